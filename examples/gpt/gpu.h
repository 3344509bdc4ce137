/*
 * gpu.h: the CUDA backend of the example GPT: a context (the device, a
 * cuBLAS handle on the communicator's stream, the first failure) and the
 * gpt_ops table whose entries queue CUDA kernels and cuBLAS GEMMs on that
 * stream.  Built from the .cu files beside it where the Makefile finds nvcc and
 * NCCL (ACCEL_HAVE_CUDA); elsewhere gpu_none.c answers: gpt_cuda_ops() is
 * NULL and the other calls fail with "built without CUDA".
 *
 * Order of use (train.c): gpt_cuda_select before accel_comm_init (so the
 * communicator and its stream live on the chosen device), gpt_cuda_init with
 * accel_comm_cuda_stream(comm), gpt_init_on(..., gpt_cuda_ops(), ctx, ...);
 * at the end gpt_free, then gpt_cuda_free, then accel_comm_free (the handle
 * is bound to the communicator's stream).
 *
 * Ownership: gpt_cuda_init allocates the context, gpt_cuda_free frees it
 * (NULL allowed).  Errors: -1 with a message naming the failed call in why.
 * Compiles as C and as C++.
 */
#ifndef GPT_GPU_H
#define GPT_GPU_H

#include <stddef.h>

#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

struct gpt_cuda;

/* The CUDA backend's table; NULL when this binary was built without CUDA. */
const struct gpt_ops *gpt_cuda_ops(void);

/* Selects device local_rank mod the number of visible devices (what
 * accelerate opens; the launcher orders CUDA_VISIBLE_DEVICES so that local
 * rank i's GPU is entry i) and stores its index in *device. */
int gpt_cuda_select(unsigned local_rank, int *device, char *why, size_t whylen);

/* A context on the current device queuing on `stream` (a cudaStream_t):
 * a cuBLAS handle bound to it, fp32 GEMMs without TF32 or emulation
 * (CUBLAS_PEDANTIC_MATH), no atomics.  Checks that the kernels run on this
 * device (compiled for its architecture). */
int gpt_cuda_init(struct gpt_cuda **out, void *stream, char *why, size_t whylen);
void gpt_cuda_free(struct gpt_cuda *g);

/* "cuda:0 NVIDIA H200 (sm_90, 139.8 GiB)" */
void gpt_cuda_describe(const struct gpt_cuda *g, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
