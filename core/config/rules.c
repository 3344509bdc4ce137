/*
 * rules.c: cross-field rules on a merged config.  Some are what `accelerate
 * launch` itself rejects (reference: commands/launch.py
 * _validate_launch_command, utils/launch.py); the others are mistakes it lets
 * through and that surface hours later on a cluster: a process count that
 * does not divide among the machines, FSDP keys under a non-FSDP type, a
 * DeepSpeed JSON file together with keys it overrides, an unquoted number
 * where accelerate expects text.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "check_int.h"
#include "schema.h"

struct rules {
    const struct accel_val *root; /* merged: defaults < user < enforced */
    const struct accel_val *user; /* the user's file alone */
    const struct accel_cfg_opts *opts;
    unsigned version;
    struct accel_diags *d;
};

static const struct accel_pair *top(const struct rules *r, const char *key)
{
    return accel_map_find(r->root, key);
}

/* A key of a nested section by its canonical name, however it was written. */
static const struct accel_pair *nested(const struct rules *r, const char *section,
                                       const char *canon)
{
    const struct accel_pair *sec = top(r, section);
    char c[256];

    if (sec == NULL || sec->val.type != ACCEL_V_MAP)
        return NULL;
    for (size_t i = 0; i < sec->val.u.map.n; i++) {
        config__canonical_key(section, sec->val.u.map.v[i].key, c, sizeof(c));
        if (strcmp(c, canon) == 0)
            return &sec->val.u.map.v[i];
    }
    return NULL;
}

/* The user's own pair for a section (callers first check nonempty_section). */
static const struct accel_pair *user_section(const struct rules *r, const char *section)
{
    return accel_map_find(r->user, section);
}

/* A section the user wrote (a site's enforce section is not the user's to
 * fix, so "ignored" warnings are about the user's file only). */
static bool nonempty_section(const struct rules *r, const char *section)
{
    const struct accel_pair *p = accel_map_find(r->user, section);
    return p != NULL && p->val.type == ACCEL_V_MAP && p->val.u.map.n > 0;
}

/* "section.key" in the caller's buffer (no static one: checking is
 * thread-safe). */
static const char *path_of(char *buf, size_t len, const char *section, const char *key)
{
    snprintf(buf, len, "%s.%s", section, key);
    return buf;
}

static bool is_true(const struct accel_pair *p)
{
    return p != NULL && p->val.type == ACCEL_V_BOOL && p->val.u.b;
}

static bool is_false(const struct accel_pair *p)
{
    return p != NULL && p->val.type == ACCEL_V_BOOL && !p->val.u.b;
}

static long int_or(const struct accel_pair *p, long dflt)
{
    return (p != NULL && p->val.type == ACCEL_V_INT) ? (long)p->val.u.i : dflt;
}

static const char *str_or(const struct accel_pair *p, const char *dflt)
{
    return (p != NULL && p->val.type == ACCEL_V_STR) ? p->val.u.s : dflt;
}

/* ------------------------------------------------------ distributed_type */

static const char *check_dist(struct rules *r, bool sagemaker)
{
    const struct accel_pair *p = top(r, "distributed_type");
    const char *const *values =
        sagemaker ? config__schema_sagemaker_dist() : config__schema_dist_values;
    char target[32];

    accel_version_format(r->version, target, sizeof(target));
    if (p == NULL) {
        accel_diag_add(r->d, ACCEL_SEV_ERROR, &r->root->mark, "distributed_type",
                       "missing; accelerate requires it: add distributed_type: MULTI_GPU (or "
                       "'NO', MULTI_CPU, FSDP, DEEPSPEED, ...)");
        return NULL;
    }
    if (p->val.type == ACCEL_V_BOOL && !p->val.u.b) {
        accel_diag_add(r->d, ACCEL_SEV_WARNING, &p->val.mark, "distributed_type",
                       "unquoted NO is the YAML boolean false, which accelerate only treats like "
                       "'NO' by accident (it skips the NO defaults); write distributed_type: 'NO'");
        return "NO";
    }
    if (p->val.type != ACCEL_V_STR) {
        accel_diag_add(r->d, ACCEL_SEV_ERROR, &p->val.mark, "distributed_type",
                       "expected a name such as MULTI_GPU, got %s", accel_vtype_name(p->val.type));
        return NULL;
    }
    for (size_t i = 0; values[i] != NULL; i++) {
        if (strcmp(p->val.u.s, values[i]) != 0)
            continue;
        if (!sagemaker &&
            (strcmp(values[i], "MULTI_SDAA") == 0 || strcmp(values[i], "MULTI_HPU") == 0) &&
            r->version < ACCEL_VERSION(1, 5, 0))
            accel_diag_add(r->d, ACCEL_SEV_ERROR, &p->val.mark, "distributed_type",
                           "%s was added in accelerate 1.5.0; the target version %s rejects it",
                           values[i], target);
        if (!sagemaker && strcmp(values[i], "MULTI_NEURON") == 0 &&
            r->version < ACCEL_VERSION(1, 13, 0))
            accel_diag_add(r->d, ACCEL_SEV_ERROR, &p->val.mark, "distributed_type",
                           "MULTI_NEURON was added in accelerate 1.13.0; the target version %s "
                           "rejects it",
                           target);
        return values[i];
    }
    if (strcmp(p->val.u.s, "TPU") == 0) {
        accel_diag_add(r->d, ACCEL_SEV_ERROR, &p->val.mark, "distributed_type",
                       "TPU was renamed XLA in accelerate 0.28.0; write distributed_type: XLA");
        return NULL;
    }
    {
        char allowed[512];
        size_t used = 0;
        const char *ci = NULL;
        allowed[0] = '\0';
        for (size_t i = 0; values[i] != NULL && used < sizeof(allowed); i++) {
            used += (size_t)snprintf(allowed + used, sizeof(allowed) - used, "%s%s", i ? ", " : "",
                                     values[i]);
            if (strcasecmp(values[i], p->val.u.s) == 0)
                ci = values[i];
        }
        if (ci != NULL)
            accel_diag_add(r->d, ACCEL_SEV_ERROR, &p->val.mark, "distributed_type",
                           "'%s' is not a distributed type (accelerate compares exactly); write "
                           "%s",
                           p->val.u.s, ci);
        else
            accel_diag_add(r->d, ACCEL_SEV_ERROR, &p->val.mark, "distributed_type",
                           "'%s' is not one of: %s", p->val.u.s, allowed);
    }
    return NULL;
}

/* ------------------------------------------------------ scalar specials */

static void check_mixed_precision(struct rules *r)
{
    const struct accel_pair *p = top(r, "mixed_precision");

    if (p == NULL || p->val.type == ACCEL_V_NULL)
        return;
    if (p->val.type == ACCEL_V_BOOL) {
        accel_diag_add(r->d, ACCEL_SEV_ERROR, &p->val.mark, "mixed_precision",
                       "unquoted %s is a YAML boolean and accelerate launch crashes on it "
                       "('bool' object has no attribute 'lower'); write mixed_precision: %s",
                       p->val.u.b ? "yes/on/true" : "no",
                       p->val.u.b ? "'fp16', 'bf16' or 'fp8'" : "'no'");
        return;
    }
    if (p->val.type != ACCEL_V_STR) {
        accel_diag_add(r->d, ACCEL_SEV_ERROR, &p->val.mark, "mixed_precision",
                       "expected one of no, fp16, bf16, fp8, got %s",
                       accel_vtype_name(p->val.type));
        return;
    }
    for (size_t i = 0; config__schema_precisions[i] != NULL; i++)
        if (strcasecmp(p->val.u.s, config__schema_precisions[i]) == 0)
            return;
    accel_diag_add(r->d, ACCEL_SEV_ERROR, &p->val.mark, "mixed_precision",
                   "'%s' is not one of: no, fp16, bf16, fp8", p->val.u.s);
}

#define GPU_ID_MAX 4096

static long bad_gpu_ids(struct rules *r, const struct accel_pair *p, const char *why)
{
    accel_diag_add(r->d, ACCEL_SEV_ERROR, &p->val.mark, "gpu_ids", "'%s' %s", p->val.u.s, why);
    return -1;
}

/* gpu_ids: "all" or a comma list of distinct device numbers.  Returns how
 * many ids. */
static long check_gpu_ids(struct rules *r)
{
    const struct accel_pair *p = top(r, "gpu_ids");
    unsigned char seen[GPU_ID_MAX / 8] = {0};
    long count = 0;

    if (p == NULL || p->val.type == ACCEL_V_NULL)
        return -1;
    if (p->val.type == ACCEL_V_INT) {
        accel_diag_add(r->d, ACCEL_SEV_ERROR, &p->val.mark, "gpu_ids",
                       "an unquoted number is an integer and accelerate launch crashes splitting "
                       "it; write gpu_ids: '%lld'",
                       p->val.u.i);
        return -1;
    }
    if (p->val.type != ACCEL_V_STR) {
        accel_diag_add(r->d, ACCEL_SEV_ERROR, &p->val.mark, "gpu_ids",
                       "expected 'all' or a comma list such as '0,1', got %s",
                       accel_vtype_name(p->val.type));
        return -1;
    }
    if (strcmp(p->val.u.s, "all") == 0)
        return -1;
    for (const char *s = p->val.u.s; *s;) {
        char *end;
        long id;
        while (*s == ' ')
            s++;
        id = strtol(s, &end, 10);
        if (end == s || id < 0 || id >= GPU_ID_MAX)
            return bad_gpu_ids(r, p,
                               "is not 'all' or a comma list of device numbers such as "
                               "'0,1,2,3'");
        /* '0,0' would become CUDA_VISIBLE_DEVICES=0,0: PyTorch sees no device */
        if (seen[id / 8] & (1u << (id % 8)))
            return bad_gpu_ids(r, p, "names a device twice; list each device once");
        seen[id / 8] |= (unsigned char)(1u << (id % 8));
        count++;
        s = end;
        while (*s == ' ')
            s++;
        if (*s == ',' && s[1 + strspn(s + 1, " ")] == '\0')
            return bad_gpu_ids(r, p, "ends with a comma; remove it");
        if (*s == ',')
            s++;
        else if (*s != '\0')
            return bad_gpu_ids(r, p,
                               "is not 'all' or a comma list of device numbers such as "
                               "'0,1,2,3'");
    }
    return count;
}

static bool strategy_name(const char *s)
{
    for (size_t i = 0; config__schema_fsdp_strategies[i] != NULL; i++)
        if (strcasecmp(s, config__schema_fsdp_strategies[i]) == 0)
            return true;
    return false;
}

/* ------------------------------------------------------ paradigm rules */

static void check_fsdp(struct rules *r, bool is_fsdp)
{
    const struct accel_pair *ver = nested(r, "fsdp_config", "fsdp_version");
    const struct accel_pair *raf = nested(r, "fsdp_config", "fsdp_reshard_after_forward");
    const struct accel_pair *ss = nested(r, "fsdp_config", "fsdp_sharding_strategy");
    const struct accel_pair *cpu_ram = nested(r, "fsdp_config", "fsdp_cpu_ram_efficient_loading");
    const struct accel_pair *sync = nested(r, "fsdp_config", "fsdp_sync_module_states");
    long v = int_or(ver, 1);

    if (raf != NULL && raf->val.type != ACCEL_V_NULL && raf->val.type != ACCEL_V_BOOL &&
        !(raf->val.type == ACCEL_V_STR && strategy_name(raf->val.u.s)))
        accel_diag_add(r->d, ACCEL_SEV_ERROR, &raf->val.mark,
                       "fsdp_config.fsdp_reshard_after_forward",
                       "expected true/false (FSDP2) or a sharding strategy name (FSDP1: "
                       "FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, HYBRID_SHARD_ZERO2)");
    if (!is_fsdp) {
        if (nonempty_section(r, "fsdp_config"))
            accel_diag_add(r->d, ACCEL_SEV_WARNING, &user_section(r, "fsdp_config")->mark,
                           "fsdp_config",
                           "ignored: distributed_type is not FSDP; set distributed_type: FSDP or "
                           "delete fsdp_config");
        return;
    }
    /* accelerate checks this with Python truthiness on its CLI defaults, which
     * are the strings "true": leaving cpu_ram_efficient_loading out and setting
     * sync_module_states false fails too. */
    bool sync_conflict = is_false(sync) && !is_false(cpu_ram);
    if (sync_conflict)
        accel_diag_add(r->d, ACCEL_SEV_ERROR, &sync->val.mark,
                       "fsdp_config.fsdp_sync_module_states",
                       "false while fsdp_cpu_ram_efficient_loading is %s; accelerate launch "
                       "refuses this%s: %s",
                       cpu_ram ? "true" : "true by default",
                       v == 2 ? " even for FSDP2, which otherwise ignores the key" : "",
                       v == 2 ? "delete fsdp_sync_module_states"
                              : "set fsdp_sync_module_states: true or "
                                "fsdp_cpu_ram_efficient_loading: false");
    if (v == 2) {
        static const char *const v1_only[] = {"fsdp_sharding_strategy", "fsdp_backward_prefetch",
                                              "fsdp_use_orig_params", "fsdp_sync_module_states"};
        const struct accel_pair *sdt = nested(r, "fsdp_config", "fsdp_state_dict_type");
        const struct accel_pair *fwd = nested(r, "fsdp_config", "fsdp_forward_prefetch");
        for (size_t i = 0; i < sizeof(v1_only) / sizeof(v1_only[0]); i++) {
            const struct accel_pair *q = nested(r, "fsdp_config", v1_only[i]);
            char path[256];
            if (q != NULL && q->val.type != ACCEL_V_NULL && !(q == sync && sync_conflict))
                accel_diag_add(r->d, ACCEL_SEV_WARNING, &q->mark,
                               path_of(path, sizeof(path), "fsdp_config", v1_only[i]),
                               "FSDP1 only: FSDP2 (fsdp_version: 2) ignores it%s",
                               i == 0 ? "; use fsdp_reshard_after_forward: true/false" : "");
        }
        if (raf != NULL && raf->val.type == ACCEL_V_STR)
            accel_diag_add(
                r->d, ACCEL_SEV_ERROR, &raf->val.mark, "fsdp_config.fsdp_reshard_after_forward",
                "FSDP2 takes true or false here, not '%s' (accelerate raises "
                "ValueError); `accelerate to-fsdp2` maps FULL_SHARD/HYBRID_SHARD to true "
                "and the others to false",
                raf->val.u.s);
        if (sdt != NULL && sdt->val.type == ACCEL_V_STR &&
            strcasecmp(sdt->val.u.s, "LOCAL_STATE_DICT") == 0)
            accel_diag_add(r->d, ACCEL_SEV_ERROR, &sdt->val.mark,
                           "fsdp_config.fsdp_state_dict_type",
                           "FSDP2 supports SHARDED_STATE_DICT and FULL_STATE_DICT only");
        if (is_true(fwd))
            accel_diag_add(r->d, ACCEL_SEV_ERROR, &fwd->val.mark,
                           "fsdp_config.fsdp_forward_prefetch",
                           "not implemented for FSDP2 (accelerate raises); set it to false");
    } else if (raf != NULL && raf->val.type == ACCEL_V_STR && ss == NULL) {
        /* DESIGN decision 1: upstream exports its CLI default FULL_SHARD as
         * FSDP_SHARDING_STRATEGY and the FSDP1 plugin prefers it. */
        accel_diag_add(
            r->d, ACCEL_SEV_WARNING, &raf->val.mark, "fsdp_config.fsdp_reshard_after_forward",
            "accelerate launch would run FULL_SHARD here (it exports its default "
            "FSDP_SHARDING_STRATEGY=FULL_SHARD, which FSDP1 prefers); accelrun follows "
            "the YAML and exports FSDP_SHARDING_STRATEGY=%s; write fsdp_sharding_strategy "
            "to make both agree",
            raf->val.u.s);
    }
}

static void check_deepspeed(struct rules *r, bool is_ds)
{
    static const char *const overridden[] = {
        "gradient_accumulation_steps", "gradient_clipping",     "zero_stage",
        "offload_optimizer_device",    "offload_param_device",  "offload_optimizer_nvme_path",
        "offload_param_nvme_path",     "zero3_save_16bit_model"};
    const struct accel_pair *file = nested(r, "deepspeed_config", "deepspeed_config_file");
    const struct accel_pair *mp = top(r, "mixed_precision");

    if (!is_ds) {
        if (nonempty_section(r, "deepspeed_config"))
            accel_diag_add(r->d, ACCEL_SEV_WARNING, &user_section(r, "deepspeed_config")->mark,
                           "deepspeed_config",
                           "ignored: distributed_type is not DEEPSPEED; set distributed_type: "
                           "DEEPSPEED or delete deepspeed_config");
        return;
    }
    if (file == NULL || file->val.type == ACCEL_V_NULL)
        return;
    for (size_t i = 0; i < sizeof(overridden) / sizeof(overridden[0]); i++) {
        const struct accel_pair *q = nested(r, "deepspeed_config", overridden[i]);
        char path[256];
        if (q != NULL)
            accel_diag_add(r->d, ACCEL_SEV_ERROR, &q->mark,
                           path_of(path, sizeof(path), "deepspeed_config", overridden[i]),
                           "set together with deepspeed_config_file: accelerate's DeepSpeed "
                           "plugin raises ValueError at Accelerator(); set it in the JSON file "
                           "(as \"auto\" or a value) and delete it here");
    }
    if (mp != NULL && mp->val.type != ACCEL_V_NULL)
        accel_diag_add(r->d, ACCEL_SEV_ERROR, &mp->mark, "mixed_precision",
                       "set together with deepspeed_config_file: accelerate's DeepSpeed plugin "
                       "raises ValueError at Accelerator(); %s",
                       mp->mark.file != NULL && r->user->mark.file != NULL &&
                               strcmp(mp->mark.file, r->user->mark.file) != 0
                           ? "this value is the site's default: write mixed_precision: null in "
                             "your config to drop it, and set fp16/bf16 in the JSON file"
                           : "set fp16/bf16 in the JSON file and delete mixed_precision here");
}

static void check_fp8(struct rules *r, const char *mp)
{
    const struct accel_pair *olp = nested(r, "fp8_config", "fp8_override_linear_precision");
    const struct accel_pair *backend = nested(r, "fp8_config", "fp8_backend");
    bool fp8 = mp != NULL && strcasecmp(mp, "fp8") == 0;

    if (olp != NULL && olp->val.type != ACCEL_V_NULL) {
        bool ok = olp->val.type == ACCEL_V_LIST && olp->val.u.list.n == 3;
        for (size_t i = 0; ok && i < 3; i++)
            ok = olp->val.u.list.v[i].type == ACCEL_V_BOOL;
        if (!ok)
            accel_diag_add(r->d, ACCEL_SEV_ERROR, &olp->val.mark,
                           "fp8_config.fp8_override_linear_precision",
                           "expected a list of three booleans, e.g. [false, false, false]; "
                           "accelerate reads a string character by character and the run crashes "
                           "(accelerate issue #3489)");
    }
    if (!fp8) {
        if (nonempty_section(r, "fp8_config"))
            accel_diag_add(r->d, ACCEL_SEV_WARNING, &user_section(r, "fp8_config")->mark,
                           "fp8_config", "ignored: mixed_precision is not fp8");
        return;
    }
    if (backend == NULL || backend->val.type == ACCEL_V_NULL)
        accel_diag_add(r->d, ACCEL_SEV_WARNING,
                       top(r, "mixed_precision") ? &top(r, "mixed_precision")->val.mark
                                                 : &r->root->mark,
                       "fp8_config.fp8_backend",
                       "fp8 without a backend: each node uses whichever of Transformer Engine, "
                       "MS-AMP or torchao it has installed; set fp8_config: {backend: TE} (or AO, "
                       "MSAMP)");
}

static void check_layout(struct rules *r, const char *dist, long ngpu_ids)
{
    const struct accel_pair *np = top(r, "num_processes");
    const struct accel_pair *nm = top(r, "num_machines");
    const struct accel_pair *mr = top(r, "machine_rank");
    const struct accel_pair *ip = top(r, "main_process_ip");
    const struct accel_pair *port = top(r, "main_process_port");
    long procs = int_or(np, -1), machines = int_or(nm, 1), rank = int_or(mr, 0);
    bool gpu_kind = dist != NULL && strcmp(dist, "NO") != 0 && strcmp(dist, "MULTI_CPU") != 0;

    if (machines < 1)
        return;
    /* a count out of range is said once, by the schema check */
    if (procs > 0 && procs <= SCHEMA_MAX_PROCESSES && machines <= SCHEMA_MAX_MACHINES &&
        procs % machines != 0)
        accel_diag_add(r->d, ACCEL_SEV_ERROR, &np->val.mark, "num_processes",
                       "%ld processes do not divide among %ld machines (accelerate would start "
                       "%ld per machine and a world of %ld); use a multiple of %ld",
                       procs, machines, procs / machines, procs / machines * machines, machines);
    if (mr != NULL && rank >= machines)
        accel_diag_add(r->d, ACCEL_SEV_ERROR, &mr->val.mark, "machine_rank",
                       "%ld is not below num_machines (%ld); machine ranks count from 0", rank,
                       machines);
    if (np == NULL && dist != NULL && strcmp(dist, "NO") != 0)
        accel_diag_add(r->d, ACCEL_SEV_NOTE, &r->root->mark, "num_processes",
                       "not given: accelrun takes it from the job (the Slurm step's tasks, or "
                       "--nnodes x --nproc-per-node); "
                       "accelerate launch alone would ask for --num_processes");
    if (dist != NULL && strcmp(dist, "NO") == 0 && procs > 1)
        accel_diag_add(r->d, ACCEL_SEV_WARNING, &np->val.mark, "num_processes",
                       "distributed_type 'NO' runs one process; %ld processes need MULTI_GPU, "
                       "MULTI_CPU, FSDP or DEEPSPEED",
                       procs);
    if (machines > 1 && (ip == NULL || ip->val.type == ACCEL_V_NULL))
        accel_diag_add(r->d, ACCEL_SEV_WARNING, &nm->val.mark, "main_process_ip",
                       "%ld machines and no main_process_ip: accelerate launch needs it; under "
                       "Slurm or Kubernetes accelrun takes the first node instead",
                       machines);
    if (machines > 1 && port != NULL && port->val.type == ACCEL_V_INT && port->val.u.i == 0)
        accel_diag_add(r->d, ACCEL_SEV_ERROR, &port->val.mark, "main_process_port",
                       "0 (pick a free port) works on one machine only: each machine would pick "
                       "its own; give a fixed port or leave it out");
    if (gpu_kind && machines <= 1 && ngpu_ids >= 0 && ngpu_ids < 2 && strcmp(dist, "XLA") != 0)
        accel_diag_add(r->d, ACCEL_SEV_ERROR, &top(r, "gpu_ids")->val.mark, "gpu_ids",
                       "fewer than two GPU ids for a multi-GPU run on one machine; accelerate "
                       "launch refuses this: list at least two, or use 'all'");
    if (r->opts != NULL && r->opts->nodes > 0 && nm != NULL && machines != (long)r->opts->nodes)
        accel_diag_add(r->d, ACCEL_SEV_ERROR, &nm->val.mark, "num_machines",
                       "%ld, but the job has %u nodes; make them equal or leave num_machines out",
                       machines, r->opts->nodes);
    if (r->opts != NULL && r->opts->gpus_per_node > 0 && gpu_kind && procs > 0 && machines > 0 &&
        procs / machines > (long)r->opts->gpus_per_node)
        accel_diag_add(r->d, ACCEL_SEV_ERROR, &np->val.mark, "num_processes",
                       "%ld processes per machine, but a node has %u GPUs; lower num_processes "
                       "to %ld or less",
                       procs / machines, r->opts->gpus_per_node,
                       (long)r->opts->gpus_per_node * machines);
}

/* YAML keys that `accelerate launch` shadows with its own CLI default. */
static void check_shadowed(struct rules *r)
{
    const struct accel_pair *aff = top(r, "enable_cpu_affinity");
    const struct accel_pair *rdzv = top(r, "rdzv_backend");
    const struct accel_pair *same = top(r, "same_network");

    if (is_true(aff))
        accel_diag_add(r->d, ACCEL_SEV_WARNING, &aff->val.mark, "enable_cpu_affinity",
                       "accelerate launch ignores this key (only its --enable_cpu_affinity flag "
                       "works); accelrun follows the YAML and sets ACCELERATE_CPU_AFFINITY=1");
    if (rdzv != NULL && strcmp(str_or(rdzv, "static"), "static") != 0)
        accel_diag_add(r->d, ACCEL_SEV_NOTE, &rdzv->val.mark, "rdzv_backend",
                       "accelerate launch ignores this key (only --rdzv_backend works); accelrun "
                       "assigns ranks statically from the scheduler, which needs no rendezvous "
                       "backend");
    (void)same;
}

void config__check_rules(const struct accel_val *root, const struct accel_val *user,
                         const struct accel_cfg_opts *opts, unsigned version, struct accel_diags *d)
{
    struct rules r = {root, user, opts, version, d};
    const struct accel_pair *ce;
    bool sagemaker;
    const char *dist;
    const struct accel_pair *mp;
    long nids;

    if (root->type != ACCEL_V_MAP)
        return;
    ce = top(&r, "compute_environment");
    sagemaker =
        ce != NULL && ce->val.type == ACCEL_V_STR && strcmp(ce->val.u.s, "AMAZON_SAGEMAKER") == 0;
    dist = check_dist(&r, sagemaker);
    check_mixed_precision(&r);
    if (sagemaker) {
        accel_diag_add(d, ACCEL_SEV_WARNING, &ce->val.mark, "compute_environment",
                       "a SageMaker config: accelerate launch hands it to AWS SageMaker; accelrun "
                       "checks it but does not launch it (use LOCAL_MACHINE on a cluster)");
        return;
    }
    nids = check_gpu_ids(&r);
    if (dist != NULL && strcmp(dist, "XLA") == 0)
        accel_diag_add(d, ACCEL_SEV_WARNING, &top(&r, "distributed_type")->val.mark,
                       "distributed_type",
                       "XLA (TPU) configs are launched by torch_xla, not by accelrun");
    check_layout(&r, dist, nids);
    check_fsdp(&r, dist != NULL && strcmp(dist, "FSDP") == 0);
    check_deepspeed(&r, dist != NULL && strcmp(dist, "DEEPSPEED") == 0);
    mp = top(&r, "mixed_precision");
    check_fp8(&r, mp ? str_or(mp, NULL) : NULL);
    if (nonempty_section(&r, "megatron_lm_config") &&
        (dist == NULL || strcmp(dist, "MEGATRON_LM") != 0))
        accel_diag_add(d, ACCEL_SEV_WARNING, &user_section(&r, "megatron_lm_config")->mark,
                       "megatron_lm_config", "ignored: distributed_type is not MEGATRON_LM");
    if (nonempty_section(&r, "parallelism_config") &&
        !(dist != NULL && strcmp(dist, "FSDP") == 0 &&
          int_or(nested(&r, "fsdp_config", "fsdp_version"), 1) == 2))
        accel_diag_add(d, ACCEL_SEV_WARNING, &user_section(&r, "parallelism_config")->mark,
                       "parallelism_config",
                       "accelerate's N-D parallelism needs distributed_type FSDP with "
                       "fsdp_version: 2");
    check_shadowed(&r);
    {
        const struct accel_pair *hf = nested(&r, "mpirun_config", "mpirun_hostfile");
        if (hf != NULL && hf->val.type == ACCEL_V_STR)
            accel_diag_add(d, ACCEL_SEV_NOTE, &hf->val.mark, "mpirun_config.mpirun_hostfile",
                           "accelerate launch wraps the script in mpirun with this hostfile; under "
                           "accelrun the scheduler starts every process and the hostfile is not "
                           "read");
    }
}
