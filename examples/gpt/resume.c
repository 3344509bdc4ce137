/*
 * resume.c: train_gpt's checkpoints (resume.h).
 */
#include <stdio.h>
#include <string.h>

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

int gpt_resume(struct accel_shard *s, const struct gpt_args *a, uint64_t data_hash, size_t *start,
               unsigned *from, struct accel_error *err)
{
    struct accel_ckpt *c = NULL;
    struct gpt_run_meta m;
    enum accel_err rc;

    *start = 0;
    *from = 0;
    rc = accel_ckpt_open(&c, a->ckpt_dir, err);
    if (rc == ACCEL_ENOTFOUND) { /* nothing to resume: a fresh run */
        accel_error_clear(err);
        return 0;
    }
    if (rc != ACCEL_OK)
        return -1;
    gpt_run_meta(a, data_hash, &m);
    for (size_t i = 0; i < m.n; i++) {
        const char *was = accel_ckpt_meta(c, m.kv[i].key);
        if (!was || strcmp(was, m.kv[i].value) != 0) {
            accel_error_set(err, ACCEL_EINVAL,
                            "%s was made with %s = %s; this run has %s (resume with the flags it "
                            "was made with, or use another --ckpt-dir)",
                            accel_ckpt_dir(c), m.kv[i].key, was ? was : "(none)", m.kv[i].value);
            accel_ckpt_close(c);
            return -1;
        }
    }
    rc = accel_shard_load(s, c, err);
    if (rc == ACCEL_OK) {
        *start = accel_ckpt_step(c);
        *from = accel_ckpt_world(c);
    }
    accel_ckpt_close(c);
    return rc == ACCEL_OK ? 0 : -1;
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
