/*
 * cublas_v2.h (tests/examples/cuda_emu): a CPU stand-in for the cuBLAS calls
 * examples/gpt makes.  cublasSgemm follows the definition in cuBLAS's
 * documentation (column-major; op(A) m x k, op(B) k x n; lda >= rows of A as
 * stored), written without looking at matmul_cuda.cu's row-major mapping, so
 * the test checks that mapping; it refuses a handle that is not in
 * CUBLAS_PEDANTIC_MATH, and leading dimensions that are too small.
 */
#ifndef EMU_CUBLAS_V2_H
#define EMU_CUBLAS_V2_H

#include "cuda_runtime.h"

#define CUBLAS_VER_MAJOR 13

typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUBLAS_POINTER_MODE_HOST = 0 } cublasPointerMode_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_PEDANTIC_MATH = 2 } cublasMath_t;
typedef enum { CUBLAS_ATOMICS_NOT_ALLOWED = 0 } cublasAtomicsMode_t;
typedef struct emu_blas {
    cudaStream_t stream;
    int math;
} * cublasHandle_t;

inline unsigned long emu_gemms;

inline cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    *h = (cublasHandle_t)calloc(1, sizeof(struct emu_blas));
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasDestroy(cublasHandle_t h)
{
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetPointerMode(cublasHandle_t, cublasPointerMode_t)
{
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m)
{
    h->math = m;
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetAtomicsMode(cublasHandle_t, cublasAtomicsMode_t)
{
    return CUBLAS_STATUS_SUCCESS;
}
inline const char *cublasGetStatusString(cublasStatus_t s)
{
    return s ? "emulated failure" : "success";
}
inline const char *cublasGetStatusName(cublasStatus_t s)
{
    return s ? "CUBLAS_STATUS_INVALID_VALUE" : "CUBLAS_STATUS_SUCCESS";
}

/* C (m x n, ldc) = alpha op(A) op(B) + beta C, column-major; op(A)[i][p] is
 * A[i + p*lda] (N) or A[p + i*lda] (T); op(B)[p][j] is B[p + j*ldb] (N) or
 * B[j + p*ldb] (T).  beta == 0: C is not read. */
inline cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                  int m, int n, int k, const float *alpha, const float *A, int lda,
                                  const float *B, int ldb, const float *beta, float *C, int ldc)
{
    if (!h || m < 0 || n < 0 || k < 0 || lda < (ta == CUBLAS_OP_N ? m : k) ||
        ldb < (tb == CUBLAS_OP_N ? k : n) || ldc < m || h->math != CUBLAS_PEDANTIC_MATH)
        return CUBLAS_STATUS_INVALID_VALUE;
    emu_gemms++;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            /* fp32 fused multiply-adds into 4 interleaved partial sums, roughly
             * as a GPU's SGEMM rounds (not its exact order) */
            float s4[4] = {0, 0, 0, 0};
            for (int p = 0; p < k; p++) {
                float a = ta == CUBLAS_OP_N ? A[i + (size_t)p * lda] : A[p + (size_t)i * lda];
                float b = tb == CUBLAS_OP_N ? B[p + (size_t)j * ldb] : B[j + (size_t)p * ldb];
                s4[p % 4] = fmaf(a, b, s4[p % 4]);
            }
            float r = *alpha * ((s4[0] + s4[1]) + (s4[2] + s4[3]));
            C[i + (size_t)j * ldc] = *beta == 0.0f ? r : r + *beta * C[i + (size_t)j * ldc];
        }
    return CUBLAS_STATUS_SUCCESS;
}

#endif
