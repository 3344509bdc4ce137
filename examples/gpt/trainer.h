/*
 * trainer.h: train_gpt's state, one per process (main's), shared by its
 * start (setup.c) and its loop (train.c).  Everything it points to is
 * freed by main, whether the start got that far or not.
 */
#ifndef GPT_TRAINER_H
#define GPT_TRAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "accel/comm.h"
#include "accel/err.h"
#include "accel/shard.h"
#include "accel/store.h"

#include "args.h"
#include "data.h"
#include "gpu.h"
#include "model.h"

struct gpt_trainer {
    struct gpt_args a;
    struct accel_bootstrap boot;
    struct accel_comm *comm;
    struct accel_shard *shard;
    struct accel_shard_opts opts;
    struct gpt_model m;
    struct gpt_data data;
    unsigned rank, world;
    size_t micro; /* sequences per micro-step on this rank */
    size_t accum; /* micro-steps per step */
    bool device;  /* the nccl backend: the model and the shard on the GPU */
    int cuda_device;
    struct gpt_cuda *cuda; /* the CUDA backend's context (device mode) */
    FILE *log;
    size_t start;        /* the step resumed from (0: a fresh run) */
    int stopped;         /* the signal the run stopped on, after saving (0: it did not) */
    unsigned from;       /* the world size that saved it */
    double save_started; /* --async-save: when the save in flight started (now_s) */
    struct accel_error err;
    const char *what; /* the failing step, for the message */
};

/* Names `what` as the failing step, for the message main prints with
 * t->err; returns -1. */
int gpt_fail(struct gpt_trainer *t, const char *what);

/* Everything before the first step: the bootstrap from the accelerate
 * environment, the backend (socket, or nccl on the GPU of LOCAL_RANK) and
 * the communicator, the batch split, the corpus, the model and the shard
 * (same layout; the same initial parameters on every rank, each keeping
 * its slice), the checkpoints of --ckpt-dir (resumed from the newest), rank
 * 0's --loss-log.  Collective.  Returns 0, or -1 with t->err and t->what
 * set. */
int gpt_setup(struct gpt_trainer *t);

#endif
