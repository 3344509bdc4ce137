/*
 * args.c: train_gpt's flags, their defaults and their ranges.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "data.h"

static const char usage[] =
    "usage: train_gpt [--steps N] [--batch B] [--seq T] [--layers L] [--channels C]\n"
    "                 [--heads NH] [--lr LR] [--warmup N] [--min-lr-frac F] [--clip G]\n"
    "                 [--seed S] [--loss-log FILE] [--data DIR] [--eval-every N]\n"
    "                 [--eval-batches N] [--print-every N]\n"
    "                 [--ckpt-dir DIR [--save-every N] [--keep K] [--async-save]\n"
    "                  [--ckpt-local DIR [--copy-rate MBPS]]]\n"
    "\n"
    "Trains a byte-level GPT on the licence texts of Debian's base-files package,\n"
    "one process per rank, sharded with libaccelrun (core/shard), on the CPU or,\n"
    "with the nccl backend, on GPU LOCAL_RANK.  Reads the accelerate environment\n"
    "(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK, ACCELERATE_USE_CPU,\n"
    "ACCELERATE_MIXED_PRECISION, FSDP_SHARDING_STRATEGY,\n"
    "ACCELERATE_GRADIENT_ACCUMULATION_STEPS; ACCELRUN_COMM, CUDA_VISIBLE_DEVICES);\n"
    "start it with `accelrun launch`.\n"
    "\n"
    "  --steps N         optimizer steps (200)\n"
    "  --batch B         global batch, sequences; fixed across world sizes (16)\n"
    "  --seq T           sequence length, bytes (64)\n"
    "  --layers L        transformer blocks (2)\n"
    "  --channels C      channels (64)\n"
    "  --heads NH        attention heads, dividing C (4)\n"
    "  --lr LR           peak learning rate, AdamW (3e-3)\n"
    "  --warmup N        linear warmup steps, then cosine decay (20)\n"
    "  --min-lr-frac F   final learning rate as a fraction of LR (0.1)\n"
    "  --clip G          clip the global gradient norm to G; 0 = off (1.0)\n"
    "  --seed S          parameter init and data order (1337)\n"
    "  --loss-log FILE   rank 0 writes \"step loss\" lines, loss as %.9g\n"
    "  --data DIR        corpus folder (/usr/share/common-licenses)\n"
    "  --eval-every N    validation every N steps; 0 = at the end only (0)\n"
    "  --eval-batches N  validation sequences = N global batches (4)\n"
    "  --print-every N   progress line every N steps; 0 = about 20 lines (0)\n"
    "  --ckpt-dir DIR    save sharded checkpoints under DIR (docs/ckpt.md) and, when\n"
    "                    DIR holds one, resume from the newest, at any world size;\n"
    "                    the flags above must be those it was made with\n"
    "  --save-every N    steps between checkpoints; 0 = at the end only (0)\n"
    "  --keep K          checkpoints kept, the newest; 0 = all (2)\n"
    "  --async-save      training goes on while a checkpoint is written; it is\n"
    "                    committed at a later step, once every rank's file is\n"
    "  --ckpt-local DIR  node-local storage: each rank writes its file there, and\n"
    "                    a background copy moves it to --ckpt-dir, where it is\n"
    "                    committed; a restart on the same nodes resumes from\n"
    "                    local files newer than --ckpt-dir's (docs/ckpt.md)\n"
    "  --copy-rate MBPS  limit of that copy, MB/s per rank; 0 = none (0)\n"
    "  -h, --help        this text\n";

static int num(const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "train_gpt: %s: '%s' is not a number in [%g, %g]\n", flag, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int count(const char *flag, const char *s, size_t lo, size_t hi, size_t *out)
{
    double v;
    if (num(flag, s, (double)lo, (double)hi, &v))
        return -1;
    if (v != (double)(size_t)v) {
        fprintf(stderr, "train_gpt: %s: '%s' is not a whole number\n", flag, s);
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

int gpt_args_parse(struct gpt_args *a, int argc, char **argv)
{
    *a = (struct gpt_args){.steps = 200,
                           .batch = 16,
                           .seq = 64,
                           .layers = 2,
                           .channels = 64,
                           .heads = 4,
                           .lr = 3e-3,
                           .min_lr_frac = 0.1,
                           .clip = 1.0,
                           .warmup = 20,
                           .seed = 1337,
                           .data = GPT_DATA_DEFAULT_DIR,
                           .eval_batches = 4,
                           .keep = 2};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double d;
        int rc = 0;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            fputs(usage, stdout);
            return 1;
        }
        if (!strcmp(f, "--async-save")) {
            a->async_save = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "train_gpt: %s needs a value (or unknown flag)\n%s", f, usage);
            return -1;
        }
        i++;
        if (!strcmp(f, "--steps"))
            rc = count(f, v, 0, 10000000, &a->steps);
        else if (!strcmp(f, "--batch"))
            rc = count(f, v, 1, 65536, &a->batch);
        else if (!strcmp(f, "--seq"))
            rc = count(f, v, 1, 4096, &a->seq);
        else if (!strcmp(f, "--layers"))
            rc = count(f, v, 1, 64, &a->layers);
        else if (!strcmp(f, "--channels"))
            rc = count(f, v, 1, 4096, &a->channels);
        else if (!strcmp(f, "--heads"))
            rc = count(f, v, 1, 4096, &a->heads);
        else if (!strcmp(f, "--lr"))
            rc = num(f, v, 0, 10, &a->lr);
        else if (!strcmp(f, "--warmup"))
            rc = count(f, v, 0, 10000000, &a->warmup);
        else if (!strcmp(f, "--min-lr-frac"))
            rc = num(f, v, 0, 1, &a->min_lr_frac);
        else if (!strcmp(f, "--clip"))
            rc = num(f, v, 0, 1e9, &a->clip);
        else if (!strcmp(f, "--seed")) {
            rc = num(f, v, 0, 9007199254740992.0, &d);
            a->seed = (uint64_t)d;
        } else if (!strcmp(f, "--loss-log"))
            a->loss_log = v;
        else if (!strcmp(f, "--data"))
            a->data = v;
        else if (!strcmp(f, "--eval-every"))
            rc = count(f, v, 0, 10000000, &a->eval_every);
        else if (!strcmp(f, "--eval-batches"))
            rc = count(f, v, 1, 1000, &a->eval_batches);
        else if (!strcmp(f, "--print-every"))
            rc = count(f, v, 0, 10000000, &a->print_every);
        else if (!strcmp(f, "--ckpt-dir"))
            a->ckpt_dir = v;
        else if (!strcmp(f, "--save-every"))
            rc = count(f, v, 0, 10000000, &a->save_every);
        else if (!strcmp(f, "--keep"))
            rc = count(f, v, 0, 1000000, &a->keep);
        else if (!strcmp(f, "--ckpt-local"))
            a->ckpt_local = v;
        else if (!strcmp(f, "--copy-rate"))
            rc = num(f, v, 0, 1e6, &a->copy_rate);
        else {
            fprintf(stderr, "train_gpt: unknown flag %s\n%s", f, usage);
            return -1;
        }
        if (rc)
            return -1;
    }
    if ((a->ckpt_local || a->async_save || a->copy_rate > 0) && !a->ckpt_dir) {
        fprintf(stderr, "train_gpt: --async-save, --ckpt-local and --copy-rate need --ckpt-dir\n");
        return -1;
    }
    if (a->copy_rate > 0 && !a->ckpt_local) {
        fprintf(stderr, "train_gpt: --copy-rate limits --ckpt-local's copy: give --ckpt-local\n");
        return -1;
    }
    return 0;
}
