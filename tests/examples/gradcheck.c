/*
 * gradcheck.c: every backward kernel of examples/gpt and the whole model
 * against central finite differences, single process, no library but libm.
 *
 *   cc -std=gnu11 -O2 -Icore/include -Ickpt/include -Iexamples/gpt tests/examples/gradcheck.c \
 *      examples/gpt/kernels.c examples/gpt/model.c examples/gpt/rng.c -lm
 *
 * Each check takes a scalar f = sum_i r_i * out_i (r fixed random weights,
 * accumulated in double), perturbs inputs by +-h and compares (f+ - f-)/2h
 * with the analytic gradient.  The outputs are fp32 (u = 6e-8) and |f| is
 * about 10, so with h = 1e-2 the quotient carries ~u*|f|/h ~ 1e-4 of
 * rounding, plus h^2 |f'''|/6 of truncation; the tolerance is
 * |a - n| <= 5e-3 * max(|a|, |n|) + 5e-4 (absolute slack for entries whose
 * gradient is near zero).  The worst entry uses about a quarter of it, and a
 * gradient off by 1% fails (checked by hand on a mutated layernorm).  Prints
 * TAP-like "ok - " lines and exits non-zero on any failure.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "model.h"
#include "rng.h"

static int failures, passes;
static struct gpt_rng rng;

static float *randn(size_t n, double s)
{
    float *x = malloc(n * sizeof *x);
    if (!x) {
        fprintf(stderr, "gradcheck: out of memory\n");
        exit(2);
    }
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(s * gpt_rng_normal(&rng));
    return x;
}

static float *zeros(size_t n)
{
    float *x = calloc(n ? n : 1, sizeof *x);
    if (!x) {
        fprintf(stderr, "gradcheck: out of memory\n");
        exit(2);
    }
    return x;
}

static double weighted(const float *out, const float *r, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)out[i] * r[i];
    return s;
}

/* The forward under test: recomputes the scalar from the current inputs. */
typedef double (*scalar_fn)(void *ctx);

/* Compares the analytic gradient ga (n) of input x with finite differences at
 * up to `samples` indices spread over x. */
static void check(const char *name, scalar_fn f, void *ctx, float *x, const float *ga, size_t n,
                  size_t samples)
{
    const float h = 1e-2f;
    double worst = 0;
    size_t bad = 0, step = n > samples ? n / samples : 1;

    for (size_t i = 0; i < n; i += step) {
        float keep = x[i];
        x[i] = keep + h;
        double fp = f(ctx);
        x[i] = keep - h;
        double fm = f(ctx);
        x[i] = keep;
        double num = (fp - fm) / (2.0 * (double)h), a = ga[i];
        double err = fabs(a - num), tol = 5e-3 * fmax(fabs(a), fabs(num)) + 5e-4;
        if (err / tol > worst)
            worst = err / tol;
        if (err > tol) {
            if (bad++ < 3)
                printf("#   %s[%zu]: analytic %.6g, numeric %.6g\n", name, i, a, num);
        }
    }
    if (bad) {
        failures++;
        printf("not ok - %s: %zu entries off (worst error/tolerance %.2f)\n", name, bad, worst);
    } else {
        passes++;
        printf("ok - %s (worst error/tolerance %.2f)\n", name, worst);
    }
}

/* ---------------------------------------------------------------- kernels */

enum { B = 2, T = 5, C = 8, NH = 2, OC = 12, V = GPT_VOCAB };
enum { N = B * T };

struct kctx {
    float *inp, *w, *b, *out, *mean, *rstd, *r, *scratch;
    unsigned char tok[N];
};

static double f_layernorm(void *p)
{
    struct kctx *k = p;
    gpt_layernorm_forward(k->out, k->mean, k->rstd, k->inp, k->w, k->b, N, C);
    return weighted(k->out, k->r, N * C);
}

static void test_layernorm(void)
{
    struct kctx k = {.inp = randn(N * C, 1.0),
                     .w = randn(C, 1.0),
                     .b = randn(C, 1.0),
                     .out = zeros(N * C),
                     .mean = zeros(N),
                     .rstd = zeros(N),
                     .r = randn(N * C, 1.0)};
    float *dinp = zeros(N * C), *dw = zeros(C), *db = zeros(C);

    f_layernorm(&k);
    gpt_layernorm_backward(dinp, dw, db, k.r, k.inp, k.w, k.mean, k.rstd, N, C);
    check("layernorm dinp", f_layernorm, &k, k.inp, dinp, N * C, 80);
    check("layernorm dw", f_layernorm, &k, k.w, dw, C, C);
    check("layernorm db", f_layernorm, &k, k.b, db, C, C);
    free(k.inp), free(k.w), free(k.b), free(k.out), free(k.mean), free(k.rstd), free(k.r);
    free(dinp), free(dw), free(db);
}

static double f_matmul(void *p)
{
    struct kctx *k = p;
    gpt_matmul_forward(k->out, k->inp, k->w, k->b, N, C, OC);
    return weighted(k->out, k->r, N * OC);
}

static void test_matmul(void)
{
    /* C = 8 fills dot()'s eight lanes exactly; the model test below uses
     * C = 12 and head size 4, which exercise the tails. */
    struct kctx k = {.inp = randn(N * C, 1.0),
                     .w = randn(OC * C, 1.0),
                     .b = randn(OC, 1.0),
                     .out = zeros(N * OC),
                     .r = randn(N * OC, 1.0)};
    float *dinp = zeros(N * C), *dw = zeros(OC * C), *db = zeros(OC);

    f_matmul(&k);
    gpt_matmul_backward(dinp, dw, db, k.r, k.inp, k.w, N, C, OC);
    check("matmul dinp", f_matmul, &k, k.inp, dinp, N * C, 80);
    check("matmul dw", f_matmul, &k, k.w, dw, OC * C, 96);
    check("matmul db", f_matmul, &k, k.b, db, OC, OC);
    free(k.inp), free(k.w), free(k.b), free(k.out), free(k.r);
    free(dinp), free(dw), free(db);
}

static double f_attention(void *p)
{
    struct kctx *k = p;
    gpt_attention_forward(k->out, k->mean /* att */, k->inp, B, T, C, NH);
    return weighted(k->out, k->r, N * C);
}

static void test_attention(void)
{
    struct kctx k = {.inp = randn(N * 3 * C, 1.0),
                     .out = zeros(N * C),
                     .mean = zeros(B * NH * T * T),
                     .r = randn(N * C, 1.0),
                     .scratch = zeros(T)};
    float *dqkv = zeros(N * 3 * C);

    f_attention(&k);
    gpt_attention_backward(dqkv, k.r, k.inp, k.mean, k.scratch, B, T, C, NH);
    check("attention dqkv", f_attention, &k, k.inp, dqkv, N * 3 * C, 240);
    free(k.inp), free(k.out), free(k.mean), free(k.r), free(k.scratch), free(dqkv);
}

static double f_gelu(void *p)
{
    struct kctx *k = p;
    gpt_gelu_forward(k->out, k->inp, N * C);
    return weighted(k->out, k->r, N * C);
}

static void test_gelu(void)
{
    struct kctx k = {.inp = randn(N * C, 2.0), .out = zeros(N * C), .r = randn(N * C, 1.0)};
    float *dinp = zeros(N * C);

    f_gelu(&k);
    memcpy(dinp, k.r, N * C * sizeof *dinp);
    gpt_gelu_backward(dinp, k.inp, dinp, N * C); /* in place, as the model calls it */
    check("gelu dinp", f_gelu, &k, k.inp, dinp, N * C, 80);
    free(k.inp), free(k.out), free(k.r), free(dinp);
}

static double f_crossentropy(void *p)
{
    struct kctx *k = p;
    double s = gpt_crossentropy_forward(k->out, k->mean, k->inp, k->tok, N, V);
    return s * 0.1; /* dloss = 0.1 */
}

static void test_crossentropy(void)
{
    struct kctx k = {.inp = randn(N * V, 2.0), .out = zeros(N * V), .mean = zeros(N)};
    float *d = zeros(N * V);

    for (size_t i = 0; i < N; i++)
        k.tok[i] = (unsigned char)(gpt_rng_next(&rng) & 0xff);
    f_crossentropy(&k);
    memcpy(d, k.out, N * V * sizeof *d);
    gpt_crossentropy_backward(d, k.tok, 0.1f, N, V);
    check("crossentropy dlogits", f_crossentropy, &k, k.inp, d, N * V, 400);
    free(k.inp), free(k.out), free(k.mean), free(d);
}

static double f_encoder(void *p)
{
    struct kctx *k = p;
    gpt_encoder_forward(k->out, k->tok, k->w, k->b, B, T, C);
    return weighted(k->out, k->r, N * C);
}

static void test_encoder(void)
{
    struct kctx k = {.w = randn(V * C, 1.0),
                     .b = randn(T * C, 1.0),
                     .out = zeros(N * C),
                     .r = randn(N * C, 1.0)};
    float *dwte = zeros(V * C), *dwpe = zeros(T * C);

    for (size_t i = 0; i < N; i++)
        k.tok[i] = (unsigned char)(i % 3 ? 7 : 200); /* repeats: accumulation */
    f_encoder(&k);
    gpt_encoder_backward(dwte, dwpe, k.r, k.tok, B, T, C);
    check("encoder dwte (rows used)", f_encoder, &k, k.w + 7 * C, dwte + 7 * C, C, C);
    check("encoder dwte (row 200)", f_encoder, &k, k.w + 200 * C, dwte + 200 * C, C, C);
    check("encoder dwpe", f_encoder, &k, k.b, dwpe, T * C, T * C);
    free(k.w), free(k.b), free(k.out), free(k.r), free(dwte), free(dwpe);
}

/* ---------------------------------------------------------------- model */

struct mctx {
    struct gpt_model m;
    float *params[GPT_MAX_LAYERS + 2];
};

static double f_model(void *p)
{
    struct mctx *x = p;
    for (size_t u = 0; u < x->m.nunits; u++)
        gpt_forward(&x->m, u, x->params[u]);
    return x->m.loss_sum / (double)(x->m.B * x->m.cfg.T);
}

static void test_model(void)
{
    struct gpt_config cfg = {.T = 6, .C = 12, .L = 2, .NH = 3};
    struct mctx x;
    float *grads[GPT_MAX_LAYERS + 2];
    char why[256];

    if (gpt_init(&x.m, &cfg, 2, false, why, sizeof why) != 0) {
        printf("not ok - model init: %s\n", why);
        failures++;
        return;
    }
    for (size_t u = 0; u < x.m.nunits; u++) {
        x.params[u] = zeros(x.m.numel[u]);
        grads[u] = zeros(x.m.numel[u]);
        gpt_init_params(&x.m, u, x.params[u], 1234);
        /* larger than the 0.02 init so every path carries a visible gradient */
        for (size_t i = 0; i < x.m.numel[u]; i++)
            x.params[u][i] += (float)(0.3 * gpt_rng_normal(&rng));
    }
    for (size_t i = 0; i < 2 * cfg.T; i++) {
        x.m.tok[i] = (unsigned char)(gpt_rng_next(&rng) % 20);
        x.m.tgt[i] = (unsigned char)(gpt_rng_next(&rng) % 20);
    }
    f_model(&x);
    for (size_t u = x.m.nunits; u-- > 0;)
        gpt_backward(&x.m, u, x.params[u], grads[u], 1.0f / (float)(2 * cfg.T));
    for (size_t u = 0; u < x.m.nunits; u++) {
        char name[64];
        size_t n = x.m.numel[u];
        if (u == 0) { /* the wte rows of tokens 0..19, and wpe */
            check("model wte", f_model, &x, x.params[0], grads[0], 20 * cfg.C, 120);
            check("model wpe", f_model, &x, x.params[0] + GPT_VOCAB * cfg.C,
                  grads[0] + GPT_VOCAB * cfg.C, cfg.T * cfg.C, 72);
            continue;
        }
        snprintf(name, sizeof name, "model unit %zu (%s, %zu params)", u, x.m.units[u].name, n);
        check(name, f_model, &x, x.params[u], grads[u], n, 300);
    }
    for (size_t u = 0; u < x.m.nunits; u++)
        free(x.params[u]), free(grads[u]);
    gpt_free(&x.m);
}

int main(void)
{
    gpt_rng_init(&rng, 42);
    test_encoder();
    test_layernorm();
    test_matmul();
    test_attention();
    test_gelu();
    test_crossentropy();
    test_model();
    printf("gradcheck: %d passed, %d failed\n", passes, failures);
    return failures ? 1 : 0;
}
