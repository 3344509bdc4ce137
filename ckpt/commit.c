/*
 * commit.c: rank 0's part of a save (save.c has the protocol): the rank
 * files' headers and declared pieces read back and merged into one model of
 * the checkpoint, checked (ckpt__check), the directory cleared of an earlier
 * attempt's files, the manifest written durably (the commit), `latest`
 * moved forward, and the checkpoints older than the `keep` newest deleted.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/fsutil.h"
#include "accel/log.h"
#include "ckpt_int.h"

static int record_cmp(const void *a, const void *b)
{
    return strcmp(((const struct ckpt__tensor *)a)->t.name,
                  ((const struct ckpt__tensor *)b)->t.name);
}

/* One tensor per name out of the records ckpt__read_declared made (one per
 * piece): the records of a name must agree on type and shape; their pieces
 * end up next to each other. */
static enum accel_err merge_records(struct accel_ckpt *c, struct accel_error *err)
{
    struct ckpt__tensor *t = accel_calloc(c->nt ? c->nt : 1, sizeof *t);
    struct ckpt__piece *p = accel_calloc(c->np ? c->np : 1, sizeof *p);
    enum accel_err rc = ACCEL_OK;
    size_t nt = 0;

    if (!t || !p) {
        accel_free(t);
        accel_free(p);
        return accel_error_set(err, ACCEL_ENOMEM, "checkpoint commit: out of memory");
    }
    if (c->nt) /* c->t is NULL when no rank has a piece */
        qsort(c->t, c->nt, sizeof *c->t, record_cmp);
    for (size_t i = 0; i < c->nt; i++) {
        struct ckpt__tensor *r = &c->t[i], *last = nt ? &t[nt - 1] : NULL;

        p[i] = c->p[r->first];
        if (last && !strcmp(last->t.name, r->t.name)) {
            if (rc == ACCEL_OK && (last->t.dtype != r->t.dtype || last->t.ndim != r->t.ndim ||
                                   memcmp(last->t.shape, r->t.shape, sizeof r->t.shape) != 0))
                rc = accel_error_set(err, ACCEL_EINVAL,
                                     "checkpoint commit: tensor '%s': ranks %u and %u saved it "
                                     "with different types or shapes",
                                     r->t.name, p[last->first].file, p[i].file);
            last->n++;
            accel_free((char *)r->t.name);
        } else {
            t[nt] = *r; /* takes the name */
            t[nt].first = i;
            t[nt++].n = 1;
        }
    }
    accel_free(c->t);
    accel_free(c->p);
    c->t = t;
    c->nt = nt;
    c->p = p;
    return rc;
}

/* Removes what a directory being committed holds besides this world's rank
 * files: files of an earlier attempt (another world size, temporaries). */
static void remove_strays(const struct accel_ckpt *c)
{
    DIR *d = ckpt__opendir_nofollow(AT_FDCWD, c->dir);
    struct dirent *e;

    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        bool ours = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
        for (size_t r = 0; !ours && r < c->nf; r++)
            ours = !strcmp(e->d_name, c->f[r].name);
        if (!ours && unlinkat(dirfd(d), e->d_name, 0) != 0)
            accel_log(ACCEL_LOG_WARN, "checkpoint: couldn't remove %s/%s: %s", c->dir, e->d_name,
                      strerror(errno));
    }
    closedir(d);
}

/* Deletes the committed checkpoints older than the keep - 1 newest before
 * `step`, and every attempt older than `step` that never committed.  A
 * manifest that does not load (another version's, unreadable) is not an
 * attempt: neither counted nor deleted.  Only the checkpoints counted and
 * those deleted are parsed, so a save reads about `keep` manifests. */
static void collect(const char *root, unsigned long step, unsigned keep)
{
    struct accel_ckpt_entry *e = NULL;
    struct accel_error err;
    size_t n = 0, kept = 1;
    char path[4096];

    if (ckpt__list(root, false, &e, &n, &err) != ACCEL_OK) {
        accel_log(ACCEL_LOG_WARN, "checkpoint: no clean-up of %s: %s", root, err.msg);
        return;
    }
    for (size_t i = n; i-- > 0;) {
        struct accel_ckpt *c = NULL;

        if (e[i].step >= step || !ckpt__path(path, sizeof path, root, e[i].name))
            continue;
        if (e[i].committed) {
            if (ckpt__load(&c, path, &err) != ACCEL_OK) {
                accel_log(ACCEL_LOG_WARN, "checkpoint: left %s alone: its %s does not load (%s)",
                          path, CK_MANIFEST, err.msg);
                continue;
            }
            accel_ckpt_close(c);
            if (keep == 0 || kept < keep) {
                kept++;
                continue;
            }
        }
        if (ckpt__remove_dir(root, e[i].name, &err) != ACCEL_OK)
            accel_log(ACCEL_LOG_WARN, "checkpoint: clean-up: %s", err.msg);
    }
    accel_free(e);
}

/* The newest step under root with a manifest; 0 when none (or unreadable). */
static unsigned long newest_committed(const char *root)
{
    struct accel_ckpt_entry *e = NULL;
    struct accel_error err;
    unsigned long best = 0;
    size_t n = 0;

    if (ckpt__list(root, false, &e, &n, &err) != ACCEL_OK)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (e[i].committed && e[i].step > best)
            best = e[i].step;
    accel_free(e);
    return best;
}

/* Removes ROOT/latest.tmp.PID files that a crash in accel_write_durable
 * left (never the one being written: that is this process's, and done). */
static void remove_latest_temps(const char *root)
{
    /* opened as every directory here is (openat: the fault tests see the
     * unlinkat through its descriptor) */
    DIR *d = ckpt__opendir_nofollow(AT_FDCWD, root);
    struct dirent *e;
    const size_t n = strlen(CK_LATEST ".tmp.");

    if (!d)
        return;
    while ((e = readdir(d)) != NULL)
        if (!strncmp(e->d_name, CK_LATEST ".tmp.", n) && e->d_name[n] >= '0' &&
            e->d_name[n] <= '9' && unlinkat(dirfd(d), e->d_name, 0) != 0)
            accel_log(ACCEL_LOG_WARN, "checkpoint: couldn't remove %s/%s: %s", root, e->d_name,
                      strerror(errno));
    closedir(d);
}

void ckpt__after_commit(const struct accel_ckpt_save_opts *o)
{
    ckpt__move_latest(o);
    ckpt__collect(o);
}

void ckpt__collect(const struct accel_ckpt_save_opts *o)
{
    collect(o->root, o->step, o->keep);
    remove_latest_temps(o->root);
}

void ckpt__move_latest(const struct accel_ckpt_save_opts *o)
{
    struct accel_error err = {0};
    char path[4096], line[32];

    /* `latest` only moves forward (a root may hold newer steps) */
    ckpt__step_name(line, sizeof line - 1, o->step);
    strcat(line, "\n");
    if (newest_committed(o->root) > o->step)
        accel_log(ACCEL_LOG_INFO,
                  "checkpoint: step %lu is committed; %s/%s keeps naming a newer "
                  "step",
                  o->step, o->root, CK_LATEST);
    else if (!ckpt__path(path, sizeof path, o->root, CK_LATEST) ||
             accel_write_durable(path, line, strlen(line), 0666, &err) != ACCEL_OK)
        accel_log(ACCEL_LOG_WARN,
                  "checkpoint: step %lu is committed, but %s/%s was not "
                  "updated: %s",
                  o->step, o->root, CK_LATEST, err.msg);
}

enum accel_err ckpt__commit(const struct accel_ckpt_save_opts *o, const char *dir,
                            struct accel_error *err)
{
    enum accel_err rc = ACCEL_OK;
    struct accel_ckpt *c;
    char path[4096], *json = NULL;
    size_t cap = 0;

    /* the rank files' renames, and the step's own entry in the root */
    if (accel_fsync_dir(dir) != 0 || accel_fsync_dir(o->root) != 0)
        return accel_error_sys(err, ACCEL_EIO, "checkpoint commit: couldn't fsync %s or its root",
                               dir);
    c = ckpt__new(dir, o->step, o->world, err);
    if (!c)
        return ACCEL_ENOMEM;
    for (unsigned r = 0; rc == ACCEL_OK && r < o->world; r++)
        rc = ckpt__read_declared(c, r, &cap, err);
    if (rc == ACCEL_OK)
        rc = merge_records(c, err);
    if (rc == ACCEL_OK && (c->nt > ACCEL_CKPT_MAX_TENSORS || c->np > ACCEL_CKPT_MAX_PIECES))
        rc = accel_error_set(err, ACCEL_ETOOBIG,
                             "checkpoint commit: %zu tensors in %zu pieces over the ranks (limits "
                             "%d, %d: a reader would refuse it)",
                             c->nt, c->np, ACCEL_CKPT_MAX_TENSORS, ACCEL_CKPT_MAX_PIECES);
    if (rc == ACCEL_OK && (rc = ckpt__check(c, dir, err)) == ACCEL_EPARSE) {
        rc = ACCEL_EINVAL; /* pieces that overlap or leave holes: the ranks' arguments */
        if (err)
            err->code = rc;
    }
    /* each file's header against what the model now says; then closed (a
     * world of thousands must not hold a descriptor a rank) */
    for (uint32_t f = 0; rc == ACCEL_OK && f < c->nf; f++) {
        rc = ckpt__open_file(c, f, err);
        ckpt__close_file(c, f);
    }
    if (rc != ACCEL_OK)
        goto out;
    remove_strays(c);
    c->meta = (struct accel_ckpt_kv *)o->meta; /* borrowed for the manifest */
    c->nmeta = o->nmeta;
    json = ckpt__manifest_json(c, err);
    c->meta = NULL;
    c->nmeta = 0;
    if (!json) {
        rc = ACCEL_ENOMEM;
        goto out;
    }
    if (strlen(json) > ACCEL_CKPT_MAX_MANIFEST) {
        rc = accel_error_set(err, ACCEL_ETOOBIG,
                             "checkpoint commit: a manifest of %zu bytes (limit %u: a reader "
                             "would refuse it)",
                             strlen(json), ACCEL_CKPT_MAX_MANIFEST);
        goto out;
    }
    if (!ckpt__path(path, sizeof path, dir, CK_MANIFEST)) {
        rc = accel_error_set(err, ACCEL_EINVAL, "checkpoint commit: path too long: %s", dir);
        goto out;
    }
    rc = accel_write_durable(path, json, strlen(json), 0666, err);
    if (rc != ACCEL_OK && access(path, F_OK) == 0) {
        /* renamed into place, only the directory's fsync failed: it is
         * committed (and visible), so say so rather than "nothing was" */
        accel_log(ACCEL_LOG_WARN, "checkpoint: step %lu is committed, but %s", o->step,
                  err ? err->msg : "the directory's fsync failed");
        rc = ACCEL_OK;
    }
out:
    cJSON_free(json);
    accel_ckpt_close(c);
    return rc;
}
