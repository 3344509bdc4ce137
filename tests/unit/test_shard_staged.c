/*
 * test_shard_staged.c: core/shard's staging path, on the CPU.
 *
 * A device converts in parallel, so there gather.c moves a unit's 16-bit
 * image through a staging buffer (the memory's in_place is false) instead of
 * through the unit's own fp32 buffer; only the nccl backend takes that path,
 * and only on a GPU (tests/gpu/shard_gpu.c).  Here the host table runs with
 * in_place = false (its conversions are right for disjoint buffers too), so
 * the staging path's offsets, order and accounting are checked on any
 * machine: on 1 to 3 ranks, every compute type, strategy and optimizer, the
 * master weights and norms must equal those of the in-place path bit for
 * bit, a staging buffer must show in the peak, and none may be left held.
 *
 * The gradients are synthetic, a function of the gathered parameters, the
 * rank, the step and the micro-step (so the reduction's averaging and the
 * accumulation over micro-steps both matter); fp16 runs get an overflow at
 * step 2 on rank 0, which both paths must skip alike.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../core/shard/shard_int.h"
#include "accel/comm.h"
#include "accel/shard.h"
#include "accel/store.h"
#include "store_proc.h"
#include "test.h"

#define NONCE 0x57a6edull
#define MAXW 3
#define STEPS 5
#define ACCUM 2
#define MAXEL 4096 /* elements of a unit, padded, at most */

static const struct accel_shard_param p_a[] = {{"w", 2, {37, 11}}, {"b", 1, {37}}};
static const struct accel_shard_param p_b[] = {{"w", 1, {5}}};
static const struct accel_shard_param p_c[] = {{"w", 2, {3, 100}}};
static const struct accel_shard_unit units[] = {{"a", p_a, 2}, {"b", p_b, 1}, {"c", p_c, 1}};
#define NUNITS 3

static float rnd(uint32_t a, uint32_t b)
{
    return (float)(test_mix32(a * 2654435761u ^ test_mix32(b + 0x9e37u)) >> 8) * 0x1p-23f - 1.0f;
}

struct cfg {
    enum accel_dtype t;
    enum accel_shard_strategy strategy;
    enum accel_optimizer optim;
    double momentum, max_norm;
};

/* What one run leaves behind, to compare. */
struct run {
    float master[NUNITS][MAXEL];
    double norm[STEPS];
    bool skipped[STEPS];
    double scale;
    size_t bytes, peak;
};

/* One micro-step: forward (gather, read, release), then backward (gather,
 * add the synthetic gradient, reduce, release), last unit first. */
static int micro(struct accel_shard *s, unsigned rank, unsigned step, unsigned k, bool fp16)
{
    static float held[NUNITS][MAXEL];
    struct accel_error err;

    for (size_t u = 0; u < NUNITS; u++) {
        const float *p;
        RCHECK_OK(accel_shard_gather(s, u, &err));
        RCHECK((p = accel_shard_params(s, u)) != NULL);
        memcpy(held[u], p, accel_shard_unit_numel(s, u) * sizeof(float));
        accel_shard_release(s, u);
    }
    for (size_t u = NUNITS; u-- > 0;) {
        size_t n = accel_shard_unit_numel(s, u);
        float scale = (float)accel_shard_loss_scale(s) / ACCUM, *g;
        RCHECK_OK(accel_shard_gather(s, u, &err));
        RCHECK((g = accel_shard_grads(s, u)) != NULL);
        for (size_t i = 0; i < n; i++)
            g[i] += scale * (0.5f * held[u][i] +
                             0.01f * rnd(step * 16 + k * 4 + rank, (uint32_t)(u * MAXEL + i)));
        if (fp16 && step == 2 && rank == 0 && u == 0)
            g[7] = 1e5f * scale; /* past 65504 once narrowed */
        RCHECK_OK(accel_shard_reduce(s, u, k + 1 == ACCUM, &err));
        accel_shard_release(s, u);
    }
    return 0;
}

static int train(struct accel_comm *c, unsigned rank, const struct cfg *cf, bool staged,
                 struct run *out)
{
    static struct shard_mem_ops staged_ops;
    struct accel_shard_opts o;
    struct accel_shard *s = NULL;
    struct accel_error err;
    float w0[MAXEL];

    accel_shard_opts_default(&o);
    o.compute = cf->t;
    o.strategy = cf->strategy;
    o.optimizer = cf->optim;
    o.momentum = cf->momentum;
    o.max_grad_norm = cf->max_norm;
    o.grad_accum = ACCUM;
    o.loss_scale = 1024;
    o.scale_window = 2;
    o.lr = 1e-2;
    RCHECK_OK(accel_shard_init(&s, c, units, NUNITS, &o, &err));
    if (staged) {
        staged_ops = *s->mem;
        staged_ops.in_place = false;
        s->mem = &staged_ops; /* the host table ignores its context */
    }
    for (size_t u = 0; u < NUNITS; u++) {
        size_t n = accel_shard_unit_numel(s, u);
        RCHECK(accel_shard_unit_padded(s, u) <= MAXEL);
        for (size_t i = 0; i < n; i++)
            w0[i] = 0.1f * rnd(999, (uint32_t)(u * MAXEL + i));
        RCHECK_OK(accel_shard_set_full(s, u, w0, &err));
    }
    for (unsigned t = 0; t < STEPS; t++) {
        struct accel_shard_stats st;
        for (unsigned k = 0; k < ACCUM; k++)
            if (micro(s, rank, t, k, cf->t == ACCEL_F16) != 0)
                return 1;
        RCHECK_OK(accel_shard_step(s, &st, &err));
        out->norm[t] = st.grad_norm;
        out->skipped[t] = st.skipped;
    }
    for (size_t u = 0; u < NUNITS; u++) {
        size_t b, e;
        const float *m = accel_shard_master(s, u, &b, &e);
        memset(out->master[u], 0, sizeof(out->master[u]));
        memcpy(out->master[u], m, (e - b) * sizeof(float));
    }
    out->scale = accel_shard_loss_scale(s);
    out->bytes = accel_shard_bytes(s, &out->peak);
    accel_shard_free(s);
    return 0;
}

static int rank_main(struct accel_comm *c, unsigned rank)
{
    static const enum accel_dtype types[] = {ACCEL_F32, ACCEL_BF16, ACCEL_F16};
    static const enum accel_shard_strategy strategies[] = {ACCEL_FULL_SHARD, ACCEL_SHARD_GRAD_OP,
                                                           ACCEL_NO_SHARD};
    static const struct {
        enum accel_optimizer optim;
        double momentum, max_norm;
    } optims[] = {{ACCEL_ADAMW, 0, 0.05}, {ACCEL_SGD, 0.9, 0}, {ACCEL_SGD, 0, 0}};
    static struct run a, b;

    for (size_t ti = 0; ti < 3; ti++)
        for (size_t si = 0; si < 3; si++)
            for (size_t oi = 0; oi < 3; oi++) {
                struct cfg cf = {types[ti], strategies[si], optims[oi].optim, optims[oi].momentum,
                                 optims[oi].max_norm};
                bool wide = cf.t != ACCEL_F32;
                if (train(c, rank, &cf, false, &a) != 0 || train(c, rank, &cf, true, &b) != 0)
                    return 1;
                RCHECK(memcmp(a.master, b.master, sizeof(a.master)) == 0);
                RCHECK(memcmp(a.norm, b.norm, sizeof(a.norm)) == 0);
                RCHECK(memcmp(a.skipped, b.skipped, sizeof(a.skipped)) == 0);
                RCHECK(a.scale == b.scale);
                /* the fp16 overflow was skipped, and the scale halved */
                RCHECK(a.skipped[2] == (cf.t == ACCEL_F16));
                /* staging held during a call (16 bits only), none left after */
                RCHECK(a.bytes == b.bytes);
                RCHECK(wide ? b.peak > a.peak : b.peak == a.peak);
                RCHECK(isfinite(a.norm[STEPS - 1]) && a.norm[STEPS - 1] > 0);
            }
    return 0;
}

static int staged_rank(struct accel_comm *c, unsigned rank, const void *arg)
{
    (void)arg;
    return rank_main(c, rank);
}

static void run_world(unsigned world)
{
    test_world_run(world, NONCE, staged_rank, NULL);
}

TEST(staged_equals_in_place_world1)
{
    run_world(1);
}

TEST(staged_equals_in_place_world2)
{
    run_world(2);
}

TEST(staged_equals_in_place_world3)
{
    run_world(3);
}

TEST_LIST(T(staged_equals_in_place_world1), T(staged_equals_in_place_world2),
          T(staged_equals_in_place_world3))
