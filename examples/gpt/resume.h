/*
 * resume.h: train_gpt's checkpoints: what a run records with them (the
 * flags that decide its trajectory), resuming from the newest one under
 * --ckpt-dir, and saving.  The checkpoint itself is the shard's
 * (accel_shard_save/_load over ckpt/); data order and the learning-rate
 * schedule are functions of the step, so the step is all else a run needs.
 */
#ifndef GPT_RESUME_H
#define GPT_RESUME_H

#include <stddef.h>
#include <stdint.h>

#include "accel/shard.h"
#include "accel/store.h"
#include "args.h"

#define GPT_RUN_KEYS 12

/* The flags and the corpus hash as checkpoint metadata ("gpt.steps" ...). */
struct gpt_run_meta {
    struct accel_ckpt_kv kv[GPT_RUN_KEYS];
    char val[GPT_RUN_KEYS][40];
    size_t n;
};
void gpt_run_meta(const struct gpt_args *a, uint64_t data_hash, struct gpt_run_meta *m);

/* When a->ckpt_dir holds a committed checkpoint: rank 0 picks the newest
 * and tells the others through the store, so that every rank opens the
 * same one; each checks that it was made with this run's flags; all load it
 * into the shard (collective: a rank that failed takes part too, so that no
 * rank waits), *start its step and *from its world size; else *start = 0
 * on every rank.  Returns 0, or -1 with err set on every rank (the message
 * names the flag that differs). */
int gpt_resume(struct accel_shard *s, struct accel_store *store, unsigned rank,
               const struct gpt_args *a, uint64_t data_hash, size_t *start, unsigned *from,
               struct accel_error *err);

/* Saves checkpoint `step` under a->ckpt_dir, keeping a->keep (collective).
 * Returns 0, or -1 with err set. */
int gpt_save(struct accel_shard *s, const struct gpt_args *a, uint64_t data_hash, size_t step,
             struct accel_error *err);

#endif
