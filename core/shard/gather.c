/*
 * gather.c: the two collectives around each unit's compute: the all-gather
 * of the compute copy (accel_shard_gather, accel_shard_params,
 * accel_shard_release) and the reduce-scatter (NO_SHARD: all-reduce) of the
 * gradient (accel_shard_grads, accel_shard_reduce), and what a step does to
 * both (shard__after_step).
 *
 * The wire carries the compute type.  In host memory (mem in_place) the
 * 16-bit image of a unit needs no staging buffer: the gathered fp32 buffer
 * is twice its size, so the all-gather lands in its first half and is
 * widened in place from the last element down, and the gradient is narrowed
 * in place from the first element up before its reduction (mem_host.c says
 * why both orders are safe).  A device converts in parallel, so there the
 * image goes to a staging buffer of padded 16-bit elements, allocated for
 * the call and freed at its end (stream-ordered: the memory is reused once
 * the queued work is done).  The conversions round to nearest even, once,
 * the same way in both memories (core/base's dtype_conv.h).
 *
 * On a device everything here is queued on the communicator's stream and
 * returns without waiting.  With a compute stream (accel_shard_set_compute_
 * stream) the hand-offs are here too, as mem's to_compute and from_compute:
 * a gather and a gradient buffer's first use hand their result to the
 * compute stream; a reduce and a release that frees take the compute
 * stream's work first, before they read the gradient or give memory back to
 * the pool.  This file decides no arithmetic of the update (step.c,
 * optim.c).
 */
#include "accel/log.h"
#include "shard_int.h"

/* Where the wire image of unit d's fp32 buffer f32 goes: f32 itself for
 * fp32 or when the memory converts in order, else a staging buffer. */
static void *wire_get(struct accel_shard *s, struct shard_unit *d, float *f32, const char *what,
                      enum accel_err *rc, struct accel_error *err)
{
    if (s->o.compute == ACCEL_F32 || s->mem->in_place)
        return f32;
    return shard__alloc(s, d->padded * accel_dtype_size(s->o.compute), d->name, what, rc, err);
}

static void wire_put(struct accel_shard *s, struct shard_unit *d, void *wire, const float *f32)
{
    if (wire != f32)
        shard__free(s, wire, d->padded * accel_dtype_size(s->o.compute));
}

/* ---------------------------------------------------------------- gather */

/* NO_SHARD: the compute copy is made locally from the full master. */
static enum accel_err gather_local(struct accel_shard *s, struct shard_unit *d,
                                   struct accel_error *err)
{
    enum accel_dtype t = s->o.compute;
    enum accel_err rc = ACCEL_OK;

    if (t == ACCEL_F32) {
        d->params = d->master;
        return ACCEL_OK;
    }
    if (d->params == NULL && (d->params = shard__alloc(s, d->padded * sizeof(float), d->name,
                                                       "compute copy", &rc, err)) == NULL)
        return rc;
    return s->mem->round(s->ctx, d->params, d->master, d->padded, t, err);
}

enum accel_err accel_shard_gather(struct accel_shard *s, size_t u, struct accel_error *err)
{
    struct shard_unit *d;
    enum accel_dtype t = s->o.compute;
    size_t es = accel_dtype_size(t);
    enum accel_err rc = ACCEL_OK;
    void *wire;

    if (u >= s->nunits)
        return accel_error_set(err, ACCEL_EINVAL, "shard: gather: no unit %zu", u);
    d = &s->units[u];
    if (d->gathered) /* the compute stream was handed this copy when it was made */
        return ACCEL_OK;
    if (s->o.strategy == ACCEL_NO_SHARD) {
        /* also for fp32, whose copy is the master: the step wrote it */
        if ((rc = gather_local(s, d, err)) == ACCEL_OK)
            rc = s->mem->to_compute(s->ctx, err);
        d->gathered = rc == ACCEL_OK;
        return rc;
    }
    if (d->params == NULL && (d->params = shard__alloc(s, d->padded * sizeof(float), d->name,
                                                       "gathered parameters", &rc, err)) == NULL)
        return rc;
    if ((wire = wire_get(s, d, d->params, "gather staging buffer", &rc, err)) == NULL)
        return rc;
    /* this rank's slice goes in place, already in the compute type */
    rc = s->mem->narrow(s->ctx, (char *)wire + d->off * es, d->master, d->slen, t, err);
    if (rc != ACCEL_OK)
        goto out;
    shard__count(s, d->slen * es);
    rc = accel_all_gather(s->comm, (char *)wire + d->off * es, wire, d->slen, t, err);
    if (rc == ACCEL_OK && t != ACCEL_F32)
        rc = s->mem->widen(s->ctx, d->params, wire, d->padded, t, err);
out:
    /* the staging buffer is the communicator's stream's alone: its free
     * needs no hand-off */
    wire_put(s, d, wire, d->params);
    if (rc == ACCEL_OK)
        rc = s->mem->to_compute(s->ctx, err);
    d->gathered = rc == ACCEL_OK;
    return rc;
}

const float *accel_shard_params(struct accel_shard *s, size_t u)
{
    if (u >= s->nunits || !s->units[u].gathered)
        return NULL;
    return s->units[u].params;
}

/* Drops the gathered copy; the sharded strategies free it.  The caller
 * has handed the compute stream's work over first (from_compute). */
static void drop_params(struct accel_shard *s, struct shard_unit *d)
{
    d->gathered = false;
    if (s->o.strategy != ACCEL_NO_SHARD)
        shard__release_buf(s, &d->params, d->padded);
}

void accel_shard_release(struct accel_shard *s, size_t u)
{
    struct shard_unit *d;
    struct accel_error e;

    if (u >= s->nunits)
        return;
    d = &s->units[u];
    /* SHARD_GRAD_OP keeps the copy from forward through the backwards of
     * every micro-step, and lets it go after the last one */
    if (!(s->o.strategy == ACCEL_FULL_SHARD ||
          (s->o.strategy == ACCEL_SHARD_GRAD_OP && d->reduced)))
        return;
    if (d->params == NULL) {
        d->gathered = false;
        return;
    }
    /* the compute stream may still read the copy: the free (and whatever
     * reuses the memory) waits for it */
    if (s->mem->from_compute(s->ctx, &e) != ACCEL_OK) {
        accel_log(ACCEL_LOG_WARN, "%s (unit %s's parameters kept)", e.msg, d->name);
        return;
    }
    drop_params(s, d);
}

/* The caller has handed the compute stream's work over first. */
enum accel_err shard__after_step(struct accel_shard *s, struct accel_error *err)
{
    enum accel_err rc = ACCEL_OK;

    for (size_t u = 0; u < s->nunits; u++) {
        struct shard_unit *d = &s->units[u];
        drop_params(s, d);
        d->reduced = false;
        if (rc == ACCEL_OK)
            rc = s->mem->zero(s->ctx, d->grad, d->slen * sizeof(float), err);
    }
    return rc;
}

/* ---------------------------------------------------------------- gradients */

/* Unit d's full gradient, allocated (zeroed) on first use in a step. */
static float *grads_of(struct accel_shard *s, struct shard_unit *d, enum accel_err *rc,
                       struct accel_error *err)
{
    if (d->grads == NULL)
        d->grads = shard__alloc(s, d->padded * sizeof(float), d->name, "full gradient", rc, err);
    return d->grads;
}

float *accel_shard_grads(struct accel_shard *s, size_t u)
{
    struct shard_unit *d;
    struct accel_error e;
    enum accel_err rc;
    bool fresh;

    if (u >= s->nunits)
        return NULL;
    d = &s->units[u];
    fresh = d->grads == NULL;
    if (grads_of(s, d, &rc, &e) == NULL) {
        accel_log(ACCEL_LOG_WARN, "%s", e.msg);
        return NULL;
    }
    /* a new buffer is zeroed on the communicator's stream: hand it over
     * (one already in use was handed over when it was new) */
    if (fresh && s->mem->to_compute(s->ctx, &e) != ACCEL_OK) {
        accel_log(ACCEL_LOG_WARN, "%s", e.msg);
        shard__release_buf(s, &d->grads, d->padded);
        return NULL;
    }
    return d->grads;
}

enum accel_err accel_shard_reduce(struct accel_shard *s, size_t u, bool last,
                                  struct accel_error *err)
{
    struct shard_unit *d;
    enum accel_dtype t = s->o.compute;
    size_t es = accel_dtype_size(t), n;
    enum accel_err rc = ACCEL_OK;
    void *wire, *mine;
    float *g;

    if (u >= s->nunits)
        return accel_error_set(err, ACCEL_EINVAL, "shard: reduce: no unit %zu", u);
    if (!last) /* no_sync: the full gradient keeps accumulating here */
        return ACCEL_OK;
    d = &s->units[u];
    /* backward wrote the gradient on the compute stream: the reduction, and
     * the free of the buffer after it, wait for that */
    if ((rc = s->mem->from_compute(s->ctx, err)) != ACCEL_OK)
        return rc;
    if ((g = grads_of(s, d, &rc, err)) == NULL)
        return rc;
    /* the padding must stay zero whatever the trainer wrote past numel */
    rc = s->mem->zero(s->ctx, g + d->numel, (d->padded - d->numel) * sizeof(float), err);
    if (rc != ACCEL_OK)
        return rc;
    if ((wire = wire_get(s, d, g, "reduce staging buffer", &rc, err)) == NULL)
        return rc;
    if (t != ACCEL_F32 && (rc = s->mem->narrow(s->ctx, wire, g, d->padded, t, err)) != ACCEL_OK)
        goto out;
    if (s->o.strategy == ACCEL_NO_SHARD) {
        n = d->padded;
        mine = wire;
        shard__count(s, n * es);
        rc = accel_all_reduce(s->comm, wire, wire, n, t, ACCEL_AVG, err);
    } else {
        n = d->slen;
        mine = (char *)wire + d->off * es;
        shard__count(s, d->padded * es);
        rc = accel_reduce_scatter(s->comm, wire, mine, n, t, ACCEL_AVG, err);
    }
    /* add, so that a trainer that reduces a unit twice in a step sums both */
    if (rc == ACCEL_OK)
        rc = s->mem->accumulate(s->ctx, d->grad, mine, n, t, err);
out:
    wire_put(s, d, wire, g);
    if (rc == ACCEL_OK) {
        shard__release_buf(s, &d->grads, d->padded);
        d->reduced = true;
    }
    return rc;
}
