/*
 * shard.c: the lifecycle of a sharded model and the two collectives around
 * each unit's compute: the all-gather of the compute copy and the
 * reduce-scatter (NO_SHARD: all-reduce) of the gradient.
 *
 * 16-bit traffic needs no staging buffer: the gathered fp32 buffer of a unit
 * is twice the size of its 16-bit image, so the 16-bit all-gather lands in
 * its first half and is widened in place from the last element down; the
 * gradient is narrowed in place from the first element up before its
 * reduction.  Both orders only ever overwrite elements already read.  The
 * conversions are core/comm's (round to nearest even, once).
 *
 * This file does not decide any arithmetic of the update (step.c, optim.c),
 * and it never waits on anything but the communicator.
 */
#include <math.h>
#include <string.h>

#include "../comm/dtype_int.h" /* the fp32 <-> bf16/fp16 conversions; see docs/shard.md */
#include "accel/alloc.h"
#include "shard_int.h"

/* ---------------------------------------------------------------- buffers */

float *shard__alloc(struct accel_shard *s, size_t n)
{
    float *p = accel_calloc(n ? n : 1, sizeof(float));

    if (p != NULL) {
        s->bytes += n * sizeof(float);
        if (s->bytes > s->peak)
            s->peak = s->bytes;
    }
    return p;
}

void shard__release_buf(struct accel_shard *s, float **p, size_t n)
{
    if (*p == NULL)
        return;
    accel_free(*p);
    *p = NULL;
    s->bytes -= n * sizeof(float);
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
    unsigned nstate = s->o.optimizer == ACCEL_ADAMW ? 2 : s->o.momentum > 0.0 ? 1 : 0;

    for (size_t u = 0; u < s->nunits; u++) {
        struct shard_unit *d = &s->units[u];
        d->master = shard__alloc(s, d->slen);
        d->grad = shard__alloc(s, d->slen);
        if (d->master == NULL || d->grad == NULL)
            goto nomem;
        for (unsigned k = 0; k < nstate; k++)
            if ((d->state[k] = shard__alloc(s, d->slen)) == NULL)
                goto nomem;
    }
    return ACCEL_OK;
nomem:
    return accel_error_set(err, ACCEL_ENOMEM, "shard: out of memory for this rank's slices");
}

/* Every rank must have passed the same units and options: a mismatch would
 * otherwise show up as collectives of different sizes, or as silently wrong
 * weights.  The hash's bits travel as two fp32 elements, which all_gather
 * copies without arithmetic. */
static enum accel_err agree(struct accel_shard *s, struct accel_error *err)
{
    uint64_t mine = shard__layout_hash(s), *all;
    enum accel_err rc;

    all = accel_calloc(s->world, sizeof(*all));
    if (all == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "shard: out of memory");
    shard__count(s, sizeof(mine));
    rc = accel_all_gather(s->comm, &mine, all, 2, ACCEL_F32, err);
    for (unsigned r = 0; rc == ACCEL_OK && r < s->world; r++)
        if (all[r] != mine)
            rc = accel_error_set(err, ACCEL_EINVAL,
                                 "shard: rank %u of %u: rank %u passed other units or options "
                                 "(names, shapes, compute type, strategy, optimizer settings)",
                                 s->rank, s->world, r);
    accel_free(all);
    return rc;
}

enum accel_err accel_shard_init(struct accel_shard **out, struct accel_comm *comm,
                                const struct accel_shard_unit *units, size_t nunits,
                                const struct accel_shard_opts *opts, struct accel_error *err)
{
    struct accel_shard *s = NULL;
    enum accel_err rc;

    if (out == NULL || comm == NULL || opts == NULL)
        return accel_error_set(err, ACCEL_EINVAL, "shard: init needs out, comm and opts");
    *out = NULL;
    if ((rc = shard__opts_check(opts, err)) != ACCEL_OK)
        return rc;
    if (strcmp(accel_comm_backend(comm), "socket") != 0)
        return accel_error_set(err, ACCEL_EUNSUPPORTED,
                               "shard: the %s backend needs device buffers; core/shard keeps "
                               "host buffers and runs on the socket backend only",
                               accel_comm_backend(comm));
    s = accel_calloc(1, sizeof(*s));
    if (s == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "shard: out of memory");
    s->comm = comm;
    s->rank = accel_comm_rank(comm);
    s->world = accel_comm_size(comm);
    s->o = *opts;
    s->scale = opts->compute == ACCEL_F16 ? opts->loss_scale : 1.0;
    if ((rc = shard__layout(s, units, nunits, err)) != ACCEL_OK)
        goto fail;
    s->partials = accel_calloc(s->world, sizeof(*s->partials));
    if (s->partials == NULL) {
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
    if (s == NULL)
        return;
    for (size_t u = 0; s->units != NULL && u < s->nunits; u++) {
        struct shard_unit *d = &s->units[u];
        accel_free(d->master);
        accel_free(d->grad);
        accel_free(d->state[0]);
        accel_free(d->state[1]);
        if (d->params != d->master) /* NO_SHARD fp32 lends the master */
            accel_free(d->params);
        accel_free(d->grads);
    }
    shard__layout_free(s);
    accel_free(s->partials);
    accel_free(s);
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

    if (u >= s->nunits || full == NULL)
        return accel_error_set(err, ACCEL_EINVAL, "shard: set_full: no unit %zu or no values", u);
    d = &s->units[u];
    memcpy(d->master, full + d->begin, (d->end - d->begin) * sizeof(float));
    d->gathered = false; /* a held copy no longer matches */
    return ACCEL_OK;
}

enum accel_err accel_shard_restore(struct accel_shard *s, unsigned long step, double loss_scale,
                                   struct accel_error *err)
{
    int e;

    if (s->o.compute == ACCEL_F16
            ? !(loss_scale >= 1.0 && loss_scale <= 0x1p64) || frexp(loss_scale, &e) != 0.5
            : loss_scale != 1.0)
        return accel_error_set(err, ACCEL_EINVAL,
                               "shard: restore: loss scale %g (fp16: a power of two in [1, 2^64]; "
                               "otherwise 1)",
                               loss_scale);
    s->step = step;
    s->scale = loss_scale;
    s->good = 0;
    shard__after_step(s);
    return ACCEL_OK;
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

/* ---------------------------------------------------------------- gather */

/* 16-bit values at the start of buf widened to fp32 over the whole buffer,
 * from the end: element i's fp32 bytes cover 16-bit elements 2i and 2i+1,
 * which are read at steps 2i and 2i+1 >= i. */
static void widen_in_place(float *buf, size_t n, enum accel_dtype t)
{
    const uint16_t *h = (const uint16_t *)buf;

    for (size_t i = n; i-- > 0;) {
        uint16_t x = h[i];
        buf[i] = t == ACCEL_BF16 ? comm__bf16_to_f32(x) : comm__f16_to_f32(x);
    }
}

/* fp32 narrowed to 16 bits at the start of the same buffer, from the start:
 * the 16-bit element i lands in fp32 element i/2 <= i, already read. */
static void narrow_in_place(float *buf, size_t n, enum accel_dtype t)
{
    uint16_t *h = (uint16_t *)buf;

    for (size_t i = 0; i < n; i++) {
        float f = buf[i];
        h[i] = t == ACCEL_BF16 ? comm__f32_to_bf16(f) : comm__f32_to_f16(f);
    }
}

static float round_to(float f, enum accel_dtype t)
{
    if (t == ACCEL_BF16)
        return comm__bf16_to_f32(comm__f32_to_bf16(f));
    if (t == ACCEL_F16)
        return comm__f16_to_f32(comm__f32_to_f16(f));
    return f;
}

/* NO_SHARD: the compute copy is made locally from the full master. */
static enum accel_err gather_local(struct accel_shard *s, struct shard_unit *d,
                                   struct accel_error *err)
{
    enum accel_dtype t = s->o.compute;

    if (t == ACCEL_F32) {
        d->params = d->master;
        return ACCEL_OK;
    }
    if (d->params == NULL && (d->params = shard__alloc(s, d->padded)) == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "shard: gather %s: out of memory", d->name);
    for (size_t i = 0; i < d->padded; i++)
        d->params[i] = round_to(d->master[i], t);
    return ACCEL_OK;
}

enum accel_err accel_shard_gather(struct accel_shard *s, size_t u, struct accel_error *err)
{
    struct shard_unit *d;
    enum accel_dtype t = s->o.compute;
    size_t es = accel_dtype_size(t);
    enum accel_err rc;

    if (u >= s->nunits)
        return accel_error_set(err, ACCEL_EINVAL, "shard: gather: no unit %zu", u);
    d = &s->units[u];
    if (d->gathered)
        return ACCEL_OK;
    if (s->o.strategy == ACCEL_NO_SHARD) {
        rc = gather_local(s, d, err);
        d->gathered = rc == ACCEL_OK;
        return rc;
    }
    if (d->params == NULL && (d->params = shard__alloc(s, d->padded)) == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "shard: gather %s: out of memory", d->name);
    /* this rank's slice goes in place, already in the compute type */
    if (t == ACCEL_F32)
        memcpy(d->params + d->off, d->master, d->slen * sizeof(float));
    else
        comm__from_f32((uint16_t *)d->params + d->off, d->master, d->slen, t);
    shard__count(s, d->slen * es);
    rc = accel_all_gather(s->comm, (char *)d->params + d->off * es, d->params, d->slen, t, err);
    if (rc != ACCEL_OK)
        return rc;
    if (t != ACCEL_F32)
        widen_in_place(d->params, d->padded, t);
    d->gathered = true;
    return ACCEL_OK;
}

const float *accel_shard_params(struct accel_shard *s, size_t u)
{
    if (u >= s->nunits || !s->units[u].gathered)
        return NULL;
    return s->units[u].params;
}

/* Drops the gathered copy of a sharded strategy. */
static void drop_params(struct accel_shard *s, struct shard_unit *d)
{
    d->gathered = false;
    if (s->o.strategy != ACCEL_NO_SHARD)
        shard__release_buf(s, &d->params, d->padded);
}

void accel_shard_release(struct accel_shard *s, size_t u)
{
    struct shard_unit *d;

    if (u >= s->nunits)
        return;
    d = &s->units[u];
    /* SHARD_GRAD_OP keeps the copy from forward through the backwards of
     * every micro-step, and lets it go after the last one */
    if (s->o.strategy == ACCEL_FULL_SHARD || (s->o.strategy == ACCEL_SHARD_GRAD_OP && d->reduced))
        drop_params(s, d);
}

void shard__after_step(struct accel_shard *s)
{
    for (size_t u = 0; u < s->nunits; u++) {
        struct shard_unit *d = &s->units[u];
        drop_params(s, d);
        d->reduced = false;
        memset(d->grad, 0, d->slen * sizeof(float));
    }
}

/* ---------------------------------------------------------------- gradients */

float *accel_shard_grads(struct accel_shard *s, size_t u)
{
    struct shard_unit *d;

    if (u >= s->nunits)
        return NULL;
    d = &s->units[u];
    if (d->grads == NULL)
        d->grads = shard__alloc(s, d->padded);
    return d->grads;
}

enum accel_err accel_shard_reduce(struct accel_shard *s, size_t u, bool last,
                                  struct accel_error *err)
{
    struct shard_unit *d;
    enum accel_dtype t = s->o.compute;
    size_t es = accel_dtype_size(t), n;
    enum accel_err rc;
    float *g;

    if (u >= s->nunits)
        return accel_error_set(err, ACCEL_EINVAL, "shard: reduce: no unit %zu", u);
    if (!last) /* no_sync: the full gradient keeps accumulating here */
        return ACCEL_OK;
    d = &s->units[u];
    if ((g = accel_shard_grads(s, u)) == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "shard: reduce %s: out of memory", d->name);
    /* the padding must stay zero whatever the trainer wrote past numel */
    memset(g + d->numel, 0, (d->padded - d->numel) * sizeof(float));
    if (t != ACCEL_F32)
        narrow_in_place(g, d->padded, t);
    if (s->o.strategy == ACCEL_NO_SHARD) {
        n = d->padded;
        shard__count(s, n * es);
        rc = accel_all_reduce(s->comm, g, g, n, t, ACCEL_AVG, err);
    } else {
        n = d->slen;
        shard__count(s, d->padded * es);
        rc = accel_reduce_scatter(s->comm, g, (char *)g + d->off * es, n, t, ACCEL_AVG, err);
    }
    if (rc != ACCEL_OK)
        return rc;
    /* add, so that a trainer that reduces a unit twice in a step sums both */
    if (t == ACCEL_F32) {
        const float *r = g + (s->o.strategy == ACCEL_NO_SHARD ? 0 : d->off);
        for (size_t j = 0; j < n; j++)
            d->grad[j] += r[j];
    } else {
        const uint16_t *h = (const uint16_t *)g + (s->o.strategy == ACCEL_NO_SHARD ? 0 : d->off);
        for (size_t j = 0; j < n; j++)
            d->grad[j] += t == ACCEL_BF16 ? comm__bf16_to_f32(h[j]) : comm__f16_to_f32(h[j]);
    }
    shard__release_buf(s, &d->grads, d->padded);
    d->reduced = true;
    return ACCEL_OK;
}
