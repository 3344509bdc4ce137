/*
 * bench/ckpt.c: checkpoint throughput, one process (bench/ckpt.sh runs it
 * beside its peers: dd, Python safetensors).
 *
 *   build/bench/ckpt DIR MIB [WORLD]
 *
 * WORLD ranks (threads, default 1) save MIB MiB of random fp32 in 64
 * tensors, FSDP-style (each tensor cut across the ranks' slices): the whole
 * protocol, checksums, fsyncs and the commit; three saves, the median.
 * Then a world-1 reader loads every tensor whole (hot page cache: the saves
 * just wrote it), and consolidation writes model.safetensors.  Prints one
 * line per figure, "ckpt: NAME SECONDS GB/s", GB = 1e9 bytes.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accel/ckpt.h"

#define NT 64
#define MAXW 8

static unsigned world;
static size_t per; /* elements of a tensor */
static float *data[NT];
static char root[4096];
static unsigned long step;
static pthread_barrier_t bar;
static bool flags[MAXW];
static struct accel_error errs[MAXW];

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static enum accel_err agree(void *ctx, bool ok, bool *all, struct accel_error *err)
{
    unsigned r = (unsigned)(size_t)ctx;
    (void)err;
    flags[r] = ok;
    pthread_barrier_wait(&bar);
    *all = true;
    for (unsigned i = 0; i < world; i++)
        *all = *all && flags[i];
    pthread_barrier_wait(&bar);
    return ACCEL_OK;
}

static void *rank_save(void *arg)
{
    unsigned r = (unsigned)(size_t)arg;
    size_t total = per * NT, a = total * r / world, b = total * (r + 1) / world, n = 0;
    struct accel_ckpt_piece p[NT];
    char names[NT][32];

    for (size_t t = 0; t < NT; t++) {
        size_t lo = t * per > a ? t * per : a, hi = (t + 1) * per < b ? (t + 1) * per : b;
        if (lo >= hi)
            continue;
        snprintf(names[t], sizeof names[t], "layer.%02zu.weight", t);
        memset(&p[n], 0, sizeof p[n]);
        p[n].t = (struct accel_ckpt_tensor){names[t], ACCEL_F32, 2, {per / 256, 256}};
        p[n].lo = lo - t * per;
        p[n].hi = hi - t * per;
        p[n].data = data[t] + (lo - t * per);
        n++;
    }
    struct accel_ckpt_save_opts o = {root, step, r, world, NULL, 0, 1, agree, arg};
    if (accel_ckpt_save(&o, p, n, &errs[r]) != ACCEL_OK)
        fprintf(stderr, "ckpt: rank %u: %s\n", r, errs[r].msg);
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    double bytes, t[3], t0;
    struct accel_ckpt *c = NULL;
    struct accel_error err;
    float *dst;
    char out[4200];

    if (argc < 3) {
        fprintf(stderr, "usage: %s DIR MIB [WORLD]\n", argv[0]);
        return 2;
    }
    snprintf(root, sizeof root, "%s", argv[1]);
    per = (size_t)atol(argv[2]) * (1u << 20) / 4 / NT / 256 * 256;
    world = argc > 3 ? (unsigned)atoi(argv[3]) : 1;
    if (per == 0 || world < 1 || world > MAXW) {
        fprintf(stderr, "ckpt: MIB >= 1, WORLD 1..%d\n", MAXW);
        return 2;
    }
    bytes = (double)per * NT * 4;
    srand(7);
    for (size_t i = 0; i < NT; i++) {
        data[i] = malloc(per * sizeof(float));
        if (!data[i])
            return 1;
        for (size_t k = 0; k < per; k++) /* random bits: nothing compresses */
            data[i][k] = (float)rand() / (float)RAND_MAX;
    }
    pthread_barrier_init(&bar, NULL, world);
    for (int rep = 0; rep < 3; rep++) {
        pthread_t th[MAXW];
        step = (unsigned long)rep + 1;
        t0 = now();
        for (unsigned r = 0; r < world; r++)
            pthread_create(&th[r], NULL, rank_save, (void *)(size_t)r);
        for (unsigned r = 0; r < world; r++)
            pthread_join(th[r], NULL);
        t[rep] = now() - t0;
        if (errs[0].code != ACCEL_OK)
            return 1;
    }
    qsort(t, 3, sizeof t[0], cmp);
    printf("ckpt: save %.3f %.2f\n", t[1], bytes / t[1] / 1e9);

    dst = malloc(per * sizeof(float));
    for (int rep = 0; rep < 3; rep++) {
        t0 = now();
        if (accel_ckpt_open(&c, root, &err) != ACCEL_OK) {
            fprintf(stderr, "ckpt: %s\n", err.msg);
            return 1;
        }
        for (size_t i = 0; i < NT; i++) {
            char name[32];
            snprintf(name, sizeof name, "layer.%02zu.weight", i);
            if (accel_ckpt_read(c, name, ACCEL_F32, 0, per, dst, &err) != ACCEL_OK) {
                fprintf(stderr, "ckpt: %s\n", err.msg);
                return 1;
            }
        }
        t[rep] = now() - t0;
        if (rep < 2)
            accel_ckpt_close(c);
    }
    qsort(t, 3, sizeof t[0], cmp);
    printf("ckpt: load %.3f %.2f\n", t[1], bytes / t[1] / 1e9);

    snprintf(out, sizeof out, "%s/hf", root);
    t0 = now();
    if (accel_ckpt_consolidate(c, out, 0, &err) != ACCEL_OK) {
        fprintf(stderr, "ckpt: %s\n", err.msg);
        return 1;
    }
    t[0] = now() - t0;
    printf("ckpt: consolidate %.3f %.2f\n", t[0], bytes / t[0] / 1e9);
    accel_ckpt_close(c);
    free(dst);
    for (size_t i = 0; i < NT; i++)
        free(data[i]);
    return 0;
}
