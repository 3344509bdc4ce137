/*
 * nodes.c: the intra-node and inter-node (rail) communicators of a job, from
 * the layout its launcher exported (RANK, LOCAL_RANK, LOCAL_WORLD_SIZE).
 * Both backends split the same way (accel_comm_split: ncclCommSplit for
 * nccl, a new ring for socket).
 */
#include "accel/comm.h"
#include "accel/getenv.h"

#define WHO "node split" /* the context of its messages */
#define LAYOUT_MAX (1u << 24)

enum accel_err accel_comm_split_nodes(struct accel_comm *c, struct accel_comm **node,
                                      struct accel_comm **rail, struct accel_error *err)
{
    unsigned first, local, lws, rank;
    enum accel_err rc;

    if (c == NULL || node == NULL || rail == NULL)
        return accel_error_set(err, ACCEL_EINVAL, WHO ": NULL argument");
    *node = *rail = NULL;
    if ((rc = accel_getenv_uint(WHO, "LOCAL_RANK", 0, LAYOUT_MAX, &local, err)) != ACCEL_OK ||
        (rc = accel_getenv_uint(WHO, "LOCAL_WORLD_SIZE", 0, LAYOUT_MAX, &lws, err)) != ACCEL_OK ||
        (rc = accel_getenv_uint(WHO, "RANK", 0, LAYOUT_MAX, &rank, err)) != ACCEL_OK)
        return rc;
    if (local >= lws || local > rank || rank != accel_comm_rank(c))
        return accel_error_set(err, ACCEL_ELAYOUT,
                               WHO ": RANK=%u, LOCAL_RANK=%u, LOCAL_WORLD_SIZE=%u do not fit "
                                   "communicator rank %u of %u",
                               rank, local, lws, accel_comm_rank(c), accel_comm_size(c));
    /* A node is named by its first rank (ranks are contiguous per node; the
     * simple launcher exports no GROUP_RANK); rails are ranked in node order,
     * which is RANK order. */
    first = rank - local;
    rc = accel_comm_split(c, (int)first, (int)local, node, err);
    if (rc != ACCEL_OK)
        return rc;
    rc = accel_comm_split(c, (int)local, (int)rank, rail, err);
    if (rc != ACCEL_OK) {
        accel_comm_free(*node);
        *node = NULL;
        return rc;
    }
    /* contiguous per node: local rank L of this node is RANK - L + L' */
    if (accel_comm_size(*node) != lws || accel_comm_rank(*node) != local) {
        rc = accel_error_set(err, ACCEL_ELAYOUT,
                             WHO ": the node of rank %u has %u ranks, LOCAL_WORLD_SIZE says %u: "
                                 "ranks are not contiguous per node",
                             rank, accel_comm_size(*node), lws);
        accel_comm_free(*node);
        accel_comm_free(*rail);
        *node = *rail = NULL;
    }
    return rc;
}
