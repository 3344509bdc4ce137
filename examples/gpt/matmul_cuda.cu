/*
 * matmul_cuda.cu: kernels.h's matmul forward and backward on the GPU: the
 * three products through cublasSgemm (fp32 in, fp32 out, fp32 arithmetic:
 * the handle is in CUBLAS_PEDANTIC_MATH, so no TF32), the bias through a
 * small kernel (forward) and the deterministic column sum of
 * kernels_cuda.cu (backward).  cuBLAS repeats its results bit for bit on one
 * GPU model with one stream and atomics off (as gpt_cuda_init sets them).
 *
 * Row-major tensors in a column-major library.  A row-major (r x c) array
 * with row stride c is, read column-major with leading dimension c, the
 * (c x r) matrix that is its transpose.  So, with X^T the column-major view
 * of row-major X:
 *
 *   inp (N, C)   is the column-major (C x N) matrix inp^T, ld C
 *   w   (OC, C)  is the column-major (C x OC) matrix w^T,  ld C
 *   out (N, OC)  is the column-major (OC x N) matrix out^T, ld OC
 *
 * and cublasSgemm(opA, opB, m, n, k, A, lda, B, ldb, Cm, ldc) computes the
 * column-major (m x n) Cm = alpha op(A) op(B) + beta Cm, op(A) (m x k),
 * op(B) (k x n).
 *
 *   forward   out = inp w^T           <=>  out^T = w inp^T
 *             = (w^T)^T (inp^T): A = w viewed (C x OC), opA = T; B = inp
 *             viewed (C x N), opB = N; m = OC, n = N, k = C; lda = C,
 *             ldb = C, ldc = OC; beta = 0.
 *   dinp      dinp += dout w          <=>  dinp^T += w^T dout^T
 *             A = w viewed (C x OC), opA = N; B = dout viewed (OC x N),
 *             opB = N; m = C, n = N, k = OC; lda = C, ldb = OC, ldc = C;
 *             beta = 1.
 *   dw        dw += dout^T inp        <=>  dw^T += inp^T dout
 *             = (inp^T) (dout^T)^T: A = inp viewed (C x N), opA = N;
 *             B = dout viewed (OC x N), opB = T; m = C, n = OC, k = N;
 *             lda = C, ldb = OC, ldc = C (dw^T is (C x OC), ld C: dw's
 *             row-major (OC, C)); beta = 1.
 *
 * cuBLAS takes int sizes: each of N, C, OC must be at most INT_MAX (model.c
 * caps N = B*T at 2^28 and C at 4096, so they are).
 */
#include <climits>

#include "cuda_int.cuh"

/* out[n, o] += b[o] */
static __global__ void add_bias_kernel(float *out, const float *b, size_t N, size_t OC)
{
    GC_FOR_EACH(i, N * OC)
    {
        out[i] += b[i % OC];
    }
}

static bool int_sizes(struct gpt_cuda *g, const char *op, size_t N, size_t C, size_t OC)
{
    if (N <= INT_MAX && C <= INT_MAX && OC <= INT_MAX)
        return true;
    gpt_cuda__fail(g, op, "a dimension over INT_MAX, which cublasSgemm cannot take");
    return false;
}

extern "C" void gpt_cuda__matmul_forward(void *ctx, float *out, const float *inp, const float *w,
                                         const float *b, size_t N, size_t C, size_t OC)
{
    struct gpt_cuda *g = (struct gpt_cuda *)ctx;
    const float one = 1.0f, zero = 0.0f;

    if (g->failed || N == 0 || C == 0 || OC == 0 || !int_sizes(g, "matmul_forward", N, C, OC))
        return;
    if (!gpt_cuda__blas_ok(g,
                           g->blas.sgemm(g->handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)OC, (int)N,
                                         (int)C, &one, w, (int)C, inp, (int)C, &zero, out, (int)OC),
                           "matmul_forward", "cublasSgemm (out = inp w^T)"))
        return;
    if (!b)
        return;
    add_bias_kernel<<<gc_blocks(N * OC, GC_THREADS), GC_THREADS, 0, g->stream>>>(out, b, N, OC);
    gpt_cuda__launched(g, "matmul_forward", "add_bias_kernel");
}

extern "C" void gpt_cuda__matmul_backward(void *ctx, float *dinp, float *dw, float *db,
                                          const float *dout, const float *inp, const float *w,
                                          size_t N, size_t C, size_t OC)
{
    struct gpt_cuda *g = (struct gpt_cuda *)ctx;
    const float one = 1.0f;

    if (g->failed || N == 0 || C == 0 || OC == 0 || !int_sizes(g, "matmul_backward", N, C, OC))
        return;
    if (!gpt_cuda__blas_ok(g,
                           g->blas.sgemm(g->handle, CUBLAS_OP_N, CUBLAS_OP_N, (int)C, (int)N,
                                         (int)OC, &one, w, (int)C, dout, (int)OC, &one, dinp,
                                         (int)C),
                           "matmul_backward", "cublasSgemm (dinp += dout w)"))
        return;
    if (!gpt_cuda__blas_ok(g,
                           g->blas.sgemm(g->handle, CUBLAS_OP_N, CUBLAS_OP_T, (int)C, (int)OC,
                                         (int)N, &one, inp, (int)C, dout, (int)OC, &one, dw,
                                         (int)C),
                           "matmul_backward", "cublasSgemm (dw += dout^T inp)"))
        return;
    if (db)
        gpt_cuda__colsum_add(g, "matmul_backward", db, dout, N, OC);
}
