/*
 * args.h: train_gpt's command line.  Parsing only: every value is checked
 * for form and range here; whether the sizes fit the world size is the
 * trainer's check.
 */
#ifndef GPT_ARGS_H
#define GPT_ARGS_H

#include <stddef.h>
#include <stdint.h>

struct gpt_args {
    size_t steps, batch, seq, layers, channels, heads;
    double lr, min_lr_frac, clip;
    size_t warmup; /* steps of linear warmup */
    uint64_t seed;
    const char *loss_log; /* rank 0 writes "step loss" lines; NULL = none */
    const char *data;
    size_t eval_every;      /* steps between validation passes; 0 = only at the end */
    size_t eval_batches;    /* global batches of validation sequences */
    size_t print_every;     /* 0 = about 20 lines a run */
    const char *ckpt_dir;   /* checkpoints: saved there, resumed from there; NULL = none */
    size_t save_every;      /* steps between checkpoints; 0 = at the end only */
    size_t keep;            /* checkpoints kept */
    const char *ckpt_local; /* node-local tier of the checkpoints; NULL = none */
    double copy_rate;       /* MB/s of the local -> --ckpt-dir copy; 0 = unlimited */
    int async_save;         /* save in the background while training goes on */
};

/* Fills defaults, then parses argv.  Returns 0 to train, 1 when --help was
 * printed, -1 on a usage error (printed to stderr). */
int gpt_args_parse(struct gpt_args *a, int argc, char **argv);

#endif
