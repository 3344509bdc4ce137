/*
 * tests/ckpt/ckpt_crash.c: one rank of the checkpoint fault tests
 * (tests/ckpt/faults.sh), started by `accelrun launch`: a run's whole
 * checkpoint life through a saver (accel/ckpt.h) over a socket
 * communicator, on a small model whose values name the step that wrote
 * them.
 *
 *   ckpt_crash ROOT LOCAL|- STEP        (LOCAL with %r: each rank a tier of its
 *                                       own, as if on a node of its own)
 *                                       resume (and check, bit for bit, that
 *                                       the step resumed holds that step's
 *                                       values), then save STEP
 *                                       asynchronously and poll until it is
 *                                       committed
 *   ckpt_crash ROOT LOCAL|- STEP --hold SECONDS
 *                                       open the saver (the root's lock) and
 *                                       hold it that long, then close
 *
 * Prints "rank R: resumed S", "rank R: verified S", "rank R: committed STEP"
 * (rank 0 then checks the root's own copy of each, not a local tier's:
 * "rank 0: verified S in the root") or "rank R: error: ..." (exit 1 setup,
 * 2 usage, 3 a wrong value, 4 a failed save, 5 a failed resume).  Test
 * code, not part of accelrun.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "accel/ckpt.h"
#include "accel/comm.h"
#include "accel/store.h"

#define NT 3

static const char *const names[NT] = {"h.0.attn.weight", "h.0.mlp.weight", "lm_head.weight"};

/* tensor k: 1000000 * (k + 1) + 13 elements (24 MB in all: a rank's file
 * of 12 MB fills the writer's 8 MiB buffers once and more); element i of
 * step s */
static size_t numel(unsigned k)
{
    return 1000000 * (k + 1) + 13;
}

static float value(unsigned k, size_t i, unsigned long step)
{
    return (float)(i % 9973) * 0.25f + (float)k * 0.5f + (float)step;
}

struct ctx {
    struct accel_comm *comm;
    unsigned world;
    uint64_t *all; /* [world] */
};

/* the smallest of every rank's value: an all-gather of its 8 bytes (the
 * socket backend moves bytes, never does arithmetic on a gather) */
static enum accel_err min_fn(void *p, uint64_t mine, uint64_t *min, struct accel_error *err)
{
    struct ctx *c = p;
    enum accel_err rc = accel_all_gather(c->comm, &mine, c->all, 2, ACCEL_F32, err);

    *min = UINT64_MAX;
    for (unsigned r = 0; rc == ACCEL_OK && r < c->world; r++)
        if (c->all[r] < *min)
            *min = c->all[r];
    return rc;
}

static int die(unsigned rank, int code, const char *what, const struct accel_error *err)
{
    printf("rank %u: error: %s: %s\n", rank, what, err ? err->msg : "");
    fflush(stdout);
    return code;
}

/* Elements [lo[k], hi[k]) of every tensor of ck read into t[k] and
 * compared with step's values: 0, or die's code. */
static int check(struct accel_ckpt *ck, unsigned rank, unsigned long step, const size_t *lo,
                 const size_t *hi, float *const *t)
{
    struct accel_error err;

    for (unsigned k = 0; k < NT; k++) {
        if (accel_ckpt_read(ck, names[k], ACCEL_F32, lo[k], hi[k], t[k], &err) != ACCEL_OK)
            return die(rank, 5, "read", &err);
        for (size_t i = lo[k]; i < hi[k]; i++)
            if (t[k][i - lo[k]] != value(k, i, step)) {
                printf("rank %u: error: %s[%zu] = %g, step %lu wrote %g\n", rank, names[k], i,
                       (double)t[k][i - lo[k]], step, (double)value(k, i, step));
                return 3;
            }
    }
    return 0;
}

/* Rank 0: the root's own copy of `step` (not a local tier's), every file
 * verified and every tensor whole compared. */
static int check_root(const char *root, unsigned long step)
{
    char dir[4200];
    struct accel_ckpt *ck = NULL;
    struct accel_error err;
    size_t lo[NT], hi[NT];
    float *t[NT] = {NULL};
    int rc = 0;

    snprintf(dir, sizeof dir, "%s/step-%08lu", root, step);
    if (accel_ckpt_open(&ck, dir, &err) != ACCEL_OK || accel_ckpt_verify(ck, &err) != ACCEL_OK)
        rc = die(0, 3, "the root's copy", &err);
    for (unsigned k = 0; rc == 0 && k < NT; k++) {
        lo[k] = 0;
        hi[k] = numel(k);
        if (!(t[k] = malloc(numel(k) * sizeof(float))))
            rc = die(0, 1, "memory", NULL);
    }
    if (rc == 0)
        rc = check(ck, 0, step, lo, hi, t);
    if (rc == 0)
        printf("rank 0: verified %lu in the root\n", step);
    for (unsigned k = 0; k < NT; k++)
        free(t[k]);
    accel_ckpt_close(ck);
    return rc;
}

int main(int argc, char **argv)
{
    struct accel_bootstrap boot;
    struct accel_comm_opts co = {.backend = "socket", .cuda_device = -1};
    struct accel_ckpt_saver *sv = NULL;
    struct accel_ckpt_piece p[NT];
    struct accel_error err;
    struct ctx c = {0};
    float *t[NT];
    size_t lo[NT], hi[NT];
    unsigned long step, resumed = 0, committed = 0;
    double hold = -1;
    unsigned rank;

    if (argc != 4 && !(argc == 6 && !strcmp(argv[4], "--hold"))) {
        fprintf(stderr, "usage: ckpt_crash ROOT LOCAL|- STEP [--hold SECONDS]\n");
        return 2;
    }
    step = strtoul(argv[3], NULL, 10);
    if (argc == 6)
        hold = atof(argv[5]);
    accel_error_clear(&err);
    if (accel_bootstrap_init(&boot, &err) != ACCEL_OK)
        return die(0, 1, "bootstrap", &err);
    rank = boot.rank;
    c.world = boot.world;
    co.timeout_s = 20;
    c.all = calloc(c.world, sizeof *c.all);
    if (!c.all || accel_comm_init(&c.comm, boot.store, rank, c.world, &co, &err) != ACCEL_OK)
        return die(rank, 1, "communicator", &err);
    /* LOCAL may name each rank's own tier with %r (a node of its own) */
    {
        static char local[4096];
        char *pct = strstr(argv[2], "%r");
        if (pct)
            snprintf(local, sizeof local, "%.*s%u%s", (int)(pct - argv[2]), argv[2], rank, pct + 2);
        else
            snprintf(local, sizeof local, "%s", argv[2]);
        argv[2] = local;
    }
    {
        struct accel_ckpt_saver_opts o = {argv[1], strcmp(argv[2], "-") ? argv[2] : NULL,
                                          rank,    c.world,
                                          2,       1,
                                          0,       "ckpt_crash",
                                          min_fn,  &c,
                                          NULL};
        if (accel_ckpt_saver_open(&sv, &o, &err) != ACCEL_OK)
            return die(rank, 1, "saver", &err);
    }
    if (hold >= 0) {
        struct timespec ts = {(time_t)hold, (long)((hold - (double)(time_t)hold) * 1e9)};
        printf("rank %u: holding the root\n", rank);
        fflush(stdout);
        nanosleep(&ts, NULL);
        accel_ckpt_saver_close(sv);
        return 0;
    }
    if (accel_ckpt_saver_resume(sv, &resumed, &err) != ACCEL_OK)
        return die(rank, 5, "resume", &err);
    printf("rank %u: resumed %lu\n", rank, resumed);
    for (unsigned k = 0; k < NT; k++) {
        lo[k] = numel(k) * rank / c.world;
        hi[k] = numel(k) * (rank + 1) / c.world;
        t[k] = malloc((hi[k] - lo[k] + 1) * sizeof(float));
        if (!t[k])
            return die(rank, 1, "memory", NULL);
    }
    if (resumed) {
        struct accel_ckpt *ck = NULL;
        int bad;
        if (accel_ckpt_saver_open_step(sv, resumed, &ck, &err) != ACCEL_OK)
            return die(rank, 5, "open the step resumed", &err);
        if ((bad = check(ck, rank, resumed, lo, hi, t)) != 0)
            return bad;
        accel_ckpt_close(ck);
        printf("rank %u: verified %lu\n", rank, resumed);
        if (rank == 0 && (bad = check_root(argv[1], resumed)) != 0)
            return bad;
    }
    for (unsigned k = 0; k < NT; k++) {
        for (size_t i = lo[k]; i < hi[k]; i++)
            t[k][i - lo[k]] = value(k, i, step);
        p[k] = (struct accel_ckpt_piece){{names[k], ACCEL_F32, 1, {numel(k)}}, lo[k], hi[k], t[k]};
    }
    {
        const struct accel_ckpt_kv meta[] = {{"test.step", argv[3]}};
        struct accel_ckpt_save_req q = {step, meta, 1, p, NT};
        if (accel_ckpt_saver_start(sv, &q, ACCEL_CKPT_WAIT, &err) != ACCEL_OK)
            return die(rank, 4, "start", &err);
    }
    /* what training would do meanwhile: change the tensors, poll each step */
    for (unsigned k = 0; k < NT; k++)
        memset(t[k], 0xff, (hi[k] - lo[k]) * sizeof(float));
    while (!committed) {
        if (accel_ckpt_saver_poll(sv, false, &committed, &err) != ACCEL_OK)
            return die(rank, 4, "save", &err);
        usleep(2000);
    }
    printf("rank %u: committed %lu\n", rank, committed);
    fflush(stdout);
    if (rank == 0 && check_root(argv[1], committed) != 0)
        return 3;
    accel_ckpt_saver_close(sv);
    accel_comm_free(c.comm);
    accel_bootstrap_free(&boot);
    for (unsigned k = 0; k < NT; k++)
        free(t[k]);
    free(c.all);
    return 0;
}
