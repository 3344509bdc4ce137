/*
 * train.c: train_gpt, the example native trainer: one process per rank, the
 * accelerate environment in, libaccelrun's bootstrap, communicator and
 * sharded data-parallel runtime underneath, the model of model.h on top.
 *
 * A step: for each micro-step, the rank's slice of the global batch goes
 * forward unit by unit (gather, forward, release) and backward in reverse
 * (gather, backward adding into the unit's gradient, reduce on the last
 * micro-step, release); then accel_shard_step updates this rank's slices.
 * The loss printed is the mean over every token of the global batch
 * (all-reduced, fixed ring order).  Rank 0 prints the progress lines and
 * writes --loss-log; every rank prints its memory at exit for bench/train.sh.
 *
 * Two modes, by the communicator's backend: "socket" runs on the CPU
 * (kernels.c, host buffers); "nccl" runs on the GPU of LOCAL_RANK (gpu.h):
 * activations, gathered parameters and gradients in device memory, every
 * kernel and copy queued on the backend's compute stream and every
 * collective on the communicator's, ordered by events (the shard's through
 * accel_shard_set_compute_stream, the loss's all-reduce here), the next
 * unit's all-gather issued while this unit computes (prefetch), the
 * micro-batch's bytes copied in and the loss read back once a step.  The
 * CPU mode prefetches nothing (every call there is complete on return, so
 * it would only raise the peak).
 * What this file does not do: kernels (kernels.c, the .cu files), units
 * (model.c), data (data.c), flags (args.c).
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "accel/comm.h"
#include "accel/err.h"
#include "accel/getenv.h"
#include "accel/shard.h"
#include "accel/store.h"

#include "args.h"
#include "data.h"
#include "gpu.h"
#include "model.h"
#include "resume.h"

struct trainer {
    struct gpt_args a;
    struct accel_bootstrap boot;
    struct accel_comm *comm;
    struct accel_shard *shard;
    struct accel_shard_opts opts;
    struct gpt_model m;
    struct gpt_data data;
    unsigned rank, world;
    size_t micro; /* sequences per micro-step on this rank */
    size_t accum; /* micro-steps per step */
    bool device;  /* the nccl backend: the model and the shard on the GPU */
    int cuda_device;
    struct gpt_cuda *cuda; /* the CUDA backend's context (device mode) */
    FILE *log;
    size_t start;        /* the step resumed from (0: a fresh run) */
    int stopped;         /* the signal the run stopped on, after saving (0: it did not) */
    unsigned from;       /* the world size that saved it */
    double save_started; /* --async-save: when the save in flight started (now_s) */
    struct accel_error err;
    const char *what; /* the failing step, for the message */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A "VmXXX:  N kB" line of /proc/self/status, in KiB; 0 when unreadable. */
static unsigned long status_kb(const char *field)
{
    char line[256];
    unsigned long kb = 0;
    size_t n = strlen(field);
    FILE *f = fopen("/proc/self/status", "r");

    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':') {
            kb = strtoul(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return kb;
}

/* Linear warmup to lr, then cosine down to lr * min_lr_frac at the last step. */
static double lr_at(const struct gpt_args *a, size_t step)
{
    double lo = a->lr * a->min_lr_frac;

    if (step < a->warmup)
        return a->lr * (double)(step + 1) / (double)a->warmup;
    if (a->steps <= a->warmup + 1)
        return a->lr;
    double p = (double)(step - a->warmup) / (double)(a->steps - 1 - a->warmup);
    return lo + 0.5 * (a->lr - lo) * (1.0 + cos(3.14159265358979323846 * p));
}

static int fail(struct trainer *t, const char *what)
{
    t->what = what;
    return -1;
}

/* The backend's first failure (a CUDA launch, cuBLAS), if any, as the step's. */
static int check_backend(struct trainer *t, const char *what)
{
    char why[512];

    if (gpt_check(&t->m, why, sizeof why) == 0)
        return 0;
    accel_error_set(&t->err, ACCEL_EIO, "%s", why);
    return fail(t, what);
}

/* Forward of every unit on the micro-batch in t->m; the head stays gathered
 * when backward follows (FSDP does not reshard the last unit either).
 *
 * Device mode prefetches: unit u + 1's gather is called after unit u's
 * kernels are queued (the compute stream's wait for it then lands behind
 * them, not ahead) and before unit u's release (whose hand-off makes the
 * communicator's stream wait for unit u's compute), so the all-gather runs
 * while unit u computes; the gather at the top of the loop is then a no-op.
 * Every rank calls the collectives in the same order. */
static int forward(struct trainer *t, bool then_backward)
{
    for (size_t u = 0; u < t->m.nunits; u++) {
        if (accel_shard_gather(t->shard, u, &t->err) != ACCEL_OK)
            return fail(t, "gather (forward)");
        gpt_forward(&t->m, u, accel_shard_params(t->shard, u));
        if (check_backend(t, "forward"))
            return -1;
        if (t->device && u + 1 < t->m.nunits &&
            accel_shard_gather(t->shard, u + 1, &t->err) != ACCEL_OK)
            return fail(t, "gather (forward prefetch)");
        if (!(then_backward && u + 1 == t->m.nunits))
            accel_shard_release(t->shard, u);
    }
    return 0;
}

/* Unit u's gathered parameters (FULL_SHARD: gathered again) and its
 * gradient buffer (allocated and zeroed on first use in a step). */
static float *backward_buffers(struct trainer *t, size_t u, const char *what)
{
    float *g;

    if (accel_shard_gather(t->shard, u, &t->err) != ACCEL_OK) {
        fail(t, what);
        return NULL;
    }
    if (!(g = accel_shard_grads(t->shard, u))) {
        accel_error_set(&t->err, ACCEL_ENOMEM, "no gradient buffer for unit %zu", u);
        fail(t, "grads");
    }
    return g;
}

/* Device mode prefetches as forward does: unit u - 1's gather and gradient
 * buffer after unit u's backward is queued and before its reduce, so the
 * all-gather runs during unit u's backward, and unit u's reduce-scatter
 * (which waits for that backward) during unit u - 1's. */
static int backward(struct trainer *t, float dloss, bool last)
{
    for (size_t u = t->m.nunits; u-- > 0;) {
        float *g = backward_buffers(t, u, "gather (backward)");
        if (!g)
            return -1;
        gpt_backward(&t->m, u, accel_shard_params(t->shard, u), g, dloss);
        if (check_backend(t, "backward"))
            return -1;
        if (t->device && u > 0 && !backward_buffers(t, u - 1, "gather (backward prefetch)"))
            return -1;
        if (accel_shard_reduce(t->shard, u, last, &t->err) != ACCEL_OK)
            return fail(t, "reduce");
        accel_shard_release(t->shard, u);
    }
    return 0;
}

/* A signal that asks the run to stop (--ckpt-dir: SIGTERM, SIGINT, SIGUSR1):
 * the handler only notes it; the ranks agree on it with the loss. */
static volatile sig_atomic_t stop_signal;

static void note_signal(int sig)
{
    stop_signal = sig;
}

/* Global mean of the per-rank mean loss sum / denom (every rank has the same
 * token count), and whether any rank was asked to stop (*stop, the mean of
 * the ranks' flags > 0): both computed where the loss is (host or device),
 * all-reduced there in one call, then read back: the one wait for the device
 * in a step, bounded by the communicator's timeout (accel_comm_sync) before
 * the copy.  On a device the loss is made on the compute stream and
 * all-reduced on the communicator's: that stream first waits for the compute
 * stream (so the sync covers both), and the compute stream, where the copy
 * goes, for it. */
static int global_mean(struct trainer *t, double denom, float *out, bool *stop)
{
    float *x = gpt_loss_mean(&t->m, denom), got[2];
    char why[512];

    gpt_loss_flag(&t->m, stop_signal ? 1.0f : 0.0f);
    if (t->device && gpt_cuda_comm_after(t->cuda, why, sizeof why)) {
        accel_error_set(&t->err, ACCEL_EIO, "%s", why);
        return fail(t, "loss (to the communicator's stream)");
    }
    if (accel_all_reduce(t->comm, x, x, 2, ACCEL_F32, ACCEL_AVG, &t->err) != ACCEL_OK)
        return fail(t, "all_reduce (loss)");
    if (accel_comm_sync(t->comm, &t->err) != ACCEL_OK)
        return fail(t, "sync (loss)");
    if (t->device && gpt_cuda_compute_after(t->cuda, why, sizeof why)) {
        accel_error_set(&t->err, ACCEL_EIO, "%s", why);
        return fail(t, "loss (to the compute stream)");
    }
    if (gpt_read(&t->m, got, x, sizeof got, why, sizeof why)) {
        accel_error_set(&t->err, ACCEL_EIO, "%s", why);
        return fail(t, "read (loss)");
    }
    *out = got[0];
    *stop = got[1] > 0;
    return 0;
}

/* One optimizer step; *loss is the global mean training loss, *stop whether
 * a rank was asked to stop. */
static int train_step(struct trainer *t, size_t step, float *loss, struct accel_shard_stats *st,
                      bool *stop)
{
    size_t B = t->micro, T = t->a.seq, N = B * T;
    float dloss = (float)(accel_shard_loss_scale(t->shard) / (double)(N * t->accum));

    accel_shard_set_lr(t->shard, lr_at(&t->a, step));
    gpt_loss_reset(&t->m);
    for (size_t k = 0; k < t->accum; k++) {
        /* this rank's contiguous slice of the global batch, micro-step k of it */
        size_t first = (size_t)t->rank * B * t->accum + k * B;
        for (size_t i = 0; i < B; i++)
            gpt_data_train_seq(&t->data, t->a.seed, step, first + i, T, t->m.tok + i * T,
                               t->m.tgt + i * T);
        if (forward(t, true))
            return -1;
        if (backward(t, dloss, k + 1 == t->accum))
            return -1;
    }
    if (accel_shard_step(t->shard, st, &t->err) != ACCEL_OK)
        return fail(t, "step");
    return global_mean(t, (double)(N * t->accum), loss, stop);
}

/* Validation: eval_batches global batches of fixed windows, each rank its
 * slice, forward only. */
static int evaluate(struct trainer *t, float *loss)
{
    size_t B = t->micro, T = t->a.seq, N = B * T;
    size_t count = t->a.eval_batches * t->a.batch, per_rank = count / t->world;

    gpt_loss_reset(&t->m);
    for (size_t k = 0; k < per_rank / B; k++) {
        size_t first = (size_t)t->rank * per_rank + k * B;
        for (size_t i = 0; i < B; i++)
            gpt_data_val_seq(&t->data, first + i, count, T, t->m.tok + i * T, t->m.tgt + i * T);
        if (forward(t, false))
            return -1;
    }
    bool ignored; /* a stop asked during validation is seen at the next step */
    return global_mean(t, (double)(N * (per_rank / B)), loss, &ignored);
}

/* A truth value as accelerate's str_to_bool reads it. */
static bool truthy(const char *v)
{
    static const char *const yes[] = {"1", "true", "t", "yes", "y", "on"};

    for (size_t i = 0; v && i < sizeof yes / sizeof yes[0]; i++)
        if (!strcasecmp(v, yes[i]))
            return true;
    return false;
}

/* The communicator's backend, chosen here so that the GPU is selected before
 * accel_comm_init: socket when ACCELERATE_USE_CPU is true (a CPU config);
 * else ACCELRUN_COMM; else nccl where it is built, this binary has the CUDA
 * kernels and CUDA_VISIBLE_DEVICES is set and not empty; else socket.  That
 * is accel_comm_init's own default, except for the first and third
 * conditions.  *msg: an error, or NULL. */
static const char *choose_backend(const char **msg)
{
    const char *b = getenv("ACCELRUN_COMM"), *gpus = getenv("CUDA_VISIBLE_DEVICES");

    *msg = NULL;
    if (truthy(getenv("ACCELERATE_USE_CPU")))
        return "socket";
    if (b && b[0]) {
        if (!strcmp(b, "nccl") && !gpt_cuda_ops())
            *msg = "ACCELRUN_COMM=nccl, but train_gpt was built without the CUDA kernels (no "
                   "nvcc or NCCL under CUDA_HOME, or NO_CUDA=1): use the socket backend";
        return b;
    }
    if (accel_comm_has_nccl() && gpt_cuda_ops() && gpus && gpus[0])
        return "nccl";
    return "socket";
}

/* Device mode, before the communicator: the GPU of LOCAL_RANK (0 when
 * unset) among the visible ones. */
static int select_device(struct trainer *t)
{
    const char *v = NULL;
    unsigned local = 0;
    char why[512];

    if (accel_getenv_str("train_gpt", "LOCAL_RANK", false, &v, &t->err) != ACCEL_OK ||
        (v &&
         accel_getenv_uint("train_gpt", "LOCAL_RANK", 0, 1u << 20, &local, &t->err) != ACCEL_OK))
        return fail(t, "device (LOCAL_RANK)");
    if (gpt_cuda_select(local, &t->cuda_device, why, sizeof why)) {
        accel_error_set(&t->err, ACCEL_EUNSUPPORTED, "%s", why);
        return fail(t, "device");
    }
    return 0;
}

static int setup(struct trainer *t)
{
    struct accel_comm_opts co = {.cuda_device = -1};
    struct gpt_config cfg = {.T = t->a.seq, .C = t->a.channels, .L = t->a.layers, .NH = t->a.heads};
    const struct gpt_ops *ops = &gpt_cpu_ops;
    const char *msg;
    char why[512];

    if (accel_bootstrap_init(&t->boot, &t->err) != ACCEL_OK)
        return fail(t, "bootstrap (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)");
    t->rank = t->boot.rank;
    t->world = t->boot.world;
    co.timeout_s = t->boot.timeout_s;
    co.backend = choose_backend(&msg);
    if (msg) {
        accel_error_set(&t->err, ACCEL_EUNSUPPORTED, "%s", msg);
        return fail(t, "backend");
    }
    if (!strcmp(co.backend, "nccl")) {
        if (select_device(t))
            return -1;
        co.cuda_device = t->cuda_device;
    }
    if (accel_comm_init(&t->comm, t->boot.store, t->rank, t->world, &co, &t->err) != ACCEL_OK)
        return fail(t, "communicator");
    t->device = !strcmp(accel_comm_backend(t->comm), "nccl");
    if (t->device) {
        if (gpt_cuda_init(&t->cuda, accel_comm_cuda_stream(t->comm), why, sizeof why)) {
            accel_error_set(&t->err, ACCEL_EIO, "%s", why);
            return fail(t, "device");
        }
        ops = gpt_cuda_ops();
    }
    if (accel_shard_opts_from_env(&t->opts, &t->err) != ACCEL_OK)
        return fail(t, "accelerate environment");
    t->opts.lr = t->a.lr;
    t->opts.max_grad_norm = t->a.clip;
    t->accum = t->opts.grad_accum ? t->opts.grad_accum : 1;
    if (t->a.batch % ((size_t)t->world * t->accum)) {
        accel_error_set(&t->err, ACCEL_EINVAL,
                        "--batch %zu is not a multiple of world size %u x gradient accumulation "
                        "%zu",
                        t->a.batch, t->world, t->accum);
        return fail(t, "batch");
    }
    t->micro = t->a.batch / ((size_t)t->world * t->accum);
    if ((t->a.eval_batches * t->a.batch / t->world) % t->micro) {
        accel_error_set(&t->err, ACCEL_EINVAL,
                        "--eval-batches %zu does not split into micro-batches", t->a.eval_batches);
        return fail(t, "batch");
    }
    if (gpt_data_load(&t->data, t->a.data, why, sizeof why)) {
        accel_error_set(&t->err, ACCEL_EIO, "%s", why);
        return fail(t, "data");
    }
    if (t->a.seq + 2 > t->data.n - t->data.ntrain) {
        accel_error_set(&t->err, ACCEL_EINVAL, "--seq %zu is longer than the validation split",
                        t->a.seq);
        return fail(t, "data");
    }
    if (gpt_init_on(&t->m, &cfg, t->micro, t->opts.compute == ACCEL_BF16, ops, t->cuda, why,
                    sizeof why)) {
        accel_error_set(&t->err, ACCEL_EINVAL, "%s", why);
        return fail(t, "model");
    }
    if (accel_shard_init(&t->shard, t->comm, t->m.units, t->m.nunits, &t->opts, &t->err) !=
        ACCEL_OK)
        return fail(t, "shard init");
    if (accel_shard_on_device(t->shard) != t->device) {
        accel_error_set(&t->err, ACCEL_EINVAL,
                        "the shard's buffers are %s memory, the model's %s memory (backend %s)",
                        t->device ? "host" : "device", t->device ? "device" : "host",
                        accel_comm_backend(t->comm));
        return fail(t, "shard init");
    }
    /* the model computes on the backend's stream, the shard stays on the
     * communicator's: the shard orders the two (docs/shard.md) */
    if (t->device &&
        accel_shard_set_compute_stream(t->shard, gpt_cuda_stream(t->cuda), &t->err) != ACCEL_OK)
        return fail(t, "shard compute stream");
    for (size_t u = 0; u < t->m.nunits; u++) {
        size_t off = 0;
        if (accel_shard_unit_numel(t->shard, u) != t->m.numel[u]) {
            accel_error_set(&t->err, ACCEL_EINVAL, "unit %zu: shard has %zu elements, model %zu", u,
                            accel_shard_unit_numel(t->shard, u), t->m.numel[u]);
            return fail(t, "layout");
        }
        for (size_t p = 0; p < t->m.units[u].nparams; p++) {
            const struct accel_shard_param *q = &t->m.units[u].params[p];
            if (accel_shard_param_offset(t->shard, u, p) != off) {
                accel_error_set(&t->err, ACCEL_EINVAL, "unit %zu param %s: offset %zu, want %zu", u,
                                q->name, accel_shard_param_offset(t->shard, u, p), off);
                return fail(t, "layout");
            }
            off += q->ndim == 2 ? q->shape[0] * q->shape[1] : q->shape[0];
        }
        /* the same full init on every rank; each keeps its slice */
        float *full = malloc(t->m.numel[u] * sizeof *full);
        if (!full) {
            accel_error_set(&t->err, ACCEL_ENOMEM, "init of unit %zu", u);
            return fail(t, "init");
        }
        gpt_init_params(&t->m, u, full, t->a.seed);
        enum accel_err e = accel_shard_set_full(t->shard, u, full, &t->err);
        free(full);
        if (e != ACCEL_OK)
            return fail(t, "set_full");
    }
    if (t->a.ckpt_dir && gpt_ckpt_open(t->shard, &t->a, t->world, &t->err))
        return fail(t, "checkpoints (--ckpt-dir)");
    if (t->a.ckpt_dir && gpt_resume(t->shard, &t->a, t->data.hash, &t->start, &t->from, &t->err))
        return fail(t, "resume (--ckpt-dir)");
    if (t->rank == 0 && t->a.loss_log) {
        t->log = fopen(t->a.loss_log, "w");
        if (!t->log) {
            accel_error_sys(&t->err, ACCEL_EIO, "cannot write %s", t->a.loss_log);
            return fail(t, "loss log");
        }
    }
    return 0;
}

static const char *strategy_name(enum accel_shard_strategy s)
{
    switch (s) {
    case ACCEL_FULL_SHARD:
        return "FULL_SHARD";
    case ACCEL_SHARD_GRAD_OP:
        return "SHARD_GRAD_OP";
    case ACCEL_NO_SHARD:
        return "NO_SHARD";
    }
    return "?";
}

static void banner(const struct trainer *t)
{
    size_t psi = gpt_num_params(&t->m), maxu = 0;

    for (size_t u = 0; u < t->m.nunits; u++)
        maxu = t->m.numel[u] > maxu ? t->m.numel[u] : maxu;
    if (t->rank != 0)
        return;
    printf("train_gpt: data %s: %zu files, %zu bytes (train %zu, val %zu), fnv1a %016llx\n",
           t->a.data, t->data.nfiles, t->data.n, t->data.ntrain, t->data.n - t->data.ntrain,
           (unsigned long long)t->data.hash);
    printf("train_gpt: model T=%zu C=%zu L=%zu NH=%zu V=%d: %zu parameters in %zu units "
           "(largest %zu)\n",
           t->a.seq, t->a.channels, t->a.layers, t->a.heads, GPT_VOCAB, psi, t->m.nunits, maxu);
    printf("train_gpt: world %u: global batch of %zu sequences = %u rank%s x %zu micro-step%s x "
           "%zu; %s, %s, %s backend\n",
           t->world, t->a.batch, t->world, t->world > 1 ? "s" : "", t->accum,
           t->accum > 1 ? "s" : "", t->micro, accel_dtype_name(t->opts.compute),
           strategy_name(t->opts.strategy), accel_comm_backend(t->comm));
    if (t->start >= t->a.steps)
        printf("train_gpt: resumed from %s/step-%08zu (saved by %u rank%s): that is step %zu of "
               "%zu, nothing left to train (a larger --steps trains on)\n",
               t->a.ckpt_dir, t->start, t->from, t->from == 1 ? "" : "s", t->start, t->a.steps);
    else if (t->start)
        printf("train_gpt: resumed from %s/step-%08zu (saved by %u rank%s): steps %zu..%zu to "
               "go\n",
               t->a.ckpt_dir, t->start, t->from, t->from == 1 ? "" : "s", t->start + 1, t->a.steps);
    if (t->device) {
        char dev[160];
        gpt_cuda_describe(t->cuda, dev, sizeof dev);
        printf("train_gpt: device %s: CUDA kernels, cuBLAS fp32 GEMMs (no TF32), activations "
               "%.1f MiB; compute stream, next unit's all-gather overlapped\n",
               dev, (double)t->m.act_bytes / (1024.0 * 1024.0));
    }
    fflush(stdout);
}

/* Every rank: its memory, for bench/train.sh (one line, key=value). */
static void memory_report(const struct trainer *t, unsigned long base_kb)
{
    size_t peak = 0, maxu = 0, now = accel_shard_bytes(t->shard, &peak);
    size_t psi = gpt_num_params(&t->m);

    for (size_t u = 0; u < t->m.nunits; u++)
        maxu = t->m.numel[u] > maxu ? t->m.numel[u] : maxu;
    printf("train_gpt: memory rank=%u world=%u psi=%zu hwm_kb=%lu base_kb=%lu shard_peak=%zu "
           "shard_now=%zu acts=%zu unit_max=%zu data=%zu\n",
           t->rank, t->world, psi, status_kb("VmHWM"), base_kb, peak, now, t->m.act_bytes, maxu,
           t->data.n);
    fflush(stdout);
}

/* --async-save: the save in flight committed once every rank's file is
 * written (with `block`, waited for), said on rank 0. */
static int poll_save(struct trainer *t, size_t s, bool block)
{
    unsigned long committed = 0;

    if (gpt_save_poll(t->shard, block, &committed, &t->err)) {
        t->what = "checkpoint";
        return -1;
    }
    if (committed && t->rank == 0) {
        printf("step %zu/%zu | checkpoint %s/step-%08lu committed, %.0f ms after it started\n",
               s + 1, t->a.steps, t->a.ckpt_dir, committed, (now_s() - t->save_started) * 1e3);
        fflush(stdout);
    }
    return 0;
}

/* After step s: a checkpoint when one is due (--save-every, the last step,
 * a stop request), and, with --async-save, the commit of one in flight once
 * every rank's file is written (at the last step and on a stop, waited
 * for).  The time training waited is left out of the step time (*tlast). */
static int save_or_poll(struct trainer *t, size_t s, bool stop, double *tlast)
{
    bool due = (t->a.save_every && (s + 1) % t->a.save_every == 0) || s + 1 == t->a.steps || stop;
    bool last = s + 1 == t->a.steps || stop;
    double c0 = now_s();

    /* the save in flight (if any) ends before the next one starts */
    if (due && t->a.async_save && poll_save(t, s, true))
        return -1;
    if (due && gpt_save(t->shard, &t->a, t->data.hash, s + 1, &t->err)) {
        t->what = "checkpoint";
        return -1;
    }
    if (due && !t->a.async_save && t->rank == 0) {
        printf("step %zu/%zu | checkpoint %s/step-%08zu committed in %.0f ms\n", s + 1, t->a.steps,
               t->a.ckpt_dir, s + 1, (now_s() - c0) * 1e3);
        fflush(stdout);
    }
    if (due && t->a.async_save) {
        t->save_started = c0;
        if (t->rank == 0) {
            printf("step %zu/%zu | checkpoint %s/step-%08zu started: training waited %.1f ms\n",
                   s + 1, t->a.steps, t->a.ckpt_dir, s + 1, (now_s() - c0) * 1e3);
            fflush(stdout);
        }
    }
    if (t->a.async_save && poll_save(t, s, last))
        return -1;
    *tlast += now_s() - c0; /* not in the step time */
    return 0;
}

static int train(struct trainer *t)
{
    size_t every = t->a.print_every ? t->a.print_every : (t->a.steps + 19) / 20;
    double tokens = (double)(t->a.batch * t->a.seq), t0 = now_s(), tlast = t0, total = 0;
    size_t since = 0, timed = 0;
    float loss = NAN, first = NAN, val;
    struct accel_shard_stats st;

    for (size_t s = t->start; s < t->a.steps; s++) {
        double ts = now_s();
        bool stop = false;
        if (train_step(t, s, &loss, &st, &stop))
            return -1;
        double dt = now_s() - ts;
        if (s > t->start) { /* the first step pays for page faults: leave it out */
            total += dt;
            timed++;
        }
        since++;
        if (s == t->start)
            first = loss;
        if (t->log)
            fprintf(t->log, "%zu %.9g\n", s + 1, (double)loss);
        if (t->rank == 0 && (s == t->start || (s + 1) % every == 0 || s + 1 == t->a.steps)) {
            double now = now_s(), per = (now - tlast) / (double)since;
            printf("step %zu/%zu | loss %.4f | lr %.1e | %.0f ms/step | %.1fk tok/s%s\n", s + 1,
                   t->a.steps, (double)loss, lr_at(&t->a, s), per * 1e3, tokens / per / 1e3,
                   st.skipped ? " | skipped (fp16 overflow)" : "");
            fflush(stdout);
            tlast = now;
            since = 0;
        }
        if (t->a.ckpt_dir && save_or_poll(t, s, stop, &tlast))
            return -1;
        if (stop) { /* every rank saw the request after the same step */
            t->stopped = stop_signal ? stop_signal : SIGTERM;
            if (t->rank == 0) {
                printf("train_gpt: stopped after step %zu/%zu on a signal%s\n", s + 1, t->a.steps,
                       t->a.ckpt_dir ? "; resume with the same --ckpt-dir" : "");
                fflush(stdout);
            }
            return 0;
        }
        if (t->a.eval_every && (s + 1) % t->a.eval_every == 0 && s + 1 < t->a.steps) {
            if (evaluate(t, &val))
                return -1;
            if (t->rank == 0)
                printf("step %zu/%zu | val loss %.4f\n", s + 1, t->a.steps, (double)val);
        }
    }
    if (evaluate(t, &val))
        return -1;
    if (t->log)
        fprintf(t->log, "# val %.9g\n", (double)val);
    if (t->rank == 0 && t->start >= t->a.steps) { /* no loss to show: none was computed */
        printf("train_gpt: 0 steps: val loss %.4f at step %zu\n", (double)val, t->start);
        fflush(stdout);
    } else if (t->rank == 0) {
        printf("train_gpt: %zu steps in %.1f s: train loss %.4f -> %.4f, val loss %.4f; "
               "%.1f ms/step (steps %zu..%zu)\n",
               t->a.steps - t->start, now_s() - t0, (double)first, (double)loss, (double)val,
               timed ? total / (double)timed * 1e3 : 0.0, t->start + 2, t->a.steps);
        fflush(stdout);
    }
    return 0;
}

int main(int argc, char **argv)
{
    static struct trainer t;
    unsigned long base_kb = status_kb("VmRSS");
    int rc = gpt_args_parse(&t.a, argc, argv);

    if (rc)
        return rc > 0 ? 0 : 2;
    accel_error_clear(&t.err);
    rc = 1;
    if (t.a.ckpt_dir) { /* a stop request saves a checkpoint first (Slurm's --signal, preemption) */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = note_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGUSR1, &sa, NULL);
    }
    if (setup(&t) == 0) {
        banner(&t);
        if (train(&t) == 0) {
            if (!t.stopped)
                memory_report(&t, base_kb);
            rc = 0;
        }
    }
    /* Every rank past its last collective before any closes its ring
     * connections: a rank that closes early can cut off a peer still
     * reading the last chunk of the final all-reduce. */
    if (rc == 0 &&
        accel_store_barrier(t.boot.store, "train_gpt.done", t.world, &t.err) != ACCEL_OK) {
        t.what = "closing barrier";
        rc = 1;
    }
    if (rc)
        fprintf(stderr, "train_gpt: rank %u of %u: %s: %s: %s\n", t.rank, t.world,
                t.what ? t.what : "?", accel_errname(t.err.code), t.err.msg);
    if (t.log && fclose(t.log) != 0 && rc == 0) {
        fprintf(stderr, "train_gpt: cannot write %s\n", t.a.loss_log);
        rc = 1;
    }
    /* the shard's device buffers (their frees wait for the compute stream,
     * so before it goes) and the model's, then the cuBLAS handle and the
     * compute stream, then the communicator */
    accel_shard_free(t.shard);
    gpt_free(&t.m);
    gpt_cuda_free(t.cuda);
    gpt_data_free(&t.data);
    accel_comm_free(t.comm);
    accel_bootstrap_free(&t.boot);
    return rc == 0 && t.stopped ? 128 + t.stopped : rc;
}
