/*
 * layout.c: the unit table.  Copies the caller's unit specs, packs each
 * unit's parameters one after the other (no gaps: only the unit's end is
 * padded), pads the unit to a multiple of world x ACCEL_SHARD_ALIGN elements
 * and cuts it into `world` equal slices, rank r owning slice r.  Every size is
 * checked for overflow here, once, so the other files can multiply freely.
 * Nothing is allocated for the weights here (shard.c does that).
 */
#include <string.h>

#include "accel/alloc.h"
#include "shard_int.h"

static char *copy_name(const char *name, const char *what, size_t u, struct accel_error *err,
                       enum accel_err *rc)
{
    size_t n;
    char *c;

    if (name == NULL || name[0] == '\0') {
        *rc = accel_error_set(err, ACCEL_EINVAL, "shard: %s of unit %zu has no name", what, u);
        return NULL;
    }
    n = strnlen(name, ACCEL_SHARD_MAX_NAME + 1);
    if (n > ACCEL_SHARD_MAX_NAME) {
        *rc = accel_error_set(err, ACCEL_ETOOBIG, "shard: a %s name of unit %zu is over %d bytes",
                              what, u, ACCEL_SHARD_MAX_NAME);
        return NULL;
    }
    c = accel_strndup(name, n);
    if (c == NULL)
        *rc = accel_error_set(err, ACCEL_ENOMEM, "shard: out of memory copying the unit table");
    return c;
}

/* Copies unit u's parameters and sets its numel; *rc on failure. */
static enum accel_err copy_unit(struct shard_unit *d, const struct accel_shard_unit *src, size_t u,
                                size_t limit, struct accel_error *err)
{
    enum accel_err rc = ACCEL_OK;

    if ((d->name = copy_name(src->name, "the unit", u, err, &rc)) == NULL)
        return rc;
    if (src->nparams == 0 || src->params == NULL)
        return accel_error_set(err, ACCEL_EINVAL, "shard: unit %s has no parameters", d->name);
    d->tensors = accel_calloc(src->nparams, sizeof(*d->tensors));
    if (d->tensors == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "shard: out of memory copying the unit table");
    d->nparams = src->nparams;
    for (size_t p = 0; p < src->nparams; p++) {
        const struct accel_shard_param *sp = &src->params[p];
        struct shard_param *dp = &d->tensors[p];
        size_t numel = 1;

        if ((dp->name = copy_name(sp->name, "a parameter", u, err, &rc)) == NULL)
            return rc;
        if (sp->ndim < 1 || sp->ndim > 4)
            return accel_error_set(err, ACCEL_EINVAL,
                                   "shard: %s.%s has %u dimensions; 1..4 allowed", d->name,
                                   dp->name, sp->ndim);
        dp->ndim = sp->ndim;
        for (unsigned k = 0; k < sp->ndim; k++) {
            if (sp->shape[k] == 0)
                return accel_error_set(err, ACCEL_EINVAL, "shard: %s.%s: dimension %u is 0",
                                       d->name, dp->name, k);
            if (numel > limit / sp->shape[k])
                return accel_error_set(err, ACCEL_ETOOBIG, "shard: %s.%s has too many elements",
                                       d->name, dp->name);
            numel *= sp->shape[k];
            dp->shape[k] = sp->shape[k];
        }
        if (d->numel > limit - numel)
            return accel_error_set(err, ACCEL_ETOOBIG, "shard: unit %s has too many elements",
                                   d->name);
        dp->offset = d->numel;
        dp->numel = numel;
        d->numel += numel;
    }
    return ACCEL_OK;
}

enum accel_err shard__layout(struct accel_shard *s, const struct accel_shard_unit *units,
                             size_t nunits, struct accel_error *err)
{
    /* 16 bytes an element of state must fit in size_t, with room to pad */
    size_t quantum = (size_t)s->world * ACCEL_SHARD_ALIGN;
    size_t limit = SIZE_MAX / 16 - quantum, total = 0, nparams = 0;
    enum accel_err rc;

    if (units == NULL || nunits == 0)
        return accel_error_set(err, ACCEL_EINVAL, "shard: no units");
    if (nunits > ACCEL_SHARD_MAX_UNITS)
        return accel_error_set(err, ACCEL_ETOOBIG, "shard: %zu units; the limit is %d", nunits,
                               ACCEL_SHARD_MAX_UNITS);
    for (size_t u = 0; u < nunits; u++) {
        if (units[u].nparams > ACCEL_SHARD_MAX_PARAMS - nparams)
            return accel_error_set(err, ACCEL_ETOOBIG,
                                   "shard: more than %d parameters over all units",
                                   ACCEL_SHARD_MAX_PARAMS);
        nparams += units[u].nparams;
    }
    s->units = accel_calloc(nunits, sizeof(*s->units));
    if (s->units == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "shard: out of memory copying the unit table");
    s->nunits = nunits;
    for (size_t u = 0; u < nunits; u++) {
        struct shard_unit *d = &s->units[u];

        if ((rc = copy_unit(d, &units[u], u, limit, err)) != ACCEL_OK)
            return rc;
        d->padded = (d->numel + quantum - 1) / quantum * quantum;
        if (d->padded > limit - total)
            return accel_error_set(err, ACCEL_ETOOBIG, "shard: the model has too many elements");
        total += d->padded;
        if (s->o.strategy == ACCEL_NO_SHARD) {
            d->off = 0;
            d->slen = d->padded;
        } else {
            d->slen = d->padded / s->world;
            d->off = (size_t)s->rank * d->slen;
        }
        d->begin = d->off < d->numel ? d->off : d->numel;
        d->end = d->off + d->slen < d->numel ? d->off + d->slen : d->numel;
    }
    return ACCEL_OK;
}

void shard__layout_free(struct accel_shard *s)
{
    if (s->units == NULL)
        return;
    for (size_t u = 0; u < s->nunits; u++) {
        struct shard_unit *d = &s->units[u];
        accel_free(d->name);
        if (d->tensors != NULL)
            for (size_t p = 0; p < d->nparams; p++)
                accel_free(d->tensors[p].name);
        accel_free(d->tensors);
    }
    accel_free(s->units);
    s->units = NULL;
    s->nunits = 0;
}

/* FNV-1a, 64 bits: a check that ranks agree, not a defence against anyone */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t fnv_u64(uint64_t h, uint64_t v)
{
    return fnv(h, &v, sizeof(v));
}

uint64_t shard__layout_hash(const struct accel_shard *s)
{
    uint64_t h = 0xcbf29ce484222325ull;

    /* what decides the bytes on the wire and the update's arithmetic (ranks
     * with different settings would diverge silently under NO_SHARD) */
    const double settings[] = {s->o.max_grad_norm, s->o.lr,        s->o.beta1,
                               s->o.beta2,         s->o.eps,       s->o.weight_decay,
                               s->o.momentum,      s->o.loss_scale};

    h = fnv_u64(h, (uint64_t)s->o.compute);
    h = fnv_u64(h, (uint64_t)s->o.strategy);
    h = fnv_u64(h, (uint64_t)s->o.optimizer);
    h = fnv_u64(h, (uint64_t)s->o.scale_window);
    h = fnv(h, settings, sizeof(settings));
    h = fnv_u64(h, (uint64_t)s->nunits);
    for (size_t u = 0; u < s->nunits; u++) {
        const struct shard_unit *d = &s->units[u];
        h = fnv(h, d->name, strlen(d->name) + 1);
        h = fnv_u64(h, (uint64_t)d->nparams);
        for (size_t p = 0; p < d->nparams; p++) {
            h = fnv(h, d->tensors[p].name, strlen(d->tensors[p].name) + 1);
            h = fnv_u64(h, d->tensors[p].ndim);
            for (unsigned k = 0; k < d->tensors[p].ndim; k++)
                h = fnv_u64(h, (uint64_t)d->tensors[p].shape[k]);
        }
    }
    return h;
}
