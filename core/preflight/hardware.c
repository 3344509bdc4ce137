/*
 * hardware.c: does the config fit this node's GPUs?  Processes per node
 * against the GPUs the job sees; mixed precision against their compute
 * capability (bf16 needs 8.0, Ampere; fp8 needs 8.9, Ada or Hopper); and
 * free memory against a floor every process needs whatever it trains (its
 * CUDA context and NCCL's buffers): an accelerate config names no model, so
 * no larger estimate can be made from it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pf_int.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define PF_GPU_FLOOR (1ull << 30) /* bytes a process needs before its model */
#define PF_GPU_BUSY_PERCENT 10    /* more in use before the job: a warning */

/* A config whose processes need GPUs (accelerate's use_cpu aside); NVIDIA
 * GPUs only: NPU, MLU, XPU... are not NVML's to count. */
static bool needs_gpus(const struct accel_cfg *cfg)
{
    return !cfg->use_cpu &&
           (cfg->dist == ACCEL_DIST_MULTI_GPU || cfg->dist == ACCEL_DIST_FSDP ||
            cfg->dist == ACCEL_DIST_DEEPSPEED || cfg->dist == ACCEL_DIST_MEGATRON_LM);
}

/* ...or that uses one where there is one: a single process (NO) runs on the
 * first GPU it sees, else on the CPU. */
static bool gpu_job(const struct accel_cfg *cfg, const struct accel_pf_versions *v)
{
    return needs_gpus(cfg) || (cfg->dist == ACCEL_DIST_NO && !cfg->use_cpu && v->ngpus > 0);
}

static unsigned procs_here(const struct accel_cfg *cfg, unsigned given)
{
    if (given)
        return given;
    if (cfg->num_processes > 0 && cfg->num_machines > 0)
        return (unsigned)((cfg->num_processes + cfg->num_machines - 1) / cfg->num_machines);
    return 0; /* taken from the job: one per visible GPU */
}

static void gpus_row(struct accel_pf_node *node, const struct accel_cfg *cfg, unsigned procs)
{
    const struct accel_pf_versions *v = &node->v;
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");

    if (!gpu_job(cfg, &node->v)) {
        accel_pf_add_row(node, "gpus", ACCEL_PF_PASS,
                         "%s runs on CPUs here: no GPU needed (%u visible)", cfg->dist_name,
                         v->ngpus);
    } else if (!v->driver[0]) {
        accel_pf_add_row(
            node, "gpus", ACCEL_PF_FAIL,
            "%s runs on GPUs and this node has no NVIDIA driver (libnvidia-ml.so.1 did not "
            "load)",
            cfg->dist_name);
    } else if (v->ngpus == 0 || v->ngpus < procs) {
        accel_pf_add_row(
            node, "gpus", ACCEL_PF_FAIL,
            "%u process%s on this node and %u GPU%s visible (CUDA_VISIBLE_DEVICES=%s): ask "
            "for --gpus-per-node=%u, or lower num_processes",
            procs, procs == 1 ? "" : "es", v->ngpus, v->ngpus == 1 ? "" : "s", vis ? vis : "unset",
            procs ? procs : 1);
    } else {
        accel_pf_add_row(node, "gpus", ACCEL_PF_PASS, "%u process%s, %u GPU%s visible (%s)",
                         procs ? procs : v->ngpus, (procs ? procs : v->ngpus) == 1 ? "" : "es",
                         v->ngpus, v->ngpus == 1 ? "" : "s", v->gpu[0].name);
    }
}

static void precision_row(struct accel_pf_node *node, const struct accel_cfg *cfg, unsigned use)
{
    const char *mp = cfg->mixed_precision;
    unsigned need = 0;

    if (strcmp(mp, "bf16") == 0)
        need = 80;
    else if (strcmp(mp, "fp8") == 0)
        need = 89;
    if (need == 0 || (need == 80 && !gpu_job(cfg, &node->v))) {
        accel_pf_add_row(node, "precision", ACCEL_PF_PASS, "mixed_precision: %s%s",
                         mp[0] ? mp : "no", gpu_job(cfg, &node->v) ? "" : " on CPUs");
        return;
    }
    if (!gpu_job(cfg, &node->v)) {
        accel_pf_add_row(
            node, "precision", ACCEL_PF_FAIL,
            "fp8 needs GPUs of compute capability 8.9 or newer (Ada, Hopper) and %s runs on "
            "CPUs here: use bf16",
            cfg->dist_name);
        return;
    }
    if (node->v.ngpus == 0)
        return; /* the gpus row fails already */
    for (unsigned i = 0; i < use && i < node->v.ngpus; i++) {
        const struct accel_pf_gpu *g = &node->v.gpu[i];
        if (g->cc_major * 10 + g->cc_minor < need) {
            accel_pf_add_row(
                node, "precision", ACCEL_PF_FAIL,
                "%s needs compute capability %u.%u or newer; GPU %u (%s) has %u.%u: use %s", mp,
                need / 10, need % 10, i, g->name, g->cc_major, g->cc_minor,
                need == 89 ? "bf16 (8.0) or fp16" : "fp16");
            return;
        }
    }
    accel_pf_add_row(node, "precision", ACCEL_PF_PASS,
                     "%s: every GPU has compute capability %u.%u or newer", mp, need / 10,
                     need % 10);
}

static void memory_row(struct accel_pf_node *node, unsigned use)
{
    double least = -1;

    for (unsigned i = 0; i < use && i < node->v.ngpus; i++) {
        const struct accel_pf_gpu *g = &node->v.gpu[i];
        if (g->mem_free < PF_GPU_FLOOR) {
            accel_pf_add_row(
                node, "gpu-memory", ACCEL_PF_FAIL,
                "GPU %u (%s): %.1f GiB free of %.1f GiB; a process needs at least %.1f GiB "
                "(its CUDA context and NCCL's buffers): another job holds it?",
                i, g->name, g->mem_free / GIB, g->mem_total / GIB, PF_GPU_FLOOR / GIB);
            return;
        }
        if (g->mem_total && g->mem_used * 100 > g->mem_total * PF_GPU_BUSY_PERCENT) {
            accel_pf_add_row(node, "gpu-memory", ACCEL_PF_WARN,
                             "GPU %u (%s): %.1f of %.1f GiB in use before the job starts (another "
                             "process?)",
                             i, g->name, g->mem_used / GIB, g->mem_total / GIB);
            return;
        }
        if (least < 0 || g->mem_free / GIB < least)
            least = g->mem_free / GIB;
    }
    accel_pf_add_row(node, "gpu-memory", ACCEL_PF_PASS, "%u GPU%s, at least %.1f GiB free on each",
                     use, use == 1 ? "" : "s", least < 0 ? 0.0 : least);
}

void pf__check_hardware(struct accel_pf_node *node, const struct accel_cfg *cfg,
                        unsigned procs_per_node)
{
    unsigned procs, use;

    if (!cfg)
        return; /* the config row says why */
    procs = procs_here(cfg, procs_per_node);
    use = procs ? procs : node->v.ngpus;
    gpus_row(node, cfg, procs);
    precision_row(node, cfg, use);
    if (gpu_job(cfg, &node->v) && node->v.ngpus > 0)
        memory_row(node, use);
}
