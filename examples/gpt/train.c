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
 * What this file does not do: the start (setup.c), kernels (kernels.c, the
 * .cu files), units (model.c), data (data.c), flags (args.c).
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accel/comm.h"
#include "accel/err.h"
#include "accel/shard.h"
#include "accel/store.h"

#include "resume.h"
#include "trainer.h"

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

int gpt_fail(struct gpt_trainer *t, const char *what)
{
    t->what = what;
    return -1;
}

/* The backend's first failure (a CUDA launch, cuBLAS), if any, as the step's. */
static int check_backend(struct gpt_trainer *t, const char *what)
{
    char why[512];

    if (gpt_check(&t->m, why, sizeof why) == 0)
        return 0;
    accel_error_set(&t->err, ACCEL_EIO, "%s", why);
    return gpt_fail(t, what);
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
static int forward(struct gpt_trainer *t, bool then_backward)
{
    for (size_t u = 0; u < t->m.nunits; u++) {
        if (accel_shard_gather(t->shard, u, &t->err) != ACCEL_OK)
            return gpt_fail(t, "gather (forward)");
        gpt_forward(&t->m, u, accel_shard_params(t->shard, u));
        if (check_backend(t, "forward"))
            return -1;
        if (t->device && u + 1 < t->m.nunits &&
            accel_shard_gather(t->shard, u + 1, &t->err) != ACCEL_OK)
            return gpt_fail(t, "gather (forward prefetch)");
        if (!(then_backward && u + 1 == t->m.nunits))
            accel_shard_release(t->shard, u);
    }
    return 0;
}

/* Unit u's gathered parameters (FULL_SHARD: gathered again) and its
 * gradient buffer (allocated and zeroed on first use in a step). */
static float *backward_buffers(struct gpt_trainer *t, size_t u, const char *what)
{
    float *g;

    if (accel_shard_gather(t->shard, u, &t->err) != ACCEL_OK) {
        gpt_fail(t, what);
        return NULL;
    }
    if (!(g = accel_shard_grads(t->shard, u))) {
        accel_error_set(&t->err, ACCEL_ENOMEM, "no gradient buffer for unit %zu", u);
        gpt_fail(t, "grads");
    }
    return g;
}

/* Device mode prefetches as forward does: unit u - 1's gather and gradient
 * buffer after unit u's backward is queued and before its reduce, so the
 * all-gather runs during unit u's backward, and unit u's reduce-scatter
 * (which waits for that backward) during unit u - 1's. */
static int backward(struct gpt_trainer *t, float dloss, bool last)
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
            return gpt_fail(t, "reduce");
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
static int global_mean(struct gpt_trainer *t, double denom, float *out, bool *stop)
{
    float *x = gpt_loss_mean(&t->m, denom), got[2];
    char why[512];

    gpt_loss_flag(&t->m, stop_signal ? 1.0f : 0.0f);
    if (t->device && gpt_cuda_comm_after(t->cuda, why, sizeof why)) {
        accel_error_set(&t->err, ACCEL_EIO, "%s", why);
        return gpt_fail(t, "loss (to the communicator's stream)");
    }
    if (accel_all_reduce(t->comm, x, x, 2, ACCEL_F32, ACCEL_AVG, &t->err) != ACCEL_OK)
        return gpt_fail(t, "all_reduce (loss)");
    if (accel_comm_sync(t->comm, &t->err) != ACCEL_OK)
        return gpt_fail(t, "sync (loss)");
    if (t->device && gpt_cuda_compute_after(t->cuda, why, sizeof why)) {
        accel_error_set(&t->err, ACCEL_EIO, "%s", why);
        return gpt_fail(t, "loss (to the compute stream)");
    }
    if (gpt_read(&t->m, got, x, sizeof got, why, sizeof why)) {
        accel_error_set(&t->err, ACCEL_EIO, "%s", why);
        return gpt_fail(t, "read (loss)");
    }
    *out = got[0];
    *stop = got[1] > 0;
    return 0;
}

/* One optimizer step; *loss is the global mean training loss, *stop whether
 * a rank was asked to stop. */
static int train_step(struct gpt_trainer *t, size_t step, float *loss, struct accel_shard_stats *st,
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
        return gpt_fail(t, "step");
    return global_mean(t, (double)(N * t->accum), loss, stop);
}

/* Validation: eval_batches global batches of fixed windows, each rank its
 * slice, forward only. */
static int evaluate(struct gpt_trainer *t, float *loss)
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

static void banner(const struct gpt_trainer *t)
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
static void memory_report(const struct gpt_trainer *t, unsigned long base_kb)
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
static int poll_save(struct gpt_trainer *t, size_t s, bool block)
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
static int save_or_poll(struct gpt_trainer *t, size_t s, bool stop, double *tlast)
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

static int train(struct gpt_trainer *t)
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
    static struct gpt_trainer t;
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
    if (gpt_setup(&t) == 0) {
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
