/*
 * cuda_int.cuh: what the CUDA backend's files share (C++ only, nvcc): the
 * context, the error recording every call goes through, launch sizes,
 * deterministic warp reductions, and the kernels' entry points that
 * cuda_backend.cu puts in the gpt_ops table.
 *
 * Errors: every CUDA and cuBLAS call is checked; the first failure is kept
 * in the context with the names of the entry point and the call
 * ("gelu_forward: launch of gelu_forward_kernel: ...", "matmul_forward:
 * cublasSgemm (out = inp w^T): ..."), and every entry point returns at once
 * while one is kept, so a failure is reported once, by name, when model.c
 * asks (gpt_check) or when the loss is read.  An error inside a kernel (an
 * illegal address) surfaces at the next call that waits, the loss's copy.
 *
 * Indexing: sizes are size_t throughout (N*C, N*V and B*NH*T*T exceed 2^31
 * at the largest sizes model.c accepts); grids are capped at GC_MAX_BLOCKS
 * and kernels loop with a grid stride, so no grid dimension overflows.
 */
#ifndef GPT_CUDA_INT_CUH
#define GPT_CUDA_INT_CUH

#include <cstddef>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "ops.h"

/* The cuBLAS calls the backend makes, resolved by gpt_cuda_init from
 * libcublas.so.<major> (dlopen): linked directly, the library's load alone
 * costs every process about 150 MB of resident memory and 70 ms, also when it
 * trains on the CPU; loaded here, only a device-mode process pays. */
struct gpt_blas {
    decltype(&cublasCreate) create;
    decltype(&cublasDestroy) destroy;
    decltype(&cublasSetStream) set_stream;
    decltype(&cublasSetPointerMode) set_pointer_mode;
    decltype(&cublasSetMathMode) set_math_mode;
    decltype(&cublasSetAtomicsMode) set_atomics_mode;
    decltype(&cublasSgemm) sgemm;
    decltype(&cublasGetStatusString) status_string;
};

struct gpt_cuda {
    int device;
    cudaStream_t stream; /* the compute stream, ours: every kernel, GEMM and copy */
    cudaStream_t comm;   /* the communicator's: the shard's work and the collectives */
    /* recorded on one stream, waited for by the other (gpt_cuda_comm_after,
     * gpt_cuda_compute_after); NULL until created */
    cudaEvent_t to_comm, to_compute;
    struct gpt_blas blas;
    cublasHandle_t handle;
    cudaDeviceProp prop;
    bool failed;
    char err[384]; /* the first failure, naming the call */
};

/* true when e (s) is success; else records "op: call: reason" as the
 * context's failure when it is the first, and returns false. */
bool gpt_cuda__ok(struct gpt_cuda *g, cudaError_t e, const char *op, const char *call);
bool gpt_cuda__blas_ok(struct gpt_cuda *g, cublasStatus_t s, const char *op, const char *call);
/* Records a failure that is not a CUDA call's (a size cuBLAS cannot take). */
void gpt_cuda__fail(struct gpt_cuda *g, const char *op, const char *what);
/* After a launch: gpt_cuda__ok of cudaGetLastError, named "launch of <kernel>". */
bool gpt_cuda__launched(struct gpt_cuda *g, const char *op, const char *kernel);

#define GC_THREADS 256 /* threads of a block, 8 warps */
#define GC_WARPS (GC_THREADS / 32)
#define GC_MAX_BLOCKS 65535u /* grid-stride loops cover the rest */

/* Grid-stride loops: over n elements, a thread each; over n rows, a warp
 * each (the bound is the same for the 32 lanes, so warp reductions inside
 * are safe). */
#define GC_FOR_EACH(i, n)                                                                          \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                        \
         i += (size_t)gridDim.x * blockDim.x)
#define GC_FOR_EACH_ROW(row, n)                                                                    \
    for (size_t row = (size_t)blockIdx.x * GC_WARPS + threadIdx.x / 32; row < (n);                 \
         row += (size_t)gridDim.x * GC_WARPS)

/* Blocks of `threads` for n items (>= 1: callers skip n == 0), capped. */
static inline unsigned gc_blocks(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    return b > GC_MAX_BLOCKS ? GC_MAX_BLOCKS : (unsigned)b;
}

/* Butterfly reductions over the 32 lanes of a full warp: every lane ends
 * with the same value, from the same fixed tree of operations on every run
 * (a + b == b + a in IEEE arithmetic, so lanes i and i^k agree at each
 * level).  All 32 lanes must call them. */
static __device__ __forceinline__ float gc_warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float gc_warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* The entry points of the table (ops.h), one file per group:
 * kernels_cuda.cu, matmul_cuda.cu, attention_cuda.cu. */
extern "C" {
void gpt_cuda__encoder_forward(void *ctx, float *out, const unsigned char *tok, const float *wte,
                               const float *wpe, size_t B, size_t T, size_t C);
void gpt_cuda__encoder_backward(void *ctx, float *dwte, float *dwpe, const float *dout,
                                const unsigned char *tok, size_t B, size_t T, size_t C);
void gpt_cuda__layernorm_forward(void *ctx, float *out, float *mean, float *rstd, const float *inp,
                                 const float *w, const float *b, size_t N, size_t C);
void gpt_cuda__layernorm_backward(void *ctx, float *dinp, float *dw, float *db, const float *dout,
                                  const float *inp, const float *w, const float *mean,
                                  const float *rstd, size_t N, size_t C);
void gpt_cuda__matmul_forward(void *ctx, float *out, const float *inp, const float *w,
                              const float *b, size_t N, size_t C, size_t OC);
void gpt_cuda__matmul_backward(void *ctx, float *dinp, float *dw, float *db, const float *dout,
                               const float *inp, const float *w, size_t N, size_t C, size_t OC);
void gpt_cuda__attention_forward(void *ctx, float *out, float *att, const float *qkv, size_t B,
                                 size_t T, size_t C, size_t NH);
void gpt_cuda__attention_backward(void *ctx, float *dqkv, const float *dout, const float *qkv,
                                  const float *att, float *scratch, size_t B, size_t T, size_t C,
                                  size_t NH);
size_t gpt_cuda__attention_scratch(size_t B, size_t T, size_t NH);
void gpt_cuda__gelu_forward(void *ctx, float *out, const float *inp, size_t n);
void gpt_cuda__gelu_backward(void *ctx, float *dinp, const float *inp, const float *dout, size_t n);
void gpt_cuda__residual_forward(void *ctx, float *out, const float *a, const float *b, size_t n);
void gpt_cuda__crossentropy_forward(void *ctx, float *probs, float *losses, const float *logits,
                                    const unsigned char *targets, size_t N, size_t V, double *sum,
                                    double *acc);
void gpt_cuda__crossentropy_backward(void *ctx, float *probs, const unsigned char *targets,
                                     float dloss, size_t N, size_t V);
void gpt_cuda__round_bf16(void *ctx, float *x, size_t n);
void gpt_cuda__loss_mean(void *ctx, float *out, const double *acc, double denom);
/* out[c] += sum over rows n of in[n*C + c] (C columns, N rows), rows in a
 * fixed order: the bias gradient (matmul_cuda.cu uses it). */
void gpt_cuda__colsum_add(struct gpt_cuda *g, const char *op, float *out, const float *in, size_t N,
                          size_t C);
/* A kernel of the backend's, to check at init that the binary has code for
 * this device (cudaFuncGetAttributes). */
const void *gpt_cuda__probe_kernel(void);
}

#endif
