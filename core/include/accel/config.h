/*
 * accel/config.h: an accelerate config file, checked and resolved.
 *
 * Loading runs three stages, one direction only:
 *   1. parse (value.h): YAML/JSON bytes -> value tree with positions;
 *   2. merge with the site policy (site.h): built-in < site defaults < user <
 *      site enforced, a user value contradicting an enforced one is an error;
 *   3. check against the accelerate schema of the target version
 *      (unknown keys with did-you-mean, types, enums, removed keys,
 *      cross-field rules) and resolve into `struct accel_cfg`: typed top-level
 *      fields plus `args`, the attribute set `accelerate launch` builds from
 *      the YAML over its CLI defaults, from which core/env derives the
 *      environment exactly as accelerate does.
 *
 * Nothing here reads the environment, the clock or the hardware.
 *
 * Ownership: struct accel_cfg owns everything it points to but the file
 * names in its values' marks (struct accel_mark: `name` given to the load,
 * the site file's), which are borrowed and used only for the findings made
 * while loading; a config kept longer (the webhook's cache) must not read
 * them.  accel_cfg_free releases it.  Findings go to a caller-owned struct
 * accel_diags.
 *
 * Thread-safety: loading and checking keep no global state (one libyaml
 * parser per call, findings in the caller's list), so threads may load
 * configs at once; a loaded config is read-only and may be shared, and is
 * freed once.
 */
#ifndef ACCEL_CONFIG_H
#define ACCEL_CONFIG_H

#include <stdbool.h>

#include "accel/diag.h"
#include "accel/err.h"
#include "accel/value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* accelerate versions as one number: ACCEL_VERSION(1, 15, 0) == 11500. */
#define ACCEL_VERSION(ma, mi, pa) ((ma)*10000u + (mi)*100u + (pa))
#define ACCEL_VERSION_OLDEST ACCEL_VERSION(1, 0, 0)
#define ACCEL_VERSION_NEWEST ACCEL_VERSION(1, 15, 0)

/* Parses "1.13", "1.13.0" or "latest" into *out.  ACCEL_EINVAL for other
 * text, ACCEL_EUNSUPPORTED outside [1.0, newest] (the message says the range). */
enum accel_err accel_version_parse(const char *text, unsigned *out, struct accel_error *err);

/* Formats a version number as "1.13.0" into buf. */
void accel_version_format(unsigned v, char *buf, size_t size);

enum accel_dist {
    ACCEL_DIST_NO,
    ACCEL_DIST_MULTI_CPU,
    ACCEL_DIST_MULTI_GPU,
    ACCEL_DIST_MULTI_NPU,
    ACCEL_DIST_MULTI_MLU,
    ACCEL_DIST_MULTI_SDAA,
    ACCEL_DIST_MULTI_MUSA,
    ACCEL_DIST_MULTI_XPU,
    ACCEL_DIST_MULTI_HPU,
    ACCEL_DIST_MULTI_NEURON,
    ACCEL_DIST_DEEPSPEED,
    ACCEL_DIST_FSDP,
    ACCEL_DIST_XLA,
    ACCEL_DIST_MEGATRON_LM
};

/* Which accelerate code path a config takes; it decides the environment. */
enum accel_launcher {
    ACCEL_LAUNCH_SIMPLE,    /* NO, MULTI_CPU: one process per rank, no torchrun */
    ACCEL_LAUNCH_TORCHRUN,  /* MULTI_*, FSDP, MEGATRON_LM */
    ACCEL_LAUNCH_DEEPSPEED, /* DEEPSPEED (single node, or the "standard" launcher) */
    ACCEL_LAUNCH_NONE       /* XLA, SageMaker: not something accelrun launches */
};

struct accel_site;

struct accel_cfg_opts {
    unsigned version;              /* 0 = ACCEL_VERSION_NEWEST */
    const struct accel_site *site; /* NULL = no site policy */
    unsigned nodes;                /* cluster fit (check --nodes); 0 = unknown */
    unsigned gpus_per_node;        /* 0 = unknown */
};

struct accel_cfg {
    char *file;            /* the user's file, for messages */
    struct accel_val tree; /* merged: defaults < user < enforced */
    bool sagemaker;        /* compute_environment AMAZON_SAGEMAKER */
    enum accel_dist dist;
    enum accel_launcher launcher;
    const char *dist_name;   /* "MULTI_GPU", static */
    char mixed_precision[8]; /* no, fp16, bf16, fp8 (lowercase) */
    long num_processes;      /* -1 = not given: taken from the job */
    long num_machines;       /* >= 1 */
    long machine_rank;       /* as written (accelrun takes node ranks from the job) */
    char *main_process_ip;   /* NULL = not given */
    long main_process_port;  /* -1 = not given; 0 = pick a free port */
    bool use_cpu;
    bool debug;
    long fsdp_version; /* 1 or 2 when dist is FSDP */
    char *gpu_ids;     /* NULL = all */
    /* The attributes `accelerate launch` ends up with (argparse defaults,
     * then the YAML), as a map name -> value; core/env reads it. */
    struct accel_val args;
    /* Comma list of the deepspeed_config keys, (+ mixed_precision), for
     * ACCELERATE_CONFIG_DS_FIELDS. */
    char *ds_fields;
};

/* Loads, merges, checks and resolves `path` (read with the caller's identity,
 * capped at ACCEL_MAX_CONFIG_BYTES).  Every finding goes to `diags`.
 * Returns ACCEL_OK (warnings allowed), ACCEL_ECONFIG or ACCEL_EPOLICY when
 * there are errors (the first one is also in `err`), ACCEL_EPARSE /
 * ACCEL_ETOOBIG / ACCEL_ENOTFOUND / ACCEL_EPERM / ACCEL_EIO for the file
 * itself (also added to diags).  On any error `cfg` holds nothing. */
enum accel_err accel_cfg_load(struct accel_cfg *cfg, const char *path,
                              const struct accel_cfg_opts *opts, struct accel_diags *diags,
                              struct accel_error *err) ACCEL_WUR;

/* The same for bytes already in memory; `name` is used in messages. */
enum accel_err accel_cfg_load_buffer(struct accel_cfg *cfg, const char *name, const char *data,
                                     size_t len, const struct accel_cfg_opts *opts,
                                     struct accel_diags *diags, struct accel_error *err) ACCEL_WUR;

/* Releases everything; safe on a zeroed or already freed cfg. */
void accel_cfg_free(struct accel_cfg *cfg);

/* An attribute of cfg->args, or NULL when absent or None. */
const struct accel_val *accel_cfg_arg(const struct accel_cfg *cfg, const char *name);

/* "MULTI_GPU" etc. */
const char *accel_dist_name(enum accel_dist d);

#ifdef __cplusplus
}
#endif

#endif
