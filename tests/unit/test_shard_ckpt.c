/*
 * test_shard_ckpt.c: accel_shard_save and accel_shard_load across world
 * sizes and strategies, on the CPU.
 *
 * A world trains a few steps (synthetic gradients), records every rank's
 * slices of the master weights and the optimizer state in shared memory at
 * their flat positions, and saves.  Another world, of another size and
 * strategy, loads: each rank's slices must equal the recorded values bit for
 * bit, the optimizer's step count and the fp16 loss scale must carry over,
 * and the next step must run.  Loading into another model or optimizer is
 * refused with a message naming what differs.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "accel/ckpt.h"
#include "accel/comm.h"
#include "accel/shard.h"
#include "store_proc.h"
#include "test.h"

#define NONCE 0xc6e7ull
#define STEPS 3
#define MAXEL 4096 /* elements of a unit, at most */

static const struct accel_shard_param p_a[] = {{"w", 2, {37, 11}}, {"b", 1, {37}}};
static const struct accel_shard_param p_b[] = {{"w", 1, {5}}};
static const struct accel_shard_param p_c[] = {{"w", 2, {3, 100}}};
static const struct accel_shard_param p_c2[] = {{"w", 2, {100, 3}}}; /* another shape */
static const struct accel_shard_unit units[] = {{"a", p_a, 2}, {"b", p_b, 1}, {"c", p_c, 1}};
static const struct accel_shard_unit other[] = {{"a", p_a, 2}, {"b", p_b, 1}, {"c", p_c2, 1}};
#define NUNITS 3

struct cfg {
    enum accel_shard_strategy strategy;
    enum accel_optimizer optim;
    enum accel_dtype compute;
    const struct accel_shard_unit *units;
    const char *expect; /* load: the error message's fragment; NULL = must load */
};

struct shared {
    char dir[128];
    float master[NUNITS][MAXEL];
    float state[2][NUNITS][MAXEL];
    unsigned long step;
    double scale;
};
static struct shared *sh;

static float rnd(uint32_t a, uint32_t b)
{
    return (float)(test_mix32(a * 2654435761u ^ test_mix32(b + 0x9e37u)) >> 8) * 0x1p-23f - 1.0f;
}

static int init(struct accel_comm *c, unsigned rank, const struct cfg *cf, float fill,
                struct accel_shard **out)
{
    struct accel_shard_opts o;
    struct accel_error err;
    static float w[MAXEL];

    accel_shard_opts_default(&o);
    o.strategy = cf->strategy;
    o.optimizer = cf->optim;
    o.momentum = cf->optim == ACCEL_SGD ? 0.9 : 0;
    o.compute = cf->compute;
    o.loss_scale = 1024;
    o.lr = 1e-2;
    RCHECK_OK(accel_shard_init(out, c, cf->units, NUNITS, &o, &err));
    for (size_t u = 0; u < NUNITS; u++) {
        size_t n = accel_shard_unit_numel(*out, u);
        for (size_t i = 0; i < n; i++)
            w[i] = fill != 0 ? fill : 0.1f * rnd(999, (uint32_t)(u * MAXEL + i));
        RCHECK_OK(accel_shard_set_full(*out, u, w, &err));
    }
    return 0;
}

static int step(struct accel_shard *s, unsigned rank, unsigned t, struct accel_shard_stats *st)
{
    struct accel_error err;

    for (size_t u = NUNITS; u-- > 0;) {
        size_t n = accel_shard_unit_numel(s, u);
        const float *p;
        float *g;
        RCHECK_OK(accel_shard_gather(s, u, &err));
        RCHECK((p = accel_shard_params(s, u)) != NULL && (g = accel_shard_grads(s, u)) != NULL);
        for (size_t i = 0; i < n; i++)
            g[i] += (float)accel_shard_loss_scale(s) *
                    (0.5f * p[i] + 0.01f * rnd(t * 16 + rank, (uint32_t)(u * MAXEL + i)));
        RCHECK_OK(accel_shard_reduce(s, u, true, &err));
        accel_shard_release(s, u);
    }
    RCHECK_OK(accel_shard_step(s, st, &err));
    return 0;
}

/* Trains, records this rank's slices at their flat positions, saves. */
static int save_rank(struct accel_comm *c, unsigned rank, const void *arg)
{
    const struct cfg *cf = arg;
    const struct accel_ckpt_kv meta[] = {{"test.key", "värde"}};
    struct accel_shard *s = NULL;
    struct accel_shard_stats st;
    struct accel_error err;

    if (init(c, rank, cf, 0, &s))
        return 1;
    for (unsigned t = 0; t < STEPS; t++)
        if (step(s, rank, t, &st))
            return 1;
    for (size_t u = 0; u < NUNITS; u++) {
        size_t b, e;
        const float *m = accel_shard_master(s, u, &b, &e);
        memcpy(&sh->master[u][b], m, (e - b) * sizeof(float));
        for (unsigned k = 0; k < 2; k++) {
            const float *x = accel_shard_optim_state(s, u, k);
            if (x)
                memcpy(&sh->state[k][u][b], x, (e - b) * sizeof(float));
        }
    }
    sh->step = st.step;
    sh->scale = accel_shard_loss_scale(s);
    RCHECK_OK(accel_shard_save(s, sh->dir, 7, meta, 1, 0, &err));
    accel_shard_free(s);
    return 0;
}

/* Loads into a shard filled with other values; checks every slice. */
static int load_rank(struct accel_comm *c, unsigned rank, const void *arg)
{
    const struct cfg *cf = arg;
    struct accel_shard *s = NULL;
    struct accel_ckpt *ck = NULL;
    struct accel_shard_stats st;
    struct accel_error err;
    enum accel_err rc;

    if (init(c, rank, cf, 7.0f, &s))
        return 1;
    RCHECK_OK(accel_ckpt_open(&ck, sh->dir, &err));
    RCHECK(accel_ckpt_step(ck) == 7);
    RCHECK(accel_ckpt_meta(ck, "test.key") && !strcmp(accel_ckpt_meta(ck, "test.key"), "värde"));
    rc = accel_shard_load(s, ck, &err);
    accel_ckpt_close(ck);
    if (cf->expect) {
        RCHECK(rc != ACCEL_OK);
        if (!strstr(err.msg, cf->expect) && !strstr(err.msg, "couldn't load"))
            return test_rank_fail(rank, __FILE__, __LINE__, "rank %u: '%s' lacks '%s'", rank,
                                  err.msg, cf->expect);
        accel_shard_free(s);
        return 0;
    }
    RCHECK_OK(rc);
    for (size_t u = 0; u < NUNITS; u++) {
        size_t b, e;
        const float *m = accel_shard_master(s, u, &b, &e);
        RCHECK(memcmp(m, &sh->master[u][b], (e - b) * sizeof(float)) == 0);
        for (unsigned k = 0; k < 2; k++) {
            const float *x = accel_shard_optim_state(s, u, k);
            if (x)
                RCHECK(memcmp(x, &sh->state[k][u][b], (e - b) * sizeof(float)) == 0);
        }
    }
    RCHECK(accel_shard_loss_scale(s) == (cf->compute == ACCEL_F16 ? sh->scale : 1.0));
    if (step(s, rank, 100, &st))
        return 1;
    RCHECK(st.step == sh->step + 1);
    accel_shard_free(s);
    return 0;
}

static void fresh_dir(void)
{
    if (sh == NULL) {
        sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        ASSERT(sh != MAP_FAILED);
    }
    memset(sh, 0, sizeof(*sh));
    test_mkdtemp(sh->dir, sizeof(sh->dir), "test-shard-ckpt");
}

static void cleanup(void)
{
    test_rmtree(sh->dir);
}

TEST(full_shard_3_to_any_world_and_strategy)
{
    const struct cfg save = {ACCEL_FULL_SHARD, ACCEL_ADAMW, ACCEL_F32, units, NULL};
    const struct cfg loads[] = {{ACCEL_FULL_SHARD, ACCEL_ADAMW, ACCEL_F32, units, NULL},
                                {ACCEL_SHARD_GRAD_OP, ACCEL_ADAMW, ACCEL_F32, units, NULL},
                                {ACCEL_NO_SHARD, ACCEL_ADAMW, ACCEL_BF16, units, NULL}};
    const unsigned worlds[] = {2, 1, 3};

    fresh_dir();
    test_world_run(3, NONCE, save_rank, &save);
    for (size_t i = 0; i < 3; i++)
        test_world_run(worlds[i], NONCE, load_rank, &loads[i]);
    cleanup();
}

TEST(no_shard_sgd_2_to_full_shard_4)
{
    const struct cfg save = {ACCEL_NO_SHARD, ACCEL_SGD, ACCEL_F32, units, NULL};
    const struct cfg load = {ACCEL_FULL_SHARD, ACCEL_SGD, ACCEL_F32, units, NULL};

    fresh_dir();
    test_world_run(2, NONCE, save_rank, &save);
    test_world_run(4, NONCE, load_rank, &load);
    cleanup();
}

TEST(fp16_loss_scale_carries_over)
{
    const struct cfg save = {ACCEL_FULL_SHARD, ACCEL_ADAMW, ACCEL_F16, units, NULL};
    const struct cfg load = {ACCEL_FULL_SHARD, ACCEL_ADAMW, ACCEL_F16, units, NULL};

    fresh_dir();
    test_world_run(2, NONCE, save_rank, &save);
    test_world_run(3, NONCE, load_rank, &load);
    cleanup();
}

TEST(another_shape_or_optimizer_is_refused)
{
    const struct cfg save = {ACCEL_FULL_SHARD, ACCEL_ADAMW, ACCEL_F32, units, NULL};
    const struct cfg shape = {ACCEL_FULL_SHARD, ACCEL_ADAMW, ACCEL_F32, other, "tensor 'c.w' of"};
    const struct cfg optim = {ACCEL_FULL_SHARD, ACCEL_SGD, ACCEL_F32, units,
                              "holds adamw state; this run uses sgd"};

    fresh_dir();
    test_world_run(2, NONCE, save_rank, &save);
    test_world_run(2, NONCE, load_rank, &shape);
    test_world_run(1, NONCE, load_rank, &optim);
    cleanup();
}

TEST_LIST(T(full_shard_3_to_any_world_and_strategy), T(no_shard_sgd_2_to_full_shard_4),
          T(fp16_loss_scale_carries_over), T(another_shape_or_optimizer_is_refused))
