/*
 * gpu.h: the CUDA backend of the example GPT: a context (the device, a
 * compute stream of its own, a cuBLAS handle on it, two events, the first
 * failure) and the gpt_ops table whose entries queue CUDA kernels, cuBLAS
 * GEMMs and copies on the compute stream, which is ordered with the
 * communicator's stream by events (core/shard's, and the hand-offs below).
 * Built from the .cu files beside it where the Makefile finds nvcc and NCCL
 * (ACCEL_HAVE_CUDA); elsewhere gpu_none.c answers: gpt_cuda_ops() is NULL
 * and the other calls fail with "built without CUDA".
 *
 * Order of use (train.c): gpt_cuda_select before accel_comm_init (so the
 * communicator and its stream live on the chosen device), gpt_cuda_init with
 * accel_comm_cuda_stream(comm), gpt_init_on(..., gpt_cuda_ops(), ctx, ...),
 * accel_shard_set_compute_stream(shard, gpt_cuda_stream(ctx)); at the end
 * accel_shard_free (the shard hands off to the compute stream until then),
 * gpt_free, then gpt_cuda_free (the compute stream and the handle bound to
 * it), then accel_comm_free.
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

/* A context on the current device beside the communicator's stream
 * `comm_stream` (a cudaStream_t): a compute stream of its own (non-blocking:
 * no implicit sync with the legacy default stream) where every kernel, GEMM
 * and copy of the table goes, a cuBLAS handle bound to it, fp32 GEMMs
 * without TF32 or emulation (CUBLAS_PEDANTIC_MATH), no atomics, and two
 * events for the hand-offs below.  Checks that the kernels run on this
 * device (compiled for its architecture). */
int gpt_cuda_init(struct gpt_cuda **out, void *comm_stream, char *why, size_t whylen);
void gpt_cuda_free(struct gpt_cuda *g);

/* The compute stream (a cudaStream_t), for accel_shard_set_compute_stream. */
void *gpt_cuda_stream(const struct gpt_cuda *g);

/* Hand-offs, device-side (an event recorded on one stream, waited for by
 * the other; the host does not wait).  comm_after: work queued on the
 * communicator's stream after the call (a collective on a model buffer)
 * runs after the compute work queued before it.  compute_after: compute
 * work queued after the call runs after the communicator's stream's work
 * queued before it.  -1 with the failure in why. */
int gpt_cuda_comm_after(struct gpt_cuda *g, char *why, size_t whylen);
int gpt_cuda_compute_after(struct gpt_cuda *g, char *why, size_t whylen);

/* "cuda:0 NVIDIA H200 (sm_90, 139.8 GiB)" */
void gpt_cuda_describe(const struct gpt_cuda *g, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
