/*
 * setup.c: train_gpt's start (gpt_setup, trainer.h), in the order it
 * happens: the bootstrap, the backend and the communicator; the shard's
 * options and the batch split; the corpus; the model and the shard; each
 * unit's layout checked and its parameters initialised; the checkpoints and
 * the loss log.  What it does not do: train (train.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "accel/comm.h"
#include "accel/err.h"
#include "accel/getenv.h"
#include "accel/shard.h"

#include "resume.h"
#include "trainer.h"

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
static int select_device(struct gpt_trainer *t)
{
    const char *v = NULL;
    unsigned local = 0;
    char why[512];

    if (accel_getenv_str("train_gpt", "LOCAL_RANK", false, &v, &t->err) != ACCEL_OK ||
        (v &&
         accel_getenv_uint("train_gpt", "LOCAL_RANK", 0, 1u << 20, &local, &t->err) != ACCEL_OK))
        return gpt_fail(t, "device (LOCAL_RANK)");
    if (gpt_cuda_select(local, &t->cuda_device, why, sizeof why)) {
        accel_error_set(&t->err, ACCEL_EUNSUPPORTED, "%s", why);
        return gpt_fail(t, "device");
    }
    return 0;
}

/* The bootstrap (RANK, WORLD_SIZE, ...), the backend (and the GPU) and the
 * communicator; *ops is the model's backend table. */
static int start_comm(struct gpt_trainer *t, const struct gpt_ops **ops)
{
    struct accel_comm_opts co = {.cuda_device = -1};
    const char *msg;
    char why[512];

    if (accel_bootstrap_init(&t->boot, &t->err) != ACCEL_OK)
        return gpt_fail(t, "bootstrap (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)");
    t->rank = t->boot.rank;
    t->world = t->boot.world;
    co.timeout_s = t->boot.timeout_s;
    co.backend = choose_backend(&msg);
    if (msg) {
        accel_error_set(&t->err, ACCEL_EUNSUPPORTED, "%s", msg);
        return gpt_fail(t, "backend");
    }
    if (!strcmp(co.backend, "nccl")) {
        if (select_device(t))
            return -1;
        co.cuda_device = t->cuda_device;
    }
    if (accel_comm_init(&t->comm, t->boot.store, t->rank, t->world, &co, &t->err) != ACCEL_OK)
        return gpt_fail(t, "communicator");
    t->device = !strcmp(accel_comm_backend(t->comm), "nccl");
    *ops = &gpt_cpu_ops;
    if (t->device) {
        if (gpt_cuda_init(&t->cuda, accel_comm_cuda_stream(t->comm), why, sizeof why)) {
            accel_error_set(&t->err, ACCEL_EIO, "%s", why);
            return gpt_fail(t, "device");
        }
        *ops = gpt_cuda_ops();
    }
    return 0;
}

/* The shard's options from the accelerate environment, and the global
 * batch as ranks x micro-steps x micro-batches of t->micro sequences. */
static int split_batch(struct gpt_trainer *t)
{
    if (accel_shard_opts_from_env(&t->opts, &t->err) != ACCEL_OK)
        return gpt_fail(t, "accelerate environment");
    t->opts.lr = t->a.lr;
    t->opts.max_grad_norm = t->a.clip;
    t->accum = t->opts.grad_accum ? t->opts.grad_accum : 1;
    if (t->a.batch % ((size_t)t->world * t->accum)) {
        accel_error_set(&t->err, ACCEL_EINVAL,
                        "--batch %zu is not a multiple of world size %u x gradient accumulation "
                        "%zu",
                        t->a.batch, t->world, t->accum);
        return gpt_fail(t, "batch");
    }
    t->micro = t->a.batch / ((size_t)t->world * t->accum);
    if ((t->a.eval_batches * t->a.batch / t->world) % t->micro) {
        accel_error_set(&t->err, ACCEL_EINVAL,
                        "--eval-batches %zu does not split into micro-batches", t->a.eval_batches);
        return gpt_fail(t, "batch");
    }
    return 0;
}

static int load_data(struct gpt_trainer *t)
{
    char why[512];

    if (gpt_data_load(&t->data, t->a.data, why, sizeof why)) {
        accel_error_set(&t->err, ACCEL_EIO, "%s", why);
        return gpt_fail(t, "data");
    }
    if (t->a.seq + 2 > t->data.n - t->data.ntrain) {
        accel_error_set(&t->err, ACCEL_EINVAL, "--seq %zu is longer than the validation split",
                        t->a.seq);
        return gpt_fail(t, "data");
    }
    return 0;
}

/* The model on `ops` and the shard over its units, both in the same
 * memory (host or device). */
static int build_model(struct gpt_trainer *t, const struct gpt_ops *ops)
{
    struct gpt_config cfg = {.T = t->a.seq, .C = t->a.channels, .L = t->a.layers, .NH = t->a.heads};
    char why[512];

    if (gpt_init_on(&t->m, &cfg, t->micro, t->opts.compute == ACCEL_BF16, ops, t->cuda, why,
                    sizeof why)) {
        accel_error_set(&t->err, ACCEL_EINVAL, "%s", why);
        return gpt_fail(t, "model");
    }
    if (accel_shard_init(&t->shard, t->comm, t->m.units, t->m.nunits, &t->opts, &t->err) !=
        ACCEL_OK)
        return gpt_fail(t, "shard init");
    if (accel_shard_on_device(t->shard) != t->device) {
        accel_error_set(&t->err, ACCEL_EINVAL,
                        "the shard's buffers are %s memory, the model's %s memory (backend %s)",
                        t->device ? "host" : "device", t->device ? "device" : "host",
                        accel_comm_backend(t->comm));
        return gpt_fail(t, "shard init");
    }
    /* the model computes on the backend's stream, the shard stays on the
     * communicator's: the shard orders the two (docs/shard.md) */
    if (t->device &&
        accel_shard_set_compute_stream(t->shard, gpt_cuda_stream(t->cuda), &t->err) != ACCEL_OK)
        return gpt_fail(t, "shard compute stream");
    return 0;
}

/* Unit u's size and parameter offsets in the shard are the model's. */
static int check_unit(struct gpt_trainer *t, size_t u)
{
    size_t off = 0;

    if (accel_shard_unit_numel(t->shard, u) != t->m.numel[u]) {
        accel_error_set(&t->err, ACCEL_EINVAL, "unit %zu: shard has %zu elements, model %zu", u,
                        accel_shard_unit_numel(t->shard, u), t->m.numel[u]);
        return gpt_fail(t, "layout");
    }
    for (size_t p = 0; p < t->m.units[u].nparams; p++) {
        const struct accel_shard_param *q = &t->m.units[u].params[p];
        if (accel_shard_param_offset(t->shard, u, p) != off) {
            accel_error_set(&t->err, ACCEL_EINVAL, "unit %zu param %s: offset %zu, want %zu", u,
                            q->name, accel_shard_param_offset(t->shard, u, p), off);
            return gpt_fail(t, "layout");
        }
        off += q->ndim == 2 ? q->shape[0] * q->shape[1] : q->shape[0];
    }
    return 0;
}

/* The same full init of unit u on every rank; each keeps its slice. */
static int init_unit(struct gpt_trainer *t, size_t u)
{
    float *full = malloc(t->m.numel[u] * sizeof *full);
    enum accel_err e;

    if (!full) {
        accel_error_set(&t->err, ACCEL_ENOMEM, "init of unit %zu", u);
        return gpt_fail(t, "init");
    }
    gpt_init_params(&t->m, u, full, t->a.seed);
    e = accel_shard_set_full(t->shard, u, full, &t->err);
    free(full);
    if (e != ACCEL_OK)
        return gpt_fail(t, "set_full");
    return 0;
}

/* --ckpt-dir: the saver, and the newest checkpoint resumed; rank 0's
 * --loss-log. */
static int open_outputs(struct gpt_trainer *t)
{
    if (t->a.ckpt_dir && gpt_ckpt_open(t->shard, &t->a, t->world, &t->err))
        return gpt_fail(t, "checkpoints (--ckpt-dir)");
    if (t->a.ckpt_dir && gpt_resume(t->shard, &t->a, t->data.hash, &t->start, &t->from, &t->err))
        return gpt_fail(t, "resume (--ckpt-dir)");
    if (t->rank == 0 && t->a.loss_log) {
        t->log = fopen(t->a.loss_log, "w");
        if (!t->log) {
            accel_error_sys(&t->err, ACCEL_EIO, "cannot write %s", t->a.loss_log);
            return gpt_fail(t, "loss log");
        }
    }
    return 0;
}

int gpt_setup(struct gpt_trainer *t)
{
    const struct gpt_ops *ops;

    if (start_comm(t, &ops) || split_batch(t) || load_data(t) || build_model(t, ops))
        return -1;
    for (size_t u = 0; u < t->m.nunits; u++)
        if (check_unit(t, u) || init_unit(t, u))
            return -1;
    return open_outputs(t);
}
