/*
 * slurm_topo.c: the switch tree, its arena and hashes, and the second of the
 * two places Slurm describes it: nodes' SLURM_TOPOLOGY_ADDR with
 * SLURM_TOPOLOGY_ADDR_PATTERN ("spine.leaf2.n2", "switch.switch.node").  The
 * first, a topology.conf in tree form (topology/tree: "SwitchName=leaf1
 * Nodes=n[1-4]", "SwitchName=spine Switches=leaf[1-2]"), is topology_conf.c's.
 * Names go into a string arena and two open-addressing hash tables (switches,
 * nodes), so building and looking up are O(1) per name and a 16k-node file
 * parses in milliseconds.  Every mistake in a file is reported with
 * file:line:column and the key.  It does not read topology/block files
 * (BlockName=), the 25.05 topology.yaml, or link speeds (LinkSpeed is checked
 * and ignored); it never asks slurmctld (`scontrol show topology`).
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <strings.h>
#include <string.h>

#include "accel/alloc.h"
#include "accel/cluster.h"
#include "switch_int.h"

#define CHUNK_BYTES 65536 /* string arena chunk */

struct accel_cluster__chunk {
    struct accel_cluster__chunk *next;
    size_t used, cap;
    char data[];
};

/* ---------------------------------------------------------------- arena and hashes */

char *topo__str_save(struct accel_switch_tree *t, const char *s, size_t n)
{
    struct accel_cluster__chunk *c = t->strings;
    char *p;

    if (c == NULL || c->cap - c->used < n + 1) {
        size_t cap = n + 1 > CHUNK_BYTES ? n + 1 : CHUNK_BYTES;
        c = accel_malloc(sizeof(*c) + cap);
        if (c == NULL)
            return NULL;
        c->next = t->strings;
        c->used = 0;
        c->cap = cap;
        t->strings = c;
    }
    p = c->data + c->used;
    memcpy(p, s, n);
    p[n] = '\0';
    c->used += n + 1;
    return p;
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a */

    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

/* Both element types start with `const char *name`: the table reads it through
 * the element array `base` of stride `stride`. */
static const char *name_at(const void *base, size_t stride, uint32_t i)
{
    return *(const char *const *)(const void *)((const char *)base + stride * i);
}

static uint32_t ht_find(const uint32_t *slots, size_t cap, const void *base, size_t stride,
                        const char *name)
{
    size_t i;

    if (cap == 0 || name == NULL)
        return ACCEL_SWITCH_NONE;
    for (i = (size_t)hash_str(name) & (cap - 1);; i = (i + 1) & (cap - 1)) {
        uint32_t v = slots[i];
        if (v == 0)
            return ACCEL_SWITCH_NONE;
        if (strcmp(name_at(base, stride, v - 1), name) == 0)
            return v - 1;
    }
}

static void ht_put(uint32_t *slots, size_t cap, const void *base, size_t stride, uint32_t idx)
{
    size_t i = (size_t)hash_str(name_at(base, stride, idx)) & (cap - 1);

    while (slots[i] != 0)
        i = (i + 1) & (cap - 1);
    slots[i] = idx + 1;
}

/* Adds element `idx` (its name already set) to the table holding elements
 * 0..idx-1, growing it to keep the load at most 1/2. */
static enum accel_err ht_insert(uint32_t **slots, size_t *cap, const void *base, size_t stride,
                                uint32_t idx)
{
    if (((size_t)idx + 1) * 2 > *cap) {
        size_t ncap = *cap ? *cap * 2 : 64;
        uint32_t *ns = accel_calloc(ncap, sizeof(*ns));
        if (ns == NULL)
            return ACCEL_ENOMEM;
        for (size_t i = 0; i < *cap; i++)
            if ((*slots)[i] != 0)
                ht_put(ns, ncap, base, stride, (*slots)[i] - 1);
        accel_free(*slots);
        *slots = ns;
        *cap = ncap;
    }
    ht_put(*slots, *cap, base, stride, idx);
    return ACCEL_OK;
}

/* ---------------------------------------------------------------- tree basics */

void accel_switch_tree_init(struct accel_switch_tree *t)
{
    memset(t, 0, sizeof(*t));
}

void accel_switch_tree_free(struct accel_switch_tree *t)
{
    struct accel_cluster__chunk *c, *next;

    if (t == NULL)
        return;
    for (c = t->strings; c != NULL; c = next) {
        next = c->next;
        accel_free(c);
    }
    accel_free(t->switches);
    accel_free(t->nodes);
    accel_free(t->switch_hash);
    accel_free(t->node_hash);
    accel_switch_tree_init(t);
}

uint32_t accel_switch_tree_find(const struct accel_switch_tree *t, const char *name)
{
    return ht_find(t->switch_hash, t->switch_hash_cap, t->switches, sizeof(*t->switches), name);
}

uint32_t accel_switch_tree_node(const struct accel_switch_tree *t, const char *name)
{
    return ht_find(t->node_hash, t->node_hash_cap, t->nodes, sizeof(*t->nodes), name);
}

uint32_t accel_switch_tree_leaf(const struct accel_switch_tree *t, const char *node)
{
    uint32_t i = accel_switch_tree_node(t, node);

    return i == ACCEL_SWITCH_NONE ? ACCEL_SWITCH_NONE : t->nodes[i].leaf;
}

/* Doubles *cap (from 16) up to `max` elements of `size` bytes. */
enum accel_err topo__grow(void **arr, uint32_t *cap, uint32_t used, size_t size)
{
    uint32_t ncap;
    void *p;

    if (used < *cap)
        return ACCEL_OK;
    ncap = *cap ? *cap * 2 : 16;
    p = accel_realloc(*arr, (size_t)ncap * size);
    if (p == NULL)
        return ACCEL_ENOMEM;
    *arr = p;
    *cap = ncap;
    return ACCEL_OK;
}

/* Appends a switch; the caller checked the name is new and the caps. */
enum accel_err topo__switch_add(struct accel_switch_tree *t, const char *name, size_t len,
                                uint32_t parent, uint32_t depth, unsigned line, uint32_t *idx)
{
    struct accel_switch *s;
    void *arr = t->switches;

    if (topo__grow(&arr, &t->switch_cap, t->nswitches, sizeof(*s)) != ACCEL_OK)
        return ACCEL_ENOMEM;
    t->switches = arr;
    s = &t->switches[t->nswitches];
    memset(s, 0, sizeof(*s));
    s->name = topo__str_save(t, name, len);
    if (s->name == NULL)
        return ACCEL_ENOMEM;
    s->parent = parent;
    s->depth = depth;
    s->line = line;
    if (ht_insert(&t->switch_hash, &t->switch_hash_cap, t->switches, sizeof(*s), t->nswitches) !=
        ACCEL_OK)
        return ACCEL_ENOMEM;
    *idx = t->nswitches++;
    return ACCEL_OK;
}

/* Appends a node under `leaf`; the caller checked the name is new. */
enum accel_err topo__switch_add_node(struct accel_switch_tree *t, const char *name, uint32_t leaf,
                                     unsigned line)
{
    struct accel_switch_node *nd;
    void *arr = t->nodes;

    if (topo__grow(&arr, &t->node_cap, t->nnodes, sizeof(*nd)) != ACCEL_OK)
        return ACCEL_ENOMEM;
    t->nodes = arr;
    nd = &t->nodes[t->nnodes];
    nd->name = topo__str_save(t, name, strlen(name));
    if (nd->name == NULL)
        return ACCEL_ENOMEM;
    nd->leaf = leaf;
    nd->line = line;
    if (ht_insert(&t->node_hash, &t->node_hash_cap, t->nodes, sizeof(*nd), t->nnodes) != ACCEL_OK)
        return ACCEL_ENOMEM;
    t->nnodes++;
    t->switches[leaf].nodes++;
    return ACCEL_OK;
}

/* A switch or node name: printable, no host-list punctuation. */
bool topo__switch_name_ok(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isgraph((unsigned char)s[i]) || strchr("[],=#", s[i]) != NULL)
            return false;
    return true;
}

/* ---------------------------------------------------------------- SLURM_TOPOLOGY_ADDR */

/* kind: "address" or "pattern", what text is */
static enum accel_err addr_fail(struct accel_error *err, enum accel_err code, size_t off,
                                const char *what, const char *kind, const char *text)
{
    accel_error_set(err, code, "topology %s '%.128s': %s at byte %zu", kind, text, what, off + 1);
    if (err != NULL)
        err->column = (unsigned)off + 1;
    return code;
}

enum accel_err accel_switch_addr_parse(const char *addr, const char *pattern,
                                       struct accel_switch_addr *out, struct accel_error *err)
{
    const char *p, *q;
    unsigned levels = 0;
    size_t n;

    memset(out, 0, sizeof(*out));
    if (addr == NULL || pattern == NULL || *addr == '\0' || *pattern == '\0')
        return accel_error_set(err, ACCEL_EINVAL, "topology address: empty address or pattern");
    if (strnlen(addr, ACCEL_CLUSTER_MAX_ADDR + 1) > ACCEL_CLUSTER_MAX_ADDR ||
        strnlen(pattern, ACCEL_CLUSTER_MAX_ADDR + 1) > ACCEL_CLUSTER_MAX_ADDR)
        return accel_error_set(err, ACCEL_ETOOBIG,
                               "topology address: address or pattern longer than %d bytes",
                               ACCEL_CLUSTER_MAX_ADDR);
    /* the pattern: (switch|block).* node */
    for (p = pattern;; p = q + 1) {
        q = strchr(p, '.');
        n = q ? (size_t)(q - p) : strlen(p);
        if (n == 4 && strncmp(p, "node", 4) == 0) {
            if (q != NULL)
                return addr_fail(err, ACCEL_EINVAL, (size_t)(q - pattern),
                                 "'node' must end the pattern", "pattern", pattern);
            break;
        }
        if (n == 0)
            return addr_fail(err, ACCEL_EINVAL, (size_t)(p - pattern), "empty word in pattern",
                             "pattern", pattern);
        if (!((n == 6 && strncmp(p, "switch", 6) == 0) || (n == 5 && strncmp(p, "block", 5) == 0)))
            return addr_fail(err, ACCEL_EINVAL, (size_t)(p - pattern),
                             "unknown word in pattern (switch, block, node)", "pattern", pattern);
        if (q == NULL)
            return addr_fail(err, ACCEL_EINVAL, (size_t)(p - pattern),
                             "the pattern does not end in 'node'", "pattern", pattern);
        if (++levels > ACCEL_CLUSTER_MAX_DEPTH)
            return addr_fail(err, ACCEL_ETOOBIG, (size_t)(p - pattern), "too many switch levels",
                             "pattern", pattern);
    }
    /* the address: one field per switch word, the rest is the node */
    p = addr;
    for (unsigned i = 0; i < levels; i++) {
        q = strchr(p, '.');
        if (q == NULL)
            return addr_fail(err, ACCEL_EINVAL, strlen(addr),
                             "the address has fewer fields than its pattern", "address", addr);
        n = (size_t)(q - p);
        if (n == 0)
            return addr_fail(err, ACCEL_EINVAL, (size_t)(p - addr), "empty switch name", "address",
                             addr);
        if (n > ACCEL_CLUSTER_MAX_NAME)
            return addr_fail(err, ACCEL_ETOOBIG, (size_t)(p - addr), "switch name too long",
                             "address", addr);
        if (!topo__switch_name_ok(p, n))
            return addr_fail(err, ACCEL_EINVAL, (size_t)(p - addr), "bad switch name", "address",
                             addr);
        memcpy(out->switches[i], p, n);
        p = q + 1;
    }
    n = strlen(p);
    if (n == 0)
        return addr_fail(err, ACCEL_EINVAL, (size_t)(p - addr), "empty node name", "address", addr);
    if (n > ACCEL_CLUSTER_MAX_NAME)
        return addr_fail(err, ACCEL_ETOOBIG, (size_t)(p - addr), "node name too long", "address",
                         addr);
    if (!topo__switch_name_ok(p, n))
        return addr_fail(err, ACCEL_EINVAL, (size_t)(p - addr), "bad node name", "address", addr);
    memcpy(out->node, p, n);
    out->nswitches = levels;
    return ACCEL_OK;
}

enum accel_err accel_switch_tree_add(struct accel_switch_tree *t, const struct accel_switch_addr *a,
                                     struct accel_error *err)
{
    uint32_t idx[ACCEL_CLUSTER_MAX_DEPTH], fresh = 0, nd, leaf;
    unsigned k = a->nswitches;

    if (k == 0)
        return ACCEL_OK;
    if (k > ACCEL_CLUSTER_MAX_DEPTH || a->node[0] == '\0')
        return accel_error_set(err, ACCEL_EINVAL, "topology address: malformed");
    /* check everything first, so that a contradiction changes nothing */
    for (unsigned j = 0; j < k; j++) {
        const struct accel_switch *s;
        for (unsigned i = 0; i < j; i++)
            if (strcmp(a->switches[i], a->switches[j]) == 0)
                return accel_error_set(err, ACCEL_ECONFIG,
                                       "node '%s': switch '%s' appears twice in its address",
                                       a->node, a->switches[j]);
        idx[j] = accel_switch_tree_find(t, a->switches[j]);
        if (idx[j] == ACCEL_SWITCH_NONE) {
            fresh++;
            continue;
        }
        s = &t->switches[idx[j]];
        if (j == 0 ? s->parent != ACCEL_SWITCH_NONE
                   : idx[j - 1] == ACCEL_SWITCH_NONE || s->parent != idx[j - 1])
            return accel_error_set(err, ACCEL_ECONFIG,
                                   "node '%s': switch '%s' is under '%s' in its address but "
                                   "under '%s' in the tree",
                                   a->node, s->name,
                                   j == 0 ? "(nothing: a top switch)" : a->switches[j - 1],
                                   s->parent == ACCEL_SWITCH_NONE ? "(nothing: a top switch)"
                                                                  : t->switches[s->parent].name);
        if (j + 1 < k && s->nodes > 0)
            return accel_error_set(err, ACCEL_ECONFIG,
                                   "node '%s': switch '%s' is a leaf (it has nodes) but its "
                                   "address puts switches under it",
                                   a->node, s->name);
        if (j + 1 == k && s->children > 0)
            return accel_error_set(err, ACCEL_ECONFIG,
                                   "node '%s': switch '%s' has switches under it but the "
                                   "address makes it a leaf",
                                   a->node, s->name);
    }
    nd = accel_switch_tree_node(t, a->node);
    if (nd != ACCEL_SWITCH_NONE) {
        if (idx[k - 1] != ACCEL_SWITCH_NONE && t->nodes[nd].leaf == idx[k - 1])
            return ACCEL_OK;
        return accel_error_set(err, ACCEL_ECONFIG,
                               "node '%s': under '%s' in the tree but under '%s' in its address",
                               a->node, t->switches[t->nodes[nd].leaf].name, a->switches[k - 1]);
    }
    if (fresh > ACCEL_CLUSTER_MAX_SWITCHES - t->nswitches)
        return accel_error_set(err, ACCEL_ETOOBIG, "switch tree: more than %u switches",
                               ACCEL_CLUSTER_MAX_SWITCHES);
    if (t->nnodes == ACCEL_CLUSTER_MAX_NODES)
        return accel_error_set(err, ACCEL_ETOOBIG, "switch tree: more than %u nodes",
                               ACCEL_CLUSTER_MAX_NODES);
    for (unsigned j = 0; j < k; j++) {
        uint32_t parent = j == 0 ? ACCEL_SWITCH_NONE : idx[j - 1];
        if (idx[j] != ACCEL_SWITCH_NONE)
            continue;
        if (topo__switch_add(t, a->switches[j], strlen(a->switches[j]), parent, j, 0, &idx[j]) !=
            ACCEL_OK)
            return accel_error_set(err, ACCEL_ENOMEM, "switch tree: out of memory adding a switch");
        if (parent != ACCEL_SWITCH_NONE)
            t->switches[parent].children++;
    }
    leaf = idx[k - 1];
    if (topo__switch_add_node(t, a->node, leaf, 0) != ACCEL_OK)
        return accel_error_set(err, ACCEL_ENOMEM, "switch tree: out of memory adding node '%s'",
                               a->node);
    return ACCEL_OK;
}
