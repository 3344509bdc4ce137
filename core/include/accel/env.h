/*
 * accel/env.h: the environment a worker gets, as a pure function.
 *
 *   (resolved config, layout, optional plan and site) -> sorted NAME=VALUE
 *
 * The variables are those `accelerate launch` plus torchrun give a worker of
 * the same config and layout, with each consumer's value encoding (True/False
 * for dynamo, lowercase true/false for FSDP, upper-case enum names for FP8
 * backends), minus what only exists because torchrun's agent process does
 * (TORCHELASTIC_USE_AGENT_STORE, TORCHELASTIC_ERROR_FILE), plus the rank
 * variables the simple launcher leaves to mpirun.  docs/differences.md lists
 * every difference and tests/unit/test_golden.c checks the rest against real
 * accelerate runs.  Same inputs, same bytes out: no I/O, no clock, no getenv.
 *
 * Ownership: struct accel_env owns its strings; accel_env_free releases them.
 *
 * Thread-safety: every function is safe from any thread (no shared state);
 * a struct accel_env belongs to one thread at a time, and the config, plan
 * and site it reads may be shared, read-only.
 */
#ifndef ACCEL_ENV_H
#define ACCEL_ENV_H

#include <stdbool.h>
#include <stddef.h>

#include "accel/config.h"
#include "accel/err.h"
#include "accel/plan.h"
#include "accel/site.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACCEL_MAX_ENV_VARS 512
#define ACCEL_MAX_ENV_NAME 128
#define ACCEL_MAX_ENV_VALUE 65536
#define ACCEL_DEFAULT_PORT 29500u

/* Where this worker sits.  Uneven layouts (5 tasks on 2 nodes) set
 * world_size and global_rank explicitly; otherwise they follow from
 * nnodes x nproc_per_node. */
struct accel_layout {
    unsigned nnodes;         /* >= 1 */
    unsigned node_rank;      /* < nnodes */
    unsigned nproc_per_node; /* processes on this node, >= 1 */
    int local_rank;          /* -1: the node-level set for a launcher in a pod */
    long global_rank;        /* -1: node_rank * nproc_per_node + local_rank */
    unsigned world_size;     /* 0: nnodes * nproc_per_node */
    const char *master_addr; /* NULL: main_process_ip, else 127.0.0.1 */
    unsigned master_port;    /* 0: main_process_port, else 29500 */
    unsigned cpus_per_proc;  /* CPU jobs: OMP_NUM_THREADS when > 1; 0 = unknown */
};

struct accel_env_opts {
    const struct accel_plan *plan; /* NULL: no placement */
    const struct accel_site *site; /* NULL: no extra variables */
    bool job_wins;                 /* the job's process and node counts override the config's
                                    * num_processes / num_machines instead of contradicting
                                    * them (site slurm_wins; the caller warns) */
};

struct accel_env {
    char **v; /* "NAME=VALUE", sorted by NAME (byte order) */
    size_t n;
};

/* Fills `out` (caller-owned, zeroed or freed) with the worker's variables.
 * ACCEL_ELAYOUT when the layout contradicts itself or the config (with the
 * reason in err), ACCEL_EUNSUPPORTED for XLA and SageMaker configs,
 * ACCEL_ETOOBIG past the caps above, ACCEL_ENOMEM. */
enum accel_err accel_env_build(const struct accel_cfg *cfg, const struct accel_layout *lay,
                               const struct accel_env_opts *opts, struct accel_env *out,
                               struct accel_error *err) ACCEL_WUR;

/* True when a value a process already has for NAME is kept over the one
 * accel_env_build gives it, as a launcher merges the two: OMP_NUM_THREADS
 * (accelerate keeps the user's) and the plan's NIC variables NCCL_IB_HCA
 * and NCCL_SOCKET_IFNAME (NCCL's documentation tells users to set them),
 * unless `site` (may be NULL) sets that name for every process. */
bool accel_env_user_wins(const char *name, const struct accel_site *site);

/* The value of NAME, or NULL. */
const char *accel_env_get(const struct accel_env *env, const char *name);

void accel_env_free(struct accel_env *env);

#ifdef __cplusplus
}
#endif

#endif
