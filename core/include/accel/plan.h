/*
 * accel/plan.h: the placement of one node's ranks, as plain data.  The
 * topology component fills it (GPU, NIC and CPU choices per local rank);
 * core/env only copies it into variables, so env_build stays pure.
 *
 * Thread-safety: plain data; a plan may be read by many threads at once.
 */
#ifndef ACCEL_PLAN_H
#define ACCEL_PLAN_H

#ifdef __cplusplus
extern "C" {
#endif

struct accel_rank_plan {
    char cuda_visible_devices[1024]; /* the granted list in plan order; "" = leave it */
    char nccl_ib_hca[128];           /* "" = not set */
    char nccl_socket_ifname[64];     /* "" = not set */
};

struct accel_plan {
    unsigned nranks;                     /* local ranks covered */
    const struct accel_rank_plan *ranks; /* [nranks], not owned */
};

#ifdef __cplusplus
}
#endif

#endif
