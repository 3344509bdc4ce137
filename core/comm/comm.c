/*
 * comm.c: the public collectives interface of accel/comm.h.  It checks what
 * every backend would check (arguments, sizes, a communicator that failed
 * before), answers counts of 0 at once, names the communicator's keys in the
 * store, chooses the backend and calls it through accel_comm_ops.  It moves
 * no data itself.
 *
 * Backend choice: opts->backend; else ACCELRUN_COMM; else "nccl" where it is
 * built and the job was given GPUs (CUDA_VISIBLE_DEVICES set and not empty),
 * else "socket".
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/alloc.h"
#include "accel/getenv.h"
#include "comm_int.h"

#define COMM_MAX_RANKS (1u << 20)

#ifdef ACCEL_HAVE_NCCL
static enum accel_err nccl_init(struct accel_comm *c, const struct accel_comm_opts *opts,
                                struct accel_error *err)
{
    return comm__nccl_init(c, opts, err);
}

bool accel_comm_has_nccl(void)
{
    return true;
}
#else
static enum accel_err nccl_init(struct accel_comm *c, const struct accel_comm_opts *opts,
                                struct accel_error *err)
{
    (void)opts;
    return accel_error_set(err, ACCEL_EUNSUPPORTED,
                           "rank %u of %u: init: the nccl backend is not built here (no CUDA "
                           "toolkit with NCCL at build time); use the socket backend",
                           c->rank, c->size);
}

bool accel_comm_has_nccl(void)
{
    return false;
}
#endif

static const char *choose_backend(const struct accel_comm_opts *opts)
{
    const char *b = opts != NULL ? opts->backend : NULL;
    const char *gpus;

    if (b == NULL || b[0] == '\0')
        b = getenv("ACCELRUN_COMM");
    if (b != NULL && b[0] != '\0')
        return b;
    gpus = getenv("CUDA_VISIBLE_DEVICES");
    if (accel_comm_has_nccl() && gpus != NULL && gpus[0] != '\0')
        return "nccl";
    return "socket";
}

static enum accel_err choose_timeout(const struct accel_comm_opts *opts, double *out,
                                     struct accel_error *err)
{
    if (opts != NULL && opts->timeout_s != 0) {
        if (!(opts->timeout_s > 0) || !isfinite(opts->timeout_s))
            return accel_error_set(err, ACCEL_EINVAL, "comm: timeout of %g s", opts->timeout_s);
        *out = opts->timeout_s;
        return ACCEL_OK;
    }
    return accel_getenv_timeout("comm", ACCEL_STORE_DEFAULT_TIMEOUT_S, out, err);
}

enum accel_err accel_comm_init(struct accel_comm **out, struct accel_store *store, unsigned rank,
                               unsigned world, const struct accel_comm_opts *opts,
                               struct accel_error *err)
{
    struct accel_comm *c;
    const char *backend = choose_backend(opts);
    enum accel_err rc;
    char key[64];
    int64_t n = 0;
    double saved;

    if (out == NULL)
        return accel_error_set(err, ACCEL_EINVAL, "comm: init: no place for the communicator");
    *out = NULL;
    if (world == 0 || world > COMM_MAX_RANKS || rank >= world)
        return accel_error_set(err, ACCEL_EINVAL, "comm: init: rank %u of %u (at most %u ranks)",
                               rank, world, COMM_MAX_RANKS);
    if (store == NULL && world > 1)
        return accel_error_set(err, ACCEL_EINVAL, "rank %u of %u: init: no store", rank, world);
    c = accel_calloc(1, sizeof(*c));
    if (c == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "rank %u of %u: init: out of memory", rank,
                               world);
    c->rank = rank;
    c->size = world;
    c->store = store;
    rc = choose_timeout(opts, &c->timeout_s, err);
    if (rc != ACCEL_OK)
        goto fail;
    /* Every rank creates its communicators in the same order, so the count of
     * this rank's inits on this store names the communicator the same way on
     * every rank, without a round trip between ranks. */
    if (store != NULL) {
        snprintf(key, sizeof(key), "accel/comm/inits/%u", rank);
        rc = accel_store_add(store, key, 1, &n, err);
        if (rc != ACCEL_OK)
            goto fail;
    }
    snprintf(c->prefix, sizeof(c->prefix), "c%lld/", (long long)(n > 0 ? n - 1 : 0));
    /* the store's waits (a rank that never joins) end at the communicator's
     * deadline, not at the store client's own */
    saved = accel_store_set_timeout(store, c->timeout_s);
    if (strcmp(backend, "socket") == 0)
        rc = comm__socket_init(c, opts, err);
    else if (strcmp(backend, "nccl") == 0)
        rc = nccl_init(c, opts, err);
    else
        rc = accel_error_set(err, ACCEL_EINVAL,
                             "rank %u of %u: init: unknown backend '%.32s' (socket or nccl)", rank,
                             world, backend);
    accel_store_set_timeout(store, saved);
    if (rc != ACCEL_OK)
        goto fail;
    *out = c;
    return ACCEL_OK;
fail:
    accel_free(c);
    return rc;
}

/* The checks every call shares; what = the operation, for messages. */
static enum accel_err check(struct accel_comm *c, const char *what, struct accel_error *err)
{
    if (c == NULL)
        return accel_error_set(err, ACCEL_EINVAL, "comm: %s: no communicator", what);
    if (c->failed)
        return accel_error_set(err, ACCEL_EINVAL,
                               "rank %u of %u: %s: the communicator failed before; only "
                               "accel_comm_free is allowed",
                               c->rank, c->size, what);
    return ACCEL_OK;
}

/* Checks a buffer of `count` elements of t, times `mult` (the size for the
 * larger buffer of all_gather and reduce_scatter). */
static enum accel_err check_buf(struct accel_comm *c, const char *what, const void *p,
                                const char *name, size_t count, size_t mult, enum accel_dtype t,
                                struct accel_error *err)
{
    size_t es = accel_dtype_size(t);

    if (es == 0)
        return accel_error_set(err, ACCEL_EINVAL, "rank %u of %u: %s: unknown type %d", c->rank,
                               c->size, what, (int)t);
    if (count > SIZE_MAX / es / mult)
        return accel_error_set(err, ACCEL_ETOOBIG, "rank %u of %u: %s: %zu elements is too many",
                               c->rank, c->size, what, count);
    if (p == NULL && count > 0)
        return accel_error_set(err, ACCEL_EINVAL, "rank %u of %u: %s: %s is NULL", c->rank, c->size,
                               what, name);
    return ACCEL_OK;
}

static enum accel_err check_op(struct accel_comm *c, const char *what, enum accel_redop op,
                               struct accel_error *err)
{
    if (op != ACCEL_SUM && op != ACCEL_AVG)
        return accel_error_set(err, ACCEL_EINVAL, "rank %u of %u: %s: unknown reduction %d",
                               c->rank, c->size, what, (int)op);
    return ACCEL_OK;
}

/* A backend's failure leaves the communicator unusable (its streams are out
 * of step), whatever the backend did. */
static enum accel_err after(struct accel_comm *c, enum accel_err rc)
{
    if (rc != ACCEL_OK)
        c->failed = true;
    return rc;
}

enum accel_err accel_comm_split(struct accel_comm *c, int color, int key, struct accel_comm **out,
                                struct accel_error *err)
{
    enum accel_err rc = check(c, "split", err);

    if (out != NULL)
        *out = NULL;
    if (rc != ACCEL_OK)
        return rc;
    if (out == NULL)
        return accel_error_set(err, ACCEL_EINVAL, "rank %u of %u: split: no place for the result",
                               c->rank, c->size);
    if (c->store == NULL)
        return accel_error_set(err, ACCEL_EINVAL, "rank %u of %u: split: no store", c->rank,
                               c->size);
    return after(c, c->ops->split(c, color, key, out, err));
}

unsigned accel_comm_rank(const struct accel_comm *c)
{
    return c != NULL ? c->rank : 0;
}

unsigned accel_comm_size(const struct accel_comm *c)
{
    return c != NULL ? c->size : 0;
}

const char *accel_comm_backend(const struct accel_comm *c)
{
    return c != NULL && c->ops != NULL ? c->ops->name : "?";
}

void *accel_comm_cuda_stream(const struct accel_comm *c)
{
    return c != NULL && c->ops != NULL && c->ops->stream != NULL ? c->ops->stream(c) : NULL;
}

enum accel_err accel_all_reduce(struct accel_comm *c, const void *send, void *recv, size_t count,
                                enum accel_dtype t, enum accel_redop op, struct accel_error *err)
{
    enum accel_err rc;

    if ((rc = check(c, "all_reduce", err)) != ACCEL_OK ||
        (rc = check_op(c, "all_reduce", op, err)) != ACCEL_OK ||
        (rc = check_buf(c, "all_reduce", send, "send", count, 1, t, err)) != ACCEL_OK ||
        (rc = check_buf(c, "all_reduce", recv, "recv", count, 1, t, err)) != ACCEL_OK)
        return rc;
    if (count == 0)
        return ACCEL_OK;
    return after(c, c->ops->all_reduce(c, send, recv, count, t, op, err));
}

enum accel_err accel_reduce_scatter(struct accel_comm *c, const void *send, void *recv,
                                    size_t recvcount, enum accel_dtype t, enum accel_redop op,
                                    struct accel_error *err)
{
    enum accel_err rc;

    if ((rc = check(c, "reduce_scatter", err)) != ACCEL_OK ||
        (rc = check_op(c, "reduce_scatter", op, err)) != ACCEL_OK ||
        (rc = check_buf(c, "reduce_scatter", send, "send", recvcount, c->size, t, err)) !=
            ACCEL_OK ||
        (rc = check_buf(c, "reduce_scatter", recv, "recv", recvcount, 1, t, err)) != ACCEL_OK)
        return rc;
    if (recvcount == 0)
        return ACCEL_OK;
    return after(c, c->ops->reduce_scatter(c, send, recv, recvcount, t, op, err));
}

enum accel_err accel_all_gather(struct accel_comm *c, const void *send, void *recv,
                                size_t sendcount, enum accel_dtype t, struct accel_error *err)
{
    enum accel_err rc;

    if ((rc = check(c, "all_gather", err)) != ACCEL_OK ||
        (rc = check_buf(c, "all_gather", send, "send", sendcount, 1, t, err)) != ACCEL_OK ||
        (rc = check_buf(c, "all_gather", recv, "recv", sendcount, c->size, t, err)) != ACCEL_OK)
        return rc;
    if (sendcount == 0)
        return ACCEL_OK;
    return after(c, c->ops->all_gather(c, send, recv, sendcount, t, err));
}

enum accel_err accel_broadcast(struct accel_comm *c, const void *send, void *recv, size_t count,
                               enum accel_dtype t, unsigned root, struct accel_error *err)
{
    enum accel_err rc;

    if ((rc = check(c, "broadcast", err)) != ACCEL_OK)
        return rc;
    if (root >= c->size)
        return accel_error_set(err, ACCEL_EINVAL, "rank %u of %u: broadcast: root %u out of range",
                               c->rank, c->size, root);
    if ((rc = check_buf(c, "broadcast", c->rank == root ? send : recv,
                        c->rank == root ? "send" : "recv", count, 1, t, err)) != ACCEL_OK ||
        (rc = check_buf(c, "broadcast", recv, "recv", count, 1, t, err)) != ACCEL_OK)
        return rc;
    if (count == 0)
        return ACCEL_OK;
    return after(c, c->ops->broadcast(c, send, recv, count, t, root, err));
}

enum accel_err accel_comm_barrier(struct accel_comm *c, struct accel_error *err)
{
    enum accel_err rc = check(c, "barrier", err);

    if (rc != ACCEL_OK)
        return rc;
    return after(c, c->ops->barrier(c, err));
}

enum accel_err accel_comm_sync(struct accel_comm *c, struct accel_error *err)
{
    enum accel_err rc = check(c, "sync", err);

    if (rc != ACCEL_OK)
        return rc;
    return after(c, c->ops->sync(c, err));
}

void accel_comm_free(struct accel_comm *c)
{
    if (c == NULL)
        return;
    if (c->ops != NULL && c->ops->free != NULL)
        c->ops->free(c);
    accel_free(c);
}
