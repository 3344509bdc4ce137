/*
 * resume.h: train_gpt's checkpoints: what a run records with them (the
 * flags that decide its trajectory), resuming from the newest one under
 * --ckpt-dir, and saving.  The checkpoint itself is the shard's
 * (accel_shard_save/_load over ckpt/); data order and the learning-rate
 * schedule are functions of the step, so the step is all else a run needs.
 */
#ifndef GPT_RESUME_H
#define GPT_RESUME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accel/shard.h"
#include "args.h"

#define GPT_RUN_KEYS 12

/* The flags and the corpus hash as checkpoint metadata ("gpt.steps" ...). */
struct gpt_run_meta {
    struct accel_ckpt_kv kv[GPT_RUN_KEYS];
    char val[GPT_RUN_KEYS][40];
    size_t n;
};
void gpt_run_meta(const struct gpt_args *a, uint64_t data_hash, struct gpt_run_meta *m);

/* Opens the shard's saver on a->ckpt_dir (and a->ckpt_local): the root's
 * lock held for the run, named after this job (SLURM_JOB_ID or the pod's
 * HOSTNAME, when there is one).  Collective; 0, or -1 with err set. */
int gpt_ckpt_open(struct accel_shard *s, const struct gpt_args *a, unsigned world,
                  struct accel_error *err);

/* When a->ckpt_dir (or every rank's a->ckpt_local) holds a newer committed
 * checkpoint than nothing: the saver picks the step, the same on every
 * rank; each checks that it was made with this run's flags; all load it
 * into the shard (collective: a rank that failed takes part too, so that no
 * rank waits), *start its step and *from its world size; else *start = 0
 * on every rank.  Returns 0, or -1 with err set on every rank (the message
 * names the flag that differs). */
int gpt_resume(struct accel_shard *s, const struct gpt_args *a, uint64_t data_hash, size_t *start,
               unsigned *from, struct accel_error *err);

/* Saves checkpoint `step` (collective): to the end with a->async_save off;
 * else starts it (finishing one still in flight first) and returns once
 * the state is staged.  Returns 0, or -1 with err set. */
int gpt_save(struct accel_shard *s, const struct gpt_args *a, uint64_t data_hash, size_t step,
             struct accel_error *err);

/* With a save in flight (a->async_save): commits it when every rank's file
 * is written (with `block`, once this rank's is): *committed is its step,
 * else 0.  Collective; 0, or -1 with err set. */
int gpt_save_poll(struct accel_shard *s, bool block, unsigned long *committed,
                  struct accel_error *err);

#endif
