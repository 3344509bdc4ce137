/*
 * ckpt.c: a shard's state in and out of checkpoints (accel_shard_save,
 * accel_shard_load over ckpt/).
 *
 * The tensors: each parameter as "<unit>.<param>" (the model: what
 * consolidation exports), and its optimizer state as "optim.exp_avg.<name>"
 * and "optim.exp_avg_sq.<name>" (AdamW) or "optim.momentum_buffer.<name>"
 * (SGD with momentum), torch.optim's names.  A rank's pieces are the
 * intersections of its slice with each tensor; with NO_SHARD, where every
 * rank holds everything, rank r saves the r-th of `world` equal parts, so
 * the pieces still tile each tensor once.  The optimizer step count, the
 * fp16 loss scale (in C99 hex, exact), the optimizer, strategy and compute
 * type go in the metadata under "shard.".  Loading reads this rank's slice
 * of every tensor from whatever world size saved it: a copy of fp32 values,
 * so resharding is bit-exact.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/alloc.h"
#include "accel/ckpt.h"
#include "shard_int.h"

#define NAME_MAX_ (ACCEL_CKPT_MAX_NAME + 1)

/* "optim.exp_avg." and the like for state k; NULL past the optimizer's. */
static const char *state_prefix(const struct accel_shard *s, unsigned k)
{
    if (s->o.optimizer == ACCEL_ADAMW)
        return k == 0 ? "optim.exp_avg." : k == 1 ? "optim.exp_avg_sq." : NULL;
    return k == 0 && s->o.momentum != 0 ? "optim.momentum_buffer." : NULL;
}

static unsigned nstates(const struct accel_shard *s)
{
    unsigned k = 0;
    while (state_prefix(s, k))
        k++;
    return k;
}

static const char *optimizer_name(const struct accel_shard *s)
{
    return s->o.optimizer == ACCEL_ADAMW ? "adamw" : "sgd";
}

static bool tensor_name(char *buf, const char *prefix, const struct shard_unit *d,
                        const struct shard_param *p)
{
    int n = snprintf(buf, NAME_MAX_, "%s%s.%s", prefix, d->name, p->name);
    return n > 0 && n < NAME_MAX_;
}

/* The range of unit d's flat buffer this rank saves. */
static void save_range(const struct accel_shard *s, const struct shard_unit *d, size_t *a,
                       size_t *b)
{
    if (s->o.strategy == ACCEL_NO_SHARD) {
        *a = d->numel * s->rank / s->world;
        *b = d->numel * (s->rank + 1) / s->world;
    } else {
        *a = d->begin;
        *b = d->end;
    }
}

/* The checkpoint's agreement: every rank's flag through the shard's own
 * collectives (host or device memory alike). */
static enum accel_err agree(void *ctx, bool ok, bool *all_ok, struct accel_error *err)
{
    struct accel_shard *s = ctx;
    enum accel_err rc = shard__exchange(s, ok ? 0 : 1, err);

    *all_ok = rc == ACCEL_OK;
    for (unsigned r = 0; rc == ACCEL_OK && r < s->world; r++)
        if (shard__exchanged(s, r) != 0)
            *all_ok = false;
    return rc;
}

struct saved {
    struct accel_ckpt_piece *p;
    size_t n;
    char (*names)[NAME_MAX_];
    float *staging; /* device: the slices' host copy */
};

static void saved_free(struct saved *v)
{
    accel_free(v->p);
    accel_free(v->names);
    accel_free(v->staging);
}

/* The pieces of unit d on this rank for the master weights (k = 0) and each
 * state (k = 1..); `src` points at element a of each. */
static enum accel_err add_pieces(struct accel_shard *s, struct shard_unit *d, size_t a, size_t b,
                                 const float *const *src, struct saved *v, struct accel_error *err)
{
    for (unsigned k = 0; k <= nstates(s); k++)
        for (size_t i = 0; i < d->nparams; i++) {
            const struct shard_param *p = &d->tensors[i];
            size_t x0 = p->offset > a ? p->offset : a;
            size_t x1 = p->offset + p->numel < b ? p->offset + p->numel : b;
            struct accel_ckpt_piece *q = &v->p[v->n];

            if (x0 >= x1)
                continue;
            if (!tensor_name(v->names[v->n], k ? state_prefix(s, k - 1) : "", d, p))
                return accel_error_set(err, ACCEL_ETOOBIG,
                                       "shard: save: the name of %s.%s is over %d bytes", d->name,
                                       p->name, ACCEL_CKPT_MAX_NAME);
            memset(q, 0, sizeof *q);
            q->t.name = v->names[v->n];
            q->t.dtype = ACCEL_F32;
            q->t.ndim = p->ndim;
            for (unsigned j = 0; j < p->ndim; j++)
                q->t.shape[j] = p->shape[j];
            q->lo = x0 - p->offset;
            q->hi = x1 - p->offset;
            q->data = src[k] + (x0 - a);
            v->n++;
        }
    return ACCEL_OK;
}

/* The pieces of this rank's state into v; on a device its slices copied
 * to host memory first: into the saver's staging when the shard has a
 * saver (pinned, and not copied again by the save), else a buffer of v's. */
static enum accel_err collect_pieces(struct accel_shard *s, struct saved *v,
                                     struct accel_error *err)
{
    unsigned ns = nstates(s);
    size_t cap = 0, staged = 0, at = 0;
    bool dev = s->mem != &shard__host_ops;
    float *dst = NULL;
    enum accel_err rc = ACCEL_OK;

    for (size_t u = 0; u < s->nunits; u++) {
        size_t a, b;
        save_range(s, &s->units[u], &a, &b);
        cap += s->units[u].nparams * (1 + ns);
        staged += (b - a) * (1 + ns);
    }
    v->p = accel_calloc(cap ? cap : 1, sizeof *v->p);
    v->names = accel_calloc(cap ? cap : 1, sizeof *v->names);
    if (dev && s->saver)
        dst = accel_ckpt_saver_staging(s->saver, staged * sizeof(float), err);
    else if (dev)
        dst = v->staging = accel_malloc(staged ? staged * sizeof(float) : 1);
    if (!v->p || !v->names || (dev && !dst))
        return s->saver && dev && !dst
                   ? err->code
                   : accel_error_set(err, ACCEL_ENOMEM, "shard: save: out of host memory");
    for (size_t u = 0; rc == ACCEL_OK && u < s->nunits; u++) {
        struct shard_unit *d = &s->units[u];
        const float *src[3];
        size_t a, b;

        save_range(s, d, &a, &b);
        if (a == b)
            continue;
        for (unsigned k = 0; rc == ACCEL_OK && k <= ns; k++) {
            const float *buf = k ? d->state[k - 1] : d->master;
            src[k] = buf + (a - d->begin);
            if (dev) { /* waits for the stream: the values after the last step */
                rc = s->mem->get(s->ctx, dst + at, src[k], (b - a) * sizeof(float), err);
                src[k] = dst + at;
                at += b - a;
            }
        }
        if (rc == ACCEL_OK)
            rc = add_pieces(s, d, a, b, src, v, err);
    }
    return rc;
}

/* The trainer's metadata and the shard's ("shard.*") into m. */
struct save_meta {
    struct accel_ckpt_kv kv[ACCEL_CKPT_MAX_META];
    size_t n;
    char nsteps[32], scale[64];
};

/* Argument errors are the same on every rank (the trainer passes the same
 * metadata everywhere), so they return before any agreement. */
static enum accel_err save_meta(const struct accel_shard *s, const struct accel_ckpt_kv *meta,
                                size_t nmeta, struct save_meta *m, struct accel_error *err)
{
    m->n = 0;
    if (nmeta > ACCEL_CKPT_MAX_META - 5 || (nmeta && !meta))
        return accel_error_set(err, ACCEL_ETOOBIG, "shard: save: at most %d metadata entries",
                               ACCEL_CKPT_MAX_META - 5);
    for (size_t i = 0; i < nmeta; i++) {
        if (meta[i].key && !strncmp(meta[i].key, "shard.", 6))
            return accel_error_set(err, ACCEL_EINVAL,
                                   "shard: save: metadata key '%s': \"shard.\" keys are the "
                                   "shard's own",
                                   meta[i].key);
        m->kv[m->n++] = meta[i];
    }
    snprintf(m->nsteps, sizeof m->nsteps, "%lu", s->step);
    snprintf(m->scale, sizeof m->scale, "%a", s->scale);
    m->kv[m->n++] = (struct accel_ckpt_kv){"shard.step", m->nsteps};
    m->kv[m->n++] = (struct accel_ckpt_kv){"shard.loss_scale", m->scale};
    m->kv[m->n++] = (struct accel_ckpt_kv){"shard.optimizer", optimizer_name(s)};
    m->kv[m->n++] = (struct accel_ckpt_kv){"shard.compute", accel_dtype_name(s->o.compute)};
    m->kv[m->n++] = (struct accel_ckpt_kv){"shard.strategy",
                                           s->o.strategy == ACCEL_FULL_SHARD      ? "FULL_SHARD"
                                           : s->o.strategy == ACCEL_SHARD_GRAD_OP ? "SHARD_GRAD_OP"
                                                                                  : "NO_SHARD"};
    return ACCEL_OK;
}

static enum accel_err through_saver(struct accel_shard *s, unsigned long step,
                                    const struct accel_ckpt_kv *meta, size_t nmeta,
                                    enum accel_ckpt_busy busy, bool sync, struct accel_error *err);

enum accel_err accel_shard_save(struct accel_shard *s, const char *root, unsigned long step,
                                const struct accel_ckpt_kv *meta, size_t nmeta, unsigned keep,
                                struct accel_error *err)
{
    struct save_meta m;
    struct saved v = {0};
    enum accel_err rc;

    if (s->saver) /* through the saver: its root and keep */
        return through_saver(s, step, meta, nmeta, ACCEL_CKPT_WAIT, true, err);
    rc = save_meta(s, meta, nmeta, &m, err);
    if (rc != ACCEL_OK)
        return rc;
    /* the last step's updates were queued after the compute stream's work */
    rc = s->mem->from_compute(s->ctx, err);
    if (rc == ACCEL_OK)
        rc = collect_pieces(s, &v, err);
    if (rc != ACCEL_OK) {
        /* the others are in accel_ckpt_save: fail its first agreement */
        bool ignored;
        struct accel_error e2;
        saved_free(&v);
        (void)agree(s, false, &ignored, &e2);
        return rc;
    }
    {
        const struct accel_ckpt_save_opts o = {root, step, s->rank, s->world, m.kv,
                                               m.n,  keep, agree,   s};
        rc = accel_ckpt_save(&o, v.p, v.n, err);
    }
    saved_free(&v);
    return rc;
}

/* ---------------------------------------------------------------- the saver */

/* The saver's collective step: every rank's value through the shard's own
 * exchange, the smallest kept. */
static enum accel_err saver_min(void *ctx, uint64_t mine, uint64_t *min, struct accel_error *err)
{
    struct accel_shard *s = ctx;
    enum accel_err rc = shard__exchange(s, mine, err);

    *min = UINT64_MAX;
    for (unsigned r = 0; rc == ACCEL_OK && r < s->world; r++)
        if (shard__exchanged(s, r) < *min)
            *min = shard__exchanged(s, r);
    return rc;
}

static void *saver_alloc(void *ctx, size_t bytes)
{
    struct accel_shard *s = ctx;
    return s->mem->pinned_alloc(s->ctx, bytes);
}

static void saver_free(void *ctx, void *p)
{
    struct accel_shard *s = ctx;
    s->mem->pinned_free(s->ctx, p);
}

enum accel_err accel_shard_ckpt_open(struct accel_shard *s, const struct accel_shard_ckpt_opts *o,
                                     struct accel_error *err)
{
    const struct accel_ckpt_mem mem = {saver_alloc, saver_free, s};
    struct accel_ckpt_saver_opts so;

    if (s->saver || !o)
        return accel_error_set(err, ACCEL_EINVAL, "shard: checkpoints: %s",
                               s->saver ? "the saver is open already" : "no options");
    so = (struct accel_ckpt_saver_opts){o->root,       o->local,     s->rank,  s->world,  o->keep,
                                        o->keep_local, o->copy_rate, o->owner, saver_min, s,
                                        &mem};
    return accel_ckpt_saver_open(&s->saver, &so, err);
}

void shard__fence(struct accel_shard *s)
{
    if (s->saver)
        accel_ckpt_saver_wait_staged(s->saver);
}

void shard__ckpt_close(struct accel_shard *s)
{
    accel_ckpt_saver_close(s->saver);
    s->saver = NULL;
}

enum accel_err accel_shard_ckpt_resume(struct accel_shard *s, unsigned long *step,
                                       struct accel_ckpt **c, struct accel_error *err)
{
    enum accel_err rc;

    *c = NULL;
    *step = 0;
    if (!s->saver)
        return accel_error_set(err, ACCEL_EINVAL,
                               "shard: resume: no saver (accel_shard_ckpt_open)");
    rc = accel_ckpt_saver_resume(s->saver, step, err);
    if (rc != ACCEL_OK || *step == 0)
        return rc;
    /* this rank's failure is accel_shard_load's agreement's, for all */
    if (accel_ckpt_saver_open_step(s->saver, *step, c, err) != ACCEL_OK)
        *c = NULL;
    return ACCEL_OK;
}

/* A save through the saver: synchronous (`sync`: the writer writes the
 * shard's host memory, or the device's slices' pinned copy, as it is; the
 * caller waits for the commit) or started (host memory: the writer copies
 * the slices while the next step's forward and backward run, which read,
 * never write, the master and the state; the next update waits for that
 * copy, shard__fence). */
static enum accel_err through_saver(struct accel_shard *s, unsigned long step,
                                    const struct accel_ckpt_kv *meta, size_t nmeta,
                                    enum accel_ckpt_busy busy, bool sync, struct accel_error *err)
{
    struct save_meta m;
    struct saved v = {0};
    unsigned long done;
    enum accel_err rc;

    if (!s->saver)
        return accel_error_set(err, ACCEL_EINVAL, "shard: save: no saver (accel_shard_ckpt_open)");
    rc = save_meta(s, meta, nmeta, &m, err); /* the same on every rank */
    if (rc != ACCEL_OK)
        return rc;
    /* the staging memory is the save's in flight: that one first (or no) */
    if (accel_ckpt_saver_pending(s->saver)) {
        if (busy == ACCEL_CKPT_REFUSE)
            return accel_error_set(err, ACCEL_EBUSY,
                                   "shard: save of step %lu: step %lu is still "
                                   "being saved",
                                   step, accel_ckpt_saver_pending(s->saver));
        rc = accel_ckpt_saver_poll(s->saver, true, &done, err);
        if (rc != ACCEL_OK)
            return rc;
    }
    rc = s->mem->from_compute(s->ctx, err);
    if (rc == ACCEL_OK)
        rc = collect_pieces(s, &v, err);
    if (rc == ACCEL_OK) {
        const bool defer = !sync && s->mem == &shard__host_ops;
        const struct accel_ckpt_save_req q = {step, m.kv, m.n, v.p, v.n, defer};
        rc = sync ? accel_ckpt_saver_save(s->saver, &q, err)
                  : accel_ckpt_saver_start(s->saver, &q, busy, err);
    } else { /* the others started it: the poll fails it everywhere */
        struct accel_error why = err ? *err : (struct accel_error){0};
        rc = accel_ckpt_saver_fail(s->saver, step, &why, err);
        if (rc == ACCEL_OK)
            rc = sync ? accel_ckpt_saver_poll(s->saver, true, &done, err) : ACCEL_OK;
    }
    saved_free(&v);
    return rc;
}

enum accel_err accel_shard_save_start(struct accel_shard *s, unsigned long step,
                                      const struct accel_ckpt_kv *meta, size_t nmeta,
                                      enum accel_ckpt_busy busy, struct accel_error *err)
{
    return through_saver(s, step, meta, nmeta, busy, false, err);
}

enum accel_err accel_shard_save_poll(struct accel_shard *s, bool block, unsigned long *committed,
                                     struct accel_error *err)
{
    *committed = 0;
    if (!s->saver)
        return accel_error_set(err, ACCEL_EINVAL, "shard: save: no saver (accel_shard_ckpt_open)");
    return accel_ckpt_saver_poll(s->saver, block, committed, err);
}

/* ---------------------------------------------------------------- loading */

static enum accel_err check_tensor(const struct accel_ckpt *c, const char *name,
                                   const struct shard_param *p, struct accel_error *err)
{
    const struct accel_ckpt_tensor *t = accel_ckpt_find(c, name);
    bool same = t && t->dtype == ACCEL_F32 && t->ndim == p->ndim;

    for (unsigned j = 0; same && j < p->ndim; j++)
        same = t->shape[j] == p->shape[j];
    if (!t)
        return accel_error_set(err, ACCEL_ENOTFOUND, "shard: load: %s has no tensor '%s'",
                               accel_ckpt_dir(c), name);
    if (!same)
        return accel_error_set(err, ACCEL_EINVAL,
                               "shard: load: tensor '%s' of %s has another type or shape than "
                               "the model's (a checkpoint of another model?)",
                               name, accel_ckpt_dir(c));
    return ACCEL_OK;
}

/* This rank's slice of unit d, buffer k (0 the master, 1.. the states),
 * read into dst (slice element 0 = flat element d->begin). */
static enum accel_err load_unit(struct accel_shard *s, struct accel_ckpt *c, struct shard_unit *d,
                                unsigned k, float *dst, struct accel_error *err)
{
    char name[NAME_MAX_];

    for (size_t i = 0; i < d->nparams; i++) {
        const struct shard_param *p = &d->tensors[i];
        size_t x0 = p->offset > d->begin ? p->offset : d->begin;
        size_t x1 = p->offset + p->numel < d->end ? p->offset + p->numel : d->end;
        enum accel_err rc;

        if (!tensor_name(name, k ? state_prefix(s, k - 1) : "", d, p))
            return accel_error_set(err, ACCEL_ETOOBIG,
                                   "shard: load: the name of %s.%s is too "
                                   "long",
                                   d->name, p->name);
        rc = check_tensor(c, name, p, err);
        if (rc == ACCEL_OK && x0 < x1)
            rc = accel_ckpt_read(c, name, ACCEL_F32, x0 - p->offset, x1 - p->offset,
                                 dst + (x0 - d->begin), err);
        if (rc != ACCEL_OK)
            return rc;
    }
    return ACCEL_OK;
}

static enum accel_err load_all(struct accel_shard *s, struct accel_ckpt *c, struct accel_error *err)
{
    const char *opt = accel_ckpt_meta(c, "shard.optimizer");
    const char *steps = accel_ckpt_meta(c, "shard.step");
    const char *scale = accel_ckpt_meta(c, "shard.loss_scale");
    const char *compute = accel_ckpt_meta(c, "shard.compute");
    bool dev = s->mem != &shard__host_ops;
    float *host = NULL;
    size_t most = 0;
    enum accel_err rc = ACCEL_OK;
    unsigned long nsteps;
    double ls = 1.0;
    char *end;

    if (!opt || !steps || !scale || !compute)
        return accel_error_set(err, ACCEL_EINVAL,
                               "shard: load: %s was not saved by accel_shard_save (no shard.* "
                               "metadata)",
                               accel_ckpt_dir(c));
    if (strcmp(opt, optimizer_name(s)) != 0)
        return accel_error_set(err, ACCEL_EINVAL,
                               "shard: load: %s holds %s state; this run uses %s (the optimizer "
                               "state doesn't carry over)",
                               accel_ckpt_dir(c), opt, optimizer_name(s));
    nsteps = strtoul(steps, &end, 10);
    if (*steps < '0' || *steps > '9' || *end)
        return accel_error_set(err, ACCEL_EINVAL, "shard: load: %s: bad shard.step '%s'",
                               accel_ckpt_dir(c), steps);
    if (s->o.compute == ACCEL_F16) /* fp16 resumes its scale, else starts afresh */
        ls = !strcmp(compute, "f16") ? strtod(scale, NULL) : s->o.loss_scale;
    if ((rc = s->mem->from_compute(s->ctx, err)) != ACCEL_OK)
        return rc;
    shard__fence(s);
    for (size_t u = 0; dev && u < s->nunits; u++) /* a device's slices go through the host */
        most =
            s->units[u].end - s->units[u].begin > most ? s->units[u].end - s->units[u].begin : most;
    if (most && !(host = accel_malloc(most * sizeof(float))))
        return accel_error_set(err, ACCEL_ENOMEM, "shard: load: out of host memory");
    for (size_t u = 0; rc == ACCEL_OK && u < s->nunits; u++) {
        struct shard_unit *d = &s->units[u];
        size_t n = d->end - d->begin;

        for (unsigned k = 0; rc == ACCEL_OK && k <= nstates(s); k++) {
            float *buf = k ? d->state[k - 1] : d->master;
            rc = load_unit(s, c, d, k, dev ? host : buf, err);
            if (rc == ACCEL_OK && dev && n)
                rc = s->mem->put(s->ctx, buf, host, n * sizeof(float), err);
        }
    }
    accel_free(host);
    if (rc == ACCEL_OK)
        rc = accel_shard_restore(s, nsteps, ls, err);
    return rc;
}

enum accel_err accel_shard_load(struct accel_shard *s, struct accel_ckpt *c,
                                struct accel_error *err)
{
    /* NULL: this rank could not open it (its error is the caller's): it
     * only takes part in the agreement, so that the others fail too */
    enum accel_err rc = c ? load_all(s, c, err) : ACCEL_EINVAL, arc;
    bool all = false;
    struct accel_error e2;

    arc = agree(s, rc == ACCEL_OK, &all, rc == ACCEL_OK ? err : &e2);
    if (rc != ACCEL_OK)
        return rc;
    if (arc != ACCEL_OK)
        return arc;
    for (unsigned r = 0; !all && r < s->world; r++)
        if (shard__exchanged(s, r) != 0)
            return accel_error_set(err, ACCEL_EPEER,
                                   "shard: load: rank %u of %u couldn't load %s (its log says why)",
                                   r, s->world, c ? accel_ckpt_dir(c) : "the checkpoint");
    return ACCEL_OK;
}
