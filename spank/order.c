/*
 * order.c: the node order of a step (DESIGN decision 7).  Nodes under one
 * leaf switch of Slurm's topology.conf sit next to each other in the ring,
 * the first host of the step (MASTER_ADDR, rank 0) stays first, and ranks
 * stay contiguous per node.  Without a topology.conf the order is Slurm's.
 *
 * user_init computes each node's place once per node (plugin_order_load);
 * task_init turns the place into GROUP_RANK and the first rank of the node
 * (plugin_order_rank).  Nothing here fails a job for want of a topology: a
 * missing or unreadable topology.conf just means Slurm's order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/alloc.h"
#include "accel/cluster.h"
#include "accel/sched.h"
#include "plugin.h"

/* The topology.conf next to slurm.conf, unless plugstack.conf names one. */
static void topology_path(spank_t sp, char *out, size_t size)
{
    char conf[1024];
    char *slash;

    if (plugin.args.topology[0] != '\0') {
        snprintf(out, size, "%s", plugin.args.topology);
        return;
    }
    /* slurmstepd's own SLURM_CONF (slurmd's), never the job's: a user must
     * not point the plugin at a topology file of their own */
    const char *own = getenv("SLURM_CONF");

    (void)sp;
    if (own == NULL || strlen(own) >= sizeof(conf) || strchr(own, '/') == NULL)
        own = "/etc/slurm/slurm.conf";
    snprintf(conf, sizeof(conf), "%s", own);
    slash = strrchr(conf, '/');
    *slash = '\0';
    snprintf(out, size, "%s/topology.conf", conf);
}

enum accel_err plugin_order_load(spank_t sp, const char *nodelist, struct accel_error *err)
{
    struct accel_hostlist hosts = {0, NULL};
    struct accel_switch_tree tree;
    char path[MAX_PATH_ARG];
    size_t *order = NULL;
    enum accel_err rc;

    accel_switch_tree_init(&tree);
    rc = accel_hostlist_expand(nodelist, ACCEL_CLUSTER_MAX_NODES, &hosts, err);
    if (rc != ACCEL_OK)
        goto out;
    topology_path(sp, path, sizeof(path));
    if (accel_switch_tree_load(&tree, path, err) != ACCEL_OK) {
        /* No usable topology: Slurm's order (logged for the admin). */
        slurm_debug(PLUGIN_NAME ": no switch order from %s: %s", path, err->msg);
        accel_switch_tree_free(&tree);
        accel_switch_tree_init(&tree);
    }
    order = accel_calloc(hosts.n, sizeof(*order));
    plugin.node_rank = accel_calloc(hosts.n, sizeof(*plugin.node_rank));
    if (order == NULL || plugin.node_rank == NULL) {
        rc = accel_error_set(err, ACCEL_ENOMEM, "out of memory ordering %zu nodes", hosts.n);
        goto out;
    }
    rc = accel_cluster_order(&tree, (const char *const *)hosts.names, hosts.n, order, err);
    if (rc != ACCEL_OK)
        goto out;
    if (err->code == ACCEL_ENOTFOUND)
        slurm_debug(PLUGIN_NAME ": %s", err->msg); /* nodes missing from the tree go last */
    accel_cluster_node_ranks(order, hosts.n, plugin.node_rank);
    plugin.nnodes = hosts.n;
    rc = ACCEL_OK;
out:
    if (rc != ACCEL_OK) {
        accel_free(plugin.node_rank);
        plugin.node_rank = NULL;
        plugin.nnodes = 0;
    }
    accel_free(order);
    accel_switch_tree_free(&tree);
    accel_hostlist_free(&hosts);
    return rc;
}

enum accel_err plugin_order_rank(const char *tasks_per_node, uint32_t node_id, uint32_t *group_rank,
                                 uint32_t *first_rank, struct accel_error *err)
{
    uint32_t base = 0;

    if (plugin.node_rank == NULL || node_id >= plugin.nnodes)
        return accel_error_set(err, ACCEL_EINVAL, "node %u is not in the step's node list",
                               node_id);
    *group_rank = (uint32_t)plugin.node_rank[node_id];
    /* Tasks on the nodes placed before this one. */
    for (uint32_t j = 0; j < plugin.nnodes; j++) {
        unsigned before, count;
        enum accel_err rc;
        if (plugin.node_rank[j] >= *group_rank)
            continue;
        rc = accel_tasks_per_node(tasks_per_node, j, &before, &count, err);
        if (rc != ACCEL_OK)
            return rc;
        base += count;
    }
    *first_rank = base;
    return ACCEL_OK;
}
