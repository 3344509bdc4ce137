/*
 * nccl.c: the `nccl` backend of core/comm: collectives on CUDA device buffers
 * through NCCL, with every wait bounded (DESIGN decision 8).
 *
 * Init: rank 0 calls ncclGetUniqueId and publishes the 128 bytes in the
 * rendezvous store under the communicator's prefix; the other ranks read them
 * there.  Each rank selects its device, creates a non-blocking communicator
 * (ncclConfig_t.blocking = 0) and polls ncclCommGetAsyncError until it is
 * ready, until the deadline, or until another rank reports in the store that
 * its own init failed; on timeout or error it calls ncclCommAbort, so no rank
 * is left inside NCCL.  Ranks are NCCL ranks as given: the caller passes them
 * in the topology plan's order (contiguous per node, nodes in switch order).
 *
 * Operations queue on the communicator's stream (the caller's, or one this
 * file creates) and return once NCCL has queued them; a non-blocking
 * communicator may answer ncclInProgress while it queues, which is waited
 * out (bounded) before returning, so later work on the stream is ordered
 * after the collective.  sync polls cudaStreamQuery and ncclCommGetAsyncError
 * until the stream is idle, with the deadline; a timeout or an asynchronous
 * NCCL error (a dead peer, a network failure) aborts the communicator.
 *
 * It does not: pick the device from LOCAL_RANK (the caller sets
 * opts->cuda_device), keep using the store after init and split, retry, or
 * shrink a communicator around a dead rank.
 */
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "accel/alloc.h"
#include "accel/clock.h"
#include "accel/log.h"
#include "comm_int.h"
#include "nccl_impl.h"
#include "nccl_int.h"

#define DEFAULT_TIMEOUT_S ACCEL_STORE_DEFAULT_TIMEOUT_S

struct nccl_impl {
    ncclComm_t comm; /* NULL once aborted */
    cudaStream_t stream;
    bool own_stream; /* created here, destroyed by free */
    int device;      /* the CUDA device of comm */
    float *scratch;  /* one f32 on the device: the barrier's all-reduce */
};

/* Between two polls: yield for the first few (a collective that is about to
 * finish), then 50 us, then 1 ms after about 50 ms of waiting. */
static void poll_pause(unsigned *n)
{
    struct timespec ts = {0, 1000000};

    if (*n < 64) {
        (*n)++;
        sched_yield();
        return;
    }
    if (*n < 1064) {
        (*n)++;
        ts.tv_nsec = 50000;
    }
    nanosleep(&ts, NULL);
}

static void abort_comm(struct nccl_impl *im)
{
    if (im->comm != NULL) {
        ncclResult_t r = ncclCommAbort(im->comm);
        if (r != ncclSuccess)
            accel_log(ACCEL_LOG_WARN, "nccl: ncclCommAbort: %s", ncclGetErrorString(r));
        im->comm = NULL;
    }
}

/* After an error: abort now (a kernel waiting for a dead peer is stopped, so
 * the stream drains) and refuse everything but free. */
static void fail_comm(struct accel_comm *c)
{
    struct nccl_impl *im = c->impl;

    c->failed = true;
    if (im != NULL)
        abort_comm(im);
}

/* ---------------------------------------------------------------- waiting */

/* Polls comm until it leaves ncclInProgress: ACCEL_OK on ncclSuccess; an error
 * on a NCCL error, at the deadline, or when the board shows a failed rank
 * (then *told, which may be NULL, is set: that rank has said why already).
 * `first` is what the call that started the work returned.  The caller aborts
 * comm on error. */
static enum accel_err wait_ready(const struct accel_comm *c, ncclComm_t comm, ncclResult_t first,
                                 const char *what, double t0, double deadline,
                                 struct comm__nccl_board *b, bool *told, struct accel_error *err)
{
    ncclResult_t st = first;
    unsigned spins = 0;
    char why[640];

    for (;;) {
        if (st == ncclSuccess)
            return ACCEL_OK;
        if (st != ncclInProgress)
            return accel_error_set(err, comm__nccl_code(st),
                                   "rank %u of %u: nccl: %s failed after %.1f s: %s; communicator "
                                   "aborted",
                                   c->rank, c->size, what, accel_now() - t0,
                                   comm__nccl_why(st, comm, why, sizeof(why)));
        if (accel_now() >= deadline)
            return accel_error_set(err, ACCEL_ETIMEDOUT,
                                   "rank %u of %u: nccl: %s did not complete within %.1f s (a rank "
                                   "never joined, or is stuck); communicator aborted",
                                   c->rank, c->size, what, deadline - t0);
        if (b != NULL && comm__nccl_board_failed(b, why, sizeof(why))) {
            if (told != NULL)
                *told = true;
            return accel_error_set(err, ACCEL_EPEER,
                                   "rank %u of %u: nccl: %s: another rank failed after %.1f s: "
                                   "%s; communicator aborted",
                                   c->rank, c->size, what, accel_now() - t0, why);
        }
        poll_pause(&spins);
        ncclResult_t r = ncclCommGetAsyncError(comm, &st);
        if (r != ncclSuccess)
            st = r;
    }
}

static double timeout_of(const struct accel_comm *c)
{
    return c->timeout_s > 0 ? c->timeout_s : DEFAULT_TIMEOUT_S;
}

/* ---------------------------------------------------------------- operations */

static bool nccl_type(enum accel_dtype t, ncclDataType_t *out)
{
    switch (t) {
    case ACCEL_F32:
        *out = ncclFloat32;
        return true;
    case ACCEL_BF16:
        *out = ncclBfloat16;
        return true;
    case ACCEL_F16:
        *out = ncclFloat16;
        return true;
    }
    return false;
}

static bool nccl_op(enum accel_redop op, ncclRedOp_t *out)
{
    switch (op) {
    case ACCEL_SUM:
        *out = ncclSum;
        return true;
    case ACCEL_AVG:
        *out = ncclAvg;
        return true;
    }
    return false;
}

/* Before an operation: an asynchronous error already raised (a peer died
 * since the last call) fails it at once. */
static enum accel_err check_async(struct accel_comm *c, const char *what, struct accel_error *err)
{
    struct nccl_impl *im = c->impl;
    ncclResult_t st = ncclSuccess, r;
    char why[512];

    if (im == NULL || im->comm == NULL) {
        c->failed = true;
        return accel_error_set(err, ACCEL_EINVAL, "rank %u of %u: nccl: %s: communicator aborted",
                               c->rank, c->size, what);
    }
    r = ncclCommGetAsyncError(im->comm, &st);
    if (r != ncclSuccess)
        st = r;
    if (st == ncclSuccess || st == ncclInProgress)
        return ACCEL_OK;
    accel_error_set(err, comm__nccl_code(st), "rank %u of %u: nccl: %s: %s; communicator aborted",
                    c->rank, c->size, what, comm__nccl_why(st, im->comm, why, sizeof(why)));
    fail_comm(c);
    return comm__nccl_code(st);
}

/* After an operation was handed to NCCL: waits (bounded) until it is queued
 * on the stream. */
static enum accel_err queued(struct accel_comm *c, ncclResult_t r, const char *what,
                             struct accel_error *err)
{
    struct nccl_impl *im = c->impl;
    double t0;
    enum accel_err rc;

    if (r == ncclSuccess)
        return ACCEL_OK;
    t0 = accel_now();
    rc = wait_ready(c, im->comm, r, what, t0, t0 + timeout_of(c), NULL, NULL, err);
    if (rc != ACCEL_OK)
        fail_comm(c);
    return rc;
}

static enum accel_err bad_args(const struct accel_comm *c, const char *what,
                               struct accel_error *err)
{
    return accel_error_set(err, ACCEL_EINVAL, "rank %u of %u: nccl: %s: unknown type or operation",
                           c->rank, c->size, what);
}

static enum accel_err nccl_all_reduce(struct accel_comm *c, const void *send, void *recv,
                                      size_t count, enum accel_dtype t, enum accel_redop op,
                                      struct accel_error *err)
{
    struct nccl_impl *im = c->impl;
    ncclDataType_t dt;
    ncclRedOp_t ro;
    enum accel_err rc;

    if (!nccl_type(t, &dt) || !nccl_op(op, &ro))
        return bad_args(c, "all_reduce", err);
    if ((rc = check_async(c, "all_reduce", err)) != ACCEL_OK)
        return rc;
    return queued(c, ncclAllReduce(send, recv, count, dt, ro, im->comm, im->stream), "all_reduce",
                  err);
}

static enum accel_err nccl_reduce_scatter(struct accel_comm *c, const void *send, void *recv,
                                          size_t recvcount, enum accel_dtype t, enum accel_redop op,
                                          struct accel_error *err)
{
    struct nccl_impl *im = c->impl;
    ncclDataType_t dt;
    ncclRedOp_t ro;
    enum accel_err rc;

    if (!nccl_type(t, &dt) || !nccl_op(op, &ro))
        return bad_args(c, "reduce_scatter", err);
    if ((rc = check_async(c, "reduce_scatter", err)) != ACCEL_OK)
        return rc;
    return queued(c, ncclReduceScatter(send, recv, recvcount, dt, ro, im->comm, im->stream),
                  "reduce_scatter", err);
}

static enum accel_err nccl_all_gather(struct accel_comm *c, const void *send, void *recv,
                                      size_t sendcount, enum accel_dtype t, struct accel_error *err)
{
    struct nccl_impl *im = c->impl;
    ncclDataType_t dt;
    enum accel_err rc;

    if (!nccl_type(t, &dt))
        return bad_args(c, "all_gather", err);
    if ((rc = check_async(c, "all_gather", err)) != ACCEL_OK)
        return rc;
    return queued(c, ncclAllGather(send, recv, sendcount, dt, im->comm, im->stream), "all_gather",
                  err);
}

static enum accel_err nccl_broadcast(struct accel_comm *c, const void *send, void *recv,
                                     size_t count, enum accel_dtype t, unsigned root,
                                     struct accel_error *err)
{
    struct nccl_impl *im = c->impl;
    ncclDataType_t dt;
    enum accel_err rc;

    if (!nccl_type(t, &dt) || root >= c->size)
        return bad_args(c, "broadcast", err);
    if ((rc = check_async(c, "broadcast", err)) != ACCEL_OK)
        return rc;
    return queued(c, ncclBroadcast(send, recv, count, dt, (int)root, im->comm, im->stream),
                  "broadcast", err);
}

static enum accel_err nccl_sync(struct accel_comm *c, struct accel_error *err)
{
    struct nccl_impl *im = c->impl;
    double t0 = accel_now(), deadline = t0 + timeout_of(c);
    unsigned spins = 0;
    enum accel_err rc;
    char why[512];

    if ((rc = check_async(c, "sync", err)) != ACCEL_OK)
        return rc;
    for (;;) {
        cudaError_t q = cudaStreamQuery(im->stream);
        ncclResult_t st = ncclSuccess, r = ncclCommGetAsyncError(im->comm, &st);

        if (r != ncclSuccess)
            st = r;
        if (st != ncclSuccess && st != ncclInProgress) {
            rc = accel_error_set(
                err, comm__nccl_code(st),
                "rank %u of %u: nccl: sync failed after %.1f s: %s; communicator aborted", c->rank,
                c->size, accel_now() - t0, comm__nccl_why(st, im->comm, why, sizeof(why)));
            break;
        }
        if (q == cudaSuccess)
            return ACCEL_OK;
        if (q != cudaErrorNotReady) {
            rc = accel_error_set(err, ACCEL_EIO,
                                 "rank %u of %u: nccl: sync: CUDA error on the stream: %s (%s); "
                                 "communicator aborted",
                                 c->rank, c->size, cudaGetErrorName(q), cudaGetErrorString(q));
            break;
        }
        if (accel_now() >= deadline) {
            rc = accel_error_set(err, ACCEL_ETIMEDOUT,
                                 "rank %u of %u: nccl: sync: the queued operations did not "
                                 "complete within %.1f s (a rank is gone or stuck); communicator "
                                 "aborted",
                                 c->rank, c->size, deadline - t0);
            break;
        }
        poll_pause(&spins);
    }
    fail_comm(c);
    return rc;
}

/* NCCL has no barrier: an all-reduce of one f32, then sync. */
static enum accel_err nccl_barrier(struct accel_comm *c, struct accel_error *err)
{
    struct nccl_impl *im = c->impl;
    enum accel_err rc;

    if ((rc = check_async(c, "barrier", err)) != ACCEL_OK)
        return rc;
    rc = queued(
        c, ncclAllReduce(im->scratch, im->scratch, 1, ncclFloat32, ncclSum, im->comm, im->stream),
        "barrier", err);
    if (rc != ACCEL_OK)
        return rc;
    return nccl_sync(c, err);
}

/* ---------------------------------------------------------------- life cycle */

/* Frees what im holds.  A communicator that is still there is finalized and
 * destroyed (bounded by timeout_s), or aborted after a failure or when
 * finalize does not complete. */
static void release(struct nccl_impl *im, bool failed, double timeout_s)
{
    int was = -1;

    if (im == NULL)
        return;
    /* the device of im for the frees, then back to the caller's */
    if (im->device >= 0 && cudaGetDevice(&was) == cudaSuccess && was != im->device)
        (void)cudaSetDevice(im->device);
    if (im->comm != NULL && !failed) {
        double t0 = accel_now();
        ncclResult_t st = ncclCommFinalize(im->comm);
        unsigned spins = 0;

        while (st == ncclInProgress && accel_now() < t0 + timeout_s) {
            poll_pause(&spins);
            if (ncclCommGetAsyncError(im->comm, &st) != ncclSuccess)
                st = ncclInternalError;
        }
        if (st == ncclSuccess) {
            st = ncclCommDestroy(im->comm);
            if (st != ncclSuccess)
                accel_log(ACCEL_LOG_WARN, "nccl: ncclCommDestroy: %s", ncclGetErrorString(st));
            im->comm = NULL;
        } else {
            accel_log(ACCEL_LOG_WARN, "nccl: finalize %s; aborting the communicator",
                      st == ncclInProgress ? "did not complete in time" : ncclGetErrorString(st));
        }
    }
    abort_comm(im);
    if (im->scratch != NULL)
        (void)cudaFree(im->scratch);
    if (im->own_stream && im->stream != NULL)
        (void)cudaStreamDestroy(im->stream);
    if (was >= 0 && was != im->device)
        (void)cudaSetDevice(was);
    (void)cudaGetLastError();
    accel_free(im);
}

static void nccl_free(struct accel_comm *c)
{
    if (c == NULL)
        return;
    release(c->impl, c->failed, timeout_of(c));
    c->impl = NULL;
}

/* The stream and the barrier's scratch word of a new communicator. */
static enum accel_err setup_stream(const struct accel_comm *c, struct nccl_impl *im,
                                   void *user_stream, struct accel_error *err)
{
    cudaError_t e;

    if (user_stream != NULL) {
        im->stream = (cudaStream_t)user_stream;
    } else {
        e = cudaStreamCreateWithFlags(&im->stream, cudaStreamNonBlocking);
        if (e != cudaSuccess)
            return accel_error_set(err, ACCEL_EIO,
                                   "rank %u of %u: nccl: couldn't create a CUDA stream: %s",
                                   c->rank, c->size, cudaGetErrorString(e));
        im->own_stream = true;
    }
    e = cudaMalloc((void **)&im->scratch, sizeof(float));
    if (e != cudaSuccess) {
        im->scratch = NULL;
        return accel_error_set(err, ACCEL_ENOMEM,
                               "rank %u of %u: nccl: couldn't allocate device memory: %s", c->rank,
                               c->size, cudaGetErrorString(e));
    }
    /* sums of 0 stay 0; on the communicator's stream, which the legacy
     * default stream does not order with a non-blocking one */
    e = cudaMemsetAsync(im->scratch, 0, sizeof(float), im->stream);
    if (e != cudaSuccess)
        return accel_error_set(err, ACCEL_EIO,
                               "rank %u of %u: nccl: couldn't clear device memory: %s", c->rank,
                               c->size, cudaGetErrorString(e));
    return ACCEL_OK;
}

/* Checks that a device is there and selects opts->cuda_device. */
static enum accel_err open_device(const struct accel_comm *c, int want, struct nccl_impl *im,
                                  struct accel_error *err)
{
    char why[256];
    int n = comm__nccl_device_count(why, sizeof(why)), dev = 0;
    cudaError_t e;

    if (n == 0)
        return accel_error_set(err, ACCEL_EUNSUPPORTED,
                               "rank %u of %u: nccl: no CUDA device (%s); use the socket backend "
                               "on CPUs",
                               c->rank, c->size, why);
    if (want >= n)
        return accel_error_set(err, ACCEL_EINVAL,
                               "rank %u of %u: nccl: CUDA device %d asked for, this process sees "
                               "%d (CUDA_VISIBLE_DEVICES=%s)",
                               c->rank, c->size, want, n,
                               getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES")
                                                              : "unset");
    e = want >= 0 ? cudaSetDevice(want) : cudaGetDevice(&dev);
    if (e != cudaSuccess && want >= 0)
        return accel_error_set(err, ACCEL_EIO,
                               "rank %u of %u: nccl: couldn't select CUDA device %d: %s", c->rank,
                               c->size, want, cudaGetErrorString(e));
    if (e != cudaSuccess)
        return accel_error_set(err, ACCEL_EIO,
                               "rank %u of %u: nccl: couldn't read the current CUDA device: %s",
                               c->rank, c->size, cudaGetErrorString(e));
    im->device = want >= 0 ? want : dev;
    return ACCEL_OK;
}

static enum accel_err nccl_split(struct accel_comm *c, int color, int key, struct accel_comm **out,
                                 struct accel_error *err);

static void *nccl_stream(const struct accel_comm *c)
{
    const struct nccl_impl *im = c->impl;
    return im != NULL ? (void *)im->stream : NULL;
}

static const struct accel_comm_ops nccl_ops = {
    .name = "nccl",
    .all_reduce = nccl_all_reduce,
    .reduce_scatter = nccl_reduce_scatter,
    .all_gather = nccl_all_gather,
    .broadcast = nccl_broadcast,
    .barrier = nccl_barrier,
    .sync = nccl_sync,
    .split = nccl_split,
    .free = nccl_free,
    .stream = nccl_stream,
};

enum accel_err comm__nccl_init(struct accel_comm *c, const struct accel_comm_opts *opts,
                               struct accel_error *err)
{
    double t0 = accel_now(), deadline = t0 + timeout_of(c);
    struct nccl_impl *im = NULL;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclUniqueId id;
    struct comm__nccl_board b;
    enum accel_err rc;
    ncclResult_t r;
    bool have_id = false, peer_failed = false;

    if (c->size == 0 || c->size > INT_MAX || c->rank >= c->size ||
        (c->store == NULL && c->size > 1))
        return accel_error_set(err, ACCEL_EINVAL, "nccl: rank %u of %u%s", c->rank, c->size,
                               c->store == NULL ? ", no store" : "");
    comm__nccl_board_init(&b, c->store, c->prefix, "nccl/");
    im = accel_calloc(1, sizeof(*im));
    if (im == NULL) {
        rc = accel_error_set(err, ACCEL_ENOMEM, "rank %u of %u: nccl: out of memory", c->rank,
                             c->size);
        goto out;
    }
    im->device = -1;
    rc = open_device(c, opts != NULL ? opts->cuda_device : -1, im, err);
    if (rc != ACCEL_OK)
        goto out;
    /* world 1 may come without a store: nothing to exchange */
    if (c->store != NULL)
        rc = comm__nccl_exchange_id(c->store, c->prefix, c->rank, c->size,
                                    (unsigned char *)id.internal, err);
    else
        rc = comm__nccl_unique_id((unsigned char *)id.internal, err);
    if (rc != ACCEL_OK) {
        peer_failed = rc == ACCEL_EPEER; /* rank 0 told us: nothing to add */
        have_id = c->rank == 0;          /* rank 0 published its failure already */
        goto out;
    }
    have_id = true;
    rc = setup_stream(c, im, opts != NULL ? opts->cuda_stream : NULL, err);
    if (rc != ACCEL_OK)
        goto out;

    cfg.blocking = 0;
    cfg.commName = c->prefix;
    /* an error returned at once (no device usable by NCCL, a bad id) goes
     * through wait_ready too, for one message format */
    r = ncclCommInitRankConfig(&im->comm, (int)c->size, id, (int)c->rank, &cfg);
    rc = wait_ready(c, im->comm, r, "init", t0, deadline, &b, &peer_failed, err);

out:
    if (rc != ACCEL_OK) {
        const char *msg = err != NULL ? err->msg : accel_strerror(rc);
        if (c->rank == 0 && !have_id && c->store != NULL)
            comm__nccl_publish_id_failure(c->store, c->prefix, msg);
        else if (!peer_failed)
            comm__nccl_board_post(&b, msg);
        release(im, true, 0);
        c->impl = NULL;
        return rc;
    }
    c->ops = &nccl_ops;
    c->impl = im;
    return ACCEL_OK;
}

static enum accel_err nccl_split(struct accel_comm *c, int color, int key, struct accel_comm **out,
                                 struct accel_error *err)
{
    struct nccl_impl *pim = c->impl, *im = NULL;
    struct accel_comm *child = NULL;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclComm_t newcomm = NULL;
    double t0 = accel_now(), deadline = t0 + timeout_of(c);
    unsigned gen = c->generation++;
    char sub[48], why[512];
    struct comm__nccl_board b;
    enum accel_err rc;
    ncclResult_t r;
    int nrank = 0, nsize = 0;
    bool peer_failed = false;

    *out = NULL;
    if ((rc = check_async(c, "split", err)) != ACCEL_OK)
        return rc;
    snprintf(sub, sizeof(sub), "nccl/split%u/", gen);
    comm__nccl_board_init(&b, c->store, c->prefix, sub);
    cfg.blocking = 0;
    if (color >= 0) {
        child = accel_calloc(1, sizeof(*child));
        im = accel_calloc(1, sizeof(*im));
        if (child == NULL || im == NULL) {
            rc = accel_error_set(err, ACCEL_ENOMEM, "rank %u of %u: nccl: split: out of memory",
                                 c->rank, c->size);
            goto out; /* the other ranks time out in the split or see the board */
        }
        im->device = pim->device;
        /* as the socket backend names them: split 0 of "c0/", color 3, is
         * "c0/s0.3/" */
        if (snprintf(child->prefix, sizeof(child->prefix), "%ss%u.%d/", c->prefix, gen, color) >=
            (int)sizeof(child->prefix)) {
            rc = accel_error_set(err, ACCEL_ETOOBIG,
                                 "rank %u of %u: nccl: split: %s is split too deeply to name",
                                 c->rank, c->size, c->prefix);
            goto out;
        }
        cfg.commName = child->prefix;
    }
    /* Non-blocking: NCCL splits in a thread of its own and reports on the
     * parent, whose state is ncclInProgress until then; newcomm is written
     * by that thread when the split completes (NULL until then, and for
     * NCCL_SPLIT_NOCOLOR). */
    r = ncclCommSplit(pim->comm, color >= 0 ? color : NCCL_SPLIT_NOCOLOR, key, &newcomm, &cfg);
    rc = wait_ready(c, pim->comm, r, "split", t0, deadline, &b, &peer_failed, err);
    if (rc != ACCEL_OK || color < 0)
        goto out;
    if (newcomm == NULL) {
        rc = accel_error_set(err, ACCEL_EIO, "rank %u of %u: nccl: split gave no communicator",
                             c->rank, c->size);
        goto out;
    }
    rc = wait_ready(c, newcomm, ncclInProgress, "split", t0, deadline, &b, &peer_failed, err);
    if (rc != ACCEL_OK)
        goto out;
    if ((r = ncclCommUserRank(newcomm, &nrank)) != ncclSuccess ||
        (r = ncclCommCount(newcomm, &nsize)) != ncclSuccess) {
        rc = accel_error_set(err, comm__nccl_code(r), "rank %u of %u: nccl: split: %s", c->rank,
                             c->size, comm__nccl_why(r, newcomm, why, sizeof(why)));
        goto out;
    }
    im->comm = newcomm;
    newcomm = NULL;
    /* the child queues on the caller's stream when the parent does; else on
     * a stream of its own */
    rc = setup_stream(c, im, pim->own_stream ? NULL : (void *)pim->stream, err);
    if (rc != ACCEL_OK)
        goto out;
    child->ops = &nccl_ops;
    child->rank = (unsigned)nrank;
    child->size = (unsigned)nsize;
    child->timeout_s = c->timeout_s;
    child->store = c->store;
    child->impl = im;
    *out = child;
    return ACCEL_OK;

out:
    if (rc != ACCEL_OK) {
        if (!peer_failed)
            comm__nccl_board_post(&b, err != NULL ? err->msg : accel_strerror(rc));
        /* the parent first: its abort stops and joins NCCL's split thread,
         * which may still write newcomm; a split that failed leaves the
         * parent's state unknown anyway */
        fail_comm(c);
        if (newcomm != NULL)
            (void)ncclCommAbort(newcomm);
    }
    release(im, true, 0);
    accel_free(child);
    return rc;
}
