/*
 * bench/ckpt.c: checkpoint figures of one process (bench/ckpt.sh runs it
 * beside its peers: dd, Python safetensors, torch.save).  MIB MiB of random
 * fp32 in 64 tensors; WORLD ranks are threads, each saving its FSDP-style
 * slice (tensors cut across the ranks).  Prints "ckpt: NAME SECONDS VALUE"
 * lines (GB = 1e9 bytes).
 *
 *   ckpt save DIR MIB WORLD [REPS]
 *                               REPS (default 3) synchronous saves through savers
 *                               (checksums, O_DIRECT, fsyncs, the commit;
 *                               keep 0: no clean-up, which a saver leaves to
 *                               its writer thread anyway): the median's GB/s
 *                               (of 1 or 3)
 *   ckpt load DIR               the newest checkpoint read whole, every
 *                               checksum checked, once (the caller drops the
 *                               page cache first for a cold read): GB/s
 *   ckpt async DIR MIB GAP_MS   a saver's asynchronous saves, world 1:
 *                               "stall" (start copying the pieces itself),
 *                               "stall_deferred" (start, GAP_MS of work
 *                               standing for forward and backward, then
 *                               wait_staged: only the copy's part that did not
 *                               overlap), each in s/GiB; and "commit", the
 *                               seconds from start to the commit
 *   ckpt tiers DIR LOCAL MIB RATE_MBPS
 *                               a saver with a local tier, world 1: "resume"
 *                               (s until training goes on: the deferred
 *                               copy's stall), "durable" (s until committed in
 *                               DIR), and "direct" (s of a synchronous save
 *                               straight into DIR, no tier)
 *   ckpt consolidate DIR        the newest checkpoint to DIR/hf: GB/s
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
static pthread_barrier_t bar;
static struct accel_error errs[MAXW];

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median3(double *t)
{
    qsort(t, 3, sizeof t[0], cmp);
    return t[1];
}

static int fail(const char *what, const struct accel_error *err)
{
    fprintf(stderr, "ckpt: %s: %s\n", what, err->msg);
    return 1;
}

/* MIB of random fp32 in NT tensors of `per` elements (a multiple of 256) */
static int make_data(const char *mib)
{
    per = (size_t)atol(mib) * (1u << 20) / 4 / NT / 256 * 256;
    if (per == 0)
        return 2;
    srand(7);
    for (size_t i = 0; i < NT; i++) {
        data[i] = malloc(per * sizeof(float));
        if (!data[i])
            return 1;
        for (size_t k = 0; k < per; k++) /* random bits: nothing compresses */
            data[i][k] = (float)rand() / (float)RAND_MAX;
    }
    return 0;
}

static double bytes_all(void)
{
    return (double)per * NT * 4;
}

/* Rank r's pieces of the tensors (names into `names`), into p; their count. */
static size_t rank_pieces(unsigned r, unsigned w, struct accel_ckpt_piece *p, char (*names)[32])
{
    size_t total = per * NT, a = total * r / w, b = total * (r + 1) / w, n = 0;

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
    return n;
}

/* ---------------------------------------------------------------- save */

/* the ranks' collective step: a barrier taking the smallest value */
static uint64_t mins[MAXW];

static enum accel_err min_fn(void *ctx, uint64_t mine, uint64_t *min, struct accel_error *err)
{
    unsigned r = (unsigned)(size_t)ctx;
    (void)err;
    mins[r] = mine;
    pthread_barrier_wait(&bar);
    *min = UINT64_MAX;
    for (unsigned i = 0; i < world; i++)
        *min = mins[i] < *min ? mins[i] : *min;
    pthread_barrier_wait(&bar);
    return ACCEL_OK;
}

static double save_t[3];
static int reps = 3;

/* Rank r: a saver (keep 0: no clean-up, as dd deletes nothing), three
 * synchronous saves, timed on rank 0 from the barrier before each. */
static void *rank_save(void *arg)
{
    unsigned r = (unsigned)(size_t)arg;
    struct accel_ckpt_saver_opts o = {root, NULL,         r,      world, 0,   1,
                                      0,    "bench/ckpt", min_fn, arg,   NULL};
    struct accel_ckpt_saver *sv = NULL;
    struct accel_ckpt_piece p[NT];
    char names[NT][32];
    size_t n = rank_pieces(r, world, p, names);

    if (accel_ckpt_saver_open(&sv, &o, &errs[r]) != ACCEL_OK) {
        fprintf(stderr, "ckpt: rank %u: %s\n", r, errs[r].msg);
        return NULL;
    }
    for (int rep = 0; rep < reps; rep++) {
        struct accel_ckpt_save_req q = {(unsigned long)rep + 1, NULL, 0, p, n, false};
        double t0;
        pthread_barrier_wait(&bar);
        t0 = now();
        if (accel_ckpt_saver_save(sv, &q, &errs[r]) != ACCEL_OK) {
            fprintf(stderr, "ckpt: rank %u: %s\n", r, errs[r].msg);
            break;
        }
        pthread_barrier_wait(&bar); /* every rank's part is in the time */
        if (r == 0)
            save_t[rep] = now() - t0;
    }
    accel_ckpt_saver_close(sv);
    return NULL;
}

static int cmd_save(char **argv)
{
    pthread_t th[MAXW];
    double t;

    world = (unsigned)atoi(argv[4]);
    if (argv[5])
        reps = atoi(argv[5]) == 1 ? 1 : 3;
    if (world < 1 || world > MAXW)
        return 2;
    pthread_barrier_init(&bar, NULL, world);
    for (unsigned r = 0; r < world; r++)
        pthread_create(&th[r], NULL, rank_save, (void *)(size_t)r);
    for (unsigned r = 0; r < world; r++)
        pthread_join(th[r], NULL);
    for (unsigned r = 0; r < world; r++)
        if (errs[r].code != ACCEL_OK)
            return 1;
    t = reps == 3 ? median3(save_t) : save_t[0];
    printf("ckpt: save %.3f %.3f\n", t, bytes_all() / t / 1e9);
    return 0;
}

/* ---------------------------------------------------------------- load, consolidate */

static int cmd_load(void)
{
    struct accel_ckpt *c = NULL;
    struct accel_error err;
    double t0 = now(), bytes = 0;
    float *dst = NULL;
    size_t cap = 0;

    if (accel_ckpt_open(&c, root, &err) != ACCEL_OK)
        return fail("open", &err);
    for (size_t i = 0; i < accel_ckpt_ntensors(c); i++) {
        const struct accel_ckpt_tensor *t = accel_ckpt_tensor_at(c, i);
        uint64_t n = 1;
        for (unsigned d = 0; d < t->ndim; d++)
            n *= t->shape[d];
        if (n > cap) {
            free(dst);
            dst = malloc(n * sizeof(float));
            cap = n;
        }
        if (!dst || accel_ckpt_read(c, t->name, ACCEL_F32, 0, n, dst, &err) != ACCEL_OK)
            return fail("read", &err);
        bytes += (double)n * 4;
    }
    t0 = now() - t0;
    printf("ckpt: load %.3f %.3f\n", t0, bytes / t0 / 1e9);
    accel_ckpt_close(c);
    free(dst);
    return 0;
}

static int cmd_consolidate(void)
{
    struct accel_ckpt *c = NULL;
    struct accel_error err;
    char out[4200];
    double t0, bytes = 0;

    if (accel_ckpt_open(&c, root, &err) != ACCEL_OK)
        return fail("open", &err);
    for (size_t i = 0; i < accel_ckpt_ntensors(c); i++) {
        const struct accel_ckpt_tensor *t = accel_ckpt_tensor_at(c, i);
        double n = 4;
        for (unsigned d = 0; d < t->ndim; d++)
            n *= (double)t->shape[d];
        bytes += n;
    }
    snprintf(out, sizeof out, "%s/hf", root);
    t0 = now();
    if (accel_ckpt_consolidate(c, out, 0, &err) != ACCEL_OK)
        return fail("consolidate", &err);
    t0 = now() - t0;
    printf("ckpt: consolidate %.3f %.3f\n", t0, bytes / t0 / 1e9);
    accel_ckpt_close(c);
    return 0;
}

/* ---------------------------------------------------------------- savers */

static enum accel_err min1(void *ctx, uint64_t mine, uint64_t *min, struct accel_error *err)
{
    (void)ctx;
    (void)err;
    *min = mine; /* world 1 */
    return ACCEL_OK;
}

static int open_saver(struct accel_ckpt_saver **sv, const char *local, double rate_mbps)
{
    struct accel_ckpt_saver_opts o = {
        root, local, 0, 1, 2, 1, (uint64_t)(rate_mbps * 1e6), "bench/ckpt", min1, NULL, NULL};
    struct accel_error err;

    return accel_ckpt_saver_open(sv, &o, &err) == ACCEL_OK ? 0 : fail("saver", &err);
}

/* busy work for `ms` on this thread (forward and backward, say) */
static void work(double ms)
{
    double end = now() + ms / 1e3;
    volatile double x = 1;
    while (now() < end)
        for (int i = 0; i < 1000; i++)
            x = x * 1.0000001 + 1e-9;
}

/* One asynchronous save of step `s`: *stall the seconds the caller was
 * held (start, and with defer: after gap_ms of work, wait_staged), *done
 * the seconds from start to the commit. */
static int async_once(struct accel_ckpt_saver *sv, unsigned long s, bool defer, double gap_ms,
                      double *stall, double *done)
{
    struct accel_ckpt_piece p[NT];
    char names[NT][32];
    size_t n = rank_pieces(0, 1, p, names);
    struct accel_ckpt_save_req q = {s, NULL, 0, p, n, defer};
    struct accel_error err;
    unsigned long committed = 0;
    double t0 = now(), t1;

    if (accel_ckpt_saver_start(sv, &q, ACCEL_CKPT_WAIT, &err) != ACCEL_OK)
        return fail("start", &err);
    *stall = now() - t0;
    if (defer) {
        work(gap_ms);
        t1 = now();
        accel_ckpt_saver_wait_staged(sv);
        *stall += now() - t1;
    }
    if (accel_ckpt_saver_poll(sv, true, &committed, &err) != ACCEL_OK || committed != s)
        return fail("poll", &err);
    *done = now() - t0;
    return 0;
}

static int cmd_async(char **argv)
{
    struct accel_ckpt_saver *sv;
    double gap = atof(argv[4]), gib = bytes_all() / (double)(1u << 30);
    double st[3], sd[3], dn[3], x;

    if (open_saver(&sv, NULL, 0))
        return 1;
    for (int rep = 0; rep < 3; rep++)
        if (async_once(sv, 10 + (unsigned long)rep, false, 0, &st[rep], &x) ||
            async_once(sv, 20 + (unsigned long)rep, true, gap, &sd[rep], &dn[rep]))
            return 1;
    accel_ckpt_saver_close(sv);
    printf("ckpt: stall %.3f %.4f\n", median3(st), median3(st) / gib);
    printf("ckpt: stall_deferred %.3f %.4f\n", median3(sd), median3(sd) / gib);
    printf("ckpt: commit %.3f %.3f\n", median3(dn), bytes_all() / median3(dn) / 1e9);
    return 0;
}

static int cmd_tiers(char **argv)
{
    struct accel_ckpt_saver *sv;
    double rs[3], du[3], di[3], x;

    if (open_saver(&sv, argv[3], atof(argv[5])))
        return 1;
    for (int rep = 0; rep < 3; rep++)
        if (async_once(sv, 30 + (unsigned long)rep, true, 0, &rs[rep], &du[rep]))
            return 1;
    accel_ckpt_saver_close(sv);
    if (open_saver(&sv, NULL, 0)) /* the same root, no tier: synchronous */
        return 1;
    for (int rep = 0; rep < 3; rep++) {
        struct accel_ckpt_piece p[NT];
        char names[NT][32];
        size_t n = rank_pieces(0, 1, p, names);
        struct accel_ckpt_save_req q = {40 + (unsigned long)rep, NULL, 0, p, n, false};
        struct accel_error err;
        double t0 = now();
        if (accel_ckpt_saver_save(sv, &q, &err) != ACCEL_OK)
            return fail("save", &err);
        di[rep] = now() - t0;
    }
    accel_ckpt_saver_close(sv);
    (void)x;
    printf("ckpt: resume %.3f %.3f\n", median3(rs), bytes_all() / median3(rs) / 1e9);
    printf("ckpt: durable %.3f %.3f\n", median3(du), bytes_all() / median3(du) / 1e9);
    printf("ckpt: direct %.3f %.3f\n", median3(di), bytes_all() / median3(di) / 1e9);
    return 0;
}

int main(int argc, char **argv)
{
    const char *m = argc > 2 ? argv[1] : "";
    int need = !strcmp(m, "save") || !strcmp(m, "async") ? 5 : !strcmp(m, "tiers") ? 6 : 3;
    int rc;

    if (!strcmp(m, "save") && argc == 6)
        need = 6;
    if (argc != need || (strcmp(m, "save") && strcmp(m, "load") && strcmp(m, "async") &&
                         strcmp(m, "tiers") && strcmp(m, "consolidate"))) {
        fprintf(stderr, "usage: ckpt save DIR MIB WORLD [REPS] | load DIR | async DIR MIB GAP_MS |\n"
                        "       tiers DIR LOCAL MIB RATE_MBPS | consolidate DIR\n");
        return 2;
    }
    snprintf(root, sizeof root, "%s", argv[2]);
    if (!strcmp(m, "load"))
        return cmd_load();
    if (!strcmp(m, "consolidate"))
        return cmd_consolidate();
    rc = make_data(argv[!strcmp(m, "tiers") ? 4 : 3]);
    if (rc)
        return rc;
    rc = !strcmp(m, "save")    ? cmd_save(argv)
         : !strcmp(m, "async") ? cmd_async(argv)
                               : cmd_tiers(argv);
    for (size_t i = 0; i < NT; i++)
        free(data[i]);
    return rc;
}
