/*
 * schema.c: the keys of accelerate's config file, section by section, from
 * accelerate's config_args.py (ClusterConfig, SageMakerConfig) and the
 * `accelerate launch` options that nested sections map onto (commands/
 * launch.py).  Versions are the first release that reads (since) or stops
 * reading (removed) a key; keys older than 1.0 carry since = 0.
 */
#include <string.h>

#include "accel/config.h"
#include "schema.h"

#define V ACCEL_VERSION
#define N(arr) (sizeof(arr) / sizeof((arr)[0]))

const char *const config__schema_dist_values[] = {
    "NO",         "MULTI_CPU",  "MULTI_GPU", "MULTI_NPU",   "MULTI_MLU",
    "MULTI_SDAA", "MULTI_MUSA", "MULTI_XPU", "MULTI_HPU",   "MULTI_NEURON",
    "DEEPSPEED",  "FSDP",       "XLA",       "MEGATRON_LM", NULL};
static const char *const sagemaker_dist[] = {"NO", "DATA_PARALLEL", "MODEL_PARALLEL", NULL};
static const char *const compute_envs[] = {"LOCAL_MACHINE", "AMAZON_SAGEMAKER", NULL};
const char *const config__schema_precisions[] = {"no", "fp16", "bf16", "fp8", NULL};
const char *const config__schema_fsdp_strategies[] = {
    "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2", NULL};
static const char *const wrap_policies[] = {"TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP",
                                            NULL};
static const char *const prefetches[] = {"BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH", NULL};
static const char *const state_dicts[] = {"FULL_STATE_DICT", "LOCAL_STATE_DICT",
                                          "SHARDED_STATE_DICT", NULL};
static const char *const offload_devices[] = {"none", "cpu", "nvme", NULL};
static const char *const ds_launchers[] = {"pdsh",  "standard", "openmpi", "mvapich",
                                           "mpich", "nossh",    "slurm",   NULL};
static const char *const dynamo_backends[] = {"NO",
                                              "EAGER",
                                              "AOT_EAGER",
                                              "INDUCTOR",
                                              "AOT_TS_NVFUSER",
                                              "NVPRIMS_NVFUSER",
                                              "CUDAGRAPHS",
                                              "OFI",
                                              "FX2TRT",
                                              "ONNXRT",
                                              "TENSORRT",
                                              "AOT_TORCHXLA_TRACE_ONCE",
                                              "TORCHXLA_TRACE_ONCE",
                                              "TVM",
                                              "HPU_BACKEND",
                                              NULL};
static const char *const dynamo_modes[] = {"default", "reduce-overhead", "max-autotune", NULL};
static const char *const fp8_backends[] = {"AO", "TE", "MSAMP", NULL};
static const char *const fp8_formats[] = {"HYBRID", "E4M3", "E5M2", NULL};
static const char *const amax_algos[] = {"max", "most_recent", NULL};
static const char *const opt_levels[] = {"O1", "O2", NULL};
static const char *const cp_strategies[] = {"allgather", "alltoall", NULL};
static const char *const cp_backends[] = {"torch", NULL};
static const char *const sp_backends[] = {"deepspeed", NULL};
static const char *const granularities[] = {"full", "selective", NULL};
static const char *const recompute_methods[] = {"uniform", "block", NULL};

/* ------------------------------------------------------------ fsdp_config */
static const struct key_spec fsdp_keys[] = {
    {"fsdp_version", KT_INT, NULL, 0, V(1, 6, 0), 0, NULL, NULL, 1, 2},
    {"fsdp_sharding_strategy", KT_ENUM, config__schema_fsdp_strategies,
     KF_CASEI | KF_DIGITS | KF_NULL},
    {"fsdp_reshard_after_forward", KT_ANY, NULL, KF_NULL},
    {"fsdp_offload_params", KT_BOOL, NULL, KF_NULL},
    {"fsdp_auto_wrap_policy", KT_ENUM, wrap_policies, KF_CASEI | KF_NULL},
    {"fsdp_transformer_layer_cls_to_wrap", KT_STR, NULL, KF_NULL},
    {"fsdp_min_num_params", KT_INT, NULL, KF_NULL, 0, 0, NULL, NULL, 0, 0x7fffffffffffffffL},
    {"fsdp_backward_prefetch", KT_ENUM, prefetches, KF_CASEI | KF_DIGITS | KF_NULL},
    {"fsdp_state_dict_type", KT_ENUM, state_dicts, KF_CASEI | KF_DIGITS | KF_NULL},
    {"fsdp_forward_prefetch", KT_BOOL, NULL, KF_NULL},
    {"fsdp_use_orig_params", KT_BOOL, NULL, KF_NULL},
    {"fsdp_cpu_ram_efficient_loading", KT_BOOL, NULL, KF_NULL},
    {"fsdp_sync_module_states", KT_BOOL, NULL, KF_NULL},
    {"fsdp_activation_checkpointing", KT_BOOL, NULL, KF_NULL},
    {"fsdp_activation_checkpointing_offload", KT_BOOL, NULL, KF_NULL, V(1, 15, 0)},
    {"fsdp_ignored_modules", KT_STR, NULL, KF_NULL, V(1, 10, 0)},
    {"fsdp_backward_prefetch_policy", KT_ANY, NULL, KF_NULL, 0, V(1, 0, 0),
     "write fsdp_backward_prefetch instead"},
};
static const struct section fsdp_section = {"fsdp_config", "fsdp_",     "fsdp", 0,
                                            fsdp_keys,     N(fsdp_keys)};

/* ------------------------------------------------------- deepspeed_config */
static const struct key_spec ds_keys[] = {
    {"deepspeed_config_file", KT_STR, NULL, KF_NULL},
    {"zero_stage", KT_INT, NULL, KF_NULL, 0, 0, NULL, NULL, 0, 3},
    {"offload_optimizer_device", KT_ENUM, offload_devices, KF_CASEI | KF_NULL},
    {"offload_param_device", KT_ENUM, offload_devices, KF_CASEI | KF_NULL},
    {"offload_optimizer_nvme_path", KT_STR, NULL, KF_NULL},
    {"offload_param_nvme_path", KT_STR, NULL, KF_NULL},
    {"gradient_accumulation_steps", KT_INT, NULL, KF_NULL | KF_AUTO, 0, 0, NULL, NULL, 1,
     1000000000},
    {"gradient_clipping", KT_FLOAT, NULL, KF_NULL | KF_AUTO},
    {"zero3_save_16bit_model", KT_BOOL, NULL, KF_NULL},
    {"zero3_init_flag", KT_BOOL, NULL, KF_NULL},
    {"deepspeed_moe_layer_cls_names", KT_STR, NULL, KF_NULL},
    {"deepspeed_multinode_launcher", KT_ENUM, ds_launchers, KF_NULL},
    {"deepspeed_hostfile", KT_STR, NULL, KF_NULL},
    {"deepspeed_exclusion_filter", KT_STR, NULL, KF_NULL},
    {"deepspeed_inclusion_filter", KT_STR, NULL, KF_NULL},
};
static const struct section ds_section = {"deepspeed_config", NULL, NULL, 0, ds_keys, N(ds_keys)};

/* ----------------------------------------------------- megatron_lm_config */
static const struct key_spec meg_keys[] = {
    {"megatron_lm_tp_degree", KT_INT, NULL, KF_NULL, 0, 0, NULL, NULL, 1, 1 << 20},
    {"megatron_lm_pp_degree", KT_INT, NULL, KF_NULL, 0, 0, NULL, NULL, 1, 1 << 20},
    {"megatron_lm_num_micro_batches", KT_INT, NULL, KF_NULL, 0, 0, NULL, NULL, 1, 1 << 30},
    {"megatron_lm_sequence_parallelism", KT_BOOL, NULL, KF_NULL},
    {"megatron_lm_recompute_activations", KT_BOOL, NULL, KF_NULL},
    {"megatron_lm_use_distributed_optimizer", KT_BOOL, NULL, KF_NULL},
    {"megatron_lm_gradient_clipping", KT_FLOAT, NULL, KF_NULL},
    {"megatron_lm_use_custom_fsdp", KT_BOOL, NULL, KF_NULL},
    {"megatron_lm_no_load_optim", KT_BOOL, NULL, KF_NULL},
    {"megatron_lm_eod_mask_loss", KT_BOOL, NULL, KF_NULL},
    {"megatron_lm_overlap_cpu_optimizer_d2h_h2d", KT_BOOL, NULL, KF_NULL},
    {"megatron_lm_no_save_optim", KT_BOOL, NULL, KF_NULL},
    {"megatron_lm_optimizer_cpu_offload", KT_BOOL, NULL, KF_NULL},
    {"megatron_lm_use_precision_aware_optimizer", KT_BOOL, NULL, KF_NULL},
    {"megatron_lm_decoder_last_pipeline_num_layers", KT_INT, NULL, KF_NULL},
    {"megatron_lm_recompute_granularity", KT_ENUM, granularities, KF_NULL},
    {"megatron_lm_recompute_method", KT_ENUM, recompute_methods, KF_NULL},
    {"megatron_lm_recompute_num_layers", KT_INT, NULL, KF_NULL},
    {"megatron_lm_attention_backend", KT_STR, NULL, KF_NULL},
    {"megatron_lm_expert_model_parallel_size", KT_INT, NULL, KF_NULL},
    {"megatron_lm_context_parallel_size", KT_INT, NULL, KF_NULL},
    {"megatron_lm_attention_dropout", KT_FLOAT, NULL, KF_NULL},
    {"megatron_lm_hidden_dropout", KT_FLOAT, NULL, KF_NULL},
    {"megatron_lm_attention_softmax_in_fp32", KT_BOOL, NULL, KF_NULL},
    {"megatron_lm_expert_tensor_parallel_size", KT_INT, NULL, KF_NULL},
    {"megatron_lm_calculate_per_token_loss", KT_BOOL, NULL, KF_NULL},
    {"megatron_lm_use_rotary_position_embeddings", KT_BOOL, NULL, KF_NULL},
};
static const struct section meg_section = {"megatron_lm_config", NULL, NULL, 0, meg_keys,
                                           N(meg_keys)};

/* ---------------------------------------------------------- dynamo_config */
static const struct key_spec dyn_keys[] = {
    {"dynamo_backend", KT_ENUM, dynamo_backends, KF_CASEI | KF_NULL},
    {"dynamo_mode", KT_ENUM, dynamo_modes, KF_NULL},
    {"dynamo_use_fullgraph", KT_BOOL, NULL, KF_NULL},
    {"dynamo_use_dynamic", KT_BOOL, NULL, KF_NULL},
    {"dynamo_use_regional_compilation", KT_BOOL, NULL, KF_NULL, V(1, 7, 0)},
};
static const struct section dyn_section = {"dynamo_config", "dynamo_", "dynamo_",
                                           V(1, 14, 0),     dyn_keys,  N(dyn_keys)};

/* -------------------------------------------------------------- fp8_config */
static const struct key_spec fp8_keys[] = {
    /* Accelerator() parses the variable with an upper-case enum */
    {"fp8_backend", KT_ENUM, fp8_backends, KF_NULL},
    {"fp8_use_autocast_during_eval", KT_BOOL, NULL, KF_NULL},
    {"fp8_margin", KT_INT, NULL, KF_NULL},
    {"fp8_interval", KT_INT, NULL, KF_NULL, 0, 0, NULL, NULL, 1, 1 << 30},
    {"fp8_format", KT_ENUM, fp8_formats, KF_NULL},
    {"fp8_amax_history_len", KT_INT, NULL, KF_NULL, 0, 0, NULL, NULL, 1, 1 << 30},
    {"fp8_amax_compute_algo", KT_ENUM, amax_algos, KF_NULL},
    {"fp8_override_linear_precision", KT_ANY, NULL, KF_NULL},
    {"fp8_opt_level", KT_ENUM, opt_levels, KF_NULL},
    {"fp8_enable_fsdp_float8_all_gather", KT_BOOL, NULL, KF_NULL, V(1, 9, 0)},
    {"fp8_pad_inner_dim", KT_BOOL, NULL, KF_NULL, V(1, 9, 0)},
    /* Names `accelerate config` writes that no FP8 recipe reads. */
    {"fp8_amax_history_length", KT_ANY, NULL, KF_NOOP, 0, 0, "fp8_amax_history_len"},
    {"fp8_amax_compute_algorithm", KT_ANY, NULL, KF_NOOP, 0, 0, "fp8_amax_compute_algo"},
    {"fp8_optimization_level", KT_ANY, NULL, KF_NOOP, 0, 0, "fp8_opt_level"},
};
static const struct section fp8_section = {"fp8_config", "fp8_", "fp8", 0, fp8_keys, N(fp8_keys)};

/* ------------------------------------------------------ parallelism_config */
static const struct key_spec par_keys[] = {
    {"parallelism_config_dp_replicate_size", KT_INT, NULL, KF_NULL, 0, 0, NULL, NULL, 1, 1 << 20},
    {"parallelism_config_dp_shard_size", KT_INT, NULL, KF_NULL, 0, 0, NULL, NULL, -1, 1 << 20},
    {"parallelism_config_tp_size", KT_INT, NULL, KF_NULL, 0, 0, NULL, NULL, 1, 1 << 20},
    {"parallelism_config_cp_size", KT_INT, NULL, KF_NULL, 0, 0, NULL, NULL, 1, 1 << 20},
    {"parallelism_config_cp_comm_strategy", KT_ENUM, cp_strategies, KF_NULL},
    {"parallelism_config_cp_backend", KT_ENUM, cp_backends, KF_NULL},
    {"parallelism_config_sp_size", KT_INT, NULL, KF_NULL, 0, 0, NULL, NULL, 1, 1 << 20},
    {"parallelism_config_sp_backend", KT_ENUM, sp_backends, KF_NULL},
    {"parallelism_config_sp_seq_length", KT_INT, NULL, KF_NULL},
    {"parallelism_config_sp_seq_length_is_variable", KT_BOOL, NULL, KF_NULL},
    {"parallelism_config_sp_attn_implementation", KT_STR, NULL, KF_NULL},
};
static const struct section par_section = {"parallelism_config", NULL, NULL, 0, par_keys,
                                           N(par_keys)};

/* ----------------------------------------------------------- mpirun_config */
static const struct key_spec mpi_keys[] = {
    {"mpirun_hostfile", KT_STR, NULL, KF_NULL},
    {"mpirun_ccl", KT_INT, NULL, KF_NULL, V(1, 8, 0), V(1, 13, 0),
     "delete the key: accelerate dropped oneCCL support"},
};
static const struct section mpi_section = {"mpirun_config", NULL, NULL, 0, mpi_keys, N(mpi_keys)};

/* --------------------------------------------------------------- top level */
#define BASE_KEYS                                                                                  \
    {"compute_environment", KT_ENUM, compute_envs, 0}, {"distributed_type", KT_ANY, NULL, 0},      \
        {"mixed_precision", KT_ANY, NULL, KF_NULL}, {"use_cpu", KT_BOOL, NULL, KF_NULL},           \
        {"debug", KT_BOOL, NULL, KF_NULL}, {"enable_cpu_affinity", KT_BOOL, NULL, KF_NULL},        \
        {"dynamo_config", KT_MAP, NULL, KF_NULL, 0, 0, NULL, &dyn_section},                        \
        {"gpu_ids", KT_ANY, NULL, KF_NULL},                                                        \
        {"num_machines", KT_INT, NULL, KF_NULL, 0, 0, NULL, NULL, 1, SCHEMA_MAX_MACHINES},         \
        {"fp16", KT_BOOL, NULL, KF_LEGACY | KF_NULL, 0, 0, "mixed_precision: fp16"},               \
    {                                                                                              \
        "dynamo_backend", KT_ANY, NULL, KF_LEGACY | KF_NULL, 0, 0,                                 \
            "dynamo_config: {dynamo_backend: ...}"                                                 \
    }

static const struct key_spec cluster_keys[] = {
    BASE_KEYS,
    {"num_processes", KT_INT, NULL, KF_NULL, 0, 0, NULL, NULL, 1, SCHEMA_MAX_PROCESSES},
    {"machine_rank", KT_INT, NULL, KF_NULL, 0, 0, NULL, NULL, 0, 1 << 20},
    {"main_process_ip", KT_STR, NULL, KF_NULL},
    {"main_process_port", KT_INT, NULL, KF_NULL, 0, 0, NULL, NULL, 0, 65535},
    {"rdzv_backend", KT_STR, NULL, KF_NULL},
    {"same_network", KT_BOOL, NULL, KF_NULL},
    {"main_training_function", KT_STR, NULL, KF_NULL},
    {"downcast_bf16", KT_ANY, NULL, KF_NULL},
    {"deepspeed_config", KT_MAP, NULL, KF_NULL, 0, 0, NULL, &ds_section},
    {"fsdp_config", KT_MAP, NULL, KF_NULL, 0, 0, NULL, &fsdp_section},
    {"megatron_lm_config", KT_MAP, NULL, KF_NULL, 0, 0, NULL, &meg_section},
    {"fp8_config", KT_MAP, NULL, KF_NULL, 0, 0, NULL, &fp8_section},
    {"parallelism_config", KT_MAP, NULL, KF_NULL, V(1, 10, 0), 0, NULL, &par_section},
    {"mpirun_config", KT_MAP, NULL, KF_NULL, 0, 0, NULL, &mpi_section},
    {"tpu_name", KT_STR, NULL, KF_NULL},
    {"tpu_zone", KT_STR, NULL, KF_NULL},
    {"tpu_use_cluster", KT_BOOL, NULL, KF_NULL},
    {"tpu_use_sudo", KT_BOOL, NULL, KF_NULL},
    {"command_file", KT_STR, NULL, KF_NULL},
    {"commands", KT_STRLIST, NULL, KF_NULL},
    {"tpu_vm", KT_STRLIST, NULL, KF_NULL},
    {"tpu_env", KT_STRLIST, NULL, KF_NULL},
    {"ipex_config", KT_MAP, NULL, KF_NULL, 0, V(1, 13, 0),
     "delete the key: accelerate dropped IPEX support"},
    {"tp_config", KT_MAP, NULL, KF_NULL, V(1, 4, 0), V(1, 7, 0),
     "write parallelism_config: {parallelism_config_tp_size: N} instead"},
};
const struct section config__schema_cluster = {"", NULL, NULL, 0, cluster_keys, N(cluster_keys)};

static const struct key_spec sagemaker_keys[] = {
    BASE_KEYS,
    {"ec2_instance_type", KT_STR, NULL, 0},
    {"iam_role_name", KT_STR, NULL, 0},
    {"image_uri", KT_STR, NULL, KF_NULL},
    {"profile", KT_STR, NULL, KF_NULL},
    {"region", KT_STR, NULL, KF_NULL},
    {"base_job_name", KT_STR, NULL, KF_NULL},
    {"pytorch_version", KT_STR, NULL, KF_NULL},
    {"transformers_version", KT_STR, NULL, KF_NULL},
    {"py_version", KT_STR, NULL, KF_NULL},
    {"sagemaker_inputs_file", KT_STR, NULL, KF_NULL},
    {"sagemaker_metrics_file", KT_STR, NULL, KF_NULL},
    {"additional_args", KT_MAP, NULL, KF_NULL},
};
const struct section config__schema_sagemaker = {"", NULL,           NULL,
                                                 0,  sagemaker_keys, N(sagemaker_keys)};

const struct section *const config__schema_sections[] = {&fsdp_section, &ds_section,  &meg_section,
                                                         &dyn_section,  &fp8_section, &par_section,
                                                         &mpi_section,  NULL};

const struct key_spec *config__schema_find(const struct section *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->keys[i].name, name) == 0)
            return &s->keys[i];
    return NULL;
}

/* sagemaker distributed_type values, for check.c */
const char *const *config__schema_sagemaker_dist(void)
{
    return sagemaker_dist;
}
