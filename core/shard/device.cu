/*
 * device.cu: core/shard's buffers in CUDA device memory, for the nccl
 * backend: the "cuda" table of mem_int.h (shard__cuda_ops).
 *
 * Memory comes from a stream-ordered pool of this file's own, on the device
 * that is current at accel_shard_init, with a release threshold of "never",
 * so a unit gathered and freed every step reuses the same memory without a
 * cudaMalloc or a device-wide sync.  Every allocation, free, memset, copy
 * and kernel is queued on the communicator's stream (accel_comm_cuda_stream),
 * where NCCL queues the collectives.  A trainer that computes on that stream
 * too needs nothing else: one stream, one order.  A trainer that computes on
 * a stream of its own (accel_shard_set_compute_stream, so that the next
 * unit's all-gather runs while this unit computes) is ordered with it by two
 * events, one each way (dev_to_compute, dev_from_compute): an event is
 * recorded on one stream and the other waits for it on the device, never on
 * the host.  One event per direction suffices: cudaStreamWaitEvent waits for
 * the record that precedes the call, and a later record of the same event
 * does not change a wait already queued.  `put` and `get` are the only
 * waits, and they wait
 * through accel_comm_sync, which is bounded by the communicator's timeout and
 * reports NCCL's asynchronous errors, never in cudaStreamSynchronize behind a
 * collective whose peer is dead.
 *
 * Kernels are grid-stride loops over size_t indices (counts past 2^31 are
 * fine), 256 threads a block, at most 4096 blocks; they read and write fp32
 * and 16-bit elements at their natural alignment.  The element arithmetic is
 * elem_int.h's (the _rn intrinsics: no FMA contraction, subnormals kept) and
 * the conversions dtype_conv.h's, the host path's own code, so elementwise
 * results equal the host's bit for bit.  The sum of squares is the one
 * reduction: each of at most 1024 blocks sums its grid-stride elements per
 * thread, then the block's 256 partials by a fixed tree, all in fp64; one
 * thread then adds the block partials in block order, then that to the
 * accumulator.  The order depends only on n, so the result is the same from
 * run to run; it differs from the host's element order in the last bits.
 *
 * Errors: "rank R of N: shard: <what>: <cudaGetErrorString> (<name>)", a
 * failed allocation ACCEL_ENOMEM, everything else ACCEL_EIO.  A kernel's
 * launch is checked at once; a fault while it runs is sticky and shows at
 * the next wait (accel_comm_sync).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime.h>

#include "../base/dtype_conv.h"
#include "mem_int.h"

extern "C" {
#include "accel/alloc.h"
#include "accel/log.h"
}

#define THREADS 256        /* a block; a power of two for the sum's tree */
#define MAX_BLOCKS 4096u   /* element-wise kernels loop past 4096 x 256 elements */
#define SUMSQ_BLOCKS 1024u /* partials of one sum of squares */

struct shard_dev {
    struct accel_comm *comm;
    cudaStream_t stream;  /* the communicator's */
    cudaStream_t compute; /* the trainer's, NULL when it is `stream` */
    /* recorded on `stream`, waited for by `compute`; and the other way;
     * created with the first compute stream, NULL until then */
    cudaEvent_t to_ev, from_ev;
    cudaMemPool_t pool; /* NULL until created */
    int device;
    double *part; /* [SUMSQ_BLOCKS] the sum of squares' block partials */
    char who[48]; /* "rank R of N", for messages */
};

/* ---------------------------------------------------------------- errors */

/* A failed runtime call becomes err; its error is also taken off the
 * thread's last error, so that the next launch check does not report it
 * again (sticky errors stay, and show at the next wait). */
static enum accel_err fail(const struct shard_dev *d, cudaError_t e, const char *what,
                           struct accel_error *err)
{
    (void)cudaGetLastError();
    return accel_error_set(err, e == cudaErrorMemoryAllocation ? ACCEL_ENOMEM : ACCEL_EIO,
                           "%s: shard: %s: %s (%s)", d->who, what, cudaGetErrorString(e),
                           cudaGetErrorName(e));
}

static enum accel_err checked(const struct shard_dev *d, cudaError_t e, const char *what,
                              struct accel_error *err)
{
    return e == cudaSuccess ? ACCEL_OK : fail(d, e, what, err);
}

/* After a launch: a bad configuration or a sticky error from before. */
static enum accel_err launched(const struct shard_dev *d, const char *kernel, size_t n,
                               struct accel_error *err)
{
    cudaError_t e = cudaGetLastError();
    char what[96];

    if (e == cudaSuccess)
        return ACCEL_OK;
    snprintf(what, sizeof(what), "%s kernel on %zu elements", kernel, n);
    return fail(d, e, what, err);
}

static double mib(size_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0);
}

/* ---------------------------------------------------------------- kernels */

static unsigned blocks_for(size_t n, unsigned cap)
{
    size_t b = n / THREADS + (n % THREADS != 0);
    return b < cap ? (unsigned)b : cap;
}

/* The grid-stride loop of every kernel: a thread's first index and step,
 * in size_t (a count may pass 2^31). */
static __device__ inline size_t first_index(void)
{
    return (size_t)blockIdx.x * blockDim.x + threadIdx.x;
}

static __device__ inline size_t grid_stride(void)
{
    return (size_t)gridDim.x * blockDim.x;
}

static __global__ void __launch_bounds__(THREADS)
    k_narrow(uint16_t *dst, const float *src, size_t n, bool bf16)
{
    for (size_t i = first_index(); i < n; i += grid_stride()) {
        float f = src[i];
        dst[i] = bf16 ? comm__cvt_f32_to_bf16(f) : comm__cvt_f32_to_f16(f);
    }
}

static __global__ void __launch_bounds__(THREADS)
    k_widen(float *dst, const uint16_t *src, size_t n, bool bf16)
{
    for (size_t i = first_index(); i < n; i += grid_stride()) {
        uint16_t h = src[i];
        dst[i] = bf16 ? comm__cvt_bf16_to_f32(h) : comm__cvt_f16_to_f32(h);
    }
}

static __global__ void __launch_bounds__(THREADS)
    k_round(float *dst, const float *src, size_t n, bool bf16)
{
    for (size_t i = first_index(); i < n; i += grid_stride()) {
        float f = src[i];
        dst[i] = bf16 ? comm__cvt_bf16_to_f32(comm__cvt_f32_to_bf16(f))
                      : comm__cvt_f16_to_f32(comm__cvt_f32_to_f16(f));
    }
}

static __global__ void __launch_bounds__(THREADS)
    k_accumulate_f32(float *acc, const float *src, size_t n)
{
    for (size_t i = first_index(); i < n; i += grid_stride())
        acc[i] = SHARD_FADD(acc[i], src[i]);
}

static __global__ void __launch_bounds__(THREADS)
    k_accumulate_16(float *acc, const uint16_t *src, size_t n, bool bf16)
{
    for (size_t i = first_index(); i < n; i += grid_stride()) {
        uint16_t h = src[i];
        acc[i] = SHARD_FADD(acc[i], bf16 ? comm__cvt_bf16_to_f32(h) : comm__cvt_f16_to_f32(h));
    }
}

/* Block b's sum of the squares of its grid-stride elements into part[b]:
 * per thread in index order, then the 256 threads' sums by a fixed tree. */
static __global__ void __launch_bounds__(THREADS)
    k_sumsq_blocks(const float *g, size_t n, double *part)
{
    __shared__ double sum[THREADS];
    double a = 0.0;

    for (size_t i = first_index(); i < n; i += grid_stride())
        a = shard__sumsq_elem(a, g[i]);
    sum[threadIdx.x] = a;
    __syncthreads();
    for (unsigned w = THREADS / 2; w > 0; w /= 2) {
        if (threadIdx.x < w)
            sum[threadIdx.x] = SHARD_DADD(sum[threadIdx.x], sum[threadIdx.x + w]);
        __syncthreads();
    }
    if (threadIdx.x == 0)
        part[blockIdx.x] = sum[0];
}

/* One thread: *acc += the block partials, added in block order. */
static __global__ void k_sumsq_finish(const double *part, unsigned nb, double *acc)
{
    double t = 0.0;

    for (unsigned b = 0; b < nb; b++)
        t = SHARD_DADD(t, part[b]);
    *acc = SHARD_DADD(*acc, t);
}

static __global__ void __launch_bounds__(THREADS)
    k_adamw(struct shard_adamw_k k, float gmul, float *p, const float *g, float *m, float *v,
            size_t n)
{
    for (size_t i = first_index(); i < n; i += grid_stride())
        shard__adamw_elem(&k, gmul, &p[i], g[i], &m[i], &v[i]);
}

static __global__ void __launch_bounds__(THREADS)
    k_sgd(struct shard_sgd_k k, float gmul, float *p, const float *g, float *buf, size_t n)
{
    for (size_t i = first_index(); i < n; i += grid_stride())
        shard__sgd_elem(&k, gmul, &p[i], g[i], buf != NULL ? &buf[i] : NULL);
}

/* ---------------------------------------------------------------- memory */

static void dev_close(void *ctx)
{
    struct shard_dev *d = (struct shard_dev *)ctx;
    cudaError_t e;

    if (d == NULL)
        return;
    /* an event still pending is released once it completes */
    if (d->to_ev != NULL && (e = cudaEventDestroy(d->to_ev)) != cudaSuccess)
        accel_log(ACCEL_LOG_WARN, "%s: shard: cudaEventDestroy: %s", d->who, cudaGetErrorString(e));
    if (d->from_ev != NULL && (e = cudaEventDestroy(d->from_ev)) != cudaSuccess)
        accel_log(ACCEL_LOG_WARN, "%s: shard: cudaEventDestroy: %s", d->who, cudaGetErrorString(e));
    if (d->part != NULL && (e = cudaFreeAsync(d->part, d->stream)) != cudaSuccess)
        accel_log(ACCEL_LOG_WARN, "%s: shard: cudaFreeAsync: %s", d->who, cudaGetErrorString(e));
    /* frees still queued complete first: the pool goes when they have */
    if (d->pool != NULL && (e = cudaMemPoolDestroy(d->pool)) != cudaSuccess)
        accel_log(ACCEL_LOG_WARN, "%s: shard: cudaMemPoolDestroy: %s", d->who,
                  cudaGetErrorString(e));
    (void)cudaGetLastError();
    accel_free(d);
}

static void *dev_alloc(void *ctx, size_t bytes, const char *unit, const char *what,
                       enum accel_err *rc, struct accel_error *err)
{
    struct shard_dev *d = (struct shard_dev *)ctx;
    char op[512]; /* a unit name is at most 256 bytes */
    void *p = NULL;
    cudaError_t e;

    snprintf(op, sizeof(op), "cudaMallocAsync of %s%s%s%s (%.1f MiB)", unit != NULL ? "unit " : "",
             unit != NULL ? unit : "", unit != NULL ? "'s " : "", what, mib(bytes));
    e = cudaMallocFromPoolAsync(&p, bytes > 0 ? bytes : 1, d->pool, d->stream);
    if (e != cudaSuccess) {
        *rc = fail(d, e, op, err);
        return NULL;
    }
    if (bytes > 0 && (e = cudaMemsetAsync(p, 0, bytes, d->stream)) != cudaSuccess) {
        snprintf(op, sizeof(op), "cudaMemsetAsync of a new %.1f MiB buffer", mib(bytes));
        *rc = fail(d, e, op, err);
        (void)cudaFreeAsync(p, d->stream);
        (void)cudaGetLastError();
        return NULL;
    }
    return p;
}

static void *dev_pinned_alloc(void *ctx, size_t bytes)
{
    struct shard_dev *d = (struct shard_dev *)ctx;
    void *p = NULL;
    cudaError_t e = cudaMallocHost(&p, bytes > 0 ? bytes : 1);

    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        accel_log(ACCEL_LOG_WARN, "%s: shard: cudaMallocHost of %.1f MiB: %s", d->who, mib(bytes),
                  cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

static void dev_pinned_free(void *ctx, void *p)
{
    (void)ctx;
    if (p != NULL && cudaFreeHost(p) != cudaSuccess)
        (void)cudaGetLastError();
}

static void dev_free(void *ctx, void *p)
{
    struct shard_dev *d = (struct shard_dev *)ctx;
    cudaError_t e;

    if (p == NULL || d == NULL)
        return;
    if ((e = cudaFreeAsync(p, d->stream)) != cudaSuccess) {
        (void)cudaGetLastError();
        accel_log(ACCEL_LOG_WARN, "%s: shard: cudaFreeAsync: %s", d->who, cudaGetErrorString(e));
    }
}

static enum accel_err dev_open(void **ctx, struct accel_comm *comm, struct accel_error *err)
{
    struct shard_dev *d;
    cudaMemPoolProps props;
    uint64_t keep = UINT64_MAX; /* bytes the pool may hold unused: all */
    int pools = 0;
    enum accel_err rc = ACCEL_OK;

    *ctx = NULL;
    d = (struct shard_dev *)accel_calloc(1, sizeof(*d));
    if (d == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "shard: out of memory");
    d->comm = comm;
    d->stream = (cudaStream_t)accel_comm_cuda_stream(comm);
    snprintf(d->who, sizeof(d->who), "rank %u of %u", accel_comm_rank(comm), accel_comm_size(comm));
    if (d->stream == NULL) {
        rc = accel_error_set(err, ACCEL_EINVAL, "%s: shard: the %s communicator has no CUDA stream",
                             d->who, accel_comm_backend(comm));
        goto fail;
    }
    if ((rc = checked(d, cudaGetDevice(&d->device), "cudaGetDevice", err)) != ACCEL_OK ||
        (rc = checked(d, cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, d->device),
                      "cudaDeviceGetAttribute(cudaDevAttrMemoryPoolsSupported)", err)) != ACCEL_OK)
        goto fail;
    if (!pools) {
        rc = accel_error_set(err, ACCEL_EUNSUPPORTED,
                             "%s: shard: CUDA device %d has no stream-ordered memory pools "
                             "(cudaDevAttrMemoryPoolsSupported is 0), which core/shard needs",
                             d->who, d->device);
        goto fail;
    }
    memset(&props, 0, sizeof(props));
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = d->device;
    if ((rc = checked(d, cudaMemPoolCreate(&d->pool, &props), "cudaMemPoolCreate", err)) !=
        ACCEL_OK) {
        d->pool = NULL;
        goto fail;
    }
    if ((rc = checked(d, cudaMemPoolSetAttribute(d->pool, cudaMemPoolAttrReleaseThreshold, &keep),
                      "cudaMemPoolSetAttribute(cudaMemPoolAttrReleaseThreshold)", err)) != ACCEL_OK)
        goto fail;
    d->part = (double *)dev_alloc(d, SUMSQ_BLOCKS * sizeof(double), NULL,
                                  "the sum of squares' partials", &rc, err);
    if (d->part == NULL)
        goto fail;
    *ctx = d;
    return ACCEL_OK;
fail:
    dev_close(d);
    return rc;
}

static enum accel_err dev_zero(void *ctx, void *p, size_t bytes, struct accel_error *err)
{
    struct shard_dev *d = (struct shard_dev *)ctx;

    if (bytes == 0)
        return ACCEL_OK;
    return checked(d, cudaMemsetAsync(p, 0, bytes, d->stream), "cudaMemsetAsync", err);
}

static enum accel_err dev_copy(void *ctx, void *dst, const void *src, size_t bytes,
                               struct accel_error *err)
{
    struct shard_dev *d = (struct shard_dev *)ctx;

    if (bytes == 0 || dst == src)
        return ACCEL_OK;
    return checked(d, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, d->stream),
                   "cudaMemcpyAsync device to device", err);
}

/* A copy between host and device, complete on return.  The stream is
 * drained first (bounded, through the communicator): a pageable copy behind
 * a stuck collective could otherwise block without a deadline. */
static enum accel_err copy_sync(struct shard_dev *d, void *dst, const void *src, size_t bytes,
                                cudaMemcpyKind kind, const char *what, struct accel_error *err)
{
    enum accel_err rc;

    if ((rc = accel_comm_sync(d->comm, err)) != ACCEL_OK || bytes == 0)
        return rc;
    rc = checked(d, cudaMemcpyAsync(dst, src, bytes, kind, d->stream), what, err);
    return rc != ACCEL_OK ? rc : accel_comm_sync(d->comm, err);
}

/* Host to device. */
static enum accel_err dev_put(void *ctx, void *dst, const void *host, size_t bytes,
                              struct accel_error *err)
{
    return copy_sync((struct shard_dev *)ctx, dst, host, bytes, cudaMemcpyHostToDevice,
                     "cudaMemcpyAsync host to device", err);
}

/* Device to host, after everything queued so far. */
static enum accel_err dev_get(void *ctx, void *host, const void *src, size_t bytes,
                              struct accel_error *err)
{
    return copy_sync((struct shard_dev *)ctx, host, src, bytes, cudaMemcpyDeviceToHost,
                     "cudaMemcpyAsync device to host", err);
}

/* ---------------------------------------------------------------- element-wise work */

static enum accel_err dev_narrow(void *ctx, void *dst, const float *src, size_t n,
                                 enum accel_dtype t, struct accel_error *err)
{
    struct shard_dev *d = (struct shard_dev *)ctx;

    if (t == ACCEL_F32)
        return dev_copy(ctx, dst, src, n * sizeof(float), err);
    if (n == 0)
        return ACCEL_OK;
    k_narrow<<<blocks_for(n, MAX_BLOCKS), THREADS, 0, d->stream>>>((uint16_t *)dst, src, n,
                                                                   t == ACCEL_BF16);
    return launched(d, "narrow", n, err);
}

static enum accel_err dev_widen(void *ctx, float *dst, const void *src, size_t n,
                                enum accel_dtype t, struct accel_error *err)
{
    struct shard_dev *d = (struct shard_dev *)ctx;

    if (t == ACCEL_F32)
        return dev_copy(ctx, dst, src, n * sizeof(float), err);
    if (n == 0)
        return ACCEL_OK;
    k_widen<<<blocks_for(n, MAX_BLOCKS), THREADS, 0, d->stream>>>(dst, (const uint16_t *)src, n,
                                                                  t == ACCEL_BF16);
    return launched(d, "widen", n, err);
}

static enum accel_err dev_round(void *ctx, float *dst, const float *src, size_t n,
                                enum accel_dtype t, struct accel_error *err)
{
    struct shard_dev *d = (struct shard_dev *)ctx;

    if (t == ACCEL_F32)
        return dev_copy(ctx, dst, src, n * sizeof(float), err);
    if (n == 0)
        return ACCEL_OK;
    k_round<<<blocks_for(n, MAX_BLOCKS), THREADS, 0, d->stream>>>(dst, src, n, t == ACCEL_BF16);
    return launched(d, "round", n, err);
}

static enum accel_err dev_accumulate(void *ctx, float *acc, const void *src, size_t n,
                                     enum accel_dtype t, struct accel_error *err)
{
    struct shard_dev *d = (struct shard_dev *)ctx;
    unsigned nb = blocks_for(n, MAX_BLOCKS);

    if (n == 0)
        return ACCEL_OK;
    if (t == ACCEL_F32)
        k_accumulate_f32<<<nb, THREADS, 0, d->stream>>>(acc, (const float *)src, n);
    else
        k_accumulate_16<<<nb, THREADS, 0, d->stream>>>(acc, (const uint16_t *)src, n,
                                                       t == ACCEL_BF16);
    return launched(d, "accumulate", n, err);
}

static enum accel_err dev_sumsq(void *ctx, const float *g, size_t n, double *acc,
                                struct accel_error *err)
{
    struct shard_dev *d = (struct shard_dev *)ctx;
    unsigned nb = blocks_for(n, SUMSQ_BLOCKS);
    enum accel_err rc;

    if (n == 0)
        return ACCEL_OK;
    k_sumsq_blocks<<<nb, THREADS, 0, d->stream>>>(g, n, d->part);
    if ((rc = launched(d, "sum of squares", n, err)) != ACCEL_OK)
        return rc;
    k_sumsq_finish<<<1, 1, 0, d->stream>>>(d->part, nb, acc);
    return launched(d, "sum of the block partials", nb, err);
}

static enum accel_err dev_adamw(void *ctx, const struct shard_adamw_k *k, float gmul, float *p,
                                const float *g, float *m, float *v, size_t n,
                                struct accel_error *err)
{
    struct shard_dev *d = (struct shard_dev *)ctx;

    if (n == 0)
        return ACCEL_OK;
    k_adamw<<<blocks_for(n, MAX_BLOCKS), THREADS, 0, d->stream>>>(*k, gmul, p, g, m, v, n);
    return launched(d, "AdamW", n, err);
}

static enum accel_err dev_sgd(void *ctx, const struct shard_sgd_k *k, float gmul, float *p,
                              const float *g, float *buf, size_t n, struct accel_error *err)
{
    struct shard_dev *d = (struct shard_dev *)ctx;

    if (n == 0)
        return ACCEL_OK;
    k_sgd<<<blocks_for(n, MAX_BLOCKS), THREADS, 0, d->stream>>>(*k, gmul, p, g, buf, n);
    return launched(d, "SGD", n, err);
}

/* ---------------------------------------------------------------- the compute stream */

/* Work queued on the compute stream from now on runs after everything
 * queued on the communicator's stream so far. */
static enum accel_err dev_to_compute(void *ctx, struct accel_error *err)
{
    struct shard_dev *d = (struct shard_dev *)ctx;
    enum accel_err rc;

    if (d->compute == NULL)
        return ACCEL_OK;
    if ((rc = checked(d, cudaEventRecord(d->to_ev, d->stream),
                      "cudaEventRecord on the communicator's stream", err)) != ACCEL_OK)
        return rc;
    return checked(d, cudaStreamWaitEvent(d->compute, d->to_ev, 0),
                   "cudaStreamWaitEvent (the compute stream after the communicator's)", err);
}

/* Work queued on the communicator's stream from now on (the shard's, and
 * NCCL's collectives) runs after everything queued on the compute stream so
 * far. */
static enum accel_err dev_from_compute(void *ctx, struct accel_error *err)
{
    struct shard_dev *d = (struct shard_dev *)ctx;
    enum accel_err rc;

    if (d->compute == NULL)
        return ACCEL_OK;
    if ((rc = checked(d, cudaEventRecord(d->from_ev, d->compute),
                      "cudaEventRecord on the compute stream", err)) != ACCEL_OK)
        return rc;
    return checked(d, cudaStreamWaitEvent(d->stream, d->from_ev, 0),
                   "cudaStreamWaitEvent (the communicator's stream after the compute stream)", err);
}

/* Binds the compute stream: the old one's work is handed to the
 * communicator's stream, and that to the new one, so nothing queued before
 * the switch is left unordered. */
static enum accel_err dev_set_compute(void *ctx, void *stream, struct accel_error *err)
{
    struct shard_dev *d = (struct shard_dev *)ctx;
    cudaStream_t c = (cudaStream_t)stream;
    enum accel_err rc;

    if (c == d->stream)
        c = NULL;
    if (c == d->compute)
        return ACCEL_OK;
    if (c != NULL && d->to_ev == NULL) {
        if ((rc = checked(d, cudaEventCreateWithFlags(&d->to_ev, cudaEventDisableTiming),
                          "cudaEventCreateWithFlags", err)) != ACCEL_OK) {
            d->to_ev = NULL;
            return rc;
        }
        if ((rc = checked(d, cudaEventCreateWithFlags(&d->from_ev, cudaEventDisableTiming),
                          "cudaEventCreateWithFlags", err)) != ACCEL_OK) {
            (void)cudaEventDestroy(d->to_ev);
            d->to_ev = d->from_ev = NULL;
            return rc;
        }
    }
    if ((rc = dev_from_compute(d, err)) != ACCEL_OK)
        return rc;
    d->compute = c;
    return dev_to_compute(d, err);
}

/* In mem_int.h's order (C++17 has no designated initializers). */
const struct shard_mem_ops shard__cuda_ops = {
    "cuda",           /* name */
    false,            /* in_place: kernels run in parallel */
    dev_open,         /* open */
    dev_close,        /* close */
    dev_alloc,        /* alloc */
    dev_free,         /* free */
    dev_pinned_alloc, /* pinned_alloc */
    dev_pinned_free,  /* pinned_free */
    dev_zero,         /* zero */
    dev_copy,         /* copy */
    dev_put,          /* put */
    dev_get,          /* get */
    dev_narrow,       /* narrow */
    dev_widen,        /* widen */
    dev_round,        /* round */
    dev_accumulate,   /* accumulate */
    dev_sumsq,        /* sumsq */
    dev_adamw,        /* adamw */
    dev_sgd,          /* sgd */
    dev_set_compute,  /* set_compute */
    dev_to_compute,   /* to_compute */
    dev_from_compute, /* from_compute */
};
