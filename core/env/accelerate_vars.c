/*
 * accelerate_vars.c: the variables accelerate itself exports, path by path,
 * mirroring accelerate 1.15's utils/launch.py (prepare_simple_launcher_
 * cmd_env, prepare_multi_gpu_env, prepare_deepspeed_cmd_env, setup_fp8_env,
 * prepare_extend_env_parallelism_config).  Values are Python's str() of the
 * resolved attribute, lowercased exactly where accelerate lowercases.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "env_int.h"

static const struct accel_val *arg(const struct accel_cfg *cfg, const char *name)
{
    return accel_cfg_arg(cfg, name);
}

/* Sets NAME from an attribute when it is not None. */
static void set_if(struct env__list *l, const struct accel_cfg *cfg, const char *name,
                   const char *attr, bool lower)
{
    const struct accel_val *v = arg(cfg, attr);
    if (v != NULL)
        env__list_set_py(l, name, v, lower);
}

/* Sets NAME from an attribute, "None" when absent (str(None)). */
static void set_always(struct env__list *l, const struct accel_cfg *cfg, const char *name,
                       const char *attr, bool lower)
{
    static const struct accel_val none = {.type = ACCEL_V_NULL};
    const struct accel_val *v = arg(cfg, attr);
    env__list_set_py(l, name, v ? v : &none, lower);
}

static void device_ids(struct env__list *l, const struct accel_cfg *cfg)
{
    const char *name = "CUDA_VISIBLE_DEVICES";

    if (cfg->gpu_ids == NULL)
        return;
    /* accelerate picks the variable by the devices of the launching host;
     * accelrun picks it by the config's device type (docs/differences.md). */
    switch (cfg->dist) {
    case ACCEL_DIST_MULTI_XPU:
        name = "ZE_AFFINITY_MASK";
        break;
    case ACCEL_DIST_MULTI_MLU:
        name = "MLU_VISIBLE_DEVICES";
        break;
    case ACCEL_DIST_MULTI_SDAA:
        name = "SDAA_VISIBLE_DEVICES";
        break;
    case ACCEL_DIST_MULTI_MUSA:
        name = "MUSA_VISIBLE_DEVICES";
        break;
    case ACCEL_DIST_MULTI_NPU:
        name = "ASCEND_RT_VISIBLE_DEVICES";
        break;
    case ACCEL_DIST_MULTI_HPU:
        name = "HABANA_VISIBLE_MODULES";
        break;
    case ACCEL_DIST_MULTI_NEURON:
        name = "NEURON_RT_VISIBLE_CORES";
        break;
    case ACCEL_DIST_NO:
    case ACCEL_DIST_MULTI_CPU:
    case ACCEL_DIST_MULTI_GPU:
    case ACCEL_DIST_DEEPSPEED:
    case ACCEL_DIST_FSDP:
    case ACCEL_DIST_XLA:
    case ACCEL_DIST_MEGATRON_LM:
        break;
    }
    env__list_set(l, name, cfg->gpu_ids);
}

/* setup_fp8_env: every fp8_* attribute that is not None. */
static void fp8_vars(struct env__list *l, const struct accel_cfg *cfg)
{
    static const char *const parts[] = {"FPROP", "DGRAD", "WGRAD"};

    if (strcmp(cfg->mixed_precision, "fp8") != 0)
        return;
    for (size_t i = 0; i < cfg->args.u.map.n; i++) {
        const struct accel_pair *p = &cfg->args.u.map.v[i];
        char name[ACCEL_MAX_ENV_NAME + 1];
        if (strncmp(p->key, "fp8_", 4) != 0 || p->val.type == ACCEL_V_NULL)
            continue;
        if (strcmp(p->key, "fp8_override_linear_precision") == 0) {
            /* value[0], value[1], value[2]: items of a list, characters of a
             * string (the string case is refused by the checks). */
            for (size_t k = 0; k < 3; k++) {
                snprintf(name, sizeof(name), "ACCELERATE_FP8_OVERRIDE_%s", parts[k]);
                if (p->val.type == ACCEL_V_LIST && k < p->val.u.list.n)
                    env__list_set_py(l, name, &p->val.u.list.v[k], false);
            }
            continue;
        }
        if (strlen(p->key) + 11 > ACCEL_MAX_ENV_NAME)
            continue;
        snprintf(name, sizeof(name), "ACCELERATE_%s", p->key);
        for (char *c = name; *c; c++)
            *c = (char)toupper((unsigned char)*c);
        env__list_set_py(l, name, &p->val, false);
    }
}

static void dynamo_vars(struct env__list *l, const struct accel_cfg *cfg)
{
    set_always(l, cfg, "ACCELERATE_DYNAMO_BACKEND", "dynamo_backend", false);
    /* DynamoBackend(value.upper()).value */
    for (size_t i = 0; i < l->env->n; i++) {
        char *kv = l->env->v[i];
        if (strncmp(kv, "ACCELERATE_DYNAMO_BACKEND=", 26) == 0)
            for (char *c = kv + 26; *c; c++)
                *c = (char)toupper((unsigned char)*c);
    }
    set_always(l, cfg, "ACCELERATE_DYNAMO_MODE", "dynamo_mode", false);
    set_always(l, cfg, "ACCELERATE_DYNAMO_USE_FULLGRAPH", "dynamo_use_fullgraph", false);
    set_always(l, cfg, "ACCELERATE_DYNAMO_USE_DYNAMIC", "dynamo_use_dynamic", false);
    set_always(l, cfg, "ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION",
               "dynamo_use_regional_compilation", false);
}

static void fsdp_vars(struct env__list *l, const struct accel_cfg *cfg)
{
    env__list_set(l, "ACCELERATE_USE_FSDP", "true");
    set_always(l, cfg, "FSDP_VERSION", "fsdp_version", false);
    set_always(l, cfg, "FSDP_SHARDING_STRATEGY", "fsdp_sharding_strategy", false);
    set_always(l, cfg, "FSDP_RESHARD_AFTER_FORWARD", "fsdp_reshard_after_forward", true);
    set_always(l, cfg, "FSDP_OFFLOAD_PARAMS", "fsdp_offload_params", true);
    set_always(l, cfg, "FSDP_MIN_NUM_PARAMS", "fsdp_min_num_params", false);
    set_if(l, cfg, "FSDP_AUTO_WRAP_POLICY", "fsdp_auto_wrap_policy", false);
    set_if(l, cfg, "FSDP_TRANSFORMER_CLS_TO_WRAP", "fsdp_transformer_layer_cls_to_wrap", false);
    set_if(l, cfg, "FSDP_BACKWARD_PREFETCH", "fsdp_backward_prefetch", false);
    set_if(l, cfg, "FSDP_STATE_DICT_TYPE", "fsdp_state_dict_type", false);
    set_always(l, cfg, "FSDP_FORWARD_PREFETCH", "fsdp_forward_prefetch", true);
    set_always(l, cfg, "FSDP_USE_ORIG_PARAMS", "fsdp_use_orig_params", true);
    set_always(l, cfg, "FSDP_CPU_RAM_EFFICIENT_LOADING", "fsdp_cpu_ram_efficient_loading", true);
    set_always(l, cfg, "FSDP_SYNC_MODULE_STATES", "fsdp_sync_module_states", true);
    set_always(l, cfg, "FSDP_ACTIVATION_CHECKPOINTING", "fsdp_activation_checkpointing", true);
    set_always(l, cfg, "FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD",
               "fsdp_activation_checkpointing_offload", true);
    set_if(l, cfg, "FSDP_IGNORED_MODULES", "fsdp_ignored_modules", false);
}

static void megatron_vars(struct env__list *l, const struct accel_cfg *cfg)
{
    /* Always exported, then each optional one when not None. */
    static const char *const always[] = {"tp_degree", "use_custom_fsdp", "pp_degree",
                                         "gradient_clipping"};
    static const char *const optional[] = {"no_load_optim",
                                           "eod_mask_loss",
                                           "no_save_optim",
                                           "optimizer_cpu_offload",
                                           "use_precision_aware_optimizer",
                                           "overlap_cpu_optimizer_d2h_h2d",
                                           "decoder_last_pipeline_num_layers",
                                           "num_micro_batches",
                                           "sequence_parallelism",
                                           "recompute_activations",
                                           "use_distributed_optimizer",
                                           "recompute_granularity",
                                           "recompute_method",
                                           "recompute_num_layers",
                                           "attention_backend",
                                           "expert_model_parallel_size",
                                           "context_parallel_size",
                                           "attention_dropout",
                                           "hidden_dropout",
                                           "attention_softmax_in_fp32",
                                           "expert_tensor_parallel_size",
                                           "calculate_per_token_loss",
                                           "use_rotary_position_embeddings"};
    char attr[96], name[96];

    env__list_set(l, "ACCELERATE_USE_MEGATRON_LM", "true");
    for (size_t i = 0;
         i < sizeof(always) / sizeof(always[0]) + sizeof(optional) / sizeof(optional[0]); i++) {
        bool is_always = i < sizeof(always) / sizeof(always[0]);
        const char *base = is_always ? always[i] : optional[i - sizeof(always) / sizeof(always[0])];
        snprintf(attr, sizeof(attr), "megatron_lm_%s", base);
        snprintf(name, sizeof(name), "MEGATRON_LM_%s", base);
        for (char *c = name; *c; c++)
            *c = (char)toupper((unsigned char)*c);
        if (is_always)
            set_always(l, cfg, name, attr, false);
        else
            set_if(l, cfg, name, attr, false);
    }
}

static long int_attr(const struct accel_cfg *cfg, const char *name)
{
    const struct accel_val *v = arg(cfg, name);
    return (v != NULL && v->type == ACCEL_V_INT) ? (long)v->u.i : 1;
}

static void parallelism_vars(struct env__list *l, const struct accel_cfg *cfg)
{
    const struct accel_pair *p = accel_map_find(&cfg->tree, "parallelism_config");

    if (p == NULL || p->val.type != ACCEL_V_MAP || p->val.u.map.n == 0)
        return;
    env__list_set(l, "ACCELERATE_USE_PARALLELISM_CONFIG", "true");
    set_always(l, cfg, "PARALLELISM_CONFIG_DP_REPLICATE_SIZE",
               "parallelism_config_dp_replicate_size", false);
    set_always(l, cfg, "PARALLELISM_CONFIG_DP_SHARD_SIZE", "parallelism_config_dp_shard_size",
               false);
    set_always(l, cfg, "PARALLELISM_CONFIG_TP_SIZE", "parallelism_config_tp_size", false);
    set_always(l, cfg, "PARALLELISM_CONFIG_CP_SIZE", "parallelism_config_cp_size", false);
    set_always(l, cfg, "PARALLELISM_CONFIG_CP_BACKEND", "parallelism_config_cp_backend", false);
    set_always(l, cfg, "PARALLELISM_CONFIG_SP_SIZE", "parallelism_config_sp_size", false);
    set_always(l, cfg, "PARALLELISM_CONFIG_SP_BACKEND", "parallelism_config_sp_backend", false);
    if (int_attr(cfg, "parallelism_config_cp_size") > 1)
        set_always(l, cfg, "PARALLELISM_CONFIG_CP_COMM_STRATEGY",
                   "parallelism_config_cp_comm_strategy", false);
    if (int_attr(cfg, "parallelism_config_sp_size") > 1) {
        set_always(l, cfg, "PARALLELISM_CONFIG_SP_SEQ_LENGTH", "parallelism_config_sp_seq_length",
                   false);
        set_always(l, cfg, "PARALLELISM_CONFIG_SP_SEQ_LENGTH_IS_VARIABLE",
                   "parallelism_config_sp_seq_length_is_variable", false);
        set_always(l, cfg, "PARALLELISM_CONFIG_SP_ATTN_IMPLEMENTATION",
                   "parallelism_config_sp_attn_implementation", false);
    }
}

static void deepspeed_vars(struct env__list *l, const struct accel_cfg *cfg)
{
    char *lower = NULL;

    env__list_set(l, "ACCELERATE_CONFIG_DS_FIELDS", cfg->ds_fields ? cfg->ds_fields : "");
    for (size_t i = 0; i < l->env->n; i++)
        if (strncmp(l->env->v[i], "ACCELERATE_CONFIG_DS_FIELDS=", 28) == 0)
            for (lower = l->env->v[i] + 28; *lower; lower++)
                *lower = (char)tolower((unsigned char)*lower);
    env__list_set(l, "ACCELERATE_USE_DEEPSPEED", "true");
    set_if(l, cfg, "ACCELERATE_DEEPSPEED_ZERO_STAGE", "zero_stage", false);
    set_if(l, cfg, "ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "gradient_accumulation_steps", false);
    set_if(l, cfg, "ACCELERATE_GRADIENT_CLIPPING", "gradient_clipping", true);
    set_if(l, cfg, "ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "offload_optimizer_device",
           true);
    set_if(l, cfg, "ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE", "offload_param_device", true);
    set_if(l, cfg, "ACCELERATE_DEEPSPEED_ZERO3_INIT", "zero3_init_flag", true);
    set_if(l, cfg, "ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL", "zero3_save_16bit_model", true);
    set_if(l, cfg, "ACCELERATE_DEEPSPEED_CONFIG_FILE", "deepspeed_config_file", false);
    set_if(l, cfg, "ACCELERATE_DEEPSPEED_MOE_LAYER_CLS_NAMES", "deepspeed_moe_layer_cls_names",
           false);
}

static bool truthy_arg(const struct accel_cfg *cfg, const char *name)
{
    const struct accel_val *v = arg(cfg, name);
    return v != NULL && accel_val_truthy(v);
}

void env__accelerate_vars(struct env__list *l, const struct accel_cfg *cfg, const struct world *w)
{
    if (cfg->debug)
        env__list_set(l, "ACCELERATE_DEBUG_MODE", "true");
    device_ids(l, cfg);
    env__list_set(l, "ACCELERATE_MIXED_PRECISION", cfg->mixed_precision);
    fp8_vars(l, cfg);
    if (truthy_arg(cfg, "enable_cpu_affinity"))
        env__list_set(l, "ACCELERATE_CPU_AFFINITY", "1");

    switch (cfg->launcher) {
    case ACCEL_LAUNCH_SIMPLE:
        /* str(args.cpu or args.use_cpu), and the CLI's cpu is False here */
        set_always(l, cfg, "ACCELERATE_USE_CPU", "use_cpu", false);
        if (cfg->use_cpu) {
            env__list_set(l, "KMP_AFFINITY", "granularity=fine,compact,1,0");
            env__list_set(l, "KMP_BLOCKTIME", "1");
        }
        dynamo_vars(l, cfg);
        env__list_setf(l, "OMP_NUM_THREADS", "%u", w->omp_threads);
        break;
    case ACCEL_LAUNCH_TORCHRUN:
        /* accelerate exports nothing for use_cpu on this path, so since 1.13
         * such a job silently runs without the CPU flag; accelrun follows the
         * YAML (docs/differences.md). */
        if (cfg->use_cpu)
            env__list_set(l, "ACCELERATE_USE_CPU", "true");
        dynamo_vars(l, cfg);
        if (cfg->dist == ACCEL_DIST_FSDP)
            fsdp_vars(l, cfg);
        if (cfg->dist == ACCEL_DIST_MEGATRON_LM)
            megatron_vars(l, cfg);
        env__list_setf(l, "OMP_NUM_THREADS", "%u", w->omp_threads);
        parallelism_vars(l, cfg);
        break;
    case ACCEL_LAUNCH_DEEPSPEED:
        if (cfg->use_cpu)
            env__list_set(l, "ACCELERATE_USE_CPU", "true");
        deepspeed_vars(l, cfg);
        /* accelerate sets no OMP_NUM_THREADS here; torchrun sets 1 when it
         * starts more than one worker and the variable is unset. */
        if (w->nproc_per_node > 1)
            env__list_set(l, "OMP_NUM_THREADS", "1");
        parallelism_vars(l, cfg);
        break;
    case ACCEL_LAUNCH_NONE:
        break;
    }
}
