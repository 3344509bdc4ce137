/*
 * saver.c: a rank's checkpoints over a run (accel/ckpt.h, "savers"): the
 * root's lock held from open to close, one writer thread, staging memory
 * reused from save to save, and an optional node-local tier.
 *
 *   start      the pieces copied into staging (the only time training
 *              waits), the job handed to the writer
 *   writer     the rank file written durably: into the root's step
 *              directory (one tier), or into the local tier's, then copied
 *              to the root's at --copy-rate and read back (two tiers)
 *   poll       collective: every rank's state, the smallest wins: still
 *              writing somewhere (nothing happens), a failure somewhere
 *              (every rank returns it, nothing is committed), or all done:
 *              rank 0 commits in the root (commit.c, as accel_ckpt_save),
 *              then every rank trims its local tier to keep_local
 *   resume     collective: the newest step committed in the root, or a
 *              newer one whose local copies every rank still has (copied
 *              up and committed first); local attempts past it removed
 *
 * The writer never calls the collective function (the caller's
 * communicator is the caller's thread's): everything collective happens in
 * start (finishing a busy save), poll and resume.
 *
 * This file: open, close, saving, the writer; the node-local tier and the
 * copy up are saver_tier.c's, resuming saver_resume.c's (saver_int.h).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/fsutil.h"
#include "../core/base/random.h"
#include "saver_int.h"

/* ---------------------------------------------------------------- memory */

static void *mem_alloc(const struct accel_ckpt_saver *sv, size_t n)
{
    return sv->mem.alloc ? sv->mem.alloc(sv->mem.ctx, n) : accel_malloc(n);
}

static void mem_free(const struct accel_ckpt_saver *sv, void *p)
{
    if (p && sv->mem.free)
        sv->mem.free(sv->mem.ctx, p);
    else
        accel_free(p);
}

/* b holds at least n bytes (its content is not kept). */
static bool mem_reserve(struct accel_ckpt_saver *sv, struct mem *b, size_t n)
{
    void *p;

    if (b->cap >= n)
        return true;
    p = mem_alloc(sv, n);
    if (!p)
        return false;
    mem_free(sv, b->p);
    b->p = p;
    b->cap = n;
    return true;
}

static void job_free(struct job *j)
{
    for (size_t i = 0; i < j->nmeta; i++) {
        accel_free((char *)j->meta[i].key);
        accel_free((char *)j->meta[i].value);
    }
    for (size_t i = 0; i < j->n; i++)
        accel_free((char *)j->p[i].t.name);
    accel_free(j->meta);
    accel_free(j->p);
    memset(j, 0, sizeof *j);
}

/* ---------------------------------------------------------------- collective */

enum accel_err ckpt__sv_agree(struct accel_ckpt_saver *sv, enum accel_err mine, bool *all,
                              struct accel_error *err)
{
    uint64_t m = 0;
    enum accel_err rc;

    if (mine != ACCEL_OK)
        ckpt__tell(sv->o.rank, err);
    rc = sv->o.min(sv->o.min_ctx, mine == ACCEL_OK ? 1 : 0, &m, mine == ACCEL_OK ? err : NULL);

    *all = rc == ACCEL_OK && m == 1;
    return rc;
}

/* rank 0's value on every rank */
enum accel_err ckpt__sv_from_rank0(struct accel_ckpt_saver *sv, uint64_t v, uint64_t *out,
                                   struct accel_error *err)
{
    return sv->o.min(sv->o.min_ctx, sv->o.rank == 0 ? v : UINT64_MAX, out, err);
}

/* The options of one save in the root (or `root`), as save.c takes them. */
static struct accel_ckpt_save_opts save_opts(const struct accel_ckpt_saver *sv, const char *root,
                                             unsigned long step, const struct accel_ckpt_kv *meta,
                                             size_t nmeta)
{
    return (struct accel_ckpt_save_opts){root,  step,       sv->o.rank, sv->o.world, meta,
                                         nmeta, sv->o.keep, NULL,       NULL};
}

/* The newest step under root whose step directory holds `file` (a
 * committed checkpoint's manifest, or this rank's file), 0 when none. */
unsigned long ckpt__sv_newest_with(const char *root, const char *file)
{
    struct accel_ckpt_entry *e = NULL;
    struct accel_error err;
    unsigned long best = 0;
    char dir[4096], path[4200];
    size_t n = 0;

    if (ckpt__list(root, false, &e, &n, &err) != ACCEL_OK)
        return 0;
    for (size_t i = n; i-- > 0 && !best;) {
        struct stat st;
        if (ckpt__path(dir, sizeof dir, root, e[i].name) &&
            ckpt__path(path, sizeof path, dir, file) && lstat(path, &st) == 0 &&
            S_ISREG(st.st_mode))
            best = e[i].step;
    }
    accel_free(e);
    return best;
}

/* ---------------------------------------------------------------- the writer */

static bool in_staging(const struct accel_ckpt_saver *sv, const struct accel_ckpt_piece *p);

/* A deferred job's pieces into the copies buffer (reserved by start), so
 * that the caller may let go of its memory (the writer says so). */
static void stage(struct accel_ckpt_saver *sv, struct job *j)
{
    size_t at = 0;

    for (size_t i = 0; j->deferred && i < j->n; i++) {
        struct accel_ckpt_piece *p = &j->p[i];
        size_t bytes = (size_t)((p->hi - p->lo) * accel_dtype_size(p->t.dtype));
        if (in_staging(sv, p))
            continue;
        memcpy((char *)sv->copies.p + at, p->data, bytes);
        p->data = (char *)sv->copies.p + at;
        at += bytes;
    }
}

static enum accel_err run_job(struct accel_ckpt_saver *sv, struct job *j, struct accel_error *err)
{
    const char *tier = sv->local ? sv->local : sv->o.root;
    const struct accel_ckpt_save_opts so = save_opts(sv, tier, j->step, j->meta, j->nmeta);
    char dir[4096];
    enum accel_err rc;
    bool local_bad;

    rc = ckpt__step_dir(tier, j->step, sv->o.rank, dir, sizeof dir, err);
    if (rc == ACCEL_OK)
        rc = ckpt__write_rank(&so, &sv->org, dir, j->p, j->n, err);
    if (rc == ACCEL_OK && sv->local) {
        /* the local copy is a record (a resume may commit it): its name in
         * the step's directory, and the step's in the tier */
        if (accel_fsync_dir(dir) != ACCEL_OK || accel_fsync_dir(sv->local) != ACCEL_OK)
            rc = accel_error_sys(err, ACCEL_EIO, "checkpoint save: couldn't fsync %s or %s", dir,
                                 sv->local);
        if (rc == ACCEL_OK)
            rc = ckpt__sv_copy_up(sv, j->step, &local_bad, err);
    }
    return rc;
}

/* After the commit of `step`: the root's old checkpoints deleted (rank 0)
 * and the local tier trimmed (every rank).  The writer does it, so that
 * training does not wait for the deletion of gigabytes. */
static void tidy_up(struct accel_ckpt_saver *sv, unsigned long step)
{
    const struct accel_ckpt_save_opts so = save_opts(sv, sv->o.root, step, NULL, 0);

    if (sv->o.rank == 0)
        ckpt__collect(&so);
    ckpt__sv_trim_local(sv, step, false);
}

static void *writer(void *arg)
{
    struct accel_ckpt_saver *sv = arg;

    pthread_mutex_lock(&sv->mu);
    for (;;) {
        struct accel_error e;
        enum accel_err rc;

        while (!sv->queued && !sv->tidy && !sv->quit)
            pthread_cond_wait(&sv->cv, &sv->mu);
        if (sv->queued && !sv->staged) { /* first: training waits for it */
            pthread_mutex_unlock(&sv->mu);
            stage(sv, &sv->job);
            pthread_mutex_lock(&sv->mu);
            sv->staged = true;
            pthread_cond_broadcast(&sv->cv);
        }
        if (sv->tidy) { /* before the next save, in the order they came */
            unsigned long step = sv->tidy;
            pthread_mutex_unlock(&sv->mu);
            tidy_up(sv, step);
            pthread_mutex_lock(&sv->mu);
            if (sv->tidy == step)
                sv->tidy = 0;
            continue;
        }
        if (!sv->queued)
            break;
        sv->queued = false;
        pthread_mutex_unlock(&sv->mu);
        accel_error_clear(&e);
        rc = run_job(sv, &sv->job, &e); /* the job is the writer's while RUNNING */
        pthread_mutex_lock(&sv->mu);
        sv->werr = e;
        sv->state = rc == ACCEL_OK ? W_DONE : W_FAILED;
        pthread_cond_broadcast(&sv->cv);
    }
    pthread_mutex_unlock(&sv->mu);
    return NULL;
}

/* The state once the writer is done with the save (block) or now. */
static enum wstate state_of(struct accel_ckpt_saver *sv, bool block)
{
    enum wstate s;

    pthread_mutex_lock(&sv->mu);
    while (block && sv->state == W_RUNNING)
        pthread_cond_wait(&sv->cv, &sv->mu);
    s = sv->state;
    pthread_mutex_unlock(&sv->mu);
    return s;
}

static void finish_job(struct accel_ckpt_saver *sv)
{
    pthread_mutex_lock(&sv->mu);
    sv->state = W_IDLE;
    sv->werr_told = false;
    pthread_mutex_unlock(&sv->mu);
    job_free(&sv->job);
}

/* ---------------------------------------------------------------- open, close */

static char *dup_or_null(const char *s, bool *ok)
{
    char *d = s ? accel_strdup(s) : NULL;

    if (s && !d)
        *ok = false;
    return d;
}

/* A rank that cannot open its saver still takes its part in the opening's
 * one agreement, so that the others fail with it rather than wait. */
static void open_failed(const struct accel_ckpt_saver_opts *o)
{
    struct accel_error e;
    uint64_t m;

    (void)o->min(o->min_ctx, 0, &m, &e);
}

static void saver_free(struct accel_ckpt_saver *sv)
{
    accel_free((char *)sv->o.root);
    accel_free((char *)sv->o.local);
    accel_free((char *)sv->o.owner);
    accel_free(sv->local);
    accel_free(sv);
}

enum accel_err accel_ckpt_saver_open(struct accel_ckpt_saver **out,
                                     const struct accel_ckpt_saver_opts *o, struct accel_error *err)
{
    struct accel_ckpt_saver *sv;
    enum accel_err rc = ACCEL_OK, arc;
    uint64_t v = 0;
    bool ok = true, all = false;

    *out = NULL;
    if (!o || !o->min)
        return accel_error_set(err, ACCEL_EINVAL, "checkpoint saver: needs a min function");
    if (!o->root || !*o->root || (o->local && !*o->local) || o->world < 1 ||
        o->world > ACCEL_CKPT_MAX_WORLD || o->rank >= o->world) {
        open_failed(o);
        return accel_error_set(err, ACCEL_EINVAL,
                               "checkpoint saver: needs a root, a min function and rank < world "
                               "<= %d",
                               ACCEL_CKPT_MAX_WORLD);
    }
    sv = accel_calloc(1, sizeof *sv);
    if (!sv) {
        open_failed(o);
        return accel_error_set(err, ACCEL_ENOMEM, "checkpoint saver: out of memory");
    }
    sv->o = *o;
    sv->o.root = dup_or_null(o->root, &ok);
    sv->o.local = dup_or_null(o->local, &ok);
    sv->o.owner = dup_or_null(o->owner, &ok);
    sv->o.mem = NULL;
    if (o->local && ok && !(sv->local = ckpt__sv_tier_path(o->local, o->root)))
        ok = false;
    if (o->mem)
        sv->mem = *o->mem;
    if (sv->o.keep_local == 0)
        sv->o.keep_local = 1;
    sv->lock = -1;
    if (!ok || pthread_mutex_init(&sv->mu, NULL) != 0) {
        rc = accel_error_set(err, ACCEL_ENOMEM, "checkpoint saver: out of memory");
    } else if (pthread_cond_init(&sv->cv, NULL) != 0) {
        pthread_mutex_destroy(&sv->mu);
        rc = accel_error_set(err, ACCEL_ENOMEM, "checkpoint saver: out of memory");
    }
    if (rc != ACCEL_OK) {
        open_failed(o);
        saver_free(sv);
        return rc;
    }
    /* the root and its lock (rank 0), each rank's local tier, the writer */
    if (o->rank == 0 && (rc = ckpt__root_dir(sv->o.root, 0, err)) == ACCEL_OK)
        rc = ckpt__lock_take(sv->o.root, sv->o.owner, &sv->lock, err);
    if (rc == ACCEL_OK && sv->local)
        rc = ckpt__sv_make_tier(sv, err);
    if (rc == ACCEL_OK) {
        if (pthread_create(&sv->thread, NULL, writer, sv) != 0)
            rc = accel_error_sys(err, ACCEL_ENOMEM, "checkpoint saver: couldn't start its writer");
        else
            sv->thread_up = true;
    }
    arc = ckpt__sv_agree(sv, rc, &all, err);
    rc = ckpt__agreed(rc, arc, all, err,
                      "checkpoint saver: another rank couldn't open its saver of %s (rank 0 "
                      "takes the root's lock; their logs say why); nothing was written",
                      sv->o.root);
    /* the run's origin, rank 0's on every rank (the lock is held: the
     * root's newest checkpoint stays what it is unless this run commits) */
    if (rc == ACCEL_OK)
        rc = ckpt__sv_from_rank0(sv, sv->o.rank == 0 ? base__random_id() : 0, &sv->org.run, err);
    if (rc == ACCEL_OK)
        rc = ckpt__sv_from_rank0(
            sv, sv->o.rank == 0 ? ckpt__sv_newest_with(sv->o.root, CK_MANIFEST) : 0, &v, err);
    sv->org.base = (unsigned long)v;
    if (rc != ACCEL_OK) {
        accel_ckpt_saver_close(sv);
        return rc;
    }
    *out = sv;
    return ACCEL_OK;
}

void accel_ckpt_saver_close(struct accel_ckpt_saver *sv)
{
    if (!sv)
        return;
    if (sv->thread_up) {
        pthread_mutex_lock(&sv->mu);
        sv->quit = true; /* a job in hand is finished first */
        pthread_cond_broadcast(&sv->cv);
        pthread_mutex_unlock(&sv->mu);
        pthread_join(sv->thread, NULL);
    }
    job_free(&sv->job);
    mem_free(sv, sv->staging.p);
    mem_free(sv, sv->copies.p);
    ckpt__lock_drop(sv->lock);
    pthread_cond_destroy(&sv->cv);
    pthread_mutex_destroy(&sv->mu);
    saver_free(sv);
}

/* ---------------------------------------------------------------- saving */

unsigned long accel_ckpt_saver_pending(struct accel_ckpt_saver *sv)
{
    return state_of(sv, false) == W_IDLE ? 0 : sv->job.step;
}

void *accel_ckpt_saver_staging(struct accel_ckpt_saver *sv, size_t bytes, struct accel_error *err)
{
    if (state_of(sv, false) != W_IDLE) {
        accel_error_set(err, ACCEL_EBUSY,
                        "checkpoint saver: the staging memory is the save's in flight (step %lu)",
                        sv->job.step);
        return NULL;
    }
    if (!mem_reserve(sv, &sv->staging, bytes ? bytes : 1)) {
        accel_error_set(err, ACCEL_ENOMEM, "checkpoint saver: no %zu bytes of staging memory",
                        bytes);
        return NULL;
    }
    return sv->staging.p;
}

static bool in_staging(const struct accel_ckpt_saver *sv, const struct accel_ckpt_piece *p)
{
    const char *a = p->data, *s = sv->staging.p;
    size_t bytes = (size_t)((p->hi - p->lo) * accel_dtype_size(p->t.dtype));

    return s && a >= s && a <= s + sv->staging.cap && bytes <= (size_t)(s + sv->staging.cap - a);
}

/* The job of q: the request copied, the pieces' data out of the caller's
 * memory (unless in staging) into ours.  Arguments checked first. */
/* Where a save's pieces are copied to staging, if at all. */
enum staging {
    STAGE_AT_START,  /* by start, before it returns */
    STAGE_BY_WRITER, /* by the writer first (q->defer: wait_staged tells when) */
    STAGE_NONE,      /* never: the writer writes the caller's memory, which the
                        caller leaves alone until the commit (a synchronous save) */
};

static enum accel_err make_job(struct accel_ckpt_saver *sv, const struct accel_ckpt_save_req *q,
                               enum staging how, struct accel_error *err)
{
    const struct accel_ckpt_save_opts so = save_opts(sv, sv->o.root, q->step, q->meta, q->nmeta);
    struct job *j = &sv->job;
    size_t need = 0, at = 0;
    enum accel_err rc = ckpt__check_save(&so, q->pieces, q->npieces, err);

    if (rc == ACCEL_OK && q->step == 0)
        rc = accel_error_set(err, ACCEL_EINVAL,
                             "checkpoint: a saver's steps start at 1 (a resume's step 0 means "
                             "none)");
    if (rc != ACCEL_OK)
        return rc;
    for (size_t i = 0; i < q->npieces && how != STAGE_NONE; i++)
        if (!in_staging(sv, &q->pieces[i]))
            need += (size_t)((q->pieces[i].hi - q->pieces[i].lo) *
                             accel_dtype_size(q->pieces[i].t.dtype));
    j->step = q->step;
    j->deferred = how == STAGE_BY_WRITER;
    j->meta = accel_calloc(q->nmeta ? q->nmeta : 1, sizeof *j->meta);
    j->p = accel_calloc(q->npieces ? q->npieces : 1, sizeof *j->p);
    if (!j->meta || !j->p || !mem_reserve(sv, &sv->copies, need ? need : 1))
        goto nomem;
    for (; j->nmeta < q->nmeta; j->nmeta++) {
        struct accel_ckpt_kv *kv = &j->meta[j->nmeta];
        kv->key = accel_strdup(q->meta[j->nmeta].key);
        kv->value = accel_strdup(q->meta[j->nmeta].value);
        if (!kv->key || !kv->value) {
            j->nmeta++;
            goto nomem;
        }
    }
    for (; j->n < q->npieces; j->n++) {
        const struct accel_ckpt_piece *p = &q->pieces[j->n];
        struct accel_ckpt_piece *c = &j->p[j->n];
        size_t bytes = (size_t)((p->hi - p->lo) * accel_dtype_size(p->t.dtype));

        *c = *p;
        c->t.name = accel_strdup(p->t.name);
        if (!c->t.name) {
            j->n++;
            goto nomem;
        }
        if (!in_staging(sv, p) && how == STAGE_AT_START) { /* the snapshot: training may
                                                               change p->data from now */
            memcpy((char *)sv->copies.p + at, p->data, bytes);
            c->data = (char *)sv->copies.p + at;
            at += bytes;
        }
    }
    return ACCEL_OK;
nomem:
    return accel_error_set(err, ACCEL_ENOMEM, "checkpoint step %lu: out of memory for its staging",
                           q->step);
}

/* The save in flight, if any, finished (a blocking poll: collective, every
 * rank has the same one in flight) before save `step` begins. */
static enum accel_err finish_busy(struct accel_ckpt_saver *sv, unsigned long step,
                                  struct accel_error *err)
{
    unsigned long done;
    enum accel_err rc;

    if (state_of(sv, false) == W_IDLE)
        return ACCEL_OK;
    rc = accel_ckpt_saver_poll(sv, true, &done, err);
    if (rc == ACCEL_OK && state_of(sv, false) != W_IDLE) /* a rank polled alone */
        rc = accel_error_set(err, ACCEL_EBUSY,
                             "checkpoint step %lu: step %lu is still being saved elsewhere "
                             "(every rank polls and starts at the same points)",
                             step, sv->job.step);
    return rc;
}

static enum accel_err start(struct accel_ckpt_saver *sv, const struct accel_ckpt_save_req *q,
                            enum staging how, enum accel_ckpt_busy busy, struct accel_error *err)
{
    struct accel_error e;
    enum accel_err rc;

    if (busy == ACCEL_CKPT_REFUSE && state_of(sv, false) != W_IDLE)
        return accel_error_set(err, ACCEL_EBUSY,
                               "checkpoint step %lu: step %lu is still being saved", q->step,
                               sv->job.step);
    rc = finish_busy(sv, q->step, err);
    if (rc != ACCEL_OK)
        return rc;
    /* a problem of this rank's is the save's: the poll that ends it says it
     * on every rank */
    accel_error_clear(&e);
    rc = make_job(sv, q, how, &e);
    pthread_mutex_lock(&sv->mu);
    /* a failed one holds nothing of the caller's */
    sv->staged = rc != ACCEL_OK || how != STAGE_BY_WRITER;
    if (rc == ACCEL_OK) {
        sv->state = W_RUNNING;
        sv->queued = true;
        pthread_cond_broadcast(&sv->cv);
    } else {
        sv->job.step = q->step;
        sv->werr = e;
        sv->state = W_FAILED;
    }
    pthread_mutex_unlock(&sv->mu);
    return ACCEL_OK;
}

enum accel_err accel_ckpt_saver_start(struct accel_ckpt_saver *sv,
                                      const struct accel_ckpt_save_req *q,
                                      enum accel_ckpt_busy busy, struct accel_error *err)
{
    return start(sv, q, q->defer ? STAGE_BY_WRITER : STAGE_AT_START, busy, err);
}

void accel_ckpt_saver_wait_staged(struct accel_ckpt_saver *sv)
{
    pthread_mutex_lock(&sv->mu);
    while (sv->state == W_RUNNING && !sv->staged)
        pthread_cond_wait(&sv->cv, &sv->mu);
    pthread_mutex_unlock(&sv->mu);
}

enum accel_err accel_ckpt_saver_fail(struct accel_ckpt_saver *sv, unsigned long step,
                                     const struct accel_error *why, struct accel_error *err)
{
    /* a save in flight is finished first, as start does (ACCEL_CKPT_WAIT) */
    enum accel_err rc = finish_busy(sv, step, err);

    if (rc != ACCEL_OK)
        return rc;
    pthread_mutex_lock(&sv->mu);
    sv->job.step = step;
    if (why && why->code != ACCEL_OK)
        sv->werr = *why;
    else
        accel_error_set(&sv->werr, ACCEL_EIO,
                        "checkpoint step %lu: this rank couldn't gather its pieces", step);
    sv->state = W_FAILED;
    pthread_mutex_unlock(&sv->mu);
    return ACCEL_OK;
}

/* Rank 0 commits `step` in the root (the others wait in the agreement);
 * then `latest`, the root's clean-up, every rank's local tier. */
enum accel_err ckpt__sv_commit_step(struct accel_ckpt_saver *sv, unsigned long step,
                                    const struct accel_ckpt_kv *meta, size_t nmeta,
                                    struct accel_error *err)
{
    const struct accel_ckpt_save_opts so = save_opts(sv, sv->o.root, step, meta, nmeta);
    char name[32], dir[4096];
    enum accel_err rc = ACCEL_OK, arc;
    bool all = false;

    ckpt__step_name(name, sizeof name, step);
    if (sv->o.rank == 0) {
        if (!ckpt__path(dir, sizeof dir, sv->o.root, name))
            rc = accel_error_set(err, ACCEL_EINVAL, "checkpoint step %lu: path too long: %s", step,
                                 sv->o.root);
        else
            rc = ckpt__commit(&so, dir, err);
    }
    arc = ckpt__sv_agree(sv, rc, &all, err);
    rc = ckpt__agreed(rc, arc, all, err,
                      "checkpoint step %lu: rank 0 couldn't commit it (its log says why)", step);
    if (rc != ACCEL_OK)
        return rc;
    if (sv->o.rank == 0)
        ckpt__move_latest(&so);
    /* the deletions to the writer (once its save in hand, if any, is done) */
    pthread_mutex_lock(&sv->mu);
    sv->tidy = step;
    pthread_cond_broadcast(&sv->cv);
    pthread_mutex_unlock(&sv->mu);
    return ACCEL_OK;
}

enum accel_err accel_ckpt_saver_poll(struct accel_ckpt_saver *sv, bool block,
                                     unsigned long *committed, struct accel_error *err)
{
    enum wstate s = state_of(sv, block);
    uint64_t least = 0;
    unsigned long step = sv->job.step;
    enum accel_err rc;

    *committed = 0;
    if (s == W_IDLE)
        return ACCEL_OK;
    if (s == W_FAILED && !sv->werr_told) {
        ckpt__tell(sv->o.rank, &sv->werr);
        sv->werr_told = true;
    }
    /* every rank's state: 0 writing, 1 failed, 2 done; the least decides */
    rc = sv->o.min(sv->o.min_ctx, s == W_RUNNING ? 0 : s == W_FAILED ? 1 : 2, &least, err);
    if (rc != ACCEL_OK || least == 0)
        return rc;
    if (least == 1) {
        if (s == W_FAILED) {
            *err = sv->werr;
            rc = sv->werr.code ? sv->werr.code : ACCEL_EIO;
        } else {
            rc = accel_error_set(err, ACCEL_EPEER,
                                 "checkpoint step %lu: another rank couldn't write its part "
                                 "(its log says why); nothing was committed",
                                 step);
        }
        finish_job(sv);
        return rc;
    }
    rc = ckpt__sv_commit_step(sv, step, sv->job.meta, sv->job.nmeta, err);
    finish_job(sv);
    if (rc == ACCEL_OK)
        *committed = step;
    return rc;
}

enum accel_err accel_ckpt_saver_save(struct accel_ckpt_saver *sv,
                                     const struct accel_ckpt_save_req *q, struct accel_error *err)
{
    unsigned long done = 0;
    /* the caller waits for the commit: the writer writes its memory as it is */
    enum accel_err rc = start(sv, q, STAGE_NONE, ACCEL_CKPT_WAIT, err);

    return rc == ACCEL_OK ? accel_ckpt_saver_poll(sv, true, &done, err) : rc;
}
