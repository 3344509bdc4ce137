/*
 * shard.c: the lifecycle of a sharded model, the accounting of its buffers,
 * and the accessors.  Which memory the buffers live in is chosen here, once,
 * from the communicator's backend (mem_int.h): host memory for socket, CUDA
 * device memory for nccl where this build has core/shard's kernels.
 *
 * This file does not decide any arithmetic (step.c, optim.c, elem_int.h),
 * nor the traffic around a unit's compute (gather.c), and it never waits on
 * anything but the communicator (through mem's put and get on a device).
 */
#include <math.h>
#include <string.h>

#include "accel/alloc.h"
#include "shard_int.h"

/* The memory of the nccl backend: CUDA kernels where nvcc built them. */
#ifdef ACCEL_HAVE_CUDA
#define CUDA_OPS (&shard__cuda_ops)
#else
#define CUDA_OPS NULL
#endif

/* ---------------------------------------------------------------- buffers */

void *shard__alloc(struct accel_shard *s, size_t bytes, const char *unit, const char *what,
                   enum accel_err *rc, struct accel_error *err)
{
    void *p = s->mem->alloc(s->ctx, bytes, unit, what, rc, err);

    if (p != NULL) {
        s->bytes += bytes;
        if (s->bytes > s->peak)
            s->peak = s->bytes;
    }
    return p;
}

void shard__free(struct accel_shard *s, void *p, size_t bytes)
{
    if (p == NULL)
        return;
    s->mem->free(s->ctx, p);
    s->bytes -= bytes;
}

void shard__release_buf(struct accel_shard *s, float **p, size_t n)
{
    shard__free(s, *p, n * sizeof(float));
    *p = NULL;
}

void shard__count(struct accel_shard *s, size_t bytes)
{
    s->calls++;
    s->sent += bytes;
}

/* ---------------------------------------------------------------- init and free */

/* Slices and optimizer state of every unit. */
static enum accel_err alloc_slices(struct accel_shard *s, struct accel_error *err)
{
    bool adamw = s->o.optimizer == ACCEL_ADAMW;
    unsigned nstate = adamw ? 2 : s->o.momentum > 0.0 ? 1 : 0;
    const char *state_name[2] = {adamw ? "first moment" : "momentum buffer", "second moment"};
    enum accel_err rc = ACCEL_OK;

    for (size_t u = 0; u < s->nunits; u++) {
        struct shard_unit *d = &s->units[u];
        size_t bytes = d->slen * sizeof(float);
        if ((d->master = shard__alloc(s, bytes, d->name, "master weights", &rc, err)) == NULL ||
            (d->grad = shard__alloc(s, bytes, d->name, "gradient slice", &rc, err)) == NULL)
            return rc;
        for (unsigned k = 0; k < nstate; k++)
            if ((d->state[k] = shard__alloc(s, bytes, d->name, state_name[k], &rc, err)) == NULL)
                return rc;
    }
    return ACCEL_OK;
}

enum accel_err shard__exchange(struct accel_shard *s, uint64_t mine, struct accel_error *err)
{
    double *slot = &s->partials[s->rank];
    enum accel_err rc;

    if ((rc = s->mem->put(s->ctx, slot, &mine, sizeof(mine), err)) != ACCEL_OK)
        return rc;
    shard__count(s, sizeof(mine));
    if ((rc = accel_all_gather(s->comm, slot, s->partials, 2, ACCEL_F32, err)) != ACCEL_OK)
        return rc;
    return s->mem->get(s->ctx, s->partials_host, s->partials, s->world * sizeof(double), err);
}

uint64_t shard__exchanged(const struct accel_shard *s, unsigned r)
{
    uint64_t v;

    memcpy(&v, &s->partials_host[r], sizeof(v));
    return v;
}

/* Every rank must have passed the same units and options: a mismatch would
 * otherwise show up as collectives of different sizes, or as silently wrong
 * weights. */
static enum accel_err agree(struct accel_shard *s, struct accel_error *err)
{
    uint64_t mine = shard__layout_hash(s);
    enum accel_err rc = shard__exchange(s, mine, err);

    if (rc != ACCEL_OK)
        return rc;
    for (unsigned r = 0; r < s->world; r++)
        if (shard__exchanged(s, r) != mine)
            return accel_error_set(err, ACCEL_EINVAL,
                                   "shard: rank %u of %u: rank %u passed other units or options "
                                   "(names, shapes, compute type, strategy, optimizer settings)",
                                   s->rank, s->world, r);
    return ACCEL_OK;
}

/* The memory for the communicator's backend; NULL when there is none. */
static const struct shard_mem_ops *mem_for(const struct accel_comm *comm)
{
    const char *b = accel_comm_backend(comm);

    if (strcmp(b, "socket") == 0)
        return &shard__host_ops;
    if (strcmp(b, "nccl") == 0)
        return CUDA_OPS;
    return NULL;
}

enum accel_err accel_shard_init(struct accel_shard **out, struct accel_comm *comm,
                                const struct accel_shard_unit *units, size_t nunits,
                                const struct accel_shard_opts *opts, struct accel_error *err)
{
    const struct shard_mem_ops *mem;
    struct accel_shard *s = NULL;
    enum accel_err rc = ACCEL_OK;

    if (out == NULL || comm == NULL || opts == NULL)
        return accel_error_set(err, ACCEL_EINVAL, "shard: init needs out, comm and opts");
    *out = NULL;
    if ((rc = shard__opts_check(opts, err)) != ACCEL_OK)
        return rc;
    if ((mem = mem_for(comm)) == NULL)
        return accel_error_set(err, ACCEL_EUNSUPPORTED,
                               strcmp(accel_comm_backend(comm), "nccl") == 0
                                   ? "shard: the %s backend needs device buffers, and this build "
                                     "has no CUDA kernels for core/shard (nvcc was not found); "
                                     "use the socket backend"
                                   : "shard: no buffers for the %s backend (socket: host memory, "
                                     "nccl: CUDA device memory)",
                               accel_comm_backend(comm));
    s = accel_calloc(1, sizeof(*s));
    if (s == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "shard: out of memory");
    s->comm = comm;
    s->mem = mem;
    s->rank = accel_comm_rank(comm);
    s->world = accel_comm_size(comm);
    s->o = *opts;
    s->scale = opts->compute == ACCEL_F16 ? opts->loss_scale : 1.0;
    if ((rc = mem->open(&s->ctx, comm, err)) != ACCEL_OK ||
        (rc = shard__layout(s, units, nunits, err)) != ACCEL_OK)
        goto fail;
    s->partials =
        mem->alloc(s->ctx, s->world * sizeof(double), NULL, "the norm's partial sums", &rc, err);
    if (s->partials == NULL)
        goto fail;
    s->partials_host = accel_calloc(s->world, sizeof(double));
    if (s->partials_host == NULL) {
        rc = accel_error_set(err, ACCEL_ENOMEM, "shard: out of memory");
        goto fail;
    }
    /* agree before the big allocations: a mismatch is the likelier failure */
    if ((rc = agree(s, err)) != ACCEL_OK || (rc = alloc_slices(s, err)) != ACCEL_OK)
        goto fail;
    *out = s;
    return ACCEL_OK;
fail:
    accel_shard_free(s);
    return rc;
}

void accel_shard_free(struct accel_shard *s)
{
    const struct shard_mem_ops *m;

    if (s == NULL)
        return;
    m = s->mem;
    /* the frees wait for the compute stream's work (errors: nothing better
     * to do than free anyway) */
    if (s->ctx != NULL) {
        struct accel_error e;
        (void)m->from_compute(s->ctx, &e);
    }
    shard__ckpt_close(s); /* its pinned staging is this memory's */
    for (size_t u = 0; s->units != NULL && u < s->nunits; u++) {
        struct shard_unit *d = &s->units[u];
        if (d->params != d->master) /* NO_SHARD fp32 lends the master */
            m->free(s->ctx, d->params);
        m->free(s->ctx, d->master);
        m->free(s->ctx, d->grad);
        m->free(s->ctx, d->state[0]);
        m->free(s->ctx, d->state[1]);
        m->free(s->ctx, d->grads);
    }
    m->free(s->ctx, s->partials);
    m->close(s->ctx);
    shard__layout_free(s);
    accel_free(s->partials_host);
    accel_free(s);
}

bool accel_shard_on_device(const struct accel_shard *s)
{
    return s != NULL && s->mem != &shard__host_ops;
}

/* ---------------------------------------------------------------- accessors */

size_t accel_shard_nunits(const struct accel_shard *s)
{
    return s->nunits;
}

size_t accel_shard_unit_numel(const struct accel_shard *s, size_t u)
{
    return u < s->nunits ? s->units[u].numel : 0;
}

size_t accel_shard_unit_padded(const struct accel_shard *s, size_t u)
{
    return u < s->nunits ? s->units[u].padded : 0;
}

size_t accel_shard_param_offset(const struct accel_shard *s, size_t u, size_t p)
{
    if (u >= s->nunits || p >= s->units[u].nparams)
        return 0;
    return s->units[u].tensors[p].offset;
}

float *accel_shard_master(struct accel_shard *s, size_t u, size_t *begin, size_t *end)
{
    struct shard_unit *d;

    if (u >= s->nunits) {
        *begin = *end = 0;
        return NULL;
    }
    d = &s->units[u];
    *begin = d->begin;
    *end = d->end;
    return d->master; /* the unpadded part starts the slice */
}

float *accel_shard_optim_state(struct accel_shard *s, size_t u, unsigned k)
{
    struct shard_unit *d;

    if (u >= s->nunits || k > 1)
        return NULL;
    d = &s->units[u];
    return d->state[k];
}

enum accel_err accel_shard_set_full(struct accel_shard *s, size_t u, const float *full,
                                    struct accel_error *err)
{
    struct shard_unit *d;
    enum accel_err rc;

    if (u >= s->nunits || full == NULL)
        return accel_error_set(err, ACCEL_EINVAL,
                               "shard: couldn't set the values of unit %zu: no such unit, or no "
                               "values",
                               u);
    d = &s->units[u];
    d->gathered = false; /* a held copy no longer matches */
    shard__fence(s);     /* a save in flight may still be copying the master */
    /* a compute stream may still read the master (NO_SHARD fp32): the put
     * waits for the communicator's stream, and that for the compute one */
    if ((rc = s->mem->from_compute(s->ctx, err)) != ACCEL_OK)
        return rc;
    return s->mem->put(s->ctx, d->master, full + d->begin, (d->end - d->begin) * sizeof(float),
                       err);
}

enum accel_err accel_shard_restore(struct accel_shard *s, unsigned long step, double loss_scale,
                                   struct accel_error *err)
{
    enum accel_err rc;
    int e;

    if (s->o.compute == ACCEL_F16
            ? !(loss_scale >= 1.0 && loss_scale <= 0x1p64) || frexp(loss_scale, &e) != 0.5
            : loss_scale != 1.0)
        return accel_error_set(err, ACCEL_EINVAL,
                               "shard: restore: loss scale %g (fp16: a power of two in [1, 2^64]; "
                               "otherwise 1)",
                               loss_scale);
    if ((rc = s->mem->from_compute(s->ctx, err)) != ACCEL_OK)
        return rc;
    s->step = step;
    s->scale = loss_scale;
    s->good = 0;
    return shard__after_step(s, err);
}

enum accel_err accel_shard_set_compute_stream(struct accel_shard *s, void *stream,
                                              struct accel_error *err)
{
    if (s == NULL)
        return accel_error_set(err, ACCEL_EINVAL,
                               "shard: couldn't set the compute stream: no shard");
    return s->mem->set_compute(s->ctx, stream, err);
}

void accel_shard_set_lr(struct accel_shard *s, double lr)
{
    s->o.lr = lr;
}

double accel_shard_loss_scale(const struct accel_shard *s)
{
    return s->scale;
}

size_t accel_shard_bytes(const struct accel_shard *s, size_t *peak)
{
    if (peak != NULL)
        *peak = s->peak;
    return s->bytes;
}

void accel_shard_traffic(const struct accel_shard *s, uint64_t *calls, uint64_t *bytes)
{
    if (calls != NULL)
        *calls = s->calls;
    if (bytes != NULL)
        *bytes = s->sent;
}
