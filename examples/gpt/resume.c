/*
 * resume.c: train_gpt's checkpoints (resume.h).
 */
#include <stdio.h>
#include <string.h>

#include "accel/alloc.h"
#include "accel/ckpt.h"
#include "resume.h"

void gpt_run_meta(const struct gpt_args *a, uint64_t data_hash, struct gpt_run_meta *m)
{
    static const char *const keys[GPT_RUN_KEYS] = {"gpt.steps",  "gpt.batch",    "gpt.seq",
                                                   "gpt.layers", "gpt.channels", "gpt.heads",
                                                   "gpt.lr",     "gpt.warmup",   "gpt.min_lr_frac",
                                                   "gpt.clip",   "gpt.seed",     "gpt.data_fnv1a"};

    snprintf(m->val[0], sizeof m->val[0], "%zu", a->steps);
    snprintf(m->val[1], sizeof m->val[1], "%zu", a->batch);
    snprintf(m->val[2], sizeof m->val[2], "%zu", a->seq);
    snprintf(m->val[3], sizeof m->val[3], "%zu", a->layers);
    snprintf(m->val[4], sizeof m->val[4], "%zu", a->channels);
    snprintf(m->val[5], sizeof m->val[5], "%zu", a->heads);
    snprintf(m->val[6], sizeof m->val[6], "%a", a->lr);
    snprintf(m->val[7], sizeof m->val[7], "%zu", a->warmup);
    snprintf(m->val[8], sizeof m->val[8], "%a", a->min_lr_frac);
    snprintf(m->val[9], sizeof m->val[9], "%a", a->clip);
    snprintf(m->val[10], sizeof m->val[10], "%llu", (unsigned long long)a->seed);
    snprintf(m->val[11], sizeof m->val[11], "%016llx", (unsigned long long)data_hash);
    for (size_t i = 0; i < GPT_RUN_KEYS; i++)
        m->kv[i] = (struct accel_ckpt_kv){keys[i], m->val[i]};
    m->n = GPT_RUN_KEYS;
}

/* Rank 0's choice, through the store, so that every rank opens the same
 * directory (each rank's own "newest" could differ while another job
 * saves, or through NFS's caches): "" for none, "!why" when rank 0 could
 * not open the root, else the checkpoint's directory. */
#define RESUME_KEY "train_gpt.resume"

static int choose(struct accel_store *store, unsigned rank, const char *root, char **choice,
                  struct accel_error *err)
{
    struct accel_ckpt *c = NULL;
    enum accel_err rc;
    size_t len;
    char *v;

    if (rank != 0) {
        if (accel_store_get(store, RESUME_KEY, (void **)&v, &len, err) != ACCEL_OK)
            return -1;
        *choice = v; /* NUL-terminated as rank 0 set it */
        return 0;
    }
    rc = accel_ckpt_open(&c, root, err);
    if (rc == ACCEL_OK)
        v = accel_strdup(accel_ckpt_dir(c));
    else if (rc == ACCEL_ENOTFOUND)
        v = accel_strdup("");
    else if ((v = accel_malloc(strlen(err->msg) + 2)))
        sprintf(v, "!%s", err->msg);
    accel_ckpt_close(c);
    if (!v || accel_store_set(store, RESUME_KEY, v, strlen(v) + 1, err) != ACCEL_OK) {
        accel_free(v);
        return -1;
    }
    *choice = v;
    return 0;
}

int gpt_resume(struct accel_shard *s, struct accel_store *store, unsigned rank,
               const struct gpt_args *a, uint64_t data_hash, size_t *start, unsigned *from,
               struct accel_error *err)
{
    struct accel_ckpt *c = NULL;
    struct accel_error mine;
    struct gpt_run_meta m;
    char *dir = NULL;
    int ok = -1;

    *start = 0;
    *from = 0;
    if (choose(store, rank, a->ckpt_dir, &dir, err))
        return -1;
    if (dir[0] == '\0') { /* nothing to resume: a fresh run, on every rank */
        accel_error_clear(err);
        accel_free(dir);
        return 0;
    }
    if (dir[0] == '!') { /* rank 0 could not open the root: every rank stops */
        accel_error_set(err, ACCEL_EIO, "%s", dir + 1);
        accel_free(dir);
        return -1;
    }
    accel_error_clear(&mine);
    if (accel_ckpt_open(&c, dir, &mine) == ACCEL_OK) {
        gpt_run_meta(a, data_hash, &m);
        ok = 0;
        for (size_t i = 0; ok == 0 && i < m.n; i++) {
            const char *was = accel_ckpt_meta(c, m.kv[i].key);
            if (!was || strcmp(was, m.kv[i].value) != 0) {
                accel_error_set(&mine, ACCEL_EINVAL,
                                "%s was made with %s = %s; this run has %s (resume with the "
                                "flags it was made with, or use another --ckpt-dir)",
                                dir, m.kv[i].key, was ? was : "(none)", m.kv[i].value);
                ok = -1;
            }
        }
    }
    /* every rank takes part in the load's agreement, one that failed too */
    if (accel_shard_load(s, ok == 0 ? c : NULL, err) == ACCEL_OK) {
        *start = accel_ckpt_step(c);
        *from = accel_ckpt_world(c);
    } else if (ok != 0) {
        *err = mine; /* this rank's own reason, not the agreement's */
    } else {
        ok = -1;
    }
    accel_ckpt_close(c);
    accel_free(dir);
    return ok;
}

int gpt_save(struct accel_shard *s, const struct gpt_args *a, uint64_t data_hash, size_t step,
             struct accel_error *err)
{
    struct gpt_run_meta m;

    gpt_run_meta(a, data_hash, &m);
    return accel_shard_save(s, a->ckpt_dir, step, m.kv, m.n, (unsigned)a->keep, err) == ACCEL_OK
               ? 0
               : -1;
}
