/*
 * preflight_job.c: `accelrun preflight --task FILE`, one task's part of a
 * job's preflight, as the SPANK plugin runs it for --accel-preflight (every
 * task, before its program).  The layout comes from the environment the
 * plugin set (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; the
 * node from SLURM_NODEID of SLURM_STEP_NUM_NODES, named SLURMD_NODENAME):
 *
 *   1. every task meets the others in the rendezvous store that rank 0
 *      serves at MASTER_ADDR:MASTER_PORT (core/bootstrap): a node that
 *      cannot reach it fails there, saying so;
 *   2. each node's local rank 0 checks its node (core/preflight); with
 *      --full every task then joins a small all_reduce (core/comm: NCCL on
 *      GPUs where built, sockets otherwise) within the deadline;
 *   3. the node's report goes to the store; rank 0 gathers one per node
 *      (a node without one by the deadline is a FAIL), keeps the record,
 *      prints the table and publishes the verdict;
 *   4. every task reads the verdict and exits 0 (start the program) or 1.
 *
 * The store is closed (a closing barrier, then rank 0 stops serving) before
 * the program starts, so MASTER_PORT is free for it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/alloc.h"
#include "accel/clock.h"
#include "accel/comm.h"
#include "accel/getenv.h"
#include "accel/preflight.h"
#include "accel/store.h"
#include "cli.h"

#define MAX_NODES 4096
#define ALLREDUCE_FLOATS 1024 /* 4 KiB: proves the path, not the bandwidth */

struct job {
    unsigned local_rank, node, nnodes;
    const char *name; /* this node's, for messages */
    double timeout_s; /* of each phase */
};

/* The layout the plugin and Slurm set, each variable checked: a malformed
 * one is an error naming it, never taken for a default. */
static enum accel_err read_layout(struct job *j, struct accel_pf_opts *pf, struct accel_error *err)
{
    static const char who[] = "the task's layout";
    unsigned nnodes = 1;
    enum accel_err rc;

    if ((rc = accel_getenv_uint_or(who, "LOCAL_RANK", 0, 1u << 20, 0, &j->local_rank, err)) ||
        (rc = accel_getenv_uint_or(who, "LOCAL_WORLD_SIZE", 1, 4096, pf->procs_per_node,
                                   &pf->procs_per_node, err)) ||
        (rc = accel_getenv_uint_or(who, "SLURM_NNODES", 1, MAX_NODES, 1, &nnodes, err)) ||
        (rc = accel_getenv_uint_or(who, "SLURM_STEP_NUM_NODES", 1, MAX_NODES, nnodes, &j->nnodes,
                                   err)) ||
        (rc = accel_getenv_uint_or(who, "SLURM_NODEID", 0, MAX_NODES - 1, 0, &j->node, err)))
        return rc;
    if (j->node >= j->nnodes)
        return accel_error_set(err, ACCEL_EINVAL,
                               "SLURM_NODEID=%u of SLURM_STEP_NUM_NODES=%u is not a node of "
                               "the step",
                               j->node, j->nnodes);
    return ACCEL_OK;
}

/* --full: a small all_reduce over every task, checked. */
static void all_reduce_row(struct accel_pf_node *node, struct accel_bootstrap *b, double timeout_s,
                           bool report)
{
    struct accel_comm_opts co = {.timeout_s = timeout_s, .cuda_device = -1, .nonce = b->nonce};
    struct accel_comm *c = NULL;
    struct accel_error err;
    float *v = malloc(ALLREDUCE_FLOATS * sizeof(float));
    double t0 = accel_now();
    enum accel_err rc = ACCEL_ENOMEM;
    size_t bad = 0;

    accel_error_clear(&err);
    if (v) {
        /* ones: the sum is the world size exactly (fp32 holds every integer
         * up to 2^24) */
        for (size_t i = 0; i < ALLREDUCE_FLOATS; i++)
            v[i] = 1.0f;
        rc = accel_comm_init(&c, b->store, b->rank, b->world, &co, &err);
        if (rc == ACCEL_OK)
            rc = accel_all_reduce(c, v, v, ALLREDUCE_FLOATS, ACCEL_F32, ACCEL_SUM, &err);
        for (size_t i = 0; rc == ACCEL_OK && i < ALLREDUCE_FLOATS; i++)
            bad += v[i] != (float)b->world;
        if (bad)
            rc = accel_error_set(&err, ACCEL_EIO,
                                 "%zu of %d sums came back wrong (element 0: %g, not %u)", bad,
                                 ALLREDUCE_FLOATS, (double)v[0], b->world);
    }
    if (report && rc == ACCEL_OK)
        accel_pf_add_row(node, "all-reduce", ACCEL_PF_PASS, "%u ranks, %zu KiB over %s in %.0f ms",
                         b->world, ALLREDUCE_FLOATS * sizeof(float) / 1024, accel_comm_backend(c),
                         (accel_now() - t0) * 1e3);
    else if (report)
        accel_pf_add_row(node, "all-reduce", ACCEL_PF_FAIL, "%s",
                         rc == ACCEL_ENOMEM && !err.msg[0] ? "out of memory" : err.msg);
    accel_comm_free(c);
    free(v);
}

/* Rank 0: one report per node, the record, the table; the verdict. */
static enum accel_pf_status gather(struct accel_bootstrap *b, const struct job *j,
                                   const struct accel_pf_opts *pf, const char *record_dir)
{
    struct accel_pf_node *nodes = calloc(j->nnodes, sizeof(*nodes));
    enum accel_pf_status worst;
    struct accel_error err;
    double end = accel_now() + j->timeout_s; /* one deadline for all the reports */
    double old = accel_store_set_timeout(b->store, j->timeout_s);

    if (!nodes) {
        fputs("accelrun preflight: out of memory\n", stderr);
        return ACCEL_PF_FAIL;
    }
    for (unsigned i = 0; i < j->nnodes; i++) {
        char key[64];
        void *val = NULL;
        size_t len = 0;
        accel_error_clear(&err);
        snprintf(key, sizeof(key), "accelrun/preflight/node/%u", i);
        accel_store_set_timeout(b->store, end - accel_now() > 0.1 ? end - accel_now() : 0.1);
        if (accel_store_get(b->store, key, &val, &len, &err) != ACCEL_OK ||
            accel_pf_node_from_json(&nodes[i], val, len, &err) != ACCEL_OK) {
            memset(&nodes[i], 0, sizeof(nodes[i]));
            snprintf(nodes[i].host, sizeof(nodes[i].host), "node%u", i);
            accel_pf_add_row(&nodes[i], "report", ACCEL_PF_FAIL,
                             "no report from node %u of %u within %.0f s: %s", i, j->nnodes,
                             j->timeout_s, err.msg);
        }
        accel_free(val);
    }
    accel_store_set_timeout(b->store, old);
    if (record_dir && *record_dir) {
        const char *job = getenv("SLURM_JOB_ID");
        accel_error_clear(&err);
        if (accel_pf_record(record_dir, pf->config, job && *job ? job : "job", nodes, j->nnodes,
                            &err) != ACCEL_OK)
            fprintf(stderr, "accelrun preflight: warning: %s\n", err.msg);
    }
    accel_pf_print(nodes, j->nnodes, pf->config, stdout);
    fflush(stdout);
    worst = accel_pf_worst(nodes, j->nnodes);
    free(nodes);
    return worst;
}

static enum accel_err post_node(struct accel_bootstrap *b, const struct job *j,
                                const struct accel_pf_opts *pf, bool full, double t_store,
                                struct accel_error *err)
{
    struct accel_pf_node node;
    enum accel_err rc;
    char key[64], *text;

    memset(&node, 0, sizeof(node));
    if (j->local_rank == 0) {
        rc = accel_pf_check_node(&node, pf, err);
        if (rc != ACCEL_OK)
            return rc;
        if (j->name)
            snprintf(node.host, sizeof(node.host), "%s", j->name);
        accel_pf_add_row(&node, "rendezvous", ACCEL_PF_PASS,
                         "reached the store at %s:%s in %.0f ms", getenv("MASTER_ADDR"),
                         getenv("MASTER_PORT"), t_store * 1e3);
    }
    if (full)
        all_reduce_row(&node, b, j->timeout_s, j->local_rank == 0);
    if (j->local_rank != 0)
        return ACCEL_OK;
    text = accel_pf_node_to_json(&node);
    if (!text)
        return accel_error_set(err, ACCEL_ENOMEM, "out of memory");
    snprintf(key, sizeof(key), "accelrun/preflight/node/%u", j->node);
    rc = accel_store_set(b->store, key, text, strlen(text), err);
    free(text);
    return rc;
}

int cli_preflight_job(const struct accel_pf_opts *given, const char *record_dir, bool full)
{
    struct accel_pf_opts opts = *given, *pf = &opts;
    struct accel_bootstrap b = {0};
    struct accel_error err;
    struct job j;
    char timeout[32];
    void *verdict = NULL;
    size_t len = 0;
    double t0 = accel_now();
    int status = CLI_EXIT_FINDINGS;

    /* the options were checked when they were parsed (cli_preflight) */
    accel_error_clear(&err);
    if (read_layout(&j, pf, &err) != ACCEL_OK) {
        fprintf(stderr, "accelrun preflight: %s\n", err.msg);
        return CLI_EXIT_USAGE;
    }
    /* this node's GPUs are the step's on the node, not the one a task bound
     * to one GPU sees */
    if (getenv("SLURM_STEP_GPUS") && *getenv("SLURM_STEP_GPUS"))
        setenv("CUDA_VISIBLE_DEVICES", getenv("SLURM_STEP_GPUS"), 1);
    j.name = getenv("SLURMD_NODENAME");
    /* every phase bounded: the Python's timeout and then some */
    j.timeout_s = (pf->timeout_ms ? pf->timeout_ms / 1000.0 : 60.0) + 30.0;
    snprintf(timeout, sizeof(timeout), "%.0f", j.timeout_s);
    setenv("ACCELRUN_TIMEOUT", timeout, 1);
    accel_error_clear(&err);
    if (accel_bootstrap_init(&b, &err) != ACCEL_OK) {
        fprintf(stderr, "accelrun preflight: %s: FAIL: rendezvous: %s\n",
                j.name ? j.name : "this node", err.msg);
        return CLI_EXIT_FINDINGS;
    }
    if (post_node(&b, &j, pf, full, accel_now() - t0, &err) != ACCEL_OK) {
        fprintf(stderr, "accelrun preflight: %s: %s\n", j.name ? j.name : "this node", err.msg);
        b.failed = true;
        goto out;
    }
    if (b.rank == 0) {
        const char *v = gather(&b, &j, pf, record_dir) == ACCEL_PF_FAIL ? "FAIL" : "PASS";
        if (accel_store_set(b.store, "accelrun/preflight/verdict", v, 4, &err) != ACCEL_OK)
            fprintf(stderr, "accelrun preflight: %s\n", err.msg);
    }
    /* rank 0 gathers within timeout_s of its own report, then prints */
    accel_store_set_timeout(b.store, 2 * j.timeout_s);
    if (accel_store_get(b.store, "accelrun/preflight/verdict", &verdict, &len, &err) != ACCEL_OK)
        fprintf(stderr, "accelrun preflight: rank %u: no verdict: %s\n", b.rank, err.msg);
    else if (len == 4 && memcmp(verdict, "PASS", 4) == 0)
        status = CLI_EXIT_OK;
    accel_free(verdict);
out:
    accel_bootstrap_free(&b);
    return status;
}
