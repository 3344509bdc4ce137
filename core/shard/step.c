/*
 * step.c: the optimizer step of a sharded model: the global gradient norm,
 * the fp16 overflow check and loss scale, clipping, and the update of this
 * rank's slices.
 *
 * The norm is reduced so that every rank computes the same bits, and so
 * that the result does not depend on the strategy: each rank sums the
 * squares of its slices in fp64 (units in order; inside a unit, elements in
 * order on the host, fixed per-block partials added in block order on a
 * device: mem_int.h), the partial sums are all-gathered as raw bits, and
 * every rank adds them in rank order, on the host.  An all_reduce would also agree across ranks,
 * but in fp32 and in the ring's order; fp64 makes the norm's rounding negligible next to the
 * gradients' own.  NO_SHARD holds every slice, so it forms the same per-rank
 * partial sums locally and sends nothing.  No fp32 gradient squared can
 * overflow fp64, so a non-finite total means a non-finite gradient: with
 * fp16 that is the overflow that skips the step, on every rank alike.
 */
#include <math.h>
#include <string.h>

#include "shard_int.h"

/* Each rank's sum of squares into s->partials_host[0..world). */
static enum accel_err partial_sums(struct accel_shard *s, struct accel_error *err)
{
    const struct shard_mem_ops *m = s->mem;
    enum accel_err rc;

    if ((rc = m->zero(s->ctx, s->partials, s->world * sizeof(double), err)) != ACCEL_OK)
        return rc;
    if (s->o.strategy == ACCEL_NO_SHARD) {
        /* slice r of each unit, as rank r of a sharded run would sum it */
        for (unsigned r = 0; r < s->world; r++)
            for (size_t u = 0; u < s->nunits; u++) {
                const struct shard_unit *d = &s->units[u];
                size_t q = d->padded / s->world;
                if ((rc = m->sumsq(s->ctx, d->grad + (size_t)r * q, q, &s->partials[r], err)) !=
                    ACCEL_OK)
                    return rc;
            }
    } else {
        for (size_t u = 0; u < s->nunits; u++)
            if ((rc = m->sumsq(s->ctx, s->units[u].grad, s->units[u].slen, &s->partials[s->rank],
                               err)) != ACCEL_OK)
                return rc;
        /* in place: this rank's fp64 is elements 2 rank, 2 rank + 1 */
        shard__count(s, sizeof(double));
        rc = accel_all_gather(s->comm, &s->partials[s->rank], s->partials, 2, ACCEL_F32, err);
        if (rc != ACCEL_OK)
            return rc;
    }
    /* the one wait of a step on a device: the norm decides on the host */
    return m->get(s->ctx, s->partials_host, s->partials, s->world * sizeof(double), err);
}

enum accel_err accel_shard_step(struct accel_shard *s, struct accel_shard_stats *st,
                                struct accel_error *err)
{
    bool fp16 = s->o.compute == ACCEL_F16, skip;
    double total, norm, coef = 1.0;
    enum accel_err rc;

    for (size_t u = 0; u < s->nunits; u++)
        if (s->units[u].grads != NULL)
            return accel_error_set(err, ACCEL_EINVAL,
                                   "shard: step: unit %s has a gradient that was not reduced "
                                   "(call accel_shard_reduce with last = true after its backward)",
                                   s->units[u].name);
    /* the compute stream's work first: the update rewrites the master (a
     * NO_SHARD fp32 compute copy), and the gathered copies are freed */
    if ((rc = s->mem->from_compute(s->ctx, err)) != ACCEL_OK)
        return rc;
    if ((rc = partial_sums(s, err)) != ACCEL_OK)
        return rc;
    total = s->partials_host[0];
    for (unsigned r = 1; r < s->world; r++)
        total += s->partials_host[r];
    norm = sqrt(total) / s->scale;
    skip = fp16 && !isfinite(total);
    if (skip) {
        /* halve, as GradScaler does; a floor of 1 as DeepSpeed's, so that a
         * persistent NaN cannot drive the scale to 0 */
        s->scale = s->scale / 2 < 1.0 ? 1.0 : s->scale / 2;
        s->good = 0;
    } else {
        /* torch.nn.utils.clip_grad_norm_: max / (norm + 1e-6), capped at 1 */
        if (s->o.max_grad_norm > 0.0 && isfinite(norm)) {
            double c = s->o.max_grad_norm / (norm + 1e-6);
            if (c < 1.0)
                coef = c;
        }
        /* the scale is a power of two: unscaling is exact, and folding it
         * into the clip factor costs no rounding; a save in flight may
         * still be copying the master and the state */
        shard__fence(s);
        if ((rc = shard__update(s, s->step + 1, (float)(coef / s->scale), err)) != ACCEL_OK)
            return rc;
        s->step++;
        if (fp16 && ++s->good >= s->o.scale_window) {
            s->scale *= 2;
            s->good = 0;
        }
    }
    if ((rc = shard__after_step(s, err)) != ACCEL_OK)
        return rc;
    if (st != NULL) {
        memset(st, 0, sizeof(*st));
        st->grad_norm = norm;
        st->skipped = skip;
        st->loss_scale = s->scale;
        st->step = s->step;
    }
    return ACCEL_OK;
}
