/*
 * cluster.c: the node order of a step and what a ring in a given order costs
 * (DESIGN decision 7).  The order is a DFS of the switch tree that visits the
 * children of each switch in the order their first node appears in Slurm's
 * list; it is computed by sorting the leaves touched by the path of their
 * ancestors' keys and then bucketing the nodes by leaf, which keeps Slurm
 * order inside a leaf: O(n + switches + l log l), no pairwise comparison of
 * nodes.  Because every subtree ends up contiguous, the ring meets the lower
 * bounds of accel_cluster_bound exactly.  This file does not place GPUs or
 * NICs inside a node (the per-node plan does; the order moves whole nodes,
 * so it cannot disturb it) and reads no files.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/alloc.h"
#include "accel/cluster.h"

/* Per-node facts shared by the three entry points. */
struct lookup {
    uint32_t *leaf;  /* [n]: leaf switch or ACCEL_SWITCH_NONE */
    size_t unplaced; /* nodes not in the tree */
};

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Validates the node list and finds each node's leaf; refuses duplicates. */
static enum accel_err lookup_nodes(const struct accel_switch_tree *t, const char *const *nodes,
                                   size_t n, struct lookup *lk, struct accel_error *err)
{
    unsigned char *seen = NULL;
    const char **unk = NULL;
    enum accel_err rc = ACCEL_OK;

    lk->leaf = NULL;
    lk->unplaced = 0;
    if (n == 0 || nodes == NULL)
        return accel_error_set(err, ACCEL_EINVAL, "node order: empty node list");
    if (n > ACCEL_CLUSTER_MAX_NODES)
        return accel_error_set(err, ACCEL_ETOOBIG, "node order: more than %u nodes in a step",
                               ACCEL_CLUSTER_MAX_NODES);
    lk->leaf = accel_malloc(n * sizeof(*lk->leaf));
    seen = accel_calloc((size_t)t->nnodes / 8 + 1, 1);
    unk = accel_malloc(n * sizeof(*unk));
    if (lk->leaf == NULL || seen == NULL || unk == NULL) {
        rc = accel_error_set(err, ACCEL_ENOMEM, "node order: out of memory for %zu nodes", n);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t k;
        if (nodes[i] == NULL || nodes[i][0] == '\0') {
            rc = accel_error_set(err, ACCEL_EINVAL,
                                 "node order: node %zu of the node list has no name", i);
            goto out;
        }
        k = accel_switch_tree_node(t, nodes[i]);
        if (k == ACCEL_SWITCH_NONE) {
            lk->leaf[i] = ACCEL_SWITCH_NONE;
            unk[lk->unplaced++] = nodes[i];
            continue;
        }
        if (seen[k / 8] & (1u << (k % 8))) {
            rc = accel_error_set(err, ACCEL_EINVAL,
                                 "node order: node '%s' appears twice in the node list", nodes[i]);
            goto out;
        }
        seen[k / 8] |= (unsigned char)(1u << (k % 8));
        lk->leaf[i] = t->nodes[k].leaf;
    }
    if (lk->unplaced > 1) {
        qsort(unk, lk->unplaced, sizeof(*unk), cmp_str);
        for (size_t i = 1; i < lk->unplaced; i++)
            if (strcmp(unk[i - 1], unk[i]) == 0) {
                rc = accel_error_set(err, ACCEL_EINVAL,
                                     "node order: node '%s' appears twice in the node "
                                     "list",
                                     unk[i]);
                goto out;
            }
    }
out:
    accel_free(seen);
    accel_free(unk);
    if (rc != ACCEL_OK) {
        accel_free(lk->leaf);
        lk->leaf = NULL;
    }
    return rc;
}

/* A leaf touched by the step and the keys of its path from the top. */
struct leaf_key {
    uint32_t leaf;
    uint32_t depth;                         /* of the leaf: path has depth + 1 keys */
    uint32_t path[ACCEL_CLUSTER_MAX_DEPTH]; /* first node index of each ancestor, top first */
};

static int cmp_leaf(const void *a, const void *b)
{
    const struct leaf_key *x = a, *y = b;
    uint32_t d = x->depth < y->depth ? x->depth : y->depth;

    for (uint32_t i = 0; i <= d; i++)
        if (x->path[i] != y->path[i])
            return x->path[i] < y->path[i] ? -1 : 1;
    /* Distinct leaves differ above (disjoint subtrees have distinct first
     * nodes); this keeps the sort total anyway. */
    if (x->depth != y->depth)
        return x->depth < y->depth ? -1 : 1;
    return (x->leaf > y->leaf) - (x->leaf < y->leaf);
}

enum accel_err accel_cluster_order(const struct accel_switch_tree *tree, const char *const *nodes,
                                   size_t n, size_t *order_out, struct accel_error *err)
{
    const struct accel_switch *sw = tree->switches;
    struct lookup lk;
    uint32_t *first = NULL, *start = NULL;
    struct leaf_key *keys = NULL;
    size_t nleaves = 0, k = 0;
    enum accel_err rc;

    accel_error_clear(err); /* a warning below must not mix with an old error */
    if ((rc = lookup_nodes(tree, nodes, n, &lk, err)) != ACCEL_OK)
        return rc;
    rc = ACCEL_ENOMEM; /* until the allocations below succeed */
    first = accel_malloc(((size_t)tree->nswitches + 1) * sizeof(*first));
    if (first == NULL)
        goto out;
    /* first[s]: the first node (in Slurm order) under switch s.  Walking up
     * stops at a switch already keyed, so each switch is touched once. */
    for (uint32_t s = 0; s < tree->nswitches; s++)
        first[s] = ACCEL_SWITCH_NONE;
    for (size_t i = 0; i < n; i++) {
        uint32_t s = lk.leaf[i];
        if (s == ACCEL_SWITCH_NONE || first[s] != ACCEL_SWITCH_NONE)
            continue;
        nleaves++;
        for (; s != ACCEL_SWITCH_NONE && first[s] == ACCEL_SWITCH_NONE; s = sw[s].parent)
            first[s] = (uint32_t)i;
    }
    keys = accel_malloc((nleaves + 1) * sizeof(*keys));
    start = accel_malloc((nleaves + 2) * sizeof(*start));
    if (keys == NULL || start == NULL)
        goto out;
    rc = ACCEL_OK;
    for (size_t i = 0, j = 0; i < n; i++) { /* node i opens its leaf: that leaf's key */
        uint32_t s = lk.leaf[i];
        if (s == ACCEL_SWITCH_NONE || first[s] != i)
            continue;
        keys[j].leaf = s;
        keys[j].depth = sw[s].depth;
        for (; s != ACCEL_SWITCH_NONE; s = sw[s].parent)
            keys[j].path[sw[s].depth] = first[s];
        j++;
    }
    qsort(keys, nleaves, sizeof(*keys), cmp_leaf);
    /* Bucket the nodes by the rank of their leaf; first[] of a leaf now holds
     * that rank, start[] the bucket boundaries. */
    for (size_t j = 0; j < nleaves; j++) {
        first[keys[j].leaf] = (uint32_t)j;
        start[j + 1] = 0;
    }
    start[0] = 0;
    for (size_t i = 0; i < n; i++)
        if (lk.leaf[i] != ACCEL_SWITCH_NONE)
            start[first[lk.leaf[i]] + 1]++;
    for (size_t j = 0; j < nleaves; j++)
        start[j + 1] += start[j];
    k = lk.leaf[0] == ACCEL_SWITCH_NONE ? 1 : 0; /* rank 0's node first, whatever happens */
    order_out[0] = 0;
    for (size_t i = 0; i < n; i++)
        if (lk.leaf[i] != ACCEL_SWITCH_NONE)
            order_out[k + start[first[lk.leaf[i]]]++] = i;
    k += n - lk.unplaced;
    for (size_t i = 1; i < n; i++)
        if (lk.leaf[i] == ACCEL_SWITCH_NONE)
            order_out[k++] = i;
    if (lk.unplaced > 0) {
        char names[256];
        size_t len = 0, shown = 0;
        names[0] = '\0';
        for (size_t i = 0; i < n && shown < 4; i++)
            if (lk.leaf[i] == ACCEL_SWITCH_NONE && len < sizeof(names)) {
                len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s", shown ? ", " : "",
                                        nodes[i]);
                shown++;
            }
        accel_error_set(
            err, ACCEL_ENOTFOUND,
            "node order: %zu of %zu nodes are not in the switch tree (%s%s); they keep Slurm's "
            "order after the others",
            lk.unplaced, n, names, lk.unplaced > shown ? ", ..." : "");
    }
out:
    if (rc == ACCEL_ENOMEM)
        accel_error_set(err, ACCEL_ENOMEM, "node order: out of memory for %zu nodes", n);
    accel_free(lk.leaf);
    accel_free(first);
    accel_free(keys);
    accel_free(start);
    return rc;
}

void accel_cluster_node_ranks(const size_t *order, size_t n, size_t *rank_out)
{
    for (size_t k = 0; k < n; k++)
        rank_out[order[k]] = k;
}

/* Switch links between leaves a and b, through a virtual switch above the top
 * switches; ACCEL_SWITCH_NONE is a node's own leaf hanging off that virtual
 * switch (depth -1 below, so 1 link up). */
static size_t hops_between(const struct accel_switch *sw, uint32_t a, uint32_t b)
{
    size_t h = 0;
    uint32_t da, db;

    if (a == b && a != ACCEL_SWITCH_NONE)
        return 0;
    if (a == ACCEL_SWITCH_NONE || b == ACCEL_SWITCH_NONE) {
        if (a != ACCEL_SWITCH_NONE)
            return sw[a].depth + 2;
        if (b != ACCEL_SWITCH_NONE)
            return sw[b].depth + 2;
        return 2;
    }
    da = sw[a].depth;
    db = sw[b].depth;
    for (; da > db; da--, h++)
        a = sw[a].parent;
    for (; db > da; db--, h++)
        b = sw[b].parent;
    while (a != b) {
        if (sw[a].parent == ACCEL_SWITCH_NONE) /* two top switches */
            return h + 2;
        a = sw[a].parent;
        b = sw[b].parent;
        h += 2;
    }
    return h;
}

/* Counts the leaves touched: distinct leaves plus one per unplaced node. */
static enum accel_err count_leaves(const struct accel_switch_tree *t, const struct lookup *lk,
                                   size_t n, size_t *leaves, struct accel_error *err)
{
    unsigned char *seen = accel_calloc((size_t)t->nswitches / 8 + 1, 1);

    if (seen == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "node order: out of memory measuring it");
    *leaves = lk->unplaced;
    for (size_t i = 0; i < n; i++) {
        uint32_t s = lk->leaf[i];
        if (s != ACCEL_SWITCH_NONE && !(seen[s / 8] & (1u << (s % 8)))) {
            seen[s / 8] |= (unsigned char)(1u << (s % 8));
            (*leaves)++;
        }
    }
    accel_free(seen);
    return ACCEL_OK;
}

enum accel_err accel_cluster_metrics(const struct accel_switch_tree *tree, const char *const *nodes,
                                     size_t n, const size_t *order, struct accel_ring_metrics *out,
                                     struct accel_error *err)
{
    struct lookup lk;
    unsigned char *hit = NULL;
    enum accel_err rc;

    memset(out, 0, sizeof(*out));
    if ((rc = lookup_nodes(tree, nodes, n, &lk, err)) != ACCEL_OK)
        return rc;
    if (order != NULL) {
        hit = accel_calloc(n / 8 + 1, 1);
        if (hit == NULL) {
            rc = accel_error_set(err, ACCEL_ENOMEM, "node order: out of memory measuring it");
            goto out;
        }
        for (size_t k = 0; k < n; k++) {
            size_t i = order[k];
            if (i >= n || (hit[i / 8] & (1u << (i % 8)))) {
                rc = accel_error_set(err, ACCEL_EINVAL, "node order: not a permutation of 0..%zu",
                                     n - 1);
                goto out;
            }
            hit[i / 8] |= (unsigned char)(1u << (i % 8));
        }
    }
    if ((rc = count_leaves(tree, &lk, n, &out->leaves, err)) != ACCEL_OK)
        goto out;
    out->nodes = n;
    out->unplaced = lk.unplaced;
    out->edges = n > 1 ? n : 0;
    for (size_t k = 0; k < out->edges; k++) {
        size_t i = order ? order[k] : k, j = order ? order[(k + 1) % n] : (k + 1) % n;
        uint32_t a = lk.leaf[i], b = lk.leaf[j];
        if (a == b && a != ACCEL_SWITCH_NONE)
            continue;
        out->crossings++;
        out->spine_hops += hops_between(tree->switches, a, b);
    }
out:
    accel_free(hit);
    accel_free(lk.leaf);
    return rc;
}

enum accel_err accel_cluster_bound(const struct accel_switch_tree *tree, const char *const *nodes,
                                   size_t n, struct accel_ring_metrics *out,
                                   struct accel_error *err)
{
    const struct accel_switch *sw = tree->switches;
    struct lookup lk;
    uint32_t *under = NULL;
    size_t cuts;
    enum accel_err rc;

    memset(out, 0, sizeof(*out));
    if ((rc = lookup_nodes(tree, nodes, n, &lk, err)) != ACCEL_OK)
        return rc;
    under = accel_calloc((size_t)tree->nswitches + 1, sizeof(*under));
    if (under == NULL) {
        rc = accel_error_set(err, ACCEL_ENOMEM, "node order: out of memory measuring it");
        goto out;
    }
    if ((rc = count_leaves(tree, &lk, n, &out->leaves, err)) != ACCEL_OK)
        goto out;
    out->nodes = n;
    out->unplaced = lk.unplaced;
    out->edges = n > 1 ? n : 0;
    out->crossings = out->leaves > 1 ? out->leaves : 0;
    /* nodes under each switch; an uplink with some but not all nodes below is
     * a cut the ring crosses at least twice */
    for (size_t i = 0; i < n; i++)
        for (uint32_t s = lk.leaf[i]; s != ACCEL_SWITCH_NONE; s = sw[s].parent)
            under[s]++;
    cuts = n > 1 ? lk.unplaced : 0; /* each unplaced node's own link */
    for (uint32_t s = 0; s < tree->nswitches; s++)
        if (under[s] > 0 && under[s] < n)
            cuts++;
    out->spine_hops = 2 * cuts;
out:
    accel_free(under);
    accel_free(lk.leaf);
    return rc;
}
