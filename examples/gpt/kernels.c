/*
 * kernels.c: CPU kernels of the example GPT, fp32, single-threaded, with
 * every reduction in an order fixed by the source (see kernels.h).  Speed
 * comes from loop order (inner loops over contiguous memory, written as
 * axpy where possible so the compiler can vectorise without reassociating)
 * and from eight independent partial sums in the dot products, combined in a
 * fixed tree.  The kernels do not allocate.  The end of the file is the CPU
 * backend of ops.h (gpt_cpu_ops): calloc'd host memory and an entry per
 * kernel that calls it unchanged.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "ops.h"

void gpt_encoder_forward(float *out, const unsigned char *tok, const float *wte, const float *wpe,
                         size_t B, size_t T, size_t C)
{
    for (size_t b = 0; b < B; b++) {
        for (size_t t = 0; t < T; t++) {
            float *o = out + (b * T + t) * C;
            const float *e = wte + (size_t)tok[b * T + t] * C, *p = wpe + t * C;
            for (size_t i = 0; i < C; i++)
                o[i] = e[i] + p[i];
        }
    }
}

void gpt_encoder_backward(float *dwte, float *dwpe, const float *dout, const unsigned char *tok,
                          size_t B, size_t T, size_t C)
{
    for (size_t b = 0; b < B; b++) {
        for (size_t t = 0; t < T; t++) {
            const float *d = dout + (b * T + t) * C;
            float *e = dwte + (size_t)tok[b * T + t] * C, *p = dwpe + t * C;
            for (size_t i = 0; i < C; i++) {
                e[i] += d[i];
                p[i] += d[i];
            }
        }
    }
}

void gpt_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                           const float *b, size_t N, size_t C)
{
    const float eps = 1e-5f;

    for (size_t n = 0; n < N; n++) {
        const float *x = inp + n * C;
        float *o = out + n * C;
        float m = 0.0f, v = 0.0f;
        for (size_t i = 0; i < C; i++)
            m += x[i];
        m /= (float)C;
        for (size_t i = 0; i < C; i++)
            v += (x[i] - m) * (x[i] - m);
        v /= (float)C;
        float s = 1.0f / sqrtf(v + eps);
        for (size_t i = 0; i < C; i++)
            o[i] = (x[i] - m) * s * w[i] + b[i];
        mean[n] = m;
        rstd[n] = s;
    }
}

void gpt_layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                            const float *w, const float *mean, const float *rstd, size_t N,
                            size_t C)
{
    for (size_t n = 0; n < N; n++) {
        const float *d = dout + n * C, *x = inp + n * C;
        float *dx = dinp + n * C;
        float m = mean[n], s = rstd[n];
        /* dnorm = d * w; dx = s * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)) */
        float dmean = 0.0f, dproj = 0.0f;
        for (size_t i = 0; i < C; i++) {
            float xhat = (x[i] - m) * s, dn = d[i] * w[i];
            dmean += dn;
            dproj += dn * xhat;
        }
        dmean /= (float)C;
        dproj /= (float)C;
        for (size_t i = 0; i < C; i++) {
            float xhat = (x[i] - m) * s, dn = d[i] * w[i];
            db[i] += d[i];
            dw[i] += d[i] * xhat;
            dx[i] += s * (dn - dmean - xhat * dproj);
        }
    }
}

/* Dot product of n floats: eight partial sums (i mod 8), then the rest in
 * order, combined as ((0+1)+(2+3))+((4+5)+(6+7)). */
static float dot(const float *a, const float *b, size_t n)
{
    float s[8] = {0};
    size_t i = 0;

    for (; i + 8 <= n; i += 8)
        for (size_t k = 0; k < 8; k++)
            s[k] += a[i + k] * b[i + k];
    for (size_t k = 0; i < n; i++, k++)
        s[k] += a[i] * b[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* y += a * x over n floats: element-wise, so no order question; blocks of
 * eight so the compiler vectorises at -O2 without a cost model. */
static void axpy(float *restrict y, float a, const float *restrict x, size_t n)
{
    size_t i = 0;

    for (; i + 8 <= n; i += 8)
        for (size_t k = 0; k < 8; k++)
            y[i + k] += a * x[i + k];
    for (; i < n; i++)
        y[i] += a * x[i];
}

void gpt_matmul_forward(float *out, const float *inp, const float *w, const float *b, size_t N,
                        size_t C, size_t OC)
{
    /* Blocks of 64 output channels so their weights stay in L1/L2 while every
     * row passes; each out element is one dot() plus the bias. */
    const size_t OB = 64;

    for (size_t o0 = 0; o0 < OC; o0 += OB) {
        size_t o1 = o0 + OB < OC ? o0 + OB : OC;
        for (size_t n = 0; n < N; n++) {
            const float *x = inp + n * C;
            float *y = out + n * OC;
            for (size_t o = o0; o < o1; o++)
                y[o] = dot(x, w + o * C, C) + (b ? b[o] : 0.0f);
        }
    }
}

void gpt_matmul_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                         const float *w, size_t N, size_t C, size_t OC)
{
    /* dinp[n, :] += dout[n, o] * w[o, :], o in order (axpy). */
    for (size_t n = 0; n < N; n++) {
        const float *d = dout + n * OC;
        float *dx = dinp + n * C;
        for (size_t o = 0; o < OC; o++)
            axpy(dx, d[o], w + o * C, C);
    }
    /* dw[o, :] += dout[n, o] * inp[n, :], n in order (axpy); db[o] likewise. */
    for (size_t o = 0; o < OC; o++) {
        float *dwr = dw + o * C;
        float bsum = 0.0f;
        for (size_t n = 0; n < N; n++) {
            float g = dout[n * OC + o];
            bsum += g;
            axpy(dwr, g, inp + n * C, C);
        }
        if (db)
            db[o] += bsum;
    }
}

void gpt_attention_forward(float *out, float *att, const float *qkv, size_t B, size_t T, size_t C,
                           size_t NH)
{
    size_t hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);

    for (size_t b = 0; b < B; b++) {
        for (size_t h = 0; h < NH; h++) {
            for (size_t t = 0; t < T; t++) {
                const float *q = qkv + (b * T + t) * C3 + h * hs;
                float *a = att + ((b * NH + h) * T + t) * T;
                float mx = -INFINITY, sum = 0.0f;
                for (size_t t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + (b * T + t2) * C3 + C + h * hs;
                    a[t2] = dot(q, k, hs) * scale;
                    if (a[t2] > mx)
                        mx = a[t2];
                }
                for (size_t t2 = 0; t2 <= t; t2++) {
                    a[t2] = expf(a[t2] - mx);
                    sum += a[t2];
                }
                float inv = 1.0f / sum;
                for (size_t t2 = 0; t2 <= t; t2++)
                    a[t2] *= inv;
                for (size_t t2 = t + 1; t2 < T; t2++)
                    a[t2] = 0.0f;
                float *o = out + (b * T + t) * C + h * hs;
                memset(o, 0, hs * sizeof *o);
                for (size_t t2 = 0; t2 <= t; t2++) {
                    const float *v = qkv + (b * T + t2) * C3 + 2 * C + h * hs;
                    axpy(o, a[t2], v, hs);
                }
            }
        }
    }
}

void gpt_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att,
                            float *scratch, size_t B, size_t T, size_t C, size_t NH)
{
    size_t hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);

    for (size_t b = 0; b < B; b++) {
        for (size_t h = 0; h < NH; h++) {
            for (size_t t = 0; t < T; t++) {
                const float *a = att + ((b * NH + h) * T + t) * T;
                const float *d = dout + (b * T + t) * C + h * hs;
                const float *q = qkv + (b * T + t) * C3 + h * hs;
                float *dq = dqkv + (b * T + t) * C3 + h * hs;
                float *da = scratch, s = 0.0f;
                /* out = sum a[t2] v[t2]: da[t2] = d . v[t2], dv[t2] += a[t2] d */
                for (size_t t2 = 0; t2 <= t; t2++) {
                    const float *v = qkv + (b * T + t2) * C3 + 2 * C + h * hs;
                    float *dv = dqkv + (b * T + t2) * C3 + 2 * C + h * hs;
                    da[t2] = dot(d, v, hs);
                    axpy(dv, a[t2], d, hs);
                    s += a[t2] * da[t2];
                }
                /* softmax: dpre[t2] = a[t2] (da[t2] - sum a da); pre = scale q.k */
                for (size_t t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + (b * T + t2) * C3 + C + h * hs;
                    float *dk = dqkv + (b * T + t2) * C3 + C + h * hs;
                    float g = a[t2] * (da[t2] - s) * scale;
                    axpy(dq, g, k, hs);
                    axpy(dk, g, q, hs);
                }
            }
        }
    }
}

/* sqrt(2/pi) */
#define GELU_K 0.7978845608028654f

void gpt_gelu_forward(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x)));
    }
}

void gpt_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_K * (x + 0.044715f * x * x * x);
        float th = tanhf(u);
        float du = GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        float g = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
        dinp[i] = g * dout[i];
    }
}

void gpt_residual_forward(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

double gpt_crossentropy_forward(float *probs, float *losses, const float *logits,
                                const unsigned char *targets, size_t N, size_t V)
{
    double total = 0.0;

    for (size_t n = 0; n < N; n++) {
        const float *l = logits + n * V;
        float *p = probs + n * V;
        float mx = -INFINITY, sum = 0.0f, lt = l[targets[n]]; /* read before in-place writes */
        for (size_t v = 0; v < V; v++)
            if (l[v] > mx)
                mx = l[v];
        for (size_t v = 0; v < V; v++) {
            p[v] = expf(l[v] - mx);
            sum += p[v];
        }
        float inv = 1.0f / sum;
        for (size_t v = 0; v < V; v++)
            p[v] *= inv;
        losses[n] = logf(sum) - (lt - mx); /* -log softmax, without log(0) */
        total += losses[n];
    }
    return total;
}

void gpt_crossentropy_backward(float *probs, const unsigned char *targets, float dloss, size_t N,
                               size_t V)
{
    for (size_t n = 0; n < N; n++) {
        float *p = probs + n * V;
        p[targets[n]] -= 1.0f;
        for (size_t v = 0; v < V; v++)
            p[v] *= dloss;
    }
}

void gpt_round_bf16(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        if ((u & 0x7f800000u) != 0x7f800000u) /* leave inf and nan alone */
            u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        memcpy(&x[i], &u, sizeof u);
    }
}

/* ---------------------------------------------------------------- gpt_cpu_ops */

static void *cpu_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    return calloc(bytes ? bytes : 1, 1);
}

static void cpu_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static void cpu_zero(void *ctx, void *p, size_t bytes)
{
    (void)ctx;
    memset(p, 0, bytes);
}

static void cpu_upload(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    if (dst != src)
        memcpy(dst, src, bytes);
}

static int cpu_download(void *ctx, void *dst, const void *src, size_t bytes, char *why,
                        size_t whylen)
{
    (void)ctx;
    (void)why;
    (void)whylen;
    if (dst != src)
        memcpy(dst, src, bytes);
    return 0;
}

static int cpu_status(void *ctx, char *why, size_t whylen)
{
    (void)ctx;
    (void)why;
    (void)whylen;
    return 0;
}

static size_t cpu_attention_scratch(size_t B, size_t T, size_t NH)
{
    (void)B;
    (void)NH;
    return T;
}

static void cpu_encoder_forward(void *ctx, float *out, const unsigned char *tok, const float *wte,
                                const float *wpe, size_t B, size_t T, size_t C)
{
    (void)ctx;
    gpt_encoder_forward(out, tok, wte, wpe, B, T, C);
}

static void cpu_encoder_backward(void *ctx, float *dwte, float *dwpe, const float *dout,
                                 const unsigned char *tok, size_t B, size_t T, size_t C)
{
    (void)ctx;
    gpt_encoder_backward(dwte, dwpe, dout, tok, B, T, C);
}

static void cpu_layernorm_forward(void *ctx, float *out, float *mean, float *rstd, const float *inp,
                                  const float *w, const float *b, size_t N, size_t C)
{
    (void)ctx;
    gpt_layernorm_forward(out, mean, rstd, inp, w, b, N, C);
}

static void cpu_layernorm_backward(void *ctx, float *dinp, float *dw, float *db, const float *dout,
                                   const float *inp, const float *w, const float *mean,
                                   const float *rstd, size_t N, size_t C)
{
    (void)ctx;
    gpt_layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
}

static void cpu_matmul_forward(void *ctx, float *out, const float *inp, const float *w,
                               const float *b, size_t N, size_t C, size_t OC)
{
    (void)ctx;
    gpt_matmul_forward(out, inp, w, b, N, C, OC);
}

static void cpu_matmul_backward(void *ctx, float *dinp, float *dw, float *db, const float *dout,
                                const float *inp, const float *w, size_t N, size_t C, size_t OC)
{
    (void)ctx;
    gpt_matmul_backward(dinp, dw, db, dout, inp, w, N, C, OC);
}

static void cpu_attention_forward(void *ctx, float *out, float *att, const float *qkv, size_t B,
                                  size_t T, size_t C, size_t NH)
{
    (void)ctx;
    gpt_attention_forward(out, att, qkv, B, T, C, NH);
}

static void cpu_attention_backward(void *ctx, float *dqkv, const float *dout, const float *qkv,
                                   const float *att, float *scratch, size_t B, size_t T, size_t C,
                                   size_t NH)
{
    (void)ctx;
    gpt_attention_backward(dqkv, dout, qkv, att, scratch, B, T, C, NH);
}

static void cpu_gelu_forward(void *ctx, float *out, const float *inp, size_t n)
{
    (void)ctx;
    gpt_gelu_forward(out, inp, n);
}

static void cpu_gelu_backward(void *ctx, float *dinp, const float *inp, const float *dout, size_t n)
{
    (void)ctx;
    gpt_gelu_backward(dinp, inp, dout, n);
}

static void cpu_residual_forward(void *ctx, float *out, const float *a, const float *b, size_t n)
{
    (void)ctx;
    gpt_residual_forward(out, a, b, n);
}

static void cpu_crossentropy_forward(void *ctx, float *probs, float *losses, const float *logits,
                                     const unsigned char *targets, size_t N, size_t V, double *sum,
                                     double *acc)
{
    (void)ctx;
    *sum = gpt_crossentropy_forward(probs, losses, logits, targets, N, V);
    *acc += *sum;
}

static void cpu_crossentropy_backward(void *ctx, float *probs, const unsigned char *targets,
                                      float dloss, size_t N, size_t V)
{
    (void)ctx;
    gpt_crossentropy_backward(probs, targets, dloss, N, V);
}

static void cpu_round_bf16(void *ctx, float *x, size_t n)
{
    (void)ctx;
    gpt_round_bf16(x, n);
}

static void cpu_loss_mean(void *ctx, float *out, const double *acc, double denom)
{
    (void)ctx;
    *out = (float)(*acc / denom);
}

const struct gpt_ops gpt_cpu_ops = {
    .name = "cpu",
    .host = true,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .zero = cpu_zero,
    .upload = cpu_upload,
    .download = cpu_download,
    .status = cpu_status,
    .attention_scratch = cpu_attention_scratch,
    .encoder_forward = cpu_encoder_forward,
    .encoder_backward = cpu_encoder_backward,
    .layernorm_forward = cpu_layernorm_forward,
    .layernorm_backward = cpu_layernorm_backward,
    .matmul_forward = cpu_matmul_forward,
    .matmul_backward = cpu_matmul_backward,
    .attention_forward = cpu_attention_forward,
    .attention_backward = cpu_attention_backward,
    .gelu_forward = cpu_gelu_forward,
    .gelu_backward = cpu_gelu_backward,
    .residual_forward = cpu_residual_forward,
    .crossentropy_forward = cpu_crossentropy_forward,
    .crossentropy_backward = cpu_crossentropy_backward,
    .round_bf16 = cpu_round_bf16,
    .loss_mean = cpu_loss_mean,
};
