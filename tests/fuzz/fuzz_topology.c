/*
 * fuzz_topology.c: libFuzzer target for the scheduler-facing parsers of the
 * topology component: Slurm host lists (expansion and first host), the
 * tasks-per-node list, topology.conf in tree form and topology addresses,
 * then the node order and its ring metrics over the parsed tree.  The first
 * byte picks the parser; the rest is its input.  Invariants: no crash, no
 * leak; an order is a permutation with node 0 first.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "accel/cluster.h"
#include "accel/sched.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s == NULL)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

static void order_check(const struct accel_switch_tree *t, const struct accel_hostlist *h)
{
    struct accel_error err;
    struct accel_ring_metrics m, b;
    size_t *order, *seen;

    if (h->n == 0 || h->n > 4096)
        return;
    order = calloc(h->n, sizeof(*order));
    seen = calloc(h->n, sizeof(*seen));
    if (order == NULL || seen == NULL)
        abort();
    if (accel_cluster_order(t, (const char *const *)h->names, h->n, order, &err) == ACCEL_OK) {
        if (order[0] != 0)
            abort();
        for (size_t i = 0; i < h->n; i++) {
            if (order[i] >= h->n || seen[order[i]]++)
                abort();
        }
        if (accel_cluster_metrics(t, (const char *const *)h->names, h->n, order, &m, &err) ==
                ACCEL_OK &&
            accel_cluster_bound(t, (const char *const *)h->names, h->n, &b, &err) == ACCEL_OK &&
            m.crossings < b.crossings)
            abort(); /* nothing beats the lower bound */
    }
    free(order);
    free(seen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct accel_error err;
    char *s;

    if (size < 1)
        return 0;
    s = cstr(data + 1, size - 1);
    switch (data[0] % 4) {
    case 0: { /* host list */
        struct accel_hostlist h = {0, NULL};
        char first[ACCEL_CLUSTER_MAX_NAME + 1];
        enum accel_err rc = accel_hostlist_expand(s, 4096, &h, &err);
        /* one grammar: a list that expands has that first host, and one
         * malformed for expand is malformed for first (4096 caps only expand) */
        if (rc == ACCEL_OK &&
            (h.n == 0 || accel_hostlist_first(s, first, sizeof(first), &err) != ACCEL_OK ||
             strcmp(first, h.names[0]) != 0))
            abort();
        if (rc == ACCEL_EINVAL && accel_hostlist_first(s, first, sizeof(first), &err) == ACCEL_OK)
            abort();
        accel_hostlist_free(&h);
        break;
    }
    case 1: { /* tasks per node */
        unsigned before, count;
        for (unsigned node = 0; node < 4; node++)
            if (accel_tasks_per_node(s, node, &before, &count, &err) == ACCEL_OK &&
                count > (1u << 20))
                abort(); /* the parser caps every entry */
        break;
    }
    case 2: { /* topology.conf, then an order over the nodes it names */
        struct accel_switch_tree t;
        accel_switch_tree_init(&t);
        if (accel_switch_tree_parse(&t, "topology.conf", s, size - 1, &err) == ACCEL_OK) {
            struct accel_hostlist h = {0, NULL};
            h.n = t.nnodes < 64 ? t.nnodes : 64;
            h.names = calloc(h.n ? h.n : 1, sizeof(char *));
            if (h.names == NULL)
                abort();
            for (size_t i = 0; i < h.n; i++)
                h.names[i] = (char *)t.nodes[i].name;
            order_check(&t, &h);
            free(h.names);
        }
        accel_switch_tree_free(&t);
        break;
    }
    default: { /* topology address "spine.leaf2.n2", a newline, then its pattern */
        struct accel_switch_addr a;
        char *nl = strchr(s, '\n');
        const char *pattern = "switch.switch.node";
        if (nl != NULL) {
            *nl = '\0';
            pattern = nl + 1;
        }
        if (accel_switch_addr_parse(s, pattern, &a, &err) == ACCEL_OK && a.nswitches > 16)
            abort(); /* at most ACCEL_CLUSTER_MAX_DEPTH switches */
        break;
    }
    }
    free(s);
    return 0;
}
