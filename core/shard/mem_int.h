/*
 * mem_int.h (private to core/shard): where a shard's buffers live, and the
 * work on them that is not communication, as one table of operations with
 * one implementation per memory, chosen at init from the communicator's
 * backend:
 *
 *   host  mem_host.c: accel_calloc'd buffers and plain loops, for the socket
 *         backend.  Every call is complete on return.
 *   cuda  device.cu: CUDA device memory from a stream-ordered pool of the
 *         current device, and kernels, for the nccl backend.  Every call
 *         queues its work on the communicator's stream
 *         (accel_comm_cuda_stream) and returns; only `put` and `get` wait,
 *         through accel_comm_sync (bounded, NCCL errors reported).  A
 *         trainer's compute stream, when one is set, is ordered with that
 *         stream by events (to_compute, from_compute), never by a wait.
 *
 * shard.c, gather.c, step.c and optim.c decide what is done and in which
 * order; they call these and never touch a buffer's elements themselves.
 * The element arithmetic both tables run is elem_int.h's.
 *
 * Pointers are the memory's own (device pointers for cuda); `ctx` is what
 * `open` made (NULL for host).  Counts are elements, `bytes` bytes; any
 * count may be 0.  The 16-bit types are stored as uint16_t bit patterns.
 * Errors carry "rank R of N: shard: <operation>: <CUDA's reason>" (cuda) or
 * "shard: ..." (host).  Compiles as C and as C++ (device.cu defines
 * shard__cuda_ops).
 */
#ifndef ACCEL_SHARD_MEM_INT_H
#define ACCEL_SHARD_MEM_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "elem_int.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "accel/comm.h"
#include "accel/err.h"

struct shard_mem_ops {
    const char *name; /* "host", "cuda": for messages */
    /* true when conversions run element by element in order, so that a
     * 16-bit image may share its fp32 buffer (narrow from the first element
     * up, widen from the last down) and no staging buffer is needed; false
     * (cuda: in parallel) when source and destination must not overlap */
    bool in_place;

    /* The memory's context for a communicator, and its end (NULL allowed). */
    enum accel_err (*open)(void **ctx, struct accel_comm *comm, struct accel_error *err);
    void (*close)(void *ctx);

    /* `bytes` of zeroed memory; NULL with *rc and err set on failure
     * (ACCEL_ENOMEM when out of memory).  `unit` (may be NULL) and `what`
     * name the buffer in the message.  free accepts NULL. */
    void *(*alloc)(void *ctx, size_t bytes, const char *unit, const char *what, enum accel_err *rc,
                   struct accel_error *err);
    void (*free)(void *ctx, void *p);
    /* `bytes` of host memory that get() copies into at full speed (cuda:
     * pinned, cudaMallocHost; host: accel_malloc), for a checkpoint's
     * staging; NULL when it cannot be had.  pinned_free accepts NULL. */
    void *(*pinned_alloc)(void *ctx, size_t bytes);
    void (*pinned_free)(void *ctx, void *p);

    /* Memsets and copies.  put: from host memory, which the caller may reuse
     * on return; get: to host memory, after everything queued before it
     * (collectives included) completed: the only waits. */
    enum accel_err (*zero)(void *ctx, void *p, size_t bytes, struct accel_error *err);
    enum accel_err (*copy)(void *ctx, void *dst, const void *src, size_t bytes,
                           struct accel_error *err);
    enum accel_err (*put)(void *ctx, void *dst, const void *host, size_t bytes,
                          struct accel_error *err);
    enum accel_err (*get)(void *ctx, void *host, const void *src, size_t bytes,
                          struct accel_error *err);

    /* Conversions (dtype_conv.h, round to nearest even).  narrow: fp32 to t;
     * widen: t to fp32; round: fp32 to t and back (the compute copy);
     * accumulate: acc[i] += (float)src[i] in fp32, src of type t.  Overlap
     * only as in_place allows: narrow with dst at src, widen with src at dst. */
    enum accel_err (*narrow)(void *ctx, void *dst, const float *src, size_t n, enum accel_dtype t,
                             struct accel_error *err);
    enum accel_err (*widen)(void *ctx, float *dst, const void *src, size_t n, enum accel_dtype t,
                            struct accel_error *err);
    enum accel_err (*round)(void *ctx, float *dst, const float *src, size_t n, enum accel_dtype t,
                            struct accel_error *err);
    enum accel_err (*accumulate)(void *ctx, float *acc, const void *src, size_t n,
                                 enum accel_dtype t, struct accel_error *err);

    /* *acc += the sum of g[i]^2 in fp64, acc in this memory.  host: in
     * element order; cuda: fixed per-block partials summed in block order
     * (deterministic for a given n; docs/shard.md). */
    enum accel_err (*sumsq)(void *ctx, const float *g, size_t n, double *acc,
                            struct accel_error *err);

    /* The optimizer updates of n elements (elem_int.h); buf may be NULL. */
    enum accel_err (*adamw)(void *ctx, const struct shard_adamw_k *k, float gmul, float *p,
                            const float *g, float *m, float *v, size_t n, struct accel_error *err);
    enum accel_err (*sgd)(void *ctx, const struct shard_sgd_k *k, float gmul, float *p,
                          const float *g, float *buf, size_t n, struct accel_error *err);

    /* The trainer's compute stream (accel_shard_set_compute_stream), where
     * it reads the gathered parameters and writes the full gradients while
     * this memory's own work stays where it was.  set_compute binds `stream`
     * (NULL, or the memory's own stream: none), handing over what the old
     * one queued first; to_compute: work queued on the compute stream after
     * the call runs after everything this memory (and the communicator)
     * queued before it; from_compute: work this memory and the communicator
     * queue after the call runs after everything queued on the compute
     * stream before it.  Neither waits on the host; both are no-ops without
     * a compute stream.  host: set_compute ignores the stream (every call is
     * complete on return), the other two do nothing. */
    enum accel_err (*set_compute)(void *ctx, void *stream, struct accel_error *err);
    enum accel_err (*to_compute)(void *ctx, struct accel_error *err);
    enum accel_err (*from_compute)(void *ctx, struct accel_error *err);
};

extern const struct shard_mem_ops shard__host_ops;
#ifdef ACCEL_HAVE_CUDA
extern const struct shard_mem_ops shard__cuda_ops;
#endif

#ifdef __cplusplus
}
#endif

#endif
