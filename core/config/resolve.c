/*
 * resolve.c: what `accelerate launch --config_file X` makes of a config,
 * before it builds any environment: its argparse defaults, overwritten by
 * the YAML exactly as _validate_launch_command does it (top-level keys only
 * where the CLI default is None; every nested key, with the fsdp_/fp8_/
 * dynamo_ prefix rules), then mixed precision and dynamo defaults.  The
 * result, cfg->args, is the input of core/env.
 *
 * Two deliberate differences (DESIGN decision 1, docs/differences.md):
 * enable_cpu_affinity from the YAML is honoured (upstream's CLI default
 * shadows it), and an FSDP1 strategy written as fsdp_reshard_after_forward
 * becomes the sharding strategy (upstream's default FULL_SHARD wins).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "accel/alloc.h"
#include "check_int.h"
#include "resolve_int.h"
#include "schema.h"

/* accelerate launch's argparse defaults that reach the environment.  Types:
 * 'N' None, 'b' bool, 'i' int, 'f' float, 's' string, 'L' the
 * (False, False, False) tuple of fp8_override_linear_precision.  String
 * defaults pass through the option's type= function, as argparse does. */
struct arg_default {
    const char *name;
    char type;
    const char *text;
};

static const struct arg_default arg_defaults[] = {
    {"cpu", 'b', "False"},
    {"debug", 'N', NULL},
    {"num_cpu_threads_per_process", 'N', NULL},
    {"enable_cpu_affinity", 'b', "False"},
    {"dynamo_backend", 'N', NULL},
    {"dynamo_mode", 's', "default"},
    {"dynamo_use_fullgraph", 'b', "False"},
    {"dynamo_use_dynamic", 'b', "False"},
    {"dynamo_use_regional_compilation", 'b', "False"},
    {"gpu_ids", 'N', NULL},
    {"same_network", 'b', "False"},
    {"rdzv_backend", 's', "static"},
    {"deepspeed_config_file", 'N', NULL},
    {"zero_stage", 'N', NULL},
    {"offload_optimizer_device", 'N', NULL},
    {"offload_param_device", 'N', NULL},
    {"gradient_accumulation_steps", 'N', NULL},
    {"gradient_clipping", 'N', NULL},
    {"zero3_init_flag", 'N', NULL},
    {"zero3_save_16bit_model", 'N', NULL},
    {"deepspeed_moe_layer_cls_names", 'N', NULL},
    {"deepspeed_multinode_launcher", 'N', NULL},
    {"fsdp_version", 's', "1"},
    {"fsdp_offload_params", 's', "false"},
    {"fsdp_min_num_params", 'i', "100000000"},
    {"fsdp_sharding_strategy", 's', "FULL_SHARD"},
    {"fsdp_reshard_after_forward", 's', "true"},
    {"fsdp_auto_wrap_policy", 'N', NULL},
    {"fsdp_transformer_layer_cls_to_wrap", 'N', NULL},
    {"fsdp_backward_prefetch", 'N', NULL},
    {"fsdp_state_dict_type", 'N', NULL},
    {"fsdp_forward_prefetch", 's', "false"},
    {"fsdp_use_orig_params", 's', "true"},
    {"fsdp_cpu_ram_efficient_loading", 's', "true"},
    {"fsdp_sync_module_states", 's', "true"},
    {"fsdp_activation_checkpointing", 's', "false"},
    {"fsdp_activation_checkpointing_offload", 's', "false"},
    {"megatron_lm_tp_degree", 'i', "1"},
    {"megatron_lm_use_custom_fsdp", 'b', "False"},
    {"megatron_lm_no_load_optim", 'b', "False"},
    {"megatron_lm_eod_mask_loss", 'b', "False"},
    {"megatron_lm_overlap_cpu_optimizer_d2h_h2d", 'b', "False"},
    {"megatron_lm_no_save_optim", 'b', "False"},
    {"megatron_lm_optimizer_cpu_offload", 'b', "False"},
    {"megatron_lm_use_precision_aware_optimizer", 'b', "False"},
    {"megatron_lm_pp_degree", 'i', "1"},
    {"megatron_lm_gradient_clipping", 'f', "1.0"},
    {"fp8_use_autocast_during_eval", 'b', "False"},
    {"fp8_margin", 'i', "0"},
    {"fp8_interval", 'i', "1"},
    {"fp8_format", 's', "HYBRID"},
    {"fp8_amax_history_len", 'i', "1024"},
    {"fp8_amax_compute_algo", 's', "most_recent"},
    {"fp8_override_linear_precision", 'L', NULL},
    {"fp8_opt_level", 's', "O2"},
    /* default "true" through type=str_to_bool, which returns the int 1 */
    {"fp8_enable_fsdp_float8_all_gather", 'i', "1"},
    {"fp8_pad_inner_dim", 'i', "1"},
    {"parallelism_config_dp_replicate_size", 'i', "1"},
    {"parallelism_config_dp_shard_size", 'i', "1"},
    {"parallelism_config_tp_size", 'i', "1"},
    {"parallelism_config_cp_size", 'i', "1"},
    {"parallelism_config_cp_backend", 's', "torch"},
    {"parallelism_config_cp_comm_strategy", 's', "allgather"},
    {"parallelism_config_sp_size", 'i', "1"},
    {"parallelism_config_sp_backend", 's', "deepspeed"},
    {"parallelism_config_sp_seq_length", 'N', NULL},
    {"parallelism_config_sp_seq_length_is_variable", 'b', "True"},
    {"parallelism_config_sp_attn_implementation", 's', "sdpa"},
};

/* ClusterConfig dataclass defaults for top-level keys absent from the file. */
static const struct arg_default cluster_defaults[] = {
    {"num_processes", 'i', "-1"},    {"machine_rank", 'i', "0"},
    {"num_machines", 'i', "1"},      {"main_training_function", 's', "main"},
    {"downcast_bf16", 'b', "False"}, {"use_cpu", 'b', "False"},
    {"debug", 'b', "False"},
};

static const char *const nested_sections[] = {
    "deepspeed_config", "fsdp_config",        "megatron_lm_config", "dynamo_config",
    "fp8_config",       "parallelism_config", "mpirun_config",      NULL};

enum accel_err config__map_set(struct accel_val *map, const char *key, struct accel_val *val,
                               const struct accel_mark *mark)
{
    struct accel_pair *p = accel_map_find(map, key);
    struct accel_pair *arr;

    if (p != NULL) {
        accel_val_free(&p->val);
        p->val = *val;
        if (mark)
            p->mark = *mark;
        val->type = ACCEL_V_NULL;
        return ACCEL_OK;
    }
    arr = accel_realloc(map->u.map.v, (map->u.map.n + 1) * sizeof(*arr));
    if (arr == NULL)
        return ACCEL_ENOMEM;
    map->u.map.v = arr;
    p = &arr[map->u.map.n];
    p->key = accel_strdup(key);
    if (p->key == NULL)
        return ACCEL_ENOMEM;
    p->val = *val;
    if (mark)
        p->mark = *mark;
    else
        memset(&p->mark, 0, sizeof(p->mark));
    map->u.map.n++;
    val->type = ACCEL_V_NULL;
    return ACCEL_OK;
}

static enum accel_err default_value(const struct arg_default *a, struct accel_val *v)
{
    memset(v, 0, sizeof(*v));
    switch (a->type) {
    case 'N':
        v->type = ACCEL_V_NULL;
        return ACCEL_OK;
    case 'b':
        v->type = ACCEL_V_BOOL;
        v->u.b = strcmp(a->text, "True") == 0;
        return ACCEL_OK;
    case 'i':
        v->type = ACCEL_V_INT;
        v->u.i = strtoll(a->text, NULL, 10);
        return ACCEL_OK;
    case 'f':
        v->type = ACCEL_V_FLOAT;
        v->u.f = strtod(a->text, NULL);
        return ACCEL_OK;
    case 'L':
        v->type = ACCEL_V_LIST;
        v->u.list.v = accel_calloc(3, sizeof(struct accel_val));
        if (v->u.list.v == NULL)
            return ACCEL_ENOMEM;
        v->u.list.n = 3;
        for (int i = 0; i < 3; i++)
            v->u.list.v[i].type = ACCEL_V_BOOL;
        return ACCEL_OK;
    default:
        v->type = ACCEL_V_STR;
        v->u.s = accel_strdup(a->text);
        return v->u.s ? ACCEL_OK : ACCEL_ENOMEM;
    }
}

static enum accel_err set_copy(struct accel_val *map, const char *key, const struct accel_val *src,
                               const struct accel_mark *mark)
{
    struct accel_val v;
    enum accel_err rc = accel_val_copy(&v, src);

    if (rc == ACCEL_OK)
        rc = config__map_set(map, key, &v, mark);
    accel_val_free(&v);
    return rc;
}

static bool arg_is_none(const struct accel_val *args, const char *key)
{
    const struct accel_pair *p = accel_map_find(args, key);
    return p == NULL || p->val.type == ACCEL_V_NULL;
}

static void map_remove(struct accel_val *map, const char *key)
{
    struct accel_pair *p = accel_map_find(map, key);
    size_t i;

    if (p == NULL)
        return;
    i = (size_t)(p - map->u.map.v);
    accel_free(p->key);
    accel_val_free(&p->val);
    memmove(p, p + 1, (map->u.map.n - i - 1) * sizeof(*p));
    map->u.map.n--;
}

enum accel_err config__migrate(struct accel_val *root)
{
    struct accel_pair *p;
    struct accel_mark mark;
    enum accel_err rc = ACCEL_OK;

    if (root->type != ACCEL_V_MAP)
        return ACCEL_OK;
    p = accel_map_find(root, "fp16");
    if (p != NULL) {
        mark = p->mark;
        if (accel_map_find(root, "mixed_precision") == NULL && accel_val_truthy(&p->val)) {
            struct accel_val v = {.type = ACCEL_V_STR, .mark = p->val.mark};
            v.u.s = accel_strdup("fp16");
            if (v.u.s == NULL)
                return ACCEL_ENOMEM;
            rc = config__map_set(root, "mixed_precision", &v, &mark);
            accel_val_free(&v);
        }
        map_remove(root, "fp16");
    }
    p = accel_map_find(root, "dynamo_backend");
    if (rc == ACCEL_OK && p != NULL) {
        /* Like accelerate, the legacy key replaces any dynamo_config. */
        struct accel_val section = {.type = ACCEL_V_MAP, .mark = p->mark};
        struct accel_val backend;
        mark = p->mark;
        rc = accel_val_copy(&backend, &p->val);
        if (rc != ACCEL_OK)
            return rc;
        if (!(backend.type == ACCEL_V_STR && strcmp(backend.u.s, "NO") == 0))
            rc = config__map_set(&section, "dynamo_backend", &backend, &mark);
        accel_val_free(&backend);
        if (rc == ACCEL_OK)
            rc = config__map_set(root, "dynamo_config", &section, &mark);
        accel_val_free(&section);
        if (rc == ACCEL_OK)
            map_remove(root, "dynamo_backend");
    }
    return rc;
}

enum accel_err config__canonicalize(struct accel_val *root, unsigned version)
{
    if (root->type != ACCEL_V_MAP)
        return ACCEL_OK;
    for (size_t i = 0; i < root->u.map.n; i++) {
        struct accel_pair *sec = &root->u.map.v[i];
        char canon[256];
        if (sec->val.type != ACCEL_V_MAP)
            continue;
        if (strcmp(sec->key, "dynamo_config") == 0 && version < ACCEL_VERSION(1, 14, 0))
            continue;
        for (size_t j = 0; j < sec->val.u.map.n; j++) {
            struct accel_pair *p = &sec->val.u.map.v[j];
            config__canonical_key(sec->key, p->key, canon, sizeof(canon));
            if (strcmp(canon, p->key) != 0) {
                char *k = accel_strdup(canon);
                if (k == NULL)
                    return ACCEL_ENOMEM;
                accel_free(p->key);
                p->key = k;
            }
        }
    }
    return ACCEL_OK;
}

const char *accel_dist_name(enum accel_dist d)
{
    return config__schema_dist_values[d];
}

static enum accel_dist dist_from(const struct accel_val *root, bool *known)
{
    const struct accel_pair *p = accel_map_find(root, "distributed_type");

    *known = true;
    if (p != NULL && p->val.type == ACCEL_V_STR)
        for (size_t i = 0; config__schema_dist_values[i] != NULL; i++)
            if (strcmp(p->val.u.s, config__schema_dist_values[i]) == 0)
                return (enum accel_dist)i;
    *known = p != NULL && p->val.type == ACCEL_V_BOOL && !p->val.u.b;
    return ACCEL_DIST_NO;
}

/* A copy of the string argument `key` in *out (NULL when it is absent or not
 * a string).  ACCEL_ENOMEM. */
static enum accel_err dup_str_arg(const struct accel_val *args, const char *key, char **out)
{
    const struct accel_pair *p = accel_map_find(args, key);

    *out = NULL;
    if (p == NULL || p->val.type != ACCEL_V_STR)
        return ACCEL_OK;
    *out = accel_strdup(p->val.u.s);
    return *out != NULL ? ACCEL_OK : ACCEL_ENOMEM;
}

static long int_arg(const struct accel_val *args, const char *key, long dflt)
{
    const struct accel_pair *p = accel_map_find(args, key);

    if (p == NULL)
        return dflt;
    if (p->val.type == ACCEL_V_INT)
        return (long)p->val.u.i;
    if (p->val.type == ACCEL_V_STR && p->val.u.s[0] >= '0' && p->val.u.s[0] <= '9')
        return strtol(p->val.u.s, NULL, 10);
    return dflt;
}

/* The deepspeed_config keys as written (in file order), for
 * ACCELERATE_CONFIG_DS_FIELDS. */
static enum accel_err ds_fields(struct accel_cfg *cfg, bool mp_from_config)
{
    const struct accel_pair *ds = accel_map_find(&cfg->tree, "deepspeed_config");
    struct accel_buf b;
    enum accel_err rc = ACCEL_OK;

    accel_buf_init(&b, ACCEL_MAX_SCALAR);
    if (ds != NULL && ds->val.type == ACCEL_V_MAP)
        for (size_t i = 0; rc == ACCEL_OK && i < ds->val.u.map.n; i++)
            rc = accel_buf_printf(&b, "%s%s", i ? "," : "", ds->val.u.map.v[i].key);
    if (rc == ACCEL_OK && mp_from_config)
        rc = accel_buf_printf(&b, "%smixed_precision", b.len ? "," : "");
    if (rc != ACCEL_OK) {
        accel_buf_free(&b);
        return rc;
    }
    cfg->ds_fields = accel_buf_take(&b);
    return cfg->ds_fields ? ACCEL_OK : ACCEL_ENOMEM;
}

static bool is_nested_section(const char *key)
{
    for (size_t s = 0; nested_sections[s] != NULL; s++)
        if (strcmp(key, nested_sections[s]) == 0)
            return true;
    return false;
}

/* Upper bound of the entries args_from_file makes from `root`. */
static size_t args_bound(const struct accel_val *root)
{
    size_t n = sizeof(arg_defaults) / sizeof(arg_defaults[0]) +
               sizeof(cluster_defaults) / sizeof(cluster_defaults[0]);

    for (size_t i = 0; root->type == ACCEL_V_MAP && i < root->u.map.n; i++) {
        const struct accel_pair *t = &root->u.map.v[i];
        n += is_nested_section(t->key) && t->val.type == ACCEL_V_MAP ? t->val.u.map.n : 1;
    }
    return n;
}

/* args[key] = a copy of *src (or the default `a` when src is NULL), in the
 * room args_from_file reserved: `p` is the entry found for key, NULL to
 * append one. */
static enum accel_err args_put(struct accel_val *args, struct accel_pair *p, const char *key,
                               const struct arg_default *a, const struct accel_val *src,
                               const struct accel_mark *mark)
{
    struct accel_val v;
    enum accel_err rc = src ? accel_val_copy(&v, src) : default_value(a, &v);

    if (rc != ACCEL_OK)
        return rc;
    if (p != NULL) {
        accel_val_free(&p->val);
    } else {
        p = &args->u.map.v[args->u.map.n];
        p->key = accel_strdup(key);
        if (p->key == NULL) {
            accel_val_free(&v);
            return ACCEL_ENOMEM;
        }
        args->u.map.n++;
    }
    p->val = v;
    if (mark)
        p->mark = *mark;
    else
        memset(&p->mark, 0, sizeof(p->mark));
    return ACCEL_OK;
}

/* Stage 1: accelerate's argparse defaults, then the dataclass defaults of
 * the top-level keys the file leaves out, then the file's own keys (nested
 * sections flattened, as the launcher's namespace has them), each applied
 * only where the CLI default is None.  The array is sized once up front and
 * the defaults (distinct names) appended without a lookup: this runs for
 * every review the webhook decides. */
static enum accel_err args_from_file(struct accel_val *args, const struct accel_val *root)
{
    enum accel_err rc = ACCEL_OK;

    args->type = ACCEL_V_MAP;
    args->u.map.n = 0;
    args->u.map.v = accel_calloc(args_bound(root), sizeof(struct accel_pair));
    if (args->u.map.v == NULL)
        return ACCEL_ENOMEM;
    for (size_t i = 0; rc == ACCEL_OK && i < sizeof(arg_defaults) / sizeof(arg_defaults[0]); i++)
        rc = args_put(args, NULL, arg_defaults[i].name, &arg_defaults[i], NULL, NULL);
    for (size_t i = 0; rc == ACCEL_OK && i < sizeof(cluster_defaults) / sizeof(cluster_defaults[0]);
         i++) {
        struct accel_pair *p = accel_map_find(args, cluster_defaults[i].name);
        if (accel_map_find(root, cluster_defaults[i].name) == NULL &&
            (p == NULL || p->val.type == ACCEL_V_NULL))
            rc = args_put(args, p, cluster_defaults[i].name, &cluster_defaults[i], NULL, NULL);
    }
    for (size_t i = 0; rc == ACCEL_OK && root->type == ACCEL_V_MAP && i < root->u.map.n; i++) {
        const struct accel_pair *t = &root->u.map.v[i];
        struct accel_pair *p;
        if (is_nested_section(t->key)) {
            for (size_t j = 0; rc == ACCEL_OK && t->val.type == ACCEL_V_MAP && j < t->val.u.map.n;
                 j++) {
                const struct accel_pair *k = &t->val.u.map.v[j];
                rc = args_put(args, accel_map_find(args, k->key), k->key, NULL, &k->val, &k->mark);
            }
            continue;
        }
        if (strcmp(t->key, "compute_environment") == 0 || strcmp(t->key, "mixed_precision") == 0 ||
            strcmp(t->key, "distributed_type") == 0)
            continue;
        p = accel_map_find(args, t->key);
        if (strcmp(t->key, "enable_cpu_affinity") == 0 || p == NULL || p->val.type == ACCEL_V_NULL)
            rc = args_put(args, p, t->key, NULL, &t->val, &t->mark);
    }
    return rc;
}

/* Stage 2, FSDP1: a strategy stored under fsdp_reshard_after_forward is the
 * strategy (accelrun follows the YAML; see the header comment). */
static enum accel_err fsdp1_strategy(struct accel_val *args, const struct accel_val *root)
{
    const struct accel_pair *fsdp = accel_map_find(root, "fsdp_config");
    const struct accel_pair *p =
        fsdp ? accel_map_find(&fsdp->val, "fsdp_reshard_after_forward") : NULL;

    if (p == NULL || p->val.type != ACCEL_V_STR || int_arg(args, "fsdp_version", 1) != 1 ||
        accel_map_find(&fsdp->val, "fsdp_sharding_strategy") != NULL)
        return ACCEL_OK;
    for (size_t i = 0; config__schema_fsdp_strategies[i] != NULL; i++)
        if (strcasecmp(p->val.u.s, config__schema_fsdp_strategies[i]) == 0)
            return set_copy(args, "fsdp_sharding_strategy", &p->val, &p->mark);
    return ACCEL_OK;
}

/* Stage 3: mixed precision (the file's value, legacy fp16 already
 * migrated, lower-cased; else "no") and dynamo's backend ("no" when unset).
 * *from_config: the file named a precision. */
static enum accel_err precision_and_dynamo(struct accel_cfg *cfg, const struct accel_val *root,
                                           bool *from_config)
{
    const struct accel_pair *p = accel_map_find(root, "mixed_precision");
    struct accel_val v = {.type = ACCEL_V_STR};
    enum accel_err rc;

    *from_config = p != NULL && p->val.type == ACCEL_V_STR;
    snprintf(cfg->mixed_precision, sizeof(cfg->mixed_precision), "%s",
             *from_config ? p->val.u.s : "no");
    for (char *c = cfg->mixed_precision; *c; c++)
        *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
    if (!arg_is_none(&cfg->args, "dynamo_backend"))
        return ACCEL_OK;
    v.u.s = accel_strdup("no");
    if (v.u.s == NULL)
        return ACCEL_ENOMEM;
    rc = config__map_set(&cfg->args, "dynamo_backend", &v, NULL);
    accel_val_free(&v);
    return rc;
}

static enum accel_launcher launcher_of(enum accel_dist dist)
{
    switch (dist) {
    case ACCEL_DIST_NO:
    case ACCEL_DIST_MULTI_CPU:
        return ACCEL_LAUNCH_SIMPLE;
    case ACCEL_DIST_DEEPSPEED:
        return ACCEL_LAUNCH_DEEPSPEED;
    case ACCEL_DIST_XLA:
        return ACCEL_LAUNCH_NONE;
    case ACCEL_DIST_MULTI_GPU:
    case ACCEL_DIST_MULTI_NPU:
    case ACCEL_DIST_MULTI_MLU:
    case ACCEL_DIST_MULTI_SDAA:
    case ACCEL_DIST_MULTI_MUSA:
    case ACCEL_DIST_MULTI_XPU:
    case ACCEL_DIST_MULTI_HPU:
    case ACCEL_DIST_MULTI_NEURON:
    case ACCEL_DIST_FSDP:
    case ACCEL_DIST_MEGATRON_LM:
        break;
    }
    return ACCEL_LAUNCH_TORCHRUN;
}

/* Stage 4: the typed view of the arguments. */
static enum accel_err typed_view(struct accel_cfg *cfg)
{
    const struct accel_val *args = &cfg->args;
    const struct accel_pair *p;
    enum accel_err rc;

    cfg->num_processes = int_arg(args, "num_processes", -1);
    if (cfg->num_processes < 0 && cfg->dist == ACCEL_DIST_NO)
        cfg->num_processes = 1; /* process_config: NO defaults to one process */
    cfg->num_machines = int_arg(args, "num_machines", 1);
    cfg->machine_rank = int_arg(args, "machine_rank", 0);
    cfg->main_process_port =
        arg_is_none(args, "main_process_port") ? -1 : int_arg(args, "main_process_port", -1);
    rc = dup_str_arg(args, "main_process_ip", &cfg->main_process_ip);
    if (rc == ACCEL_OK)
        rc = dup_str_arg(args, "gpu_ids", &cfg->gpu_ids);
    if (rc != ACCEL_OK)
        return rc;
    if (cfg->gpu_ids != NULL && strcmp(cfg->gpu_ids, "all") == 0) {
        accel_free(cfg->gpu_ids);
        cfg->gpu_ids = NULL;
    }
    p = accel_map_find(args, "use_cpu");
    cfg->use_cpu = p != NULL && accel_val_truthy(&p->val);
    p = accel_map_find(args, "debug");
    cfg->debug = p != NULL && accel_val_truthy(&p->val);
    cfg->fsdp_version = int_arg(args, "fsdp_version", 1);
    cfg->launcher = cfg->sagemaker ? ACCEL_LAUNCH_NONE : launcher_of(cfg->dist);
    return ACCEL_OK;
}

enum accel_err config__resolve(struct accel_cfg *cfg)
{
    const struct accel_val *root = &cfg->tree;
    const struct accel_pair *p = accel_map_find(root, "compute_environment");
    bool known, mp_from_config = false;
    enum accel_err rc;

    cfg->sagemaker =
        p != NULL && p->val.type == ACCEL_V_STR && strcmp(p->val.u.s, "AMAZON_SAGEMAKER") == 0;
    cfg->dist = dist_from(root, &known);
    cfg->dist_name = accel_dist_name(cfg->dist);
    rc = args_from_file(&cfg->args, root);
    if (rc == ACCEL_OK)
        rc = fsdp1_strategy(&cfg->args, root);
    if (rc == ACCEL_OK)
        rc = precision_and_dynamo(cfg, root, &mp_from_config);
    if (rc == ACCEL_OK)
        rc = typed_view(cfg);
    return rc == ACCEL_OK ? ds_fields(cfg, mp_from_config) : rc;
}

const struct accel_val *accel_cfg_arg(const struct accel_cfg *cfg, const char *name)
{
    const struct accel_pair *p = accel_map_find(&cfg->args, name);
    return (p == NULL || p->val.type == ACCEL_V_NULL) ? NULL : &p->val;
}
