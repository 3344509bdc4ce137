/*
 * emu_test.c (tests/examples/cuda_emu): examples/gpt's CUDA backend, its
 * .cu files run on the CPU by the stand-ins of this folder, against the CPU
 * backend (kernels.c), through model.c: for several shapes (head sizes
 * below and above a warp, sequences longer than two warps, sizes that are
 * not multiples of 32, T = 1, bf16 rounding), one forward and one backward
 * of every unit on the same parameters and bytes, comparing the loss, the
 * attention, a block's output, every unit's gradient (added to non-zero
 * values, as the shard's buffers may hold) and the gradient reaching the
 * embeddings; then the same on the CUDA backend under a second thread
 * schedule, which must give the same bits (no order-dependent sums, no
 * races the emulator can see); and a failed cudaMalloc.
 *
 * Tolerances: the two backends sum in different orders (warp trees,
 * cuBLAS-like GEMMs), so values differ by a few units in the last place
 * (u = 6e-8): 1e-5 of the largest element (normwise) for gradients and
 * activations, 1e-6 relative for the loss sum (a mean of many terms); with
 * bf16 rounding 1e-3 and 1e-4 (a value next to a rounding boundary moves by
 * 2^-9 = 2e-3).  A wrong index or a transposed GEMM is off by O(1).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "model.h"
#include "rng.h"

void emu_seed(unsigned long long s);
unsigned long emu_stats(unsigned long *yields);
void emu_fail_alloc_after(size_t n);

static int passed, failed;
static struct gpt_rng rng;

static void check(int ok, const char *what)
{
    printf("%s - %s\n", ok ? "ok" : "not ok", what);
    if (ok)
        passed++;
    else
        failed++;
}

/* max |a - b| / max |a| (NaN: infinity) */
static double normwise(const float *a, const float *b, size_t n)
{
    double mx = 0, md = 0;

    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        mx = fabs(a[i]) > mx ? fabs(a[i]) : mx;
        md = d > md || d != d ? (d != d ? INFINITY : d) : md;
    }
    return mx > 0 ? md / mx : md;
}

/* A model and its parameters and gradients, in its backend's memory. */
struct run {
    struct gpt_model m;
    float *p[GPT_MAX_LAYERS + 2], *g[GPT_MAX_LAYERS + 2];
};

static void *backend_copy(struct gpt_model *m, const void *src, size_t bytes)
{
    void *d = m->ops->alloc(m->ctx, bytes);
    if (!d) {
        printf("not ok - out of memory\n");
        exit(1);
    }
    m->ops->upload(m->ctx, d, src, bytes);
    return d;
}

static void to_host(const struct gpt_model *m, void *dst, const void *src, size_t bytes)
{
    char why[512];

    if (gpt_read(m, dst, src, bytes, why, sizeof why)) {
        printf("not ok - read: %s\n", why);
        exit(1);
    }
}

/* h (host) against c (cm's backend), n floats */
static void compare(const float *h, const struct gpt_model *cm, const float *c, size_t n,
                    double tol, const char *name, const char *quantity)
{
    float *x = malloc(n * sizeof *x);
    char what[256];

    to_host(cm, x, c, n * sizeof *x);
    double e = normwise(h, x, n);
    snprintf(what, sizeof what, "%s: %s, normwise %.2g <= %g", name, quantity, e, tol);
    check(e <= tol, what);
    free(x);
}

static void step(struct run *r, float dloss, const char *name)
{
    char why[512];

    gpt_loss_reset(&r->m);
    for (size_t u = 0; u < r->m.nunits; u++)
        gpt_forward(&r->m, u, r->p[u]);
    for (size_t u = r->m.nunits; u-- > 0;)
        gpt_backward(&r->m, u, r->p[u], r->g[u], dloss);
    if (gpt_check(&r->m, why, sizeof why)) {
        printf("not ok - %s: backend failed: %s\n", name, why);
        exit(1);
    }
}

static void shape(const char *name, struct gpt_config cfg, size_t B, bool bf16, struct gpt_cuda *g)
{
    struct run h, c, c2;
    struct run *rs[3] = {&h, &c, &c2};
    size_t N = B * cfg.T;
    double tol = bf16 ? 1e-3 : 1e-5, ltol = bf16 ? 1e-4 : 1e-6, sum, acc;
    float dloss = 1.0f / (float)N, mean_h, mean_c;
    char why[512], what[256];

    memset(&h, 0, sizeof h);
    memset(&c, 0, sizeof c);
    memset(&c2, 0, sizeof c2);
    if (gpt_init(&h.m, &cfg, B, bf16, why, sizeof why) ||
        gpt_init_on(&c.m, &cfg, B, bf16, gpt_cuda_ops(), g, why, sizeof why) ||
        gpt_init_on(&c2.m, &cfg, B, bf16, gpt_cuda_ops(), g, why, sizeof why)) {
        printf("not ok - %s: init: %s\n", name, why);
        exit(1);
    }
    for (size_t u = 0; u < h.m.nunits; u++) {
        size_t n = h.m.numel[u];
        h.p[u] = malloc(n * sizeof(float));
        h.g[u] = malloc(n * sizeof(float));
        if (!h.p[u] || !h.g[u])
            exit(1);
        gpt_init_params(&h.m, u, h.p[u], 99 + u);
        for (size_t i = 0; i < n; i++) {
            h.p[u][i] += (float)(0.2 * gpt_rng_normal(&rng)); /* away from the init's symmetry */
            h.g[u][i] = (float)(0.01 * gpt_rng_normal(&rng));
        }
        c.p[u] = c2.p[u] = backend_copy(&c.m, h.p[u], n * sizeof(float));
        c.g[u] = backend_copy(&c.m, h.g[u], n * sizeof(float));
        c2.g[u] = backend_copy(&c2.m, h.g[u], n * sizeof(float));
    }
    for (size_t i = 0; i < N; i++) {
        h.m.tok[i] = c.m.tok[i] = c2.m.tok[i] = (unsigned char)(gpt_rng_next(&rng) & 0xff);
        h.m.tgt[i] = c.m.tgt[i] = c2.m.tgt[i] = (unsigned char)(gpt_rng_next(&rng) & 0xff);
    }
    if (N > 1) /* a byte twice: the embedding gradient's sum over tokens */
        h.m.tok[N - 1] = c.m.tok[N - 1] = c2.m.tok[N - 1] = h.m.tok[0];

    for (int k = 0; k < 3; k++) {
        emu_seed(k == 2 ? 12345 : 777);
        step(rs[k], dloss, name);
    }

    to_host(&c.m, &sum, c.m.loss_cell, sizeof sum);
    to_host(&c.m, &acc, c.m.loss_acc, sizeof acc);
    snprintf(what, sizeof what, "%s: loss sum %.9g, CPU %.9g (relative %.2g <= %g)", name, sum,
             h.m.loss_sum, fabs(sum - h.m.loss_sum) / h.m.loss_sum, ltol);
    check(fabs(sum - h.m.loss_sum) <= ltol * h.m.loss_sum, what);
    snprintf(what, sizeof what, "%s: the loss accumulator holds the one forward's sum", name);
    check(acc == sum, what);
    to_host(&c.m, &mean_c, gpt_loss_mean(&c.m, (double)N), sizeof mean_c);
    to_host(&h.m, &mean_h, gpt_loss_mean(&h.m, (double)N), sizeof mean_h);
    snprintf(what, sizeof what, "%s: loss mean %.9g, CPU %.9g", name, mean_c, mean_h);
    check(fabs(mean_c - mean_h) <= ltol * mean_h, what);

    compare(h.m.blk[0].att, &c.m, c.m.blk[0].att, B * cfg.NH * cfg.T * cfg.T, tol, name,
            "block 0 attention probabilities");
    compare(h.m.blk[0].atty, &c.m, c.m.blk[0].atty, N * cfg.C, tol, name,
            "block 0 attention output");
    compare(h.m.blk[0].res3, &c.m, c.m.blk[0].res3, N * cfg.C, tol, name, "block 0 output");
    compare(h.m.dres, &c.m, c.m.dres, N * cfg.C, tol, name, "gradient of the embeddings");
    for (size_t u = 0; u < h.m.nunits; u++) {
        size_t n = h.m.numel[u];
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        char q[96];
        snprintf(q, sizeof q, "unit %zu (%s) gradient", u, h.m.units[u].name);
        compare(h.g[u], &c.m, c.g[u], n, tol, name, q);
        to_host(&c.m, a, c.g[u], n * sizeof *a);
        to_host(&c2.m, b, c2.g[u], n * sizeof *b);
        snprintf(what, sizeof what, "%s: %s bit-identical under another thread schedule", name, q);
        check(!memcmp(a, b, n * sizeof *a), what);
        free(a);
        free(b);
    }

    for (size_t u = 0; u < h.m.nunits; u++) {
        free(h.p[u]);
        free(h.g[u]);
        c.m.ops->free(c.m.ctx, c.p[u]);
        c.m.ops->free(c.m.ctx, c.g[u]);
        c2.m.ops->free(c2.m.ctx, c2.g[u]);
    }
    gpt_free(&h.m);
    gpt_free(&c.m);
    gpt_free(&c2.m);
}

int main(void)
{
    struct gpt_cuda *g;
    struct gpt_model m;
    struct gpt_config small = {.T = 8, .C = 8, .L = 1, .NH = 1};
    unsigned long yields, launches;
    char why[512];
    int dev, rc;

    gpt_rng_init(&rng, 4242);
    if (gpt_cuda_select(0, &dev, why, sizeof why) ||
        gpt_cuda_init(&g, (void *)&rng /* any stream */, why, sizeof why)) {
        printf("not ok - init: %s\n", why);
        return 1;
    }
    shape("T=64 C=64 NH=4 L=2 B=4 (the defaults)",
          (struct gpt_config){.T = 64, .C = 64, .L = 2, .NH = 4}, 4, false, g);
    shape("T=70 C=80 NH=2 L=2 B=3 (head size 40)",
          (struct gpt_config){.T = 70, .C = 80, .L = 2, .NH = 2}, 3, false, g);
    shape("T=33 C=48 NH=3 L=1 B=2 bf16", (struct gpt_config){.T = 33, .C = 48, .L = 1, .NH = 3}, 2,
          true, g);
    shape("T=1 C=8 NH=1 L=1 B=1", (struct gpt_config){.T = 1, .C = 8, .L = 1, .NH = 1}, 1, false,
          g);

    emu_fail_alloc_after(5);
    rc = gpt_init_on(&m, &small, 1, false, gpt_cuda_ops(), g, why, sizeof why);
    printf("# %s\n", why);
    check(rc == -1 && strstr(why, "cudaMalloc") != NULL,
          "a failed cudaMalloc fails gpt_init_on with a message naming it");
    launches = emu_stats(&yields);
    printf("# %lu launches, %lu thread switches\n", launches, yields);
    gpt_cuda_free(g);
    printf("# emu_test: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
