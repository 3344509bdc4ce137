/*
 * attention_cuda.cu: kernels.h's causal self-attention on the GPU, forward
 * and backward, as plain kernels that follow kernels.c's math term by term
 * (the same 8-way partial sums in q.k and d.v, the same accumulation order
 * over positions in the weighted sums) rather than cuBLAS batched GEMMs:
 * at this model's sizes (T = 64, head size 16) the GEMMs would be tiny, and
 * written out the backward needs no atomics.
 *
 * Layout as kernels.h: qkv (B, T, 3C) = q | k | v, head h at columns
 * h*hs .. h*hs+hs-1 of each; att (B, NH, T, T) the softmax rows (row t uses
 * columns 0..t, the rest zero); out (B, T, C).  A "row" r = (b*NH + h)*T + t
 * indexes att's rows; each is one warp's.
 *
 * Backward without atomics, in two kernels:
 *   1. per row (b, h, t): da[t2] = dout_t . v_t2, s = sum a[t2] da[t2],
 *      dpre[t, t2] = a[t2] (da[t2] - s) scale for t2 <= t, into the scratch
 *      (B, NH, T, T) (gpt_cuda__attention_scratch);
 *   2. per row (b, h, j), a lane per channel i of the head: the gradients of
 *      position j, each element written by one thread:
 *        dq[j] += sum_{t2 <= j} dpre[j, t2] k[t2]
 *        dk[j] += sum_{t >= j}  dpre[t, j]  q[t]
 *        dv[j] += sum_{t >= j}  att[t, j]   dout[t]
 *      in ascending t2 / t, the order in which kernels.c's loops add them.
 * Deterministic: fixed orders, no atomics.  Cost: B*NH*T^2*hs multiply-adds
 * a kernel, as the CPU's; fine for this example's sizes, where a flash
 * attention would be the next step for long sequences.
 */
#include <cmath>

#include "cuda_int.cuh"

/* kernels.c's dot(): eight partial sums (i mod 8), the tail into s[0..],
 * combined ((0+1)+(2+3))+((4+5)+(6+7)); unrolled so s stays in registers. */
static __device__ __forceinline__ float dot8(const float *a, const float *b, size_t n)
{
    float s[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    size_t i = 0;

    for (; i + 8 <= n; i += 8) {
#pragma unroll
        for (int k = 0; k < 8; k++)
            s[k] += a[i + k] * b[i + k];
    }
#pragma unroll
    for (int k = 0; k < 8; k++)
        if (i + k < n)
            s[k] += a[i + k] * b[i + k];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static __global__ void attention_forward_kernel(float *out, float *att, const float *qkv, size_t B,
                                                size_t T, size_t C, size_t NH, float scale)
{
    const unsigned lane = threadIdx.x % 32;
    const size_t hs = C / NH, C3 = 3 * C;

    GC_FOR_EACH_ROW(r, B * NH * T)
    {
        const size_t t = r % T, h = (r / T) % NH, b = r / (T * NH);
        const float *q = qkv + (b * T + t) * C3 + h * hs;
        const float *seq = qkv + b * T * C3 + h * hs; /* position p: seq + p*C3 (+C k, +2C v) */
        float *a = att + r * T;
        float mx = -INFINITY, sum = 0.0f;

        for (size_t t2 = lane; t2 <= t; t2 += 32) {
            float s = dot8(q, seq + t2 * C3 + C, hs) * scale;
            a[t2] = s;
            mx = fmaxf(mx, s);
        }
        mx = gc_warp_max(mx);
        for (size_t t2 = lane; t2 <= t; t2 += 32) { /* each lane its own entries */
            float e = expf(a[t2] - mx);
            a[t2] = e;
            sum += e;
        }
        sum = gc_warp_sum(sum);
        float inv = 1.0f / sum;
        for (size_t t2 = lane; t2 <= t; t2 += 32)
            a[t2] *= inv;
        for (size_t t2 = t + 1 + lane; t2 < T; t2 += 32)
            a[t2] = 0.0f;
        __syncwarp(); /* the row's probabilities, written by every lane, visible to all */
        float *o = out + (b * T + t) * C + h * hs;
        for (size_t i = lane; i < hs; i += 32) {
            float acc = 0.0f;
            for (size_t t2 = 0; t2 <= t; t2++)
                acc += a[t2] * seq[t2 * C3 + 2 * C + i];
            o[i] = acc;
        }
        __syncwarp(); /* done reading this row before the lanes move on */
    }
}

/* Step 1 of the backward: dpre (B, NH, T, T), entries t2 <= t. */
static __global__ void attention_backward_scores_kernel(float *dpre, const float *dout,
                                                        const float *qkv, const float *att,
                                                        size_t B, size_t T, size_t C, size_t NH,
                                                        float scale)
{
    const unsigned lane = threadIdx.x % 32;
    const size_t hs = C / NH, C3 = 3 * C;

    GC_FOR_EACH_ROW(r, B * NH * T)
    {
        const size_t t = r % T, h = (r / T) % NH, b = r / (T * NH);
        const float *d = dout + (b * T + t) * C + h * hs;
        const float *v = qkv + b * T * C3 + 2 * C + h * hs; /* position p: v + p*C3 */
        const float *a = att + r * T;
        float *dp = dpre + r * T;
        float s = 0.0f;

        for (size_t t2 = lane; t2 <= t; t2 += 32) {
            float da = dot8(d, v + t2 * C3, hs);
            dp[t2] = da;
            s += a[t2] * da;
        }
        s = gc_warp_sum(s);
        for (size_t t2 = lane; t2 <= t; t2 += 32) /* each lane rereads its own entries */
            dp[t2] = a[t2] * (dp[t2] - s) * scale;
    }
}

/* Step 2 of the backward: dq, dk, dv of position j, one lane per channel. */
static __global__ void attention_backward_grads_kernel(float *dqkv, const float *dpre,
                                                       const float *dout, const float *qkv,
                                                       const float *att, size_t B, size_t T,
                                                       size_t C, size_t NH)
{
    const unsigned lane = threadIdx.x % 32;
    const size_t hs = C / NH, C3 = 3 * C;

    GC_FOR_EACH_ROW(r, B * NH * T)
    {
        const size_t j = r % T, h = (r / T) % NH, b = r / (T * NH);
        const float *P = dpre + (r - j) * T; /* (T, T) of (b, h): P[t*T + t2] */
        const float *A = att + (r - j) * T;
        const float *x = qkv + b * T * C3 + h * hs;  /* q of position p: x + p*C3; k +C; v +2C */
        const float *dy = dout + b * T * C + h * hs; /* position p: dy + p*C */
        float *dx = dqkv + (b * T + j) * C3 + h * hs;

        for (size_t i = lane; i < hs; i += 32) {
            float dq = 0.0f, dk = 0.0f, dv = 0.0f;
            for (size_t t2 = 0; t2 <= j; t2++)
                dq += P[j * T + t2] * x[t2 * C3 + C + i];
            for (size_t t = j; t < T; t++) {
                dk += P[t * T + j] * x[t * C3 + i];
                dv += A[t * T + j] * dy[t * C + i];
            }
            dx[i] += dq;
            dx[C + i] += dk;
            dx[2 * C + i] += dv;
        }
    }
}

extern "C" size_t gpt_cuda__attention_scratch(size_t B, size_t T, size_t NH)
{
    return B * NH * T * T;
}

extern "C" void gpt_cuda__attention_forward(void *ctx, float *out, float *att, const float *qkv,
                                            size_t B, size_t T, size_t C, size_t NH)
{
    struct gpt_cuda *g = (struct gpt_cuda *)ctx;
    size_t rows = B * NH * T;

    if (g->failed || rows == 0 || C == 0)
        return;
    attention_forward_kernel<<<gc_blocks(rows, GC_WARPS), GC_THREADS, 0, g->stream>>>(
        out, att, qkv, B, T, C, NH, 1.0f / sqrtf((float)(C / NH)));
    gpt_cuda__launched(g, "attention_forward", "attention_forward_kernel");
}

extern "C" void gpt_cuda__attention_backward(void *ctx, float *dqkv, const float *dout,
                                             const float *qkv, const float *att, float *scratch,
                                             size_t B, size_t T, size_t C, size_t NH)
{
    struct gpt_cuda *g = (struct gpt_cuda *)ctx;
    size_t rows = B * NH * T;

    if (g->failed || rows == 0 || C == 0)
        return;
    attention_backward_scores_kernel<<<gc_blocks(rows, GC_WARPS), GC_THREADS, 0, g->stream>>>(
        scratch, dout, qkv, att, B, T, C, NH, 1.0f / sqrtf((float)(C / NH)));
    if (!gpt_cuda__launched(g, "attention_backward", "attention_backward_scores_kernel"))
        return;
    attention_backward_grads_kernel<<<gc_blocks(rows, GC_WARPS), GC_THREADS, 0, g->stream>>>(
        dqkv, scratch, dout, qkv, att, B, T, C, NH);
    gpt_cuda__launched(g, "attention_backward", "attention_backward_grads_kernel");
}
