/*
 * kernels_cuda.cu: the CUDA versions of kernels.h's pointwise and row
 * kernels (encoder, LayerNorm, GELU, residual, cross-entropy, bf16
 * rounding), the loss sums and the column sums, queued on the context's
 * stream.  The matmuls are in matmul_cuda.cu, attention in attention_cuda.cu.
 *
 * Same math as kernels.c, formula by formula; what differs is the order of
 * the sums inside a row (lanes of a warp, then a fixed butterfly) and the
 * fused multiply-adds nvcc emits, so values differ from the CPU's in the
 * last bits.  Determinism: no atomics anywhere; every sum has one fixed
 * order for given sizes, so two runs on one GPU give the same bits.  The
 * sums over rows (the encoder's gradients, LayerNorm's dw and db, a bias's
 * db) are per column: one thread (encoder: rows in the CPU's order, so those
 * match the CPU bit for bit for equal inputs) or 32 threads with a fixed
 * tree (column sums).
 *
 * Launches: rows map to warps (GC_WARPS rows a block of GC_THREADS) and
 * elements to threads, both with grid-stride loops over size_t indices;
 * every entry returns at once when the context has failed or there is
 * nothing to do (a grid of 0 blocks is a launch error).
 */
#include <cmath>
#include <cstdint>

#include "cuda_int.cuh"

/* sqrt(2/pi), as kernels.c */
#define GELU_K 0.7978845608028654f
#define ENC_THREADS 128u /* channels of one vocabulary row a block */
#define ENC_TILE 2048u   /* tokens staged in shared memory at a time */
#define SUM_THREADS 512u /* the loss sum's single block */

static struct gpt_cuda *ctx_of(void *ctx)
{
    return (struct gpt_cuda *)ctx;
}

/* ---------------------------------------------------------------- encoder */

static __global__ void encoder_forward_kernel(float *out, const unsigned char *tok,
                                              const float *wte, const float *wpe, size_t N,
                                              size_t T, size_t C)
{
    GC_FOR_EACH(i, N * C)
    {
        size_t n = i / C, c = i % C;
        out[i] = wte[(size_t)tok[n] * C + c] + wpe[(n % T) * C + c];
    }
}

/* dwte[v, c] += dout[n, c] for every token n == v, n ascending (the CPU's
 * order): block (c-range, v); the tokens pass through shared memory in
 * tiles, each thread scans them all and adds its channel of the matches. */
static __global__ void encoder_backward_wte_kernel(float *dwte, const float *dout,
                                                   const unsigned char *tok, size_t N, size_t C)
{
    __shared__ unsigned char tile[ENC_TILE];
    const unsigned v = blockIdx.y;
    const size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    float acc = c < C ? dwte[(size_t)v * C + c] : 0.0f;

    for (size_t n0 = 0; n0 < N; n0 += ENC_TILE) {
        size_t len = N - n0 < ENC_TILE ? N - n0 : ENC_TILE;
        for (size_t k = threadIdx.x; k < len; k += blockDim.x)
            tile[k] = tok[n0 + k];
        __syncthreads();
        if (c < C)
            for (size_t k = 0; k < len; k++)
                if (tile[k] == v)
                    acc += dout[(n0 + k) * C + c];
        __syncthreads(); /* before the next tile overwrites this one */
    }
    if (c < C)
        dwte[(size_t)v * C + c] = acc;
}

/* dwpe[t, c] += dout[b, t, c] for b ascending (the CPU's order). */
static __global__ void encoder_backward_wpe_kernel(float *dwpe, const float *dout, size_t B,
                                                   size_t T, size_t C)
{
    const size_t TC = T * C;

    GC_FOR_EACH(i, TC)
    {
        float acc = dwpe[i];
        for (size_t b = 0; b < B; b++)
            acc += dout[b * TC + i];
        dwpe[i] = acc;
    }
}

extern "C" void gpt_cuda__encoder_forward(void *ctx, float *out, const unsigned char *tok,
                                          const float *wte, const float *wpe, size_t B, size_t T,
                                          size_t C)
{
    struct gpt_cuda *g = ctx_of(ctx);
    size_t N = B * T;

    if (g->failed || N * C == 0)
        return;
    encoder_forward_kernel<<<gc_blocks(N * C, GC_THREADS), GC_THREADS, 0, g->stream>>>(
        out, tok, wte, wpe, N, T, C);
    gpt_cuda__launched(g, "encoder_forward", "encoder_forward_kernel");
}

extern "C" void gpt_cuda__encoder_backward(void *ctx, float *dwte, float *dwpe, const float *dout,
                                           const unsigned char *tok, size_t B, size_t T, size_t C)
{
    struct gpt_cuda *g = ctx_of(ctx);
    size_t N = B * T;
    /* the vocabulary is every byte value: grid.y = 256 */
    dim3 grid((unsigned)((C + ENC_THREADS - 1) / ENC_THREADS), 256);

    if (g->failed || N * C == 0)
        return;
    encoder_backward_wte_kernel<<<grid, ENC_THREADS, 0, g->stream>>>(dwte, dout, tok, N, C);
    if (!gpt_cuda__launched(g, "encoder_backward", "encoder_backward_wte_kernel"))
        return;
    encoder_backward_wpe_kernel<<<gc_blocks(T * C, GC_THREADS), GC_THREADS, 0, g->stream>>>(
        dwpe, dout, B, T, C);
    gpt_cuda__launched(g, "encoder_backward", "encoder_backward_wpe_kernel");
}

/* ---------------------------------------------------------------- column sums */

/* out[c] += sum over n of in[n, c].  Block (32, 32) for 32 columns: thread
 * (x, y) sums rows y, y + 32, ... of column x in order, then the 32 partial
 * sums of a column are added in a fixed tree (16, 8, 4, 2, 1). */
static __global__ void colsum_add_kernel(float *out, const float *in, size_t N, size_t C)
{
    __shared__ float part[32][33];
    const unsigned x = threadIdx.x, y = threadIdx.y;
    const size_t c = (size_t)blockIdx.x * 32 + x;
    float acc = 0.0f;

    if (c < C)
        for (size_t n = y; n < N; n += 32)
            acc += in[n * C + c];
    part[y][x] = acc;
    __syncthreads();
    for (unsigned s = 16; s > 0; s >>= 1) {
        if (y < s)
            part[y][x] += part[y + s][x];
        __syncthreads();
    }
    if (y == 0 && c < C)
        out[c] += part[0][x];
}

extern "C" void gpt_cuda__colsum_add(struct gpt_cuda *g, const char *op, float *out,
                                     const float *in, size_t N, size_t C)
{
    if (g->failed || N == 0 || C == 0)
        return;
    colsum_add_kernel<<<(unsigned)((C + 31) / 32), dim3(32, 32), 0, g->stream>>>(out, in, N, C);
    gpt_cuda__launched(g, op, "colsum_add_kernel");
}

/* ---------------------------------------------------------------- layernorm */

static __global__ void layernorm_forward_kernel(float *out, float *mean, float *rstd,
                                                const float *inp, const float *w, const float *b,
                                                size_t N, size_t C)
{
    const unsigned lane = threadIdx.x % 32;

    GC_FOR_EACH_ROW(row, N)
    {
        const float *x = inp + row * C;
        float *o = out + row * C;
        float m = 0.0f, v = 0.0f;
        for (size_t i = lane; i < C; i += 32)
            m += x[i];
        m = gc_warp_sum(m) / (float)C;
        for (size_t i = lane; i < C; i += 32)
            v += (x[i] - m) * (x[i] - m);
        v = gc_warp_sum(v) / (float)C;
        float s = 1.0f / sqrtf(v + 1e-5f);
        for (size_t i = lane; i < C; i += 32)
            o[i] = (x[i] - m) * s * w[i] + b[i];
        if (lane == 0) {
            mean[row] = m;
            rstd[row] = s;
        }
    }
}

/* dinp += s * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)), a row a warp. */
static __global__ void layernorm_backward_kernel(float *dinp, const float *dout, const float *inp,
                                                 const float *w, const float *mean,
                                                 const float *rstd, size_t N, size_t C)
{
    const unsigned lane = threadIdx.x % 32;

    GC_FOR_EACH_ROW(row, N)
    {
        const float *d = dout + row * C, *x = inp + row * C;
        float *dx = dinp + row * C;
        float m = mean[row], s = rstd[row], dmean = 0.0f, dproj = 0.0f;
        for (size_t i = lane; i < C; i += 32) {
            float xhat = (x[i] - m) * s, dn = d[i] * w[i];
            dmean += dn;
            dproj += dn * xhat;
        }
        dmean = gc_warp_sum(dmean) / (float)C;
        dproj = gc_warp_sum(dproj) / (float)C;
        for (size_t i = lane; i < C; i += 32) {
            float xhat = (x[i] - m) * s, dn = d[i] * w[i];
            dx[i] += s * (dn - dmean - xhat * dproj);
        }
    }
}

/* dw[c] += sum_n dout[n, c] * xhat[n, c], db[c] += sum_n dout[n, c]: the
 * column sums of colsum_add_kernel, two at once. */
static __global__ void layernorm_params_kernel(float *dw, float *db, const float *dout,
                                               const float *inp, const float *mean,
                                               const float *rstd, size_t N, size_t C)
{
    __shared__ float pw[32][33], pb[32][33];
    const unsigned x = threadIdx.x, y = threadIdx.y;
    const size_t c = (size_t)blockIdx.x * 32 + x;
    float aw = 0.0f, ab = 0.0f;

    if (c < C)
        for (size_t n = y; n < N; n += 32) {
            float d = dout[n * C + c], xhat = (inp[n * C + c] - mean[n]) * rstd[n];
            aw += d * xhat;
            ab += d;
        }
    pw[y][x] = aw;
    pb[y][x] = ab;
    __syncthreads();
    for (unsigned s = 16; s > 0; s >>= 1) {
        if (y < s) {
            pw[y][x] += pw[y + s][x];
            pb[y][x] += pb[y + s][x];
        }
        __syncthreads();
    }
    if (y == 0 && c < C) {
        dw[c] += pw[0][x];
        db[c] += pb[0][x];
    }
}

extern "C" void gpt_cuda__layernorm_forward(void *ctx, float *out, float *mean, float *rstd,
                                            const float *inp, const float *w, const float *b,
                                            size_t N, size_t C)
{
    struct gpt_cuda *g = ctx_of(ctx);

    if (g->failed || N == 0 || C == 0)
        return;
    layernorm_forward_kernel<<<gc_blocks(N, GC_WARPS), GC_THREADS, 0, g->stream>>>(out, mean, rstd,
                                                                                   inp, w, b, N, C);
    gpt_cuda__launched(g, "layernorm_forward", "layernorm_forward_kernel");
}

extern "C" void gpt_cuda__layernorm_backward(void *ctx, float *dinp, float *dw, float *db,
                                             const float *dout, const float *inp, const float *w,
                                             const float *mean, const float *rstd, size_t N,
                                             size_t C)
{
    struct gpt_cuda *g = ctx_of(ctx);

    if (g->failed || N == 0 || C == 0)
        return;
    layernorm_backward_kernel<<<gc_blocks(N, GC_WARPS), GC_THREADS, 0, g->stream>>>(
        dinp, dout, inp, w, mean, rstd, N, C);
    if (!gpt_cuda__launched(g, "layernorm_backward", "layernorm_backward_kernel"))
        return;
    layernorm_params_kernel<<<(unsigned)((C + 31) / 32), dim3(32, 32), 0, g->stream>>>(
        dw, db, dout, inp, mean, rstd, N, C);
    gpt_cuda__launched(g, "layernorm_backward", "layernorm_params_kernel");
}

/* ---------------------------------------------------------------- pointwise */

static __global__ void gelu_forward_kernel(float *out, const float *inp, size_t n)
{
    GC_FOR_EACH(i, n)
    {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x)));
    }
}

/* dinp = gelu'(inp) * dout; dinp == dout allowed (each thread reads its
 * element before it writes it). */
static __global__ void gelu_backward_kernel(float *dinp, const float *inp, const float *dout,
                                            size_t n)
{
    GC_FOR_EACH(i, n)
    {
        float x = inp[i];
        float u = GELU_K * (x + 0.044715f * x * x * x);
        float th = tanhf(u);
        float du = GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        float gr = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
        dinp[i] = gr * dout[i];
    }
}

static __global__ void residual_forward_kernel(float *out, const float *a, const float *b, size_t n)
{
    GC_FOR_EACH(i, n)
    {
        out[i] = a[i] + b[i];
    }
}

/* The bits of kernels.c's gpt_round_bf16: nearest, ties to even; inf and
 * nan left alone. */
static __global__ void round_bf16_kernel(float *x, size_t n)
{
    GC_FOR_EACH(i, n)
    {
        unsigned u = __float_as_uint(x[i]);
        if ((u & 0x7f800000u) != 0x7f800000u)
            u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        x[i] = __uint_as_float(u);
    }
}

extern "C" void gpt_cuda__gelu_forward(void *ctx, float *out, const float *inp, size_t n)
{
    struct gpt_cuda *g = ctx_of(ctx);

    if (g->failed || n == 0)
        return;
    gelu_forward_kernel<<<gc_blocks(n, GC_THREADS), GC_THREADS, 0, g->stream>>>(out, inp, n);
    gpt_cuda__launched(g, "gelu_forward", "gelu_forward_kernel");
}

extern "C" void gpt_cuda__gelu_backward(void *ctx, float *dinp, const float *inp, const float *dout,
                                        size_t n)
{
    struct gpt_cuda *g = ctx_of(ctx);

    if (g->failed || n == 0)
        return;
    gelu_backward_kernel<<<gc_blocks(n, GC_THREADS), GC_THREADS, 0, g->stream>>>(dinp, inp, dout,
                                                                                 n);
    gpt_cuda__launched(g, "gelu_backward", "gelu_backward_kernel");
}

extern "C" void gpt_cuda__residual_forward(void *ctx, float *out, const float *a, const float *b,
                                           size_t n)
{
    struct gpt_cuda *g = ctx_of(ctx);

    if (g->failed || n == 0)
        return;
    residual_forward_kernel<<<gc_blocks(n, GC_THREADS), GC_THREADS, 0, g->stream>>>(out, a, b, n);
    gpt_cuda__launched(g, "residual_forward", "residual_forward_kernel");
}

extern "C" void gpt_cuda__round_bf16(void *ctx, float *x, size_t n)
{
    struct gpt_cuda *g = ctx_of(ctx);

    if (g->failed || n == 0)
        return;
    round_bf16_kernel<<<gc_blocks(n, GC_THREADS), GC_THREADS, 0, g->stream>>>(x, n);
    gpt_cuda__launched(g, "round_bf16", "round_bf16_kernel");
}

/* ---------------------------------------------------------------- cross-entropy */

/* A row a warp: softmax in place (probs == logits allowed) and the loss
 * log(sum) - (logit[target] - max), as kernels.c. */
static __global__ void crossentropy_forward_kernel(float *probs, float *losses, const float *logits,
                                                   const unsigned char *targets, size_t N, size_t V)
{
    const unsigned lane = threadIdx.x % 32;

    GC_FOR_EACH_ROW(row, N)
    {
        const float *l = logits + row * V;
        float *p = probs + row * V;
        const float lt = l[targets[row]];
        float mx = -INFINITY, sum = 0.0f;
        for (size_t v = lane; v < V; v += 32)
            mx = fmaxf(mx, l[v]);
        mx = gc_warp_max(mx);
        __syncwarp(); /* every lane has read l[target] before any lane writes p */
        for (size_t v = lane; v < V; v += 32) {
            float e = expf(l[v] - mx);
            p[v] = e;
            sum += e;
        }
        sum = gc_warp_sum(sum);
        float inv = 1.0f / sum;
        for (size_t v = lane; v < V; v += 32)
            p[v] *= inv;
        if (lane == 0)
            losses[row] = logf(sum) - (lt - mx);
        __syncwarp(); /* this row's reads and writes before the next row's */
    }
}

/* *sum = the N losses summed in fp64 (thread i takes i, i + 512, ... in
 * order, then a fixed tree), *acc += *sum.  One block. */
static __global__ void loss_sum_kernel(double *sum, double *acc, const float *losses, size_t N)
{
    __shared__ double part[SUM_THREADS];
    double s = 0.0;

    for (size_t i = threadIdx.x; i < N; i += SUM_THREADS)
        s += (double)losses[i];
    part[threadIdx.x] = s;
    __syncthreads();
    for (unsigned k = SUM_THREADS / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k)
            part[threadIdx.x] += part[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        *sum = part[0];
        *acc += part[0];
    }
}

/* probs becomes (probs - onehot(target)) * dloss, as kernels.c. */
static __global__ void crossentropy_backward_kernel(float *probs, const unsigned char *targets,
                                                    float dloss, size_t N, size_t V)
{
    GC_FOR_EACH(i, N * V)
    {
        float x = probs[i];
        if (i % V == targets[i / V])
            x -= 1.0f;
        probs[i] = x * dloss;
    }
}

static __global__ void loss_mean_kernel(float *out, const double *acc, double denom)
{
    *out = (float)(*acc / denom);
}

extern "C" void gpt_cuda__crossentropy_forward(void *ctx, float *probs, float *losses,
                                               const float *logits, const unsigned char *targets,
                                               size_t N, size_t V, double *sum, double *acc)
{
    struct gpt_cuda *g = ctx_of(ctx);

    if (g->failed || N == 0 || V == 0)
        return;
    crossentropy_forward_kernel<<<gc_blocks(N, GC_WARPS), GC_THREADS, 0, g->stream>>>(
        probs, losses, logits, targets, N, V);
    if (!gpt_cuda__launched(g, "crossentropy_forward", "crossentropy_forward_kernel"))
        return;
    loss_sum_kernel<<<1, SUM_THREADS, 0, g->stream>>>(sum, acc, losses, N);
    gpt_cuda__launched(g, "crossentropy_forward", "loss_sum_kernel");
}

extern "C" void gpt_cuda__crossentropy_backward(void *ctx, float *probs,
                                                const unsigned char *targets, float dloss, size_t N,
                                                size_t V)
{
    struct gpt_cuda *g = ctx_of(ctx);

    if (g->failed || N * V == 0)
        return;
    crossentropy_backward_kernel<<<gc_blocks(N * V, GC_THREADS), GC_THREADS, 0, g->stream>>>(
        probs, targets, dloss, N, V);
    gpt_cuda__launched(g, "crossentropy_backward", "crossentropy_backward_kernel");
}

extern "C" void gpt_cuda__loss_mean(void *ctx, float *out, const double *acc, double denom)
{
    struct gpt_cuda *g = ctx_of(ctx);

    if (g->failed)
        return;
    loss_mean_kernel<<<1, 1, 0, g->stream>>>(out, acc, denom);
    gpt_cuda__launched(g, "loss_mean", "loss_mean_kernel");
}

extern "C" const void *gpt_cuda__probe_kernel(void)
{
    return (const void *)residual_forward_kernel;
}
