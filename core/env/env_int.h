/*
 * env_int.h (private to core/env): the layout as numbers, and the
 * accelerate-side builder that env.c calls.
 */
#ifndef ACCEL_ENV_INT_H
#define ACCEL_ENV_INT_H

#include "envlist.h"

struct world {
    unsigned nnodes, node_rank, nproc_per_node, world_size;
    long rank;      /* -1 for the node-level set */
    int local_rank; /* -1 for the node-level set */
    const char *master_addr;
    unsigned master_port;
    unsigned omp_threads;
};

void env__accelerate_vars(struct env__list *l, const struct accel_cfg *cfg, const struct world *w);

#endif
