/*
 * test_shard.c: the sharded data-parallel runtime (core/shard).
 *
 * Worlds of 1 to 4 ranks are forked processes meeting in a store served by
 * the test process, with the socket backend; ranks write what they saw
 * (final weights, norms, scales, traffic) into memory shared with the test
 * process, which compares.  The model is a linear least-squares problem
 * (y1 = W x + b, y2 = V x + c; 7 inputs, 56 weights in three units of 35, 5
 * and 16 elements, so every unit has padding and one is smaller than the
 * world), trained on a fixed synthetic data set of 12 samples a step.
 *
 * Tolerances (docs/shard.md, DETERMINISM): same world size, any strategy:
 * bit-identical.  Different world sizes or micro-step splits: SGD on this
 * convex problem with lr = 1/16 makes each step's map w -> w - lr H w
 * non-expansive (the Hessian's eigenvalues are at most max |(x, 1)|^2 = 8,
 * lr * 8 < 2), so a run's distance to the exact (fp64) trajectory is at most
 * the sum over steps of lr * |gradient error| + the update's own rounding.
 * The gradient error of a step is at most gamma_K * D_t, with gamma_K =
 * K u / (1 - K u), u = 2^-24, K = 32 roundings in the longest chain (8 in
 * the forward dot product, 1 residual, 2 scalings, 12 samples, 4 ranks and
 * a division, 3 micro-steps, rounded up), and D_t the norm of
 * mean_i((|r_i| + sum_j |W_j x_ij| + |b| + |t_i|) |x~_i|) over the weights;
 * bf16 adds 2 u_bf16 per gradient narrowing and 8 u_bf16 |w| for the
 * rounded compute copy (u_bf16 = 2^-9).  The test computes that bound along
 * the fp64 trajectory, checks every run against it, and prints the measured
 * distances next to it.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../core/comm/dtype_int.h"
#include "accel/alloc.h"
#include "accel/comm.h"
#include "accel/shard.h"
#include "accel/store.h"
#include "store_proc.h"
#include "test.h"

#define NONCE 0x5a4dull
#define MAXW 4
#define IN 7
#define O1 5 /* rows of W and b */
#define O2 2 /* rows of V and c */
#define NW 56
#define BATCH 12
#define STEPS 50
#define SLOTS 16
#define LR (1.0 / 16)

/* ------------------------------------------------------------ the model */

static const struct accel_shard_param p_lin[] = {{"lin.weight", 2, {O1, IN}}};
static const struct accel_shard_param p_bias[] = {{"lin.bias", 1, {O1}}};
static const struct accel_shard_param p_aux[] = {{"aux.weight", 2, {O2, IN}},
                                                 {"aux.bias", 1, {O2}}};
static const struct accel_shard_unit units[] = {
    {"lin", p_lin, 1}, {"bias", p_bias, 1}, {"aux", p_aux, 2}};
#define NUNITS 3
static const size_t ubase[NUNITS] = {0, 35, 40}; /* unit offsets in the test's weight vector */
static const size_t unumel[NUNITS] = {35, 5, 16};

/* A value in [-1, 1) from two integers. */
static float rnd(uint32_t a, uint32_t b)
{
    return (float)(test_mix32(a * 2654435761u ^ test_mix32(b + 0x9e37u)) >> 8) * 0x1p-23f - 1.0f;
}

static float xin(size_t sample, unsigned j)
{
    return rnd((uint32_t)sample, 100 + j);
}

/* targets from a teacher plus noise: output o of sample i (o < O1 + O2) */
static float target(size_t sample, unsigned o)
{
    float acc = rnd(7000 + o, 1) * 0.5f;
    for (unsigned j = 0; j < IN; j++)
        acc += rnd(8000 + o, j) * xin(sample, j);
    return acc + 0.1f * rnd((uint32_t)sample, 9000 + o);
}

static void init_weights(float *w)
{
    for (size_t i = 0; i < NW; i++)
        w[i] = 0.1f * rnd(12345, (uint32_t)i);
}

/* Weight of output o, input j (j == IN: the bias), in the test's vector. */
static size_t widx(unsigned o, unsigned j)
{
    if (o < O1)
        return j < IN ? o * IN + j : 35 + o;
    return j < IN ? 40 + (o - O1) * IN + j : 54 + (o - O1);
}

/* ------------------------------------------------------------ worlds */

struct shared {
    float w[SLOTS][NW];
    double loss[SLOTS][MAXW][STEPS];
    double norm[SLOTS][MAXW][STEPS];
    double scale[MAXW][STEPS];
    int skipped[MAXW][STEPS];
    uint64_t calls[MAXW][8];
    size_t bytes[MAXW][8];
    size_t numbers[MAXW][64];
};

static struct shared *sh;

static void shared_map(void)
{
    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT(sh != MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    /* counted, so that ranks can check they leak nothing (they end with
     * _exit, which LeakSanitizer does not see) */
    test_alloc_install();
}

/* Runs fn on `world` forked ranks; fails the case if a rank did. */
static void run_world(unsigned world, test_rank_fn fn, const void *arg)
{
    test_world_run(world, NONCE, fn, arg);
}

/* ------------------------------------------------------------ training on a rank */

struct cfg {
    enum accel_dtype compute;
    enum accel_shard_strategy strategy;
    enum accel_optimizer optim;
    unsigned accum, steps;
    double lr, max_norm, momentum, wd;
    int slot;
    int inject; /* fp16 test: 1 = rank 1 writes an inf at step 0, 2 = huge values at step 4 */
};

static void opts_of(const struct cfg *cf, struct accel_shard_opts *o)
{
    accel_shard_opts_default(o);
    o->compute = cf->compute;
    o->strategy = cf->strategy;
    o->optimizer = cf->optim;
    o->grad_accum = cf->accum ? cf->accum : 1;
    o->lr = cf->lr;
    o->max_grad_norm = cf->max_norm;
    o->momentum = cf->momentum;
    o->weight_decay = cf->wd;
    o->loss_scale = 1024;
    o->scale_window = 3;
}

/* Writes this rank's master slices into the shared weight vector. */
static void publish(struct accel_shard *s, float *w)
{
    for (size_t u = 0; u < NUNITS; u++) {
        size_t b, e;
        const float *m = accel_shard_master(s, u, &b, &e);
        memcpy(w + ubase[u] + b, m, (e - b) * sizeof(float));
    }
}

/* One micro-step's forward and backward on samples [first, first + n),
 * with the protocol of accel/shard.h; returns the loss sum through *loss. */
static int micro_step(struct accel_shard *s, unsigned rank, size_t first, size_t n, unsigned accum,
                      bool last, int inject, double *loss)
{
    struct accel_error err;
    float resid[BATCH][O1 + O2];
    const float *pw, *pb, *pa;
    float *g;
    float dscale = 1.0f / (float)(n * accum) * (float)accel_shard_loss_scale(s);

    /* forward: lin and bias together, then aux */
    RCHECK_OK(accel_shard_gather(s, 0, &err));
    RCHECK_OK(accel_shard_gather(s, 1, &err));
    pw = accel_shard_params(s, 0);
    pb = accel_shard_params(s, 1);
    RCHECK(pw != NULL && pb != NULL);
    for (size_t i = 0; i < n; i++)
        for (unsigned o = 0; o < O1; o++) {
            float acc = pb[o];
            for (unsigned j = 0; j < IN; j++)
                acc += pw[o * IN + j] * xin(first + i, j);
            resid[i][o] = acc - target(first + i, o);
        }
    accel_shard_release(s, 1);
    accel_shard_release(s, 0);
    RCHECK_OK(accel_shard_gather(s, 2, &err));
    pa = accel_shard_params(s, 2);
    RCHECK(pa != NULL);
    for (size_t i = 0; i < n; i++)
        for (unsigned o = 0; o < O2; o++) {
            float acc = pa[O2 * IN + o];
            for (unsigned j = 0; j < IN; j++)
                acc += pa[o * IN + j] * xin(first + i, j);
            resid[i][O1 + o] = acc - target(first + i, O1 + o);
        }
    accel_shard_release(s, 2);
    for (size_t i = 0; i < n; i++)
        for (unsigned o = 0; o < O1 + O2; o++)
            *loss += 0.5 * (double)resid[i][o] * (double)resid[i][o];

    /* backward, last unit first */
    RCHECK_OK(accel_shard_gather(s, 2, &err));
    RCHECK((g = accel_shard_grads(s, 2)) != NULL);
    for (size_t i = 0; i < n; i++)
        for (unsigned o = 0; o < O2; o++) {
            float d = resid[i][O1 + o] * dscale;
            for (unsigned j = 0; j < IN; j++)
                g[o * IN + j] += d * xin(first + i, j);
            g[O2 * IN + o] += d;
        }
    RCHECK_OK(accel_shard_reduce(s, 2, last, &err));
    accel_shard_release(s, 2);
    RCHECK_OK(accel_shard_gather(s, 1, &err));
    RCHECK((g = accel_shard_grads(s, 1)) != NULL);
    for (size_t i = 0; i < n; i++)
        for (unsigned o = 0; o < O1; o++)
            g[o] += resid[i][o] * dscale;
    RCHECK_OK(accel_shard_reduce(s, 1, last, &err));
    accel_shard_release(s, 1);
    RCHECK_OK(accel_shard_gather(s, 0, &err));
    RCHECK((g = accel_shard_grads(s, 0)) != NULL);
    for (size_t i = 0; i < n; i++)
        for (unsigned o = 0; o < O1; o++) {
            float d = resid[i][o] * dscale;
            for (unsigned j = 0; j < IN; j++)
                g[o * IN + j] += d * xin(first + i, j);
        }
    if (inject == 1)
        g[3] = INFINITY;
    if (inject == 2)
        for (size_t k = 0; k < 35; k++)
            g[k] = 100.0f * (float)accel_shard_loss_scale(s); /* past 65504 once scaled */
    RCHECK_OK(accel_shard_reduce(s, 0, last, &err));
    accel_shard_release(s, 0);
    return 0;
}

/* Steps [from, to) of a run of cf on this rank. */
static int run_steps(struct accel_shard *s, unsigned rank, unsigned world, const struct cfg *cf,
                     unsigned from, unsigned to)
{
    unsigned accum = cf->accum ? cf->accum : 1;
    size_t per = BATCH / accum / world; /* samples of a rank in a micro-step */
    struct accel_error err;

    for (unsigned t = from; t < to; t++) {
        struct accel_shard_stats st;
        double loss = 0;
        for (unsigned k = 0; k < accum; k++) {
            size_t first = (size_t)t * BATCH + (size_t)k * (BATCH / accum) + rank * per;
            int inj = rank == 1 && ((cf->inject == 1 && t == 0) || (cf->inject == 2 && t == 4))
                          ? cf->inject
                          : 0;
            uint64_t before, after;
            accel_shard_traffic(s, &before, NULL);
            if (micro_step(s, rank, first, per, accum, k + 1 == accum, inj, &loss) != 0)
                return 1;
            accel_shard_traffic(s, &after, NULL);
            /* a middle micro-step: SHARD_GRAD_OP still holds the copies
             * gathered by the first, and no gradient is reduced */
            if (k >= 1 && k + 1 < accum && t < 8)
                sh->calls[rank][t] += after - before;
        }
        RCHECK_OK(accel_shard_step(s, &st, &err));
        sh->loss[cf->slot][rank][t] = loss;
        sh->norm[cf->slot][rank][t] = st.grad_norm;
        sh->scale[rank][t] = st.loss_scale;
        sh->skipped[rank][t] = st.skipped;
        sh->numbers[rank][0] = st.step;
    }
    return 0;
}

/* The socket ring sets up its connections and buffers on first use and
 * keeps them: start it before counting what a shard leaves behind. */
static int warm_up(struct accel_comm *c, unsigned rank)
{
    float a[MAXW * 4] = {0};
    struct accel_error err;

    RCHECK_OK(accel_all_reduce(c, a, a, 4, ACCEL_F32, ACCEL_SUM, &err));
    RCHECK_OK(accel_reduce_scatter(c, a, a, 4, ACCEL_F32, ACCEL_AVG, &err));
    RCHECK_OK(accel_all_gather(c, a, a, 4, ACCEL_F32, &err));
    return 0;
}

static int new_shard(struct accel_comm *c, unsigned rank, const struct cfg *cf,
                     struct accel_shard **s)
{
    struct accel_shard_opts o;
    struct accel_error err;
    float w0[NW];

    opts_of(cf, &o);
    init_weights(w0);
    RCHECK_OK(accel_shard_init(s, c, units, NUNITS, &o, &err));
    for (size_t u = 0; u < NUNITS; u++)
        RCHECK_OK(accel_shard_set_full(*s, u, w0 + ubase[u], &err));
    return 0;
}

static int train_rank(struct accel_comm *c, unsigned rank, const void *arg)
{
    const struct cfg *cf = arg;
    struct accel_shard *s = NULL;
    long live;
    int rc;

    if (warm_up(c, rank) != 0)
        return 1;
    live = test_alloc_live();
    if (new_shard(c, rank, cf, &s) != 0)
        return 1;
    rc = run_steps(s, rank, accel_comm_size(c), cf, 0, cf->steps);
    if (rc == 0)
        publish(s, sh->w[cf->slot]);
    accel_shard_free(s);
    if (rc == 0)
        RCHECK(test_alloc_live() == live);
    return rc;
}

/* Three steps, a checkpoint of this rank's slices (master, state, step,
 * scale) into a fresh shard, two more steps. */
static int resume_rank(struct accel_comm *c, unsigned rank, const void *arg)
{
    const struct cfg *cf = arg;
    unsigned world = accel_comm_size(c);
    struct accel_shard *a = NULL, *b = NULL;
    struct accel_error err;
    unsigned long step;
    double scale;

    if (new_shard(c, rank, cf, &a) != 0 || run_steps(a, rank, world, cf, 0, 3) != 0)
        return 1;
    step = sh->numbers[rank][0];
    scale = accel_shard_loss_scale(a);
    if (new_shard(c, rank, cf, &b) != 0)
        return 1;
    for (size_t u = 0; u < NUNITS; u++) {
        size_t ba, ea, bb, eb;
        const float *ma = accel_shard_master(a, u, &ba, &ea);
        float *mb = accel_shard_master(b, u, &bb, &eb);
        RCHECK(ba == bb && ea == eb);
        memcpy(mb, ma, (ea - ba) * sizeof(float));
        for (unsigned k = 0; k < 2; k++) {
            const float *sa = accel_shard_optim_state(a, u, k);
            float *sb = accel_shard_optim_state(b, u, k);
            RCHECK((sa == NULL) == (sb == NULL));
            if (sa != NULL)
                memcpy(sb, sa, (ea - ba) * sizeof(float));
        }
    }
    accel_shard_free(a);
    RCHECK(accel_shard_restore(b, step, scale * 3, &err) == ACCEL_EINVAL);
    RCHECK_OK(accel_shard_restore(b, step, scale, &err));
    if (run_steps(b, rank, world, cf, 3, 5) != 0)
        return 1;
    publish(b, sh->w[cf->slot]);
    accel_shard_free(b);
    return 0;
}

static bool same_bits(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof(float)) == 0;
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs((double)a[i] - (double)b[i]) > m)
            m = fabs((double)a[i] - (double)b[i]);
    return m;
}

static double l2_diff(const float *a, const double *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return sqrt(m);
}

/* ------------------------------------------------------------ the fp64 reference */

/* SGD (no momentum, no decay) in fp64 over the global batches, and the
 * first-order bound on an fp32 (or bf16) run's distance to it. */
static double reference(double *w, unsigned steps, bool bf16)
{
    const double u = 0x1p-24, ub = 0x1p-9, K = 32, gam = K * u / (1 - K * u);
    double bound = 0;
    float w0[NW];

    init_weights(w0);
    for (size_t i = 0; i < NW; i++)
        w[i] = w0[i];
    for (unsigned t = 0; t < steps; t++) {
        double g[NW] = {0}, dd[NW] = {0}, ga[NW] = {0}, dn = 0, gn = 0, wn = 0, gan = 0;
        for (size_t i = (size_t)t * BATCH; i < (size_t)(t + 1) * BATCH; i++)
            for (unsigned o = 0; o < O1 + O2; o++) {
                double acc = w[widx(o, IN)], mag = fabs(w[widx(o, IN)]), r;
                for (unsigned j = 0; j < IN; j++) {
                    acc += w[widx(o, j)] * xin(i, j);
                    mag += fabs(w[widx(o, j)] * xin(i, j));
                }
                r = acc - target(i, o);
                mag += fabs(r) + fabs(target(i, o));
                for (unsigned j = 0; j <= IN; j++) {
                    double x = j < IN ? xin(i, j) : 1.0;
                    g[widx(o, j)] += r * x / BATCH;
                    dd[widx(o, j)] += mag * fabs(x) / BATCH;
                    ga[widx(o, j)] += fabs(r * x) / BATCH;
                }
            }
        for (size_t k = 0; k < NW; k++) {
            dn += dd[k] * dd[k];
            gn += g[k] * g[k];
            wn += w[k] * w[k];
            gan += ga[k] * ga[k];
        }
        bound += LR * gam * sqrt(dn);
        if (bf16)
            bound += LR * (2 * ub * sqrt(gan) + 8 * ub * sqrt(wn));
        for (size_t k = 0; k < NW; k++)
            w[k] -= LR * g[k];
        wn = 0;
        for (size_t k = 0; k < NW; k++)
            wn += w[k] * w[k];
        bound += u * (sqrt(wn) + LR * sqrt(gn));
    }
    return bound * 1.01; /* second-order terms */
}

/* ------------------------------------------------------------ cases */

static int layout_rank(struct accel_comm *c, unsigned rank, const void *arg)
{
    static const struct accel_shard_param p[] = {{"a", 2, {3, 7}}, {"b", 1, {14}}};
    static const struct accel_shard_param tiny[] = {{"t", 1, {3}}};
    static const struct accel_shard_unit us[] = {{"big", p, 2}, {"tiny", tiny, 1}};
    unsigned world = accel_comm_size(c);
    struct accel_shard_opts o;
    struct accel_shard *s;
    struct accel_error err;
    size_t q = (size_t)world * ACCEL_SHARD_ALIGN;

    (void)arg;
    accel_shard_opts_default(&o);
    RCHECK_OK(accel_shard_init(&s, c, us, 2, &o, &err));
    RCHECK(accel_shard_nunits(s) == 2);
    RCHECK(accel_shard_unit_numel(s, 0) == 35);
    RCHECK(accel_shard_unit_numel(s, 1) == 3);
    RCHECK(accel_shard_param_offset(s, 0, 0) == 0);
    RCHECK(accel_shard_param_offset(s, 0, 1) == 21);
    for (size_t u = 0; u < 2; u++) {
        size_t padded = accel_shard_unit_padded(s, u), b, e, numel = accel_shard_unit_numel(s, u);
        size_t slen = padded / world, lo = rank * slen, hi = lo + slen;
        RCHECK(padded % q == 0 && padded >= numel && padded - numel < q);
        RCHECK(accel_shard_master(s, u, &b, &e) != NULL);
        RCHECK(b == (lo < numel ? lo : numel) && e == (hi < numel ? hi : numel));
        sh->numbers[rank][2 * u] = b;
        sh->numbers[rank][2 * u + 1] = e;
    }
    accel_shard_free(s);
    return 0;
}

TEST(layout_padding_and_slices)
{
    shared_map();
    for (unsigned world = 1; world <= 4; world++) {
        run_world(world, layout_rank, NULL);
        /* the slices tile [0, numel) in rank order, empty ones at the end */
        for (size_t u = 0; u < 2; u++) {
            size_t at = 0;
            for (unsigned r = 0; r < world; r++) {
                ASSERT_INT_EQ(sh->numbers[r][2 * u], at);
                at = sh->numbers[r][2 * u + 1];
            }
            ASSERT_INT_EQ(at, u == 0 ? 35 : 3);
        }
        /* the 3-element unit lives on rank 0 alone */
        for (unsigned r = 1; r < world; r++)
            ASSERT_INT_EQ(sh->numbers[r][3] - sh->numbers[r][2], 0);
    }
}

static int bad_units_rank(struct accel_comm *c, unsigned rank, const void *arg)
{
    static const struct accel_shard_param zero[] = {{"z", 2, {3, 0}}};
    static const struct accel_shard_param dims[] = {{"d", 5, {1, 1, 1, 1}}};
    static const struct accel_shard_param noname[] = {{NULL, 1, {3}}};
    static const struct accel_shard_param huge[] = {{"h", 4, {SIZE_MAX / 4, 2, 2, 2}}};
    static const struct accel_shard_param ok[] = {{"w", 1, {4}}};
    const struct {
        struct accel_shard_unit u;
        enum accel_err want;
    } cases[] = {
        {{"empty", ok, 0}, ACCEL_EINVAL},  {{"zero", zero, 1}, ACCEL_EINVAL},
        {{"dims", dims, 1}, ACCEL_EINVAL}, {{"noname", noname, 1}, ACCEL_EINVAL},
        {{NULL, ok, 1}, ACCEL_EINVAL},     {{"huge", huge, 1}, ACCEL_ETOOBIG},
    };
    struct accel_shard_opts o;
    struct accel_shard *s = NULL;
    struct accel_error err;

    (void)arg;
    accel_shard_opts_default(&o);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        enum accel_err rc = accel_shard_init(&s, c, &cases[i].u, 1, &o, &err);
        if (rc != cases[i].want)
            return test_rank_fail(rank, __FILE__, __LINE__, "case %zu: %s (%s), expected %s", i,
                                  accel_errname(rc), err.msg, accel_errname(cases[i].want));
        RCHECK(s == NULL);
    }
    RCHECK(accel_shard_init(&s, c, units, 0, &o, &err) == ACCEL_EINVAL);
    RCHECK(accel_shard_init(&s, c, units, ACCEL_SHARD_MAX_UNITS + 1, &o, &err) == ACCEL_ETOOBIG);
    o.beta1 = 1.0;
    RCHECK(accel_shard_init(&s, c, units, NUNITS, &o, &err) == ACCEL_EINVAL);
    accel_shard_opts_default(&o);
    o.compute = ACCEL_F16;
    o.loss_scale = 1000; /* not a power of two */
    RCHECK(accel_shard_init(&s, c, units, NUNITS, &o, &err) == ACCEL_EINVAL);
    /* a step with a gradient left unreduced is refused before it talks */
    accel_shard_opts_default(&o);
    RCHECK_OK(accel_shard_init(&s, c, units, NUNITS, &o, &err));
    RCHECK(accel_shard_grads(s, 1) != NULL);
    RCHECK(accel_shard_step(s, NULL, &err) == ACCEL_EINVAL);
    RCHECK(strstr(err.msg, "bias") != NULL);
    RCHECK_OK(accel_shard_reduce(s, 1, true, &err));
    RCHECK_OK(accel_shard_step(s, NULL, &err));
    accel_shard_free(s);
    accel_shard_free(NULL);
    return 0;
}

TEST(init_refuses_bad_units_and_options)
{
    shared_map();
    run_world(1, bad_units_rank, NULL);
}

static int mismatch_rank(struct accel_comm *c, unsigned rank, const void *arg)
{
    static const struct accel_shard_param other[] = {{"lin.weight", 2, {O1, IN + 1}}};
    struct accel_shard_unit mine[NUNITS];
    struct accel_shard_opts o;
    struct accel_shard *s = NULL;
    struct accel_error err;

    (void)arg;
    memcpy(mine, units, sizeof(mine));
    if (rank == 1)
        mine[0].params = other;
    accel_shard_opts_default(&o);
    RCHECK(accel_shard_init(&s, c, mine, NUNITS, &o, &err) == ACCEL_EINVAL);
    RCHECK(strstr(err.msg, rank == 0 ? "rank 1" : "rank 0") != NULL);
    /* the same units, another learning rate */
    o.lr = rank == 1 ? 2e-3 : 1e-3;
    RCHECK(accel_shard_init(&s, c, units, NUNITS, &o, &err) == ACCEL_EINVAL);
    o.lr = 1e-3;
    RCHECK_OK(accel_shard_init(&s, c, units, NUNITS, &o, &err));
    accel_shard_free(s);
    return 0;
}

TEST(init_refuses_ranks_that_disagree)
{
    shared_map();
    run_world(2, mismatch_rank, NULL);
}

/* ---- environment */

static void clear_env(void)
{
    static const char *const vars[] = {
        "ACCELERATE_MIXED_PRECISION",  "FSDP_VERSION",
        "FSDP_SHARDING_STRATEGY",      "FSDP_RESHARD_AFTER_FORWARD",
        "FSDP_OFFLOAD_PARAMS",         "ACCELERATE_GRADIENT_ACCUMULATION_STEPS",
        "ACCELERATE_GRADIENT_CLIPPING"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
}

TEST(opts_from_env_accepts_accelerates_values)
{
    static const struct {
        const char *env[4]; /* NAME=VALUE */
        enum accel_dtype compute;
        enum accel_shard_strategy strategy;
        unsigned accum;
        double clip;
    } cases[] = {
        {{NULL}, ACCEL_F32, ACCEL_FULL_SHARD, 1, 0},
        {{"ACCELERATE_MIXED_PRECISION=no"}, ACCEL_F32, ACCEL_FULL_SHARD, 1, 0},
        {{"ACCELERATE_MIXED_PRECISION=bf16"}, ACCEL_BF16, ACCEL_FULL_SHARD, 1, 0},
        {{"ACCELERATE_MIXED_PRECISION=fp16"}, ACCEL_F16, ACCEL_FULL_SHARD, 1, 0},
        {{"FSDP_SHARDING_STRATEGY=FULL_SHARD"}, ACCEL_F32, ACCEL_FULL_SHARD, 1, 0},
        {{"FSDP_SHARDING_STRATEGY=SHARD_GRAD_OP"}, ACCEL_F32, ACCEL_SHARD_GRAD_OP, 1, 0},
        {{"FSDP_SHARDING_STRATEGY=no_shard"}, ACCEL_F32, ACCEL_NO_SHARD, 1, 0},
        {{"FSDP_SHARDING_STRATEGY=1"}, ACCEL_F32, ACCEL_FULL_SHARD, 1, 0},
        {{"FSDP_SHARDING_STRATEGY=2"}, ACCEL_F32, ACCEL_SHARD_GRAD_OP, 1, 0},
        {{"FSDP_SHARDING_STRATEGY=3"}, ACCEL_F32, ACCEL_NO_SHARD, 1, 0},
        /* FSDP1 without a strategy falls back to reshard_after_forward */
        {{"FSDP_SHARDING_STRATEGY=None", "FSDP_RESHARD_AFTER_FORWARD=shard_grad_op"},
         ACCEL_F32,
         ACCEL_SHARD_GRAD_OP,
         1,
         0},
        /* FSDP2: reshard_after_forward decides, the strategy is ignored */
        {{"FSDP_VERSION=2", "FSDP_SHARDING_STRATEGY=FULL_SHARD",
          "FSDP_RESHARD_AFTER_FORWARD=false"},
         ACCEL_F32,
         ACCEL_SHARD_GRAD_OP,
         1,
         0},
        {{"FSDP_VERSION=2", "FSDP_RESHARD_AFTER_FORWARD=true", "FSDP_OFFLOAD_PARAMS=false"},
         ACCEL_F32,
         ACCEL_FULL_SHARD,
         1,
         0},
        {{"ACCELERATE_GRADIENT_ACCUMULATION_STEPS=4", "ACCELERATE_GRADIENT_CLIPPING=1.0"},
         ACCEL_F32,
         ACCEL_FULL_SHARD,
         4,
         1.0},
        {{"ACCELERATE_GRADIENT_CLIPPING=auto"}, ACCEL_F32, ACCEL_FULL_SHARD, 1, 0},
    };
    struct accel_shard_opts o;
    struct accel_error err;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        clear_env();
        for (size_t k = 0; k < 4 && cases[i].env[k]; k++)
            ASSERT_OK(putenv((char *)(uintptr_t)cases[i].env[k]));
        if (accel_shard_opts_from_env(&o, &err) != ACCEL_OK)
            test_fail(__FILE__, __LINE__, "case %zu: %s", i, err.msg);
        ASSERT_INT_EQ(o.compute, cases[i].compute);
        ASSERT_INT_EQ(o.strategy, cases[i].strategy);
        ASSERT_INT_EQ(o.grad_accum, cases[i].accum);
        ASSERT(o.max_grad_norm == cases[i].clip);
        ASSERT(o.optimizer == ACCEL_ADAMW && o.lr == 1e-3 && o.weight_decay == 0.01);
    }
}

TEST(opts_from_env_refuses_with_messages)
{
    static const struct {
        const char *env[2];
        enum accel_err code;
        const char *key, *text;
    } cases[] = {
        {{"ACCELERATE_MIXED_PRECISION=fp8"},
         ACCEL_EUNSUPPORTED,
         "ACCELERATE_MIXED_PRECISION",
         "supported: no, bf16, fp16"},
        {{"ACCELERATE_MIXED_PRECISION=BF16"},
         ACCEL_EINVAL,
         "ACCELERATE_MIXED_PRECISION",
         "ACCELERATE_MIXED_PRECISION=BF16: not one of"},
        {{"ACCELERATE_MIXED_PRECISION=fp32"},
         ACCEL_EINVAL,
         "ACCELERATE_MIXED_PRECISION",
         "lowercase"},
        {{"FSDP_SHARDING_STRATEGY=HYBRID_SHARD"},
         ACCEL_EUNSUPPORTED,
         "FSDP_SHARDING_STRATEGY",
         "hybrid sharding is not supported"},
        {{"FSDP_SHARDING_STRATEGY=5"},
         ACCEL_EUNSUPPORTED,
         "FSDP_SHARDING_STRATEGY",
         "FSDP_SHARDING_STRATEGY=5"},
        {{"FSDP_SHARDING_STRATEGY=ZERO3"},
         ACCEL_EINVAL,
         "FSDP_SHARDING_STRATEGY",
         "not a sharding strategy"},
        {{"FSDP_SHARDING_STRATEGY=0"}, ACCEL_EINVAL, "FSDP_SHARDING_STRATEGY", "1..5"},
        {{"FSDP_VERSION=2", "FSDP_RESHARD_AFTER_FORWARD=full_shard"},
         ACCEL_EINVAL,
         "FSDP_RESHARD_AFTER_FORWARD",
         "FSDP2"},
        {{"FSDP_VERSION=3"}, ACCEL_EUNSUPPORTED, "FSDP_VERSION", "1 and 2"},
        {{"FSDP_VERSION=two"}, ACCEL_EINVAL, "FSDP_VERSION", "not 1 or 2"},
        {{"FSDP_OFFLOAD_PARAMS=true"}, ACCEL_EUNSUPPORTED, "FSDP_OFFLOAD_PARAMS", "offload"},
        {{"FSDP_OFFLOAD_PARAMS=maybe"}, ACCEL_EINVAL, "FSDP_OFFLOAD_PARAMS", "truth value"},
        {{"ACCELERATE_GRADIENT_ACCUMULATION_STEPS=0"},
         ACCEL_EINVAL,
         "ACCELERATE_GRADIENT_ACCUMULATION_STEPS",
         "1..65536"},
        {{"ACCELERATE_GRADIENT_ACCUMULATION_STEPS=-2"},
         ACCEL_EINVAL,
         "ACCELERATE_GRADIENT_ACCUMULATION_STEPS",
         "=-2"},
        {{"ACCELERATE_GRADIENT_ACCUMULATION_STEPS=65537"},
         ACCEL_EINVAL,
         "ACCELERATE_GRADIENT_ACCUMULATION_STEPS",
         "65537"},
        {{"ACCELERATE_GRADIENT_CLIPPING=-1"}, ACCEL_EINVAL, "ACCELERATE_GRADIENT_CLIPPING", "auto"},
        {{"ACCELERATE_GRADIENT_CLIPPING=1.0x"},
         ACCEL_EINVAL,
         "ACCELERATE_GRADIENT_CLIPPING",
         "finite"},
    };
    struct accel_shard_opts o;
    struct accel_error err;
    char long_value[200];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        enum accel_err rc;
        clear_env();
        for (size_t k = 0; k < 2 && cases[i].env[k]; k++)
            ASSERT_OK(putenv((char *)(uintptr_t)cases[i].env[k]));
        accel_error_clear(&err);
        rc = accel_shard_opts_from_env(&o, &err);
        if (rc != cases[i].code)
            test_fail(__FILE__, __LINE__, "case %zu (%s): %s, expected %s: %s", i, cases[i].env[0],
                      accel_errname(rc), accel_errname(cases[i].code), err.msg);
        ASSERT_STR_EQ(err.key, cases[i].key);
        ASSERT_CONTAINS(err.msg, cases[i].text);
    }
    clear_env();
    memset(long_value, 'x', sizeof(long_value) - 1);
    long_value[sizeof(long_value) - 1] = '\0';
    ASSERT_OK(setenv("FSDP_SHARDING_STRATEGY", long_value, 1));
    ASSERT_INT_EQ(accel_shard_opts_from_env(&o, &err), ACCEL_ETOOBIG);
    ASSERT_CONTAINS(err.msg, "FSDP_SHARDING_STRATEGY");
}

/* ---- training */

static void train(unsigned world, struct cfg cf)
{
    if (cf.steps == 0)
        cf.steps = STEPS;
    run_world(world, train_rank, &cf);
}

/* (a) FULL_SHARD, SHARD_GRAD_OP and NO_SHARD give the same bits at one
 * world size; a rerun too. */
static void strategies_agree(unsigned world)
{
    static const enum accel_dtype types[] = {ACCEL_F32, ACCEL_BF16, ACCEL_F16};
    static const enum accel_shard_strategy strat[] = {ACCEL_FULL_SHARD, ACCEL_SHARD_GRAD_OP,
                                                      ACCEL_NO_SHARD};

    shared_map();
    for (size_t t = 0; t < 3; t++) {
        for (int k = 0; k < 4; k++) {
            struct cfg cf = {types[t], strat[k % 3], ACCEL_ADAMW, 1, 0, 1e-2, 0.5, 0, 0.01, k, 0};
            train(world, cf);
        }
        for (int k = 1; k < 4; k++) {
            if (!same_bits(sh->w[0], sh->w[k], NW))
                test_fail(__FILE__, __LINE__, "world %u %s: run %d differs from FULL_SHARD by %g",
                          world, accel_dtype_name(types[t]), k, max_diff(sh->w[0], sh->w[k], NW));
            for (unsigned r = 0; r < world; r++)
                if (memcmp(sh->loss[0][r], sh->loss[k][r], sizeof(sh->loss[0][r])) != 0 ||
                    memcmp(sh->norm[0][r], sh->norm[k][r], sizeof(sh->norm[0][r])) != 0)
                    test_fail(__FILE__, __LINE__,
                              "world %u %s: run %d: rank %u's loss or norm "
                              "curve differs",
                              world, accel_dtype_name(types[t]), k, r);
        }
        /* every rank saw the same norm */
        for (unsigned r = 1; r < world; r++)
            ASSERT(memcmp(sh->norm[0][0], sh->norm[0][r], sizeof(sh->norm[0][0])) == 0);
        /* and it trained: the loss went down */
        ASSERT(sh->loss[0][0][STEPS - 1] < 0.5 * sh->loss[0][0][0]);
    }
}

TEST(strategies_bit_identical_world1)
{
    strategies_agree(1);
}

TEST(strategies_bit_identical_world2)
{
    strategies_agree(2);
}

TEST(strategies_bit_identical_world3)
{
    strategies_agree(3);
}

TEST(strategies_bit_identical_world4)
{
    strategies_agree(4);
}

/* (b) world sizes 1..4 and (c) k micro-steps against the fp64 trajectory,
 * within the bound derived at the top of this file. */
static void worlds_within_bound(enum accel_dtype t)
{
    double ref[NW], bound = reference(ref, STEPS, t == ACCEL_BF16), worst = 0;
    int slot = 0;

    shared_map();
    for (unsigned world = 1; world <= 4; world++)
        for (unsigned accum = 1; accum <= 3; accum += 2) {
            struct cfg cf = {t, ACCEL_FULL_SHARD, ACCEL_SGD, accum, 0, LR, 0, 0, 0, slot, 0};
            double d;
            if ((BATCH / accum) % world != 0)
                continue;
            train(world, cf);
            d = l2_diff(sh->w[slot], ref, NW);
            test_note("%s world %u, %u micro-step(s): |w - w_fp64| = %.3g (bound %.3g)",
                      accel_dtype_name(t), world, accum, d, bound);
            if (d > bound)
                test_fail(__FILE__, __LINE__, "world %u accum %u: %g past the bound %g", world,
                          accum, d, bound);
            if (d > worst)
                worst = d;
            slot++;
        }
    /* pairwise, the runs are within twice the bound; show the largest */
    for (int a = 0; a < slot; a++)
        for (int b = a + 1; b < slot; b++)
            ASSERT(max_diff(sh->w[a], sh->w[b], NW) <= 2 * bound);
    test_note("%s: largest distance to fp64 %.3g, bound %.3g", accel_dtype_name(t), worst, bound);
    /* AdamW has no such bound (its update divides by the gradient's own
     * size, so a relative error of a tiny gradient is not damped); the
     * distances are shown for docs/shard.md and held to limits that leave
     * a wide margin over what was measured there (fp32 6e-8, bf16 4e-4) */
    for (unsigned world = 1; world <= 4; world++) {
        struct cfg cf = {t, ACCEL_FULL_SHARD, ACCEL_ADAMW, 1, 0, 1e-2, 0.5, 0, 0.01, 8 + world, 0};
        double d;
        train(world, cf);
        if (world == 1)
            continue;
        d = max_diff(sh->w[9], sh->w[8 + world], NW);
        test_note("%s AdamW lr 1e-2, %d steps: max |w(world %u) - w(world 1)| = %.3g",
                  accel_dtype_name(t), STEPS, world, d);
        ASSERT(d <= (t == ACCEL_F32 ? 1e-5 : 1e-2));
    }
}

TEST(world_sizes_agree_fp32)
{
    worlds_within_bound(ACCEL_F32);
}

TEST(world_sizes_agree_bf16)
{
    worlds_within_bound(ACCEL_BF16);
}

/* (c) micro-steps before the last send nothing. */
static int accum_rank(struct accel_comm *c, unsigned rank, const void *arg)
{
    const enum accel_shard_strategy *strategy = arg;
    struct accel_shard_opts o;
    struct accel_shard *s;
    struct accel_error err;
    uint64_t calls0, bytes0, calls1, bytes1;

    accel_shard_opts_default(&o);
    o.strategy = *strategy;
    o.grad_accum = 4;
    RCHECK_OK(accel_shard_init(&s, c, units, NUNITS, &o, &err));
    /* gather everything once, then three micro-steps of backward alone */
    for (size_t u = 0; u < NUNITS; u++)
        RCHECK_OK(accel_shard_gather(s, u, &err));
    accel_shard_traffic(s, &calls0, &bytes0);
    for (int k = 0; k < 3; k++)
        for (size_t u = NUNITS; u-- > 0;) {
            float *g = accel_shard_grads(s, u);
            RCHECK(g != NULL);
            g[0] += 1.0f;
            RCHECK_OK(accel_shard_reduce(s, u, false, &err));
        }
    accel_shard_traffic(s, &calls1, &bytes1);
    RCHECK(calls1 == calls0 && bytes1 == bytes0);
    /* the last micro-step reduces each unit once */
    for (size_t u = NUNITS; u-- > 0;)
        RCHECK_OK(accel_shard_reduce(s, u, true, &err));
    accel_shard_traffic(s, &calls1, &bytes1);
    RCHECK(calls1 == calls0 + NUNITS);
    RCHECK_OK(accel_shard_step(s, NULL, &err));
    accel_shard_free(s);
    return 0;
}

TEST(accumulation_is_silent_until_the_last_micro_step)
{
    static const enum accel_shard_strategy strat[] = {ACCEL_FULL_SHARD, ACCEL_SHARD_GRAD_OP,
                                                      ACCEL_NO_SHARD};

    shared_map();
    for (size_t i = 0; i < 3; i++)
        run_world(3, accum_rank, &strat[i]);
    /* and in a real run (SHARD_GRAD_OP keeps the gathered copies between
     * micro-steps): the non-final micro-steps of step t >= 1 issued nothing */
    {
        struct cfg cf = {ACCEL_F32, ACCEL_SHARD_GRAD_OP, ACCEL_SGD, 3, 4, LR, 0, 0, 0, 0, 0};
        train(2, cf);
        for (unsigned r = 0; r < 2; r++)
            for (unsigned t = 0; t < 4; t++)
                ASSERT_INT_EQ(sh->calls[r][t], 0);
    }
}

/* (d) clipping by the global norm, against a serial computation. */
static void serial_gradient(const float *w, size_t first, size_t n, double *g)
{
    memset(g, 0, NW * sizeof(double));
    for (size_t i = first; i < first + n; i++)
        for (unsigned o = 0; o < O1 + O2; o++) {
            double acc = w[widx(o, IN)], r;
            for (unsigned j = 0; j < IN; j++)
                acc += (double)w[widx(o, j)] * xin(i, j);
            r = acc - target(i, o);
            for (unsigned j = 0; j <= IN; j++)
                g[widx(o, j)] += r * (j < IN ? xin(i, j) : 1.0) / (double)n;
        }
}

TEST(clipping_uses_the_global_norm)
{
    double g[NW], norm = 0;
    float w0[NW];

    shared_map();
    init_weights(w0);
    serial_gradient(w0, 0, BATCH, g);
    for (size_t k = 0; k < NW; k++)
        norm += g[k] * g[k];
    norm = sqrt(norm);
    for (unsigned world = 1; world <= 4; world++) {
        /* max 0.1 clips (the norm is larger), 1e9 does not */
        for (int c = 0; c < 2; c++) {
            double maxn = c == 0 ? 0.1 : 1e9, coef = c == 0 ? 0.1 / (norm + 1e-6) : 1.0;
            struct cfg cf = {ACCEL_F32, world == 2 ? ACCEL_NO_SHARD : ACCEL_FULL_SHARD,
                             ACCEL_SGD, 1,
                             1,         LR,
                             maxn,      0,
                             0,         c,
                             0};
            ASSERT(norm > 0.2);
            train(world, cf);
            for (unsigned r = 0; r < world; r++)
                if (fabs(sh->norm[c][r][0] - norm) > 1e-5 * norm)
                    test_fail(__FILE__, __LINE__, "world %u rank %u: norm %.9g, serial %.9g", world,
                              r, sh->norm[c][r][0], norm);
            for (size_t k = 0; k < NW; k++) {
                double want = (double)w0[k] - LR * coef * g[k];
                if (fabs(sh->w[c][k] - want) > 1e-6)
                    test_fail(__FILE__, __LINE__, "world %u clip %g: w[%zu] = %.9g, serial %.9g",
                              world, maxn, k, (double)sh->w[c][k], want);
            }
        }
    }
}

/* (e) fp16: an inf skips the step and halves the scale on every rank; after
 * scale_window (3) good steps it doubles; a gradient that only overflows
 * once scaled (100 x 1024 > 65504) skips too. */
TEST(fp16_loss_scaling)
{
    struct cfg inf = {ACCEL_F16, ACCEL_FULL_SHARD, ACCEL_SGD, 1, 1, LR, 0, 0, 0, 0, 1};
    struct cfg none = {ACCEL_F16, ACCEL_FULL_SHARD, ACCEL_SGD, 1, 1, LR, 0, 0, 0, 1, 0};
    struct cfg both = {ACCEL_F16, ACCEL_FULL_SHARD, ACCEL_SGD, 1, 9, LR, 0, 0, 0, 2, 2};
    float w0[NW];

    shared_map();
    init_weights(w0);
    /* one step, skipped: the weights are the initial ones on every rank */
    train(2, inf);
    for (unsigned r = 0; r < 2; r++) {
        ASSERT(sh->skipped[r][0]);
        ASSERT(sh->scale[r][0] == 512);
        ASSERT(isinf(sh->norm[0][r][0]) || isnan(sh->norm[0][r][0]));
    }
    ASSERT(same_bits(sh->w[0], w0, NW));
    train(2, none);
    ASSERT(!same_bits(sh->w[1], w0, NW));
    /* nine steps, window 3: good, good, good (x2), overflow at step 4 (/2),
     * then good x3 (x2 at the third) */
    train(2, both);
    for (unsigned r = 0; r < 2; r++)
        for (unsigned t = 0; t < 9; t++) {
            double w = t < 2 ? 1024 : t < 4 ? 2048 : t < 7 ? 1024 : 2048;
            if (sh->scale[r][t] != w || sh->skipped[r][t] != (t == 4))
                test_fail(__FILE__, __LINE__,
                          "rank %u step %u: scale %g skipped %d, expected "
                          "%g and %d",
                          r, t, sh->scale[r][t], sh->skipped[r][t], w, t == 4);
        }
}

/* (f) the compute copy is the rounding of the master weights. */
static int compute_copy_rank(struct accel_comm *c, unsigned rank, const void *arg)
{
    const enum accel_dtype *t = arg;
    struct accel_shard_opts o;
    struct accel_shard *s;
    struct accel_error err;
    float full[64];

    accel_shard_opts_default(&o);
    o.compute = *t;
    o.optimizer = ACCEL_SGD;
    for (size_t i = 0; i < 64; i++) /* wide range: fp16 subnormals, ties, overflow to inf */
        full[i] = ldexpf(rnd(77, (uint32_t)i), (int)(i % 40) - 26);
    full[5] = 70000.0f;
    full[6] = 65520.0f;
    RCHECK_OK(accel_shard_init(&s, c, units, NUNITS, &o, &err));
    for (size_t u = 0; u < NUNITS; u++)
        RCHECK_OK(accel_shard_set_full(s, u, full + ubase[u], &err));
    for (int round = 0; round < 2; round++) {
        for (size_t u = 0; u < NUNITS; u++) {
            const float *p;
            size_t b, e;
            const float *m = accel_shard_master(s, u, &b, &e);
            RCHECK(accel_shard_params(s, u) == NULL);
            RCHECK_OK(accel_shard_gather(s, u, &err));
            p = accel_shard_params(s, u);
            RCHECK(p != NULL);
            for (size_t i = 0; i < unumel[u]; i++) {
                float want = round == 0 ? full[ubase[u] + i] : 0;
                uint32_t a, x;
                if (round == 1 && (i < b || i >= e))
                    continue; /* after a step only our slice is known here */
                if (round == 1)
                    want = m[i - b];
                want = *t == ACCEL_BF16 ? comm__bf16_to_f32(comm__f32_to_bf16(want))
                                        : comm__f16_to_f32(comm__f32_to_f16(want));
                memcpy(&a, &p[i], 4);
                memcpy(&x, &want, 4);
                if (a != x)
                    return test_rank_fail(rank, __FILE__, __LINE__,
                                          "unit %zu [%zu]: %a, expected %a", u, i, (double)p[i],
                                          (double)want);
            }
            accel_shard_release(s, u);
            RCHECK(accel_shard_params(s, u) == NULL); /* FULL_SHARD frees */
        }
        /* a step with a small gradient moves the master; the copy follows */
        for (size_t u = 0; u < NUNITS; u++) {
            float *g = accel_shard_grads(s, u);
            RCHECK(g != NULL);
            for (size_t i = 0; i < unumel[u]; i++)
                g[i] = 1e-3f * (float)(i + 1);
            RCHECK_OK(accel_shard_reduce(s, u, true, &err));
        }
        RCHECK_OK(accel_shard_step(s, NULL, &err));
    }
    accel_shard_free(s);
    return 0;
}

TEST(compute_copy_is_the_rounded_master)
{
    static const enum accel_dtype types[] = {ACCEL_BF16, ACCEL_F16};

    shared_map();
    for (size_t t = 0; t < 2; t++)
        for (unsigned world = 1; world <= 3; world += 2)
            run_world(world, compute_copy_rank, &types[t]);
}

/* (g) AdamW and SGD with momentum, five steps on one rank, against the
 * formulas of torch.optim written out here. */
static int optim_rank(struct accel_comm *c, unsigned rank, const void *arg)
{
    const enum accel_optimizer *which = arg;
    struct accel_shard_opts o;
    struct accel_shard *s;
    struct accel_error err;
    float w[NW], m[NW] = {0}, v[NW] = {0};

    accel_shard_opts_default(&o);
    o.optimizer = *which;
    o.lr = 0.01;
    o.weight_decay = 0.1;
    o.momentum = 0.9;
    o.beta1 = 0.8;
    o.beta2 = 0.95;
    o.eps = 1e-6;
    init_weights(w);
    RCHECK_OK(accel_shard_init(&s, c, units, NUNITS, &o, &err));
    for (size_t u = 0; u < NUNITS; u++)
        RCHECK_OK(accel_shard_set_full(s, u, w + ubase[u], &err));
    for (unsigned t = 1; t <= 5; t++) {
        float grad[NW];
        for (size_t k = 0; k < NW; k++)
            grad[k] = rnd(t, (uint32_t)k) * (k % 3 == 0 ? 1e-4f : 1.0f);
        for (size_t u = 0; u < NUNITS; u++) {
            float *g = accel_shard_grads(s, u);
            RCHECK(g != NULL);
            memcpy(g, grad + ubase[u], unumel[u] * sizeof(float));
            RCHECK_OK(accel_shard_reduce(s, u, true, &err));
        }
        RCHECK_OK(accel_shard_step(s, NULL, &err));
        for (size_t k = 0; k < NW; k++) {
            if (*which == ACCEL_ADAMW) {
                double bc1 = 1 - pow(0.8, t), bc2 = 1 - pow(0.95, t);
                float step = (float)(0.01 / bc1), bc2s = (float)sqrt(bc2);
                m[k] = 0.8f * m[k] + (float)(1 - 0.8) * grad[k];
                v[k] = 0.95f * v[k] + (float)(1 - 0.95) * (grad[k] * grad[k]);
                w[k] = w[k] * (float)(1 - 0.01 * 0.1);
                w[k] = w[k] - step * (m[k] / (sqrtf(v[k]) / bc2s + 1e-6f));
            } else {
                float d = grad[k] + 0.1f * w[k];
                m[k] = t == 1 ? d : 0.9f * m[k] + d;
                w[k] = w[k] - 0.01f * m[k];
            }
        }
    }
    for (size_t u = 0; u < NUNITS; u++) {
        size_t b, e;
        const float *p = accel_shard_master(s, u, &b, &e);
        const float *st = accel_shard_optim_state(s, u, 0);
        RCHECK(b == 0 && e == unumel[u] && st != NULL);
        RCHECK(memcmp(p, w + ubase[u], unumel[u] * sizeof(float)) == 0);
        RCHECK(memcmp(st, m + ubase[u], unumel[u] * sizeof(float)) == 0);
        RCHECK((accel_shard_optim_state(s, u, 1) != NULL) == (*which == ACCEL_ADAMW));
    }
    accel_shard_free(s);
    return 0;
}

TEST(optimizers_match_serial_reference_exactly)
{
    static const enum accel_optimizer which[] = {ACCEL_ADAMW, ACCEL_SGD};

    shared_map();
    run_world(1, optim_rank, &which[0]);
    run_world(1, optim_rank, &which[1]);
}

TEST(resume_from_slices_is_bit_identical)
{
    struct cfg cfs[] = {
        {ACCEL_F32, ACCEL_FULL_SHARD, ACCEL_ADAMW, 1, 5, 1e-2, 0.5, 0, 0.01, 0, 0},
        {ACCEL_F16, ACCEL_NO_SHARD, ACCEL_SGD, 1, 5, LR, 0, 0.9, 0.01, 0, 0},
    };

    shared_map();
    for (size_t i = 0; i < 2; i++) {
        double scale[MAXW][STEPS];
        cfs[i].slot = 0;
        run_world(3, train_rank, &cfs[i]);
        memcpy(scale, sh->scale, sizeof(scale));
        cfs[i].slot = 1;
        run_world(3, resume_rank, &cfs[i]);
        if (!same_bits(sh->w[0], sh->w[1], NW))
            test_fail(__FILE__, __LINE__, "case %zu: resumed weights differ by %g", i,
                      max_diff(sh->w[0], sh->w[1], NW));
        /* fp16: the scale doubled after step 3 (window 3) and was carried */
        ASSERT(memcmp(scale, sh->scale, sizeof(scale)) == 0);
        ASSERT(sh->scale[0][4] == (i == 1 ? 2048 : 1));
    }
}

/* (h) the memory formula: 16 bytes an element of state over N ranks. */
struct bytes_arg {
    enum accel_shard_strategy strategy;
    enum accel_optimizer optim;
    double momentum;
};

static int bytes_rank(struct accel_comm *c, unsigned rank, const void *arg)
{
    static const struct accel_shard_param big[] = {{"w", 2, {1000, 37}}};
    static const struct accel_shard_param mid[] = {{"w", 2, {999, 11}}, {"b", 1, {3}}};
    static const struct accel_shard_unit us[] = {{"a", big, 1}, {"b", mid, 2}, {"c", big, 1}};
    const struct bytes_arg *a = arg;
    struct accel_shard_opts o;
    struct accel_shard *s;
    struct accel_error err;
    size_t peak;

    accel_shard_opts_default(&o);
    o.strategy = a->strategy;
    o.optimizer = a->optim;
    o.momentum = a->momentum;
    RCHECK_OK(accel_shard_init(&s, c, us, 3, &o, &err));
    sh->bytes[rank][0] = accel_shard_bytes(s, &peak);
    sh->bytes[rank][5] = accel_shard_unit_padded(s, 0);
    sh->bytes[rank][1] = accel_shard_unit_padded(s, 0) + accel_shard_unit_padded(s, 1) +
                         accel_shard_unit_padded(s, 2);
    RCHECK(peak == sh->bytes[rank][0]);
    /* a gathered unit and its gradient are 8 bytes an element more, while held */
    RCHECK_OK(accel_shard_gather(s, 0, &err));
    RCHECK(accel_shard_grads(s, 0) != NULL);
    sh->bytes[rank][2] = accel_shard_bytes(s, NULL);
    RCHECK_OK(accel_shard_reduce(s, 0, true, &err));
    accel_shard_release(s, 0);
    for (size_t u = 1; u < 3; u++)
        RCHECK_OK(accel_shard_reduce(s, u, true, &err));
    RCHECK_OK(accel_shard_step(s, NULL, &err));
    sh->bytes[rank][3] = accel_shard_bytes(s, &peak);
    sh->bytes[rank][4] = peak;
    accel_shard_free(s);
    return 0;
}

TEST(bytes_follow_the_formula)
{
    const size_t psi = 37000 + 10989 + 3 + 37000;
    const struct {
        struct bytes_arg a;
        unsigned per; /* bytes an element of a slice */
    } cases[] = {
        {{ACCEL_FULL_SHARD, ACCEL_ADAMW, 0}, 16},
        {{ACCEL_FULL_SHARD, ACCEL_SGD, 0.9}, 12},
        {{ACCEL_FULL_SHARD, ACCEL_SGD, 0}, 8},
        {{ACCEL_NO_SHARD, ACCEL_ADAMW, 0}, 16},
    };

    shared_map();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        for (unsigned world = 1; world <= 4; world++) {
            bool full = cases[i].a.strategy == ACCEL_NO_SHARD;
            size_t div = full ? 1 : world;
            run_world(world, bytes_rank, &cases[i].a);
            for (unsigned r = 0; r < world; r++) {
                size_t padded = sh->bytes[r][1], state = sh->bytes[r][0];
                ASSERT_INT_EQ(state, cases[i].per * padded / div);
                /* padding costs at most world x ALIGN elements a unit */
                ASSERT(state >= cases[i].per * psi / div);
                ASSERT(state <= cases[i].per * (psi + 3 * world * ACCEL_SHARD_ALIGN) / div);
                /* a gathered fp32 copy (NO_SHARD fp32: the master itself)
                 * and a full fp32 gradient of unit 0 */
                ASSERT_INT_EQ(sh->bytes[r][2] - state, (full ? 4 : 8) * sh->bytes[r][5]);
                ASSERT_INT_EQ(sh->bytes[r][3], state);
                ASSERT(sh->bytes[r][4] >= sh->bytes[r][2]);
            }
            if (i == 0 && world == 4)
                test_note("FULL_SHARD AdamW, 4 ranks, psi = %zu: %zu bytes a rank "
                          "(16 psi / N = %zu)",
                          psi, sh->bytes[0][0], 16 * psi / 4);
        }
}

/* Allocation failures in init: every one is ACCEL_ENOMEM and leaks nothing. */
static int alloc_rank(struct accel_comm *c, unsigned rank, const void *arg)
{
    struct accel_shard_opts o;
    struct accel_shard *s = NULL;
    struct accel_error err;
    unsigned long n;
    long live;

    (void)arg;
    accel_shard_opts_default(&o);
    o.compute = ACCEL_BF16;
    live = test_alloc_live();
    for (n = 1; n < 1000; n++) {
        enum accel_err rc;
        test_alloc_fail_at(n); /* counts from here */
        rc = accel_shard_init(&s, c, units, NUNITS, &o, &err);
        test_alloc_fail_at(0);
        if (rc == ACCEL_OK)
            break;
        if (rc != ACCEL_ENOMEM)
            return test_rank_fail(rank, __FILE__, __LINE__, "failing allocation %lu: %s: %s", n,
                                  accel_errname(rc), err.msg);
        RCHECK(s == NULL);
        RCHECK(test_alloc_live() == live);
    }
    RCHECK(n > 10 && s != NULL);
    accel_shard_free(s);
    RCHECK(test_alloc_live() == live);
    sh->numbers[0][0] = n;
    return 0;
}

TEST(init_survives_every_allocation_failure)
{
    shared_map();
    test_alloc_install();
    run_world(1, alloc_rank, NULL);
    test_note("init made %zu allocations", sh->numbers[0][0] - 1);
}

TEST_LIST(T(layout_padding_and_slices), T(init_refuses_bad_units_and_options),
          T(init_refuses_ranks_that_disagree), T(opts_from_env_accepts_accelerates_values),
          T(opts_from_env_refuses_with_messages), T(strategies_bit_identical_world1),
          T(strategies_bit_identical_world2), T(strategies_bit_identical_world3),
          T(strategies_bit_identical_world4), T(world_sizes_agree_fp32), T(world_sizes_agree_bf16),
          T(accumulation_is_silent_until_the_last_micro_step), T(clipping_uses_the_global_norm),
          T(fp16_loss_scaling), T(compute_copy_is_the_rounded_master),
          T(optimizers_match_serial_reference_exactly), T(resume_from_slices_is_bit_identical),
          T(bytes_follow_the_formula), T(init_survives_every_allocation_failure))
