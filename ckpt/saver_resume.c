/*
 * saver_resume.c: accel_ckpt_saver_resume and accel_ckpt_saver_open_step
 * (accel/ckpt.h, "savers"): the newest step committed in the root, or a
 * newer one whose local copies every rank still has and that went on from
 * the root's newest in this run (copied up and committed first); local
 * attempts past it removed.  Collective, over the caller's min.
 */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/log.h"
#include "saver_int.h"

/* ---------------------------------------------------------------- resuming */

/* The save's metadata as this rank's local file of `step` recorded it
 * (rank 0 commits with it), into a new array of *n pairs. */
static enum accel_err local_meta(struct accel_ckpt_saver *sv, unsigned long step,
                                 struct accel_ckpt_kv **out, size_t *n, struct accel_error *err)
{
    char name[64], step_name[32], dir[4096], path[4200];
    struct ckpt__st_header h;
    const char *json;
    cJSON *doc = NULL;
    struct stat st;
    enum accel_err rc;
    int fd;

    *out = NULL;
    *n = 0;
    memset(&h, 0, sizeof h);
    ckpt__rank_name(name, sizeof name, sv->o.rank, sv->o.world);
    ckpt__step_name(step_name, sizeof step_name, step);
    if (!ckpt__path(dir, sizeof dir, sv->local, step_name) ||
        !ckpt__path(path, sizeof path, dir, name))
        return accel_error_set(err, ACCEL_EINVAL, "%s: path too long", sv->local);
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0)
            close(fd);
        return accel_error_sys(err, ACCEL_EIO, "%s: couldn't open", path);
    }
    rc = ckpt__st_read(fd, (uint64_t)st.st_size, ST_MAX_HEADER, path, &h, err);
    close(fd);
    json = rc == ACCEL_OK ? ckpt__st_meta(&h, CK_META_USER) : NULL;
    doc = json ? ckpt__st_json_object(json, strlen(json)) : NULL;
    if (rc == ACCEL_OK && !doc)
        rc = accel_error_set(err, ACCEL_EPARSE, "%s: __metadata__[\"%s\"] is missing or malformed",
                             path, CK_META_USER);
    if (rc == ACCEL_OK) {
        size_t cap = (size_t)cJSON_GetArraySize(doc);
        *out = accel_calloc(cap ? cap : 1, sizeof **out);
        if (!*out)
            rc = accel_error_set(err, ACCEL_ENOMEM, "checkpoint: out of memory");
        for (const cJSON *e = doc->child; rc == ACCEL_OK && e; e = e->next) {
            struct accel_ckpt_kv *kv = &(*out)[*n];
            if (!cJSON_IsString(e))
                rc = accel_error_set(err, ACCEL_EPARSE, "%s: metadata '%s' is not a string", path,
                                     e->string);
            else if (!(kv->key = accel_strdup(e->string)) ||
                     !(kv->value = accel_strdup(e->valuestring)))
                rc = accel_error_set(err, ACCEL_ENOMEM, "checkpoint: out of memory");
            (*n)++;
        }
    }
    cJSON_Delete(doc);
    ckpt__st_header_free(&h);
    return rc;
}

static void kv_free(struct accel_ckpt_kv *kv, size_t n)
{
    for (size_t i = 0; kv && i < n; i++) {
        accel_free((char *)kv[i].key);
        accel_free((char *)kv[i].value);
    }
    accel_free(kv);
}

/* Every rank's local copy of `step` copied up, then committed in the root.
 * On failure *fallback says whether a local copy somewhere was at fault
 * (the resume goes on from the root's newest) rather than the root (the
 * resume fails, the local copies kept for another try). */
static enum accel_err commit_local(struct accel_ckpt_saver *sv, unsigned long step, bool *fallback,
                                   struct accel_error *err)
{
    struct accel_ckpt_kv *meta = NULL;
    size_t nmeta = 0;
    uint64_t least = 0;
    enum accel_err rc, arc;
    bool local_bad = false;

    *fallback = false;
    rc = ckpt__sv_copy_up(sv, step, &local_bad, err);
    if (rc == ACCEL_OK && sv->o.rank == 0 &&
        (rc = local_meta(sv, step, &meta, &nmeta, err)) != ACCEL_OK)
        local_bad = rc != ACCEL_ENOMEM;
    /* every rank's outcome, the least decides: 0 a local copy at fault,
     * 1 another failure, 2 copied */
    arc = sv->o.min(sv->o.min_ctx,
                    rc == ACCEL_OK ? 2
                    : local_bad    ? 0
                                   : 1,
                    &least, rc == ACCEL_OK ? err : NULL);
    if (rc == ACCEL_OK && arc != ACCEL_OK)
        rc = arc;
    else if (rc == ACCEL_OK && least < 2)
        rc = accel_error_set(err, ACCEL_EPEER,
                             "checkpoint step %lu: another rank couldn't copy its local file to "
                             "the root (its log says why)",
                             step);
    *fallback = arc == ACCEL_OK && least == 0;
    if (rc == ACCEL_OK)
        rc = ckpt__sv_commit_step(sv, step, meta, nmeta, err);
    kv_free(meta, nmeta);
    return rc;
}

/* The origin of the root's committed `step` (as its rank 0 file records
 * it): zero when none (a save without a saver) or unreadable. */
static struct ckpt__origin root_origin(const char *root, unsigned long step)
{
    struct ckpt__origin org = {0, 0};
    struct ckpt__st_header h;
    struct accel_ckpt *c = NULL;
    struct accel_error e;
    char name[32], dir[4096], path[4200];
    struct stat st;
    int fd = -1;

    memset(&h, 0, sizeof h);
    ckpt__step_name(name, sizeof name, step);
    if (step && ckpt__path(dir, sizeof dir, root, name) && ckpt__load(&c, dir, &e) == ACCEL_OK &&
        c->nf > 0 && ckpt__path(path, sizeof path, dir, c->f[0].name) &&
        (fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) >= 0 && fstat(fd, &st) == 0 &&
        ckpt__st_read(fd, (uint64_t)st.st_size, ST_MAX_HEADER, path, &h, &e) == ACCEL_OK)
        (void)ckpt__origin_of(&h, &org);
    if (fd >= 0)
        close(fd);
    ckpt__st_header_free(&h);
    accel_ckpt_close(c);
    return org;
}

/* The run of this rank's local copy of `step` (0: unusable, the reason
 * logged): its header whole and of this rank, world and step, written by
 * the run that wrote the root's newest checkpoint `shared` (whose origin's
 * run is shared_run) or by a run that went on from that one. */
static uint64_t usable_run(struct accel_ckpt_saver *sv, unsigned long step, unsigned long shared,
                           uint64_t shared_run)
{
    char step_name[32], dir[4096];
    struct ckpt__origin org = {0, 0};
    struct ckpt__check v;
    struct accel_error e;
    uint64_t run = 0;

    memset(&v, 0, sizeof v);
    accel_error_clear(&e);
    ckpt__step_name(step_name, sizeof step_name, step);
    if (!ckpt__path(dir, sizeof dir, sv->local, step_name))
        accel_error_set(&e, ACCEL_EINVAL, "%s: path too long", sv->local);
    else if (ckpt__check_open(&v, dir, step, sv->o.rank, sv->o.world, &e) != ACCEL_OK)
        ;
    else if (!ckpt__origin_of(ckpt__check_header(&v), &org))
        accel_error_set(&e, ACCEL_EPARSE, "%s/%s: records no saver's run", dir,
                        v.c->f[sv->o.rank].name);
    else if (org.run != shared_run && org.base != shared)
        accel_error_set(&e, ACCEL_EINVAL,
                        "%s/%s: written by a run that went on from step %lu, and %s has step %lu "
                        "from another run since",
                        dir, v.c->f[sv->o.rank].name, org.base, sv->o.root, shared);
    else
        run = org.run;
    if (!run)
        accel_log(ACCEL_LOG_WARN, "checkpoint: rank %u: local step %lu not committed: %s",
                  sv->o.rank, step, e.msg);
    ckpt__check_free(&v);
    return run;
}

enum accel_err accel_ckpt_saver_resume(struct accel_ckpt_saver *sv, unsigned long *step,
                                       struct accel_error *err)
{
    char name[64];
    uint64_t shared = 0, local = 0, shared_run = 0, lo = 0, hi_inv = 0, run = 0;
    bool all_trimmed = false;
    enum accel_err rc;

    *step = 0;
    /* rank 0's view of the root (the others' may be behind, through NFS) */
    rc = ckpt__sv_from_rank0(
        sv, sv->o.rank == 0 ? ckpt__sv_newest_with(sv->o.root, CK_MANIFEST) : 0, &shared, err);
    if (rc != ACCEL_OK)
        return rc;
    if (sv->local) {
        ckpt__rank_name(name, sizeof name, sv->o.rank, sv->o.world);
        rc = sv->o.min(sv->o.min_ctx, ckpt__sv_newest_with(sv->local, name), &local, err);
        /* a newer step every rank has, of one run, that went on from the
         * root's newest: its run agreed as the least of run and of ~run */
        if (rc == ACCEL_OK && local > shared)
            rc = ckpt__sv_from_rank0(sv, sv->o.rank == 0 ? root_origin(sv->o.root, shared).run : 0,
                                     &shared_run, err);
        if (rc == ACCEL_OK && local > shared)
            run = usable_run(sv, (unsigned long)local, (unsigned long)shared, shared_run);
        if (rc == ACCEL_OK && local > shared)
            rc = sv->o.min(sv->o.min_ctx, run, &lo, err);
        if (rc == ACCEL_OK && local > shared)
            rc = sv->o.min(sv->o.min_ctx, run ? ~run : 0, &hi_inv, err);
        if (rc != ACCEL_OK)
            return rc;
        if (local > shared && lo != 0 && lo == ~hi_inv) {
            struct accel_error e;
            bool fallback = false;
            accel_error_clear(&e);
            rc = commit_local(sv, (unsigned long)local, &fallback, &e);
            if (rc == ACCEL_OK) {
                if (sv->o.rank == 0)
                    accel_log(ACCEL_LOG_INFO,
                              "checkpoint: step %lu was in every rank's local tier, not yet in "
                              "%s: committed there from the local copies",
                              (unsigned long)local, sv->o.root);
                shared = local;
            } else if (fallback) {
                accel_log(ACCEL_LOG_WARN,
                          "checkpoint: a local copy of step %lu is damaged (%s): resuming from "
                          "step %lu",
                          (unsigned long)local, e.msg, (unsigned long)shared);
            } else {
                return accel_error_set(err, rc,
                                       "checkpoint resume: couldn't commit step %lu from every "
                                       "rank's local tier in %s: %s; the local copies are kept "
                                       "for the next try (removing step %lu from the local tiers "
                                       "resumes from step %lu instead)",
                                       (unsigned long)local, sv->o.root, e.msg,
                                       (unsigned long)local, (unsigned long)shared);
            }
        } else if (local > shared && sv->o.rank == 0) {
            accel_log(ACCEL_LOG_INFO,
                      "checkpoint: local step %lu is not committed in %s (not every rank has a "
                      "whole copy of it from one run that went on from step %lu; their logs "
                      "say why): resuming from step %lu",
                      (unsigned long)local, sv->o.root, (unsigned long)shared,
                      (unsigned long)shared);
        }
        ckpt__sv_trim_local(sv, (unsigned long)shared, true);
        /* the ranks of a node share its tier: none saves (a step past the
         * one resumed) before all are done removing such steps */
        rc = ckpt__sv_agree(sv, ACCEL_OK, &all_trimmed, err);
        if (rc != ACCEL_OK)
            return rc;
    }
    sv->org.base = (unsigned long)shared; /* this run goes on from it */
    *step = (unsigned long)shared;
    return ACCEL_OK;
}

enum accel_err accel_ckpt_saver_open_step(struct accel_ckpt_saver *sv, unsigned long step,
                                          struct accel_ckpt **c, struct accel_error *err)
{
    char name[32], dir[4096], local[4096];
    enum accel_err rc;

    *c = NULL;
    ckpt__step_name(name, sizeof name, step);
    if (!ckpt__path(dir, sizeof dir, sv->o.root, name) ||
        (sv->local && !ckpt__path(local, sizeof local, sv->local, name)))
        return accel_error_set(err, ACCEL_EINVAL, "checkpoint step %lu: path too long: %s", step,
                               sv->o.root);
    rc = accel_ckpt_open(c, dir, err);
    if (rc == ACCEL_OK && sv->local && !((*c)->local_dir = accel_strdup(local))) {
        accel_ckpt_close(*c);
        *c = NULL;
        rc = accel_error_set(err, ACCEL_ENOMEM, "checkpoint: out of memory");
    }
    return rc;
}
