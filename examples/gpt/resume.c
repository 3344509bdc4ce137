/*
 * resume.c: train_gpt's checkpoints (resume.h).
 */
#include <stdio.h>
#include <stdlib.h>
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

int gpt_ckpt_open(struct accel_shard *s, const struct gpt_args *a, unsigned world,
                  struct accel_error *err)
{
    const char *job = getenv("SLURM_JOB_ID"), *pod = getenv("HOSTNAME");
    char owner[256];
    struct accel_shard_ckpt_opts o = {
        a->ckpt_dir, a->ckpt_local, (unsigned)a->keep, 1, (uint64_t)(a->copy_rate * 1e6), owner};

    if (job && *job)
        snprintf(owner, sizeof owner, "train_gpt of Slurm job %.64s (%u ranks)", job, world);
    else if (pod && *pod)
        snprintf(owner, sizeof owner, "train_gpt of pod %.64s (%u ranks)", pod, world);
    else
        snprintf(owner, sizeof owner, "train_gpt (%u ranks)", world);
    return accel_shard_ckpt_open(s, &o, err) == ACCEL_OK ? 0 : -1;
}

int gpt_resume(struct accel_shard *s, const struct gpt_args *a, uint64_t data_hash, size_t *start,
               unsigned *from, struct accel_error *err)
{
    struct accel_ckpt *c = NULL;
    struct accel_error mine;
    struct gpt_run_meta m;
    unsigned long step = 0;
    int ok = -1;

    *start = 0;
    *from = 0;
    accel_error_clear(&mine);
    if (accel_shard_ckpt_resume(s, &step, &c, &mine) != ACCEL_OK) {
        *err = mine;
        return -1;
    }
    if (step == 0) { /* nothing to resume: a fresh run, on every rank */
        accel_error_clear(err);
        return 0;
    }
    if (c) {
        gpt_run_meta(a, data_hash, &m);
        ok = 0;
        for (size_t i = 0; ok == 0 && i < m.n; i++) {
            const char *was = accel_ckpt_meta(c, m.kv[i].key);
            if (!was || strcmp(was, m.kv[i].value) != 0) {
                accel_error_set(&mine, ACCEL_EINVAL,
                                "%s was made with %s = %s; this run has %s (resume with the "
                                "flags it was made with, or use another --ckpt-dir)",
                                accel_ckpt_dir(c), m.kv[i].key, was ? was : "(none)",
                                m.kv[i].value);
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
    return ok;
}

int gpt_save(struct accel_shard *s, const struct gpt_args *a, uint64_t data_hash, size_t step,
             struct accel_error *err)
{
    struct gpt_run_meta m;
    enum accel_err rc;

    gpt_run_meta(a, data_hash, &m);
    if (a->async_save)
        rc = accel_shard_save_start(s, step, m.kv, m.n, ACCEL_CKPT_WAIT, err);
    else
        rc = accel_shard_save(s, NULL, step, m.kv, m.n, 0, err);
    return rc == ACCEL_OK ? 0 : -1;
}

int gpt_save_poll(struct accel_shard *s, bool block, unsigned long *committed,
                  struct accel_error *err)
{
    return accel_shard_save_poll(s, block, committed, err) == ACCEL_OK ? 0 : -1;
}
