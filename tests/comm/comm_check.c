/*
 * comm_check.c: one rank of a real multi-process, multi-host check of
 * core/bootstrap and core/comm, started by whatever launches the job
 * (`srun --accel-config`, `accelrun launch`): it reads only the accelerate
 * environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
 *
 *   comm_check [--backend socket|nccl] [--sizes N,N,...] [--die R] [--split]
 *
 * Every operation, type and size, in place and out of place, against the
 * answer each rank computes alone.  The inputs are small integers (rank and
 * index mixed), so every sum is exact in fp32, bf16 and fp16 and the check
 * is bit for bit whatever the reduction order; the order's own
 * reproducibility is tests/unit/test_comm.c's.  Prints one line per rank,
 * "comm_check: rank R of W (host H): N checks passed", and exits 0, or names
 * the first mismatch and exits 1.  --die R: rank R kills itself (SIGKILL)
 * just before the first all_reduce of the largest size, so the others are
 * inside that collective when it goes; they must fail, naming it.  --split
 * also checks accel_comm_split_nodes: the node communicator holds this node's
 * ranks in LOCAL_RANK order, the rail communicator local rank L of every
 * node in node order, and a sum over each is the sum of their global ranks.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/comm.h"
#include "accel/store.h"

static const size_t default_sizes[] = {0, 1, 7, 1000, 65536 + 3, 1u << 20};

/* The value rank r holds at index i: an integer in 0..15. */
static float value(unsigned r, size_t i)
{
    return (float)((r * 7 + i * 13) % 16);
}

/* fp32 → bf16/f16 of a small integer (exact), and back. */
static void put(void *buf, enum accel_dtype t, size_t i, float v)
{
    if (t == ACCEL_F32) {
        ((float *)buf)[i] = v;
    } else if (t == ACCEL_BF16) {
        union {
            float f;
            unsigned u;
        } x = {v};
        ((unsigned short *)buf)[i] = (unsigned short)(x.u >> 16);
    } else { /* f16: integers below 2048 are exact */
        unsigned n = (unsigned)v, e = 0, m;
        if (n == 0) {
            ((unsigned short *)buf)[i] = 0;
            return;
        }
        while ((n >> e) > 1)
            e++;
        m = (n << (10 - e)) & 0x3ff;
        ((unsigned short *)buf)[i] = (unsigned short)(((e + 15) << 10) | m);
    }
}

static float get(const void *buf, enum accel_dtype t, size_t i)
{
    unsigned short h;

    if (t == ACCEL_F32)
        return ((const float *)buf)[i];
    h = ((const unsigned short *)buf)[i];
    if (t == ACCEL_BF16) {
        union {
            unsigned u;
            float f;
        } x = {(unsigned)h << 16};
        return x.f;
    }
    if ((h & 0x7fff) == 0)
        return 0;
    return (float)(1024 + (h & 0x3ff)) / 1024.0f * (float)(1u << (((h >> 10) & 0x1f) - 15));
}

struct ctx {
    struct accel_comm *c;
    unsigned rank, world;
    long die;   /* the rank that kills itself, -1 none */
    size_t max; /* the largest size */
    unsigned long checks;
    char host[64];
};

static int mismatch(const struct ctx *x, const char *op, enum accel_dtype t, size_t n, size_t i,
                    float got, float want)
{
    fprintf(stderr, "comm_check: rank %u: %s %s count %zu: element %zu is %g, want %g\n", x->rank,
            op, accel_dtype_name(t), n, i, (double)got, (double)want);
    return 1;
}

static int failed(const struct ctx *x, const char *op, const struct accel_error *e)
{
    fprintf(stderr, "comm_check: rank %u: %s: %s: %s\n", x->rank, op, accel_errname(e->code),
            e->msg);
    return 1;
}

/* all_reduce sum and avg, in and out of place */
static int check_all_reduce(struct ctx *x, enum accel_dtype t, size_t n, void *a, void *b)
{
    struct accel_error e;

    if (x->die == (long)x->rank && n == x->max) {
        fprintf(stderr, "comm_check: rank %u: dying on purpose before all_reduce of %zu\n", x->rank,
                n);
        raise(SIGKILL);
    }
    for (int inplace = 0; inplace < 2; inplace++) {
        for (int avg = 0; avg < 2; avg++) {
            for (size_t i = 0; i < n; i++)
                put(a, t, i, value(x->rank, i) * (float)x->world);
            if (accel_all_reduce(x->c, a, inplace ? a : b, n, t, avg ? ACCEL_AVG : ACCEL_SUM, &e) !=
                ACCEL_OK)
                return failed(x, "all_reduce", &e);
            for (size_t i = 0; i < n; i++) {
                float want = 0, got = get(inplace ? a : b, t, i);
                for (unsigned r = 0; r < x->world; r++)
                    want += value(r, i) * (float)x->world;
                if (avg)
                    want /= (float)x->world;
                if (got != want)
                    return mismatch(x, avg ? "all_reduce avg" : "all_reduce sum", t, n, i, got,
                                    want);
            }
            x->checks++;
        }
    }
    return 0;
}

/* reduce_scatter (n per rank) and all_gather (n per rank) */
static int check_scatter_gather(struct ctx *x, enum accel_dtype t, size_t n, void *a, void *b)
{
    size_t esz = accel_dtype_size(t), total = n * x->world;
    struct accel_error e;

    for (size_t i = 0; i < total; i++)
        put(a, t, i, value(x->rank, i));
    if (accel_reduce_scatter(x->c, a, b, n, t, ACCEL_SUM, &e) != ACCEL_OK)
        return failed(x, "reduce_scatter", &e);
    for (size_t i = 0; i < n; i++) {
        float want = 0, got = get(b, t, i);
        for (unsigned r = 0; r < x->world; r++)
            want += value(r, x->rank * n + i);
        if (got != want)
            return mismatch(x, "reduce_scatter", t, n, i, got, want);
    }
    x->checks++;
    /* in place: this rank's slice of a */
    for (size_t i = 0; i < total; i++)
        put(a, t, i, value(x->rank + 1, i));
    if (accel_reduce_scatter(x->c, a, (char *)a + x->rank * n * esz, n, t, ACCEL_SUM, &e) !=
        ACCEL_OK)
        return failed(x, "reduce_scatter in place", &e);
    for (size_t i = 0; i < n; i++) {
        float want = 0, got = get(a, t, x->rank * n + i);
        for (unsigned r = 0; r < x->world; r++)
            want += value(r + 1, x->rank * n + i);
        if (got != want)
            return mismatch(x, "reduce_scatter in place", t, n, i, got, want);
    }
    x->checks++;
    for (size_t i = 0; i < n; i++)
        put(b, t, i, value(x->rank, i));
    if (accel_all_gather(x->c, b, a, n, t, &e) != ACCEL_OK)
        return failed(x, "all_gather", &e);
    for (size_t i = 0; i < total; i++)
        if (get(a, t, i) != value((unsigned)(i / (n ? n : 1)), i % (n ? n : 1)))
            return mismatch(x, "all_gather", t, n, i, get(a, t, i),
                            value((unsigned)(i / n), i % n));
    x->checks++;
    return 0;
}

/* The node and rail communicators of an even layout (the same task count on
 * every node). */
static int check_split(struct ctx *x)
{
    struct accel_comm *node = NULL, *rail = NULL;
    struct accel_error e;
    unsigned lws = accel_comm_size(x->c), local, group;
    float v, sum;
    int rc = 0;

    if (accel_comm_split_nodes(x->c, &node, &rail, &e) != ACCEL_OK)
        return failed(x, "split_nodes", &e);
    lws = accel_comm_size(node);
    local = accel_comm_rank(node);
    group = accel_comm_rank(rail);
    if (x->rank != group * lws + local || accel_comm_size(rail) * lws != x->world) {
        fprintf(stderr, "comm_check: rank %u: node rank %u of %u, rail rank %u of %u\n", x->rank,
                local, lws, group, accel_comm_size(rail));
        rc = 1;
    }
    v = (float)x->rank;
    if (rc == 0 && accel_all_reduce(node, &v, &sum, 1, ACCEL_F32, ACCEL_SUM, &e) != ACCEL_OK)
        rc = failed(x, "all_reduce on the node", &e);
    if (rc == 0 && sum != (float)(group * lws * lws + lws * (lws - 1) / 2))
        rc = mismatch(x, "all_reduce on the node", ACCEL_F32, 1, 0, sum,
                      (float)(group * lws * lws + lws * (lws - 1) / 2));
    if (rc == 0 && accel_all_reduce(rail, &v, &sum, 1, ACCEL_F32, ACCEL_SUM, &e) != ACCEL_OK)
        rc = failed(x, "all_reduce on the rail", &e);
    {
        unsigned n = accel_comm_size(rail);
        float want = (float)(lws * n * (n - 1) / 2 + local * n);
        if (rc == 0 && sum != want)
            rc = mismatch(x, "all_reduce on the rail", ACCEL_F32, 1, 0, sum, want);
    }
    if (rc == 0) {
        printf("comm_check: rank %u: node communicator %u of %u, rail communicator %u of %u\n",
               x->rank, local, lws, group, accel_comm_size(rail));
        x->checks += 2;
    }
    accel_comm_free(node);
    accel_comm_free(rail);
    return rc;
}

static int check_broadcast(struct ctx *x, enum accel_dtype t, size_t n, void *a, void *b)
{
    struct accel_error e;
    unsigned root = x->world - 1;

    for (size_t i = 0; i < n; i++)
        put(a, t, i, value(x->rank, i));
    if (accel_broadcast(x->c, a, b, n, t, root, &e) != ACCEL_OK)
        return failed(x, "broadcast", &e);
    for (size_t i = 0; i < n; i++)
        if (get(b, t, i) != value(root, i))
            return mismatch(x, "broadcast", t, n, i, get(b, t, i), value(root, i));
    x->checks++;
    return 0;
}

int main(int argc, char **argv)
{
    struct accel_bootstrap boot;
    struct accel_comm_opts opts = {0};
    struct accel_error e;
    struct ctx x = {0};
    size_t sizes[32], nsizes = 0, max = 0;
    int rc = 0;
    bool split = false;

    opts.cuda_device = -1;
    x.die = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
            opts.backend = argv[++i];
        } else if (strcmp(argv[i], "--split") == 0) {
            split = true;
        } else if (strcmp(argv[i], "--die") == 0 && i + 1 < argc) {
            x.die = strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
            for (char *s = argv[++i], *end; *s && nsizes < 32; s = *end ? end + 1 : end)
                sizes[nsizes++] = strtoul(s, &end, 10);
        } else {
            fprintf(stderr, "usage: comm_check [--backend socket|nccl] [--sizes N,N,...] [--die R] "
                            "[--split]\n");
            return 2;
        }
    }
    if (nsizes == 0) {
        nsizes = sizeof(default_sizes) / sizeof(default_sizes[0]);
        memcpy(sizes, default_sizes, sizeof(default_sizes));
    }
    gethostname(x.host, sizeof(x.host) - 1);
    accel_error_clear(&e);
    if (accel_bootstrap_init(&boot, &e) != ACCEL_OK) {
        fprintf(stderr, "comm_check: %s\n", e.msg);
        return 1;
    }
    x.rank = boot.rank;
    x.world = boot.world;
    opts.nonce = boot.nonce;
    if (accel_comm_init(&x.c, boot.store, boot.rank, boot.world, &opts, &e) != ACCEL_OK) {
        fprintf(stderr, "comm_check: rank %u: comm init: %s\n", x.rank, e.msg);
        accel_bootstrap_free(&boot);
        return 1;
    }
    for (size_t k = 0; k < nsizes; k++)
        max = sizes[k] > max ? sizes[k] : max;
    x.max = max;
    {
        /* room for world * max elements of 4 bytes, twice */
        char *a = accel_malloc(4 * (max * x.world + 1)), *b = accel_malloc(4 * (max * x.world + 1));
        static const enum accel_dtype types[] = {ACCEL_F32, ACCEL_BF16, ACCEL_F16};
        if (a == NULL || b == NULL) {
            fprintf(stderr, "comm_check: rank %u: out of memory\n", x.rank);
            rc = 1;
        }
        for (size_t k = 0; rc == 0 && k < nsizes; k++)
            for (size_t ti = 0; rc == 0 && ti < 3; ti++)
                rc = check_all_reduce(&x, types[ti], sizes[k], a, b) ||
                     check_scatter_gather(&x, types[ti], sizes[k], a, b) ||
                     check_broadcast(&x, types[ti], sizes[k], a, b);
        if (rc == 0 && split)
            rc = check_split(&x);
        if (rc == 0 && accel_comm_barrier(x.c, &e) != ACCEL_OK)
            rc = failed(&x, "barrier", &e);
        accel_free(a);
        accel_free(b);
    }
    if (rc == 0)
        printf("comm_check: rank %u of %u (host %s, %s): %lu checks passed\n", x.rank, x.world,
               x.host, accel_comm_backend(x.c), x.checks);
    accel_comm_free(x.c);
    boot.failed = rc != 0; /* a peer may be gone: no closing barrier */
    accel_bootstrap_free(&boot);
    return rc;
}
