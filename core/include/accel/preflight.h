/*
 * accel/preflight.h: the upgrade checklist, run on a node before the job's
 * program starts (docs/preflight.md).  accel_pf_check_node checks one node:
 *
 *   python      the job's Python (--python, else the first python or python3
 *               on PATH) answers within the timeout
 *   versions    python, torch (its CUDA and NCCL), accelerate, transformers,
 *               peft, deepspeed; the NVIDIA driver and GPUs (NVML by dlopen)
 *   config      the YAML against the schema of the accelerate installed on
 *               this node, not the newest
 *   imports     `from accelerate import Accelerator; import
 *               accelerate.big_modeling`, transformers, peft and the extra
 *               modules, in a clean process
 *   threads     then, in the same process (torch stays loaded), accelerate
 *               and the extra modules' packages forgotten and imported again
 *               from one thread per module at once: an import cycle that a
 *               single thread survives by the order of its imports
 *   gpus, precision, gpu-memory
 *               GPUs visible against processes per node; bf16 needs compute
 *               capability 8.0, fp8 8.9; free memory against a floor
 *   network     NCCL_SOCKET_IFNAME and NCCL_IB_HCA name what this node has;
 *               MASTER_ADDR resolves
 *
 * accel_pf_record then compares the nodes' versions with the previous record
 * for the same config (a `drift` row per node) and writes this job's.  Each
 * check is a row: PASS, WARN or FAIL with one line of reason.
 *
 * Ownership: every struct here is caller-allocated and holds no pointers;
 * nothing to free but the strings the JSON functions return (free()).
 * Thread-safety: accel_pf_check_node runs child processes and waits for them
 * (waitpid on their pids only); calls on distinct nodes may run in parallel.
 */
#ifndef ACCEL_PREFLIGHT_H
#define ACCEL_PREFLIGHT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "accel/err.h"

#ifdef __cplusplus
extern "C" {
#endif

struct accel_site;

enum accel_pf_status { ACCEL_PF_PASS, ACCEL_PF_WARN, ACCEL_PF_FAIL };

#define ACCEL_PF_MAX_ROWS 16
#define ACCEL_PF_MAX_GPUS 16
#define ACCEL_PF_MAX_IMPORTS 8
#define ACCEL_PF_REASON 640

struct accel_pf_row {
    char check[16]; /* "python", "versions", ... */
    enum accel_pf_status status;
    char reason[ACCEL_PF_REASON];
};

/* The packages a record keeps, in this order (accel_pf_pkg_name). */
enum accel_pf_pkg {
    ACCEL_PF_TORCH,
    ACCEL_PF_ACCELERATE,
    ACCEL_PF_TRANSFORMERS,
    ACCEL_PF_PEFT,
    ACCEL_PF_DEEPSPEED,
    ACCEL_PF_NPKG
};

struct accel_pf_gpu {
    char name[96];
    unsigned cc_major, cc_minor;
    uint64_t mem_total, mem_free, mem_used; /* bytes */
};

/* What a node has; "" where it has none. */
struct accel_pf_versions {
    char python[32];       /* "3.11.2" */
    char python_path[512]; /* as found on PATH, or --python */
    char pkg[ACCEL_PF_NPKG][48];
    char torch_cuda[16]; /* torch.version.cuda */
    char torch_nccl[16]; /* torch.cuda.nccl.version() */
    char driver[32];     /* the NVIDIA driver; "" = none */
    unsigned ngpus;      /* visible to the job (CUDA_VISIBLE_DEVICES) */
    struct accel_pf_gpu gpu[ACCEL_PF_MAX_GPUS];
};

struct accel_pf_node {
    char host[64];
    struct accel_pf_versions v;
    size_t nrows;
    struct accel_pf_row rows[ACCEL_PF_MAX_ROWS];
};

struct accel_pf_opts {
    const char *config;            /* the user's YAML, read with the caller's identity */
    const struct accel_site *site; /* NULL = none */
    const char *python;            /* NULL = the first python or python3 on PATH */
    const char *imports[ACCEL_PF_MAX_IMPORTS]; /* more modules to import-test */
    size_t nimports;
    unsigned procs_per_node; /* processes this node runs; 0 = from the config */
    unsigned timeout_ms;     /* for the job's Python (versions, both imports); 0 = 60 s */
    unsigned rounds;         /* of the threaded import; 0 = 3 */
};

/* ACCEL_EINVAL, with the reason, for options no check can run with: no
 * config, more than ACCEL_PF_MAX_IMPORTS modules, an import name that is not
 * a dotted Python name.  A front end calls it before anything else. */
enum accel_err accel_pf_opts_check(const struct accel_pf_opts *opts,
                                   struct accel_error *err) ACCEL_WUR;

/* Checks this node: fills `node` (host, versions, rows) and returns ACCEL_OK
 * whatever the rows say; an error only for options accel_pf_opts_check
 * refuses. */
enum accel_err accel_pf_check_node(struct accel_pf_node *node, const struct accel_pf_opts *opts,
                                   struct accel_error *err) ACCEL_WUR;

/* Compares each node's versions with its entry in the newest earlier record
 * of `config` under `dir` (DIR/<config name>-<hash of its path>.<uid>/
 * <job>.json) that has one, appends a `drift` row to every node, and writes
 * this job's record (temp file, fsync, rename).  Errors name the path: a
 * job id that is not a file name (ACCEL_EINVAL), a folder that is not this
 * user's own (ACCEL_EPERM), one that cannot be made or written; every node
 * gets its drift row (a WARN saying why) before any is returned. */
enum accel_err accel_pf_record(const char *dir, const char *config, const char *job,
                               struct accel_pf_node *nodes, size_t n,
                               struct accel_error *err) ACCEL_WUR;

/* Appends a row to `node` (the reason formatted, cut to fit); ignored past
 * ACCEL_PF_MAX_ROWS.  For checks a front end adds (the rendezvous). */
void accel_pf_add_row(struct accel_pf_node *node, const char *check, enum accel_pf_status st,
                      const char *fmt, ...) ACCEL_PRINTF(4, 5);

/* The worst status of all rows. */
enum accel_pf_status accel_pf_worst(const struct accel_pf_node *nodes, size_t n);

/* "PASS", "WARN", "FAIL" */
const char *accel_pf_status_name(enum accel_pf_status s);

/* "torch", "accelerate", ... */
const char *accel_pf_pkg_name(enum accel_pf_pkg p);

/* Prints the table (one line per node and check: NODE CHECK RESULT REASON)
 * and a summary line. */
void accel_pf_print(const struct accel_pf_node *nodes, size_t n, const char *config, FILE *out);

/* {"result": "PASS", "nodes": [{"host", "versions": {...}, "checks": [...]}]}
 * as a malloc'd string, or NULL without memory. */
char *accel_pf_to_json(const struct accel_pf_node *nodes, size_t n);

/* One node as the JSON accel_pf_node_to_json writes, and back: how nodes send
 * their results to the one that prints.  from_json: ACCEL_EPARSE for text
 * that is not such a node (every string capped to its field). */
char *accel_pf_node_to_json(const struct accel_pf_node *node);
enum accel_err accel_pf_node_from_json(struct accel_pf_node *node, const char *text, size_t len,
                                       struct accel_error *err) ACCEL_WUR;

#ifdef __cplusplus
}
#endif

#endif
