/*
 * nccl_bench.c: bandwidth of the nccl backend's all_reduce, all_gather and
 * reduce_scatter through libaccelrun, in the columns nccl-tests prints (size,
 * count, time per operation, algbw, busbw; GB = 1e9 bytes), one process per
 * GPU of this machine.  Each line also gives the ratio to a peer measured in
 * the same run: cudaMemcpy device to device of the same number of bytes.
 *
 *   nccl_bench [-b 4K] [-e 1G] [-f 2] [-n 20] [-w 5] [-g NGPUS] [-t f32|bf16|f16]
 *              [-o all_reduce,all_gather,reduce_scatter] [-T 300]
 *
 * busbw follows nccl-tests: algbw x 2(n-1)/n for all_reduce and x (n-1)/n for
 * all_gather and reduce_scatter, so with one GPU it is 0 by definition and
 * algbw is that GPU's local copy rate, not a link figure.  Without a GPU (or
 * built without NCCL) it prints one SKIP line and exits 0.  The whole run is
 * bounded by -T seconds: ranks still running then are killed, exit 1.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "accel/comm.h"
#include "accel/store.h"

#ifdef ACCEL_HAVE_NCCL
#include "../core/comm/nccl_int.h"

#define MAX_RANKS 16

enum bench_op { OP_ALL_REDUCE, OP_ALL_GATHER, OP_REDUCE_SCATTER, OP_COUNT };
static const char *const op_name[OP_COUNT] = {"all_reduce", "all_gather", "reduce_scatter"};

struct bench_opts {
    size_t min_bytes, max_bytes;
    unsigned factor, iters, warmup, ngpus;
    enum accel_dtype type;
    bool ops[OP_COUNT];
    double limit_s;
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || end == s)
        return -1;
    switch (*end) {
    case 'K':
    case 'k':
        v <<= 10;
        end++;
        break;
    case 'M':
    case 'm':
        v <<= 20;
        end++;
        break;
    case 'G':
    case 'g':
        v <<= 30;
        end++;
        break;
    default:
        break;
    }
    if (*end != '\0' || v == 0 || v > (16ull << 30))
        return -1;
    *out = (size_t)v;
    return 0;
}

static int parse_args(int argc, char **argv, struct bench_opts *o)
{
    int ch;

    *o = (struct bench_opts){.min_bytes = 4096,
                             .max_bytes = 1u << 30,
                             .factor = 2,
                             .iters = 20,
                             .warmup = 5,
                             .type = ACCEL_F32,
                             .limit_s = 300};
    o->ops[OP_ALL_REDUCE] = o->ops[OP_ALL_GATHER] = o->ops[OP_REDUCE_SCATTER] = true;
    while ((ch = getopt(argc, argv, "b:e:f:n:w:g:t:o:T:h")) != -1) {
        switch (ch) {
        case 'b':
            if (parse_size(optarg, &o->min_bytes) != 0)
                return -1;
            break;
        case 'e':
            if (parse_size(optarg, &o->max_bytes) != 0)
                return -1;
            break;
        case 'f':
            o->factor = (unsigned)atoi(optarg);
            break;
        case 'n':
            o->iters = (unsigned)atoi(optarg);
            break;
        case 'w':
            o->warmup = (unsigned)atoi(optarg);
            break;
        case 'g':
            o->ngpus = (unsigned)atoi(optarg);
            break;
        case 'T':
            o->limit_s = atof(optarg);
            break;
        case 't':
            if (strcmp(optarg, "f32") == 0)
                o->type = ACCEL_F32;
            else if (strcmp(optarg, "bf16") == 0)
                o->type = ACCEL_BF16;
            else if (strcmp(optarg, "f16") == 0)
                o->type = ACCEL_F16;
            else
                return -1;
            break;
        case 'o':
            for (int k = 0; k < OP_COUNT; k++)
                o->ops[k] = strstr(optarg, op_name[k]) != NULL;
            break;
        default:
            return -1;
        }
    }
    if (o->factor < 2 || o->iters == 0 || o->min_bytes > o->max_bytes || o->limit_s <= 0 ||
        o->ngpus > MAX_RANKS)
        return -1;
    return 0;
}

/* nccl-tests' bus bandwidth factor. */
static double bus_factor(enum bench_op op, unsigned n)
{
    if (op == OP_ALL_REDUCE)
        return 2.0 * (n - 1) / n;
    return (double)(n - 1) / n;
}

/* Iterations for one size: at least -n, more for small sizes (about 4 GiB
 * moved), at most 1000. */
static unsigned iters_for(const struct bench_opts *o, size_t bytes)
{
    size_t want = ((size_t)4 << 30) / bytes;

    if (want > 1000)
        want = 1000;
    return want > o->iters ? (unsigned)want : o->iters;
}

static int fail(unsigned rank, const char *what, const struct accel_error *err)
{
    fprintf(stderr, "nccl_bench: rank %u: %s: %s\n", rank, what, err->msg);
    return 1;
}

static enum accel_err run_op(struct accel_comm *c, enum bench_op op, void *send, void *recv,
                             size_t count, enum accel_dtype t, struct accel_error *err)
{
    switch (op) {
    case OP_ALL_REDUCE:
        return accel_all_reduce(c, send, recv, count, t, ACCEL_SUM, err);
    case OP_ALL_GATHER:
        return accel_all_gather(c, send, recv, count, t, err);
    case OP_REDUCE_SCATTER:
        return accel_reduce_scatter(c, send, recv, count, t, ACCEL_SUM, err);
    case OP_COUNT:
        break;
    }
    return ACCEL_EINVAL;
}

/* Seconds per cudaMemcpy device to device of `bytes` (synchronous copies). */
static double memcpy_time(void *dst, const void *src, size_t bytes, unsigned iters,
                          struct accel_error *err)
{
    double t0;

    if (comm__nccl_copy(dst, src, bytes, err) != ACCEL_OK)
        return -1;
    t0 = now_s();
    for (unsigned i = 0; i < iters; i++)
        if (comm__nccl_copy(dst, src, bytes, err) != ACCEL_OK)
            return -1;
    return (now_s() - t0) / iters;
}

static int bench_rank(const struct bench_opts *o, unsigned port, unsigned rank, unsigned world)
{
    struct accel_store_opts so = {.host = "127.0.0.1", .port = port, .timeout_s = 60};
    struct accel_comm_opts co = {.backend = "nccl", .timeout_s = 60, .cuda_device = (int)rank};
    struct accel_store *s = NULL;
    struct accel_comm *c = NULL;
    struct accel_error err;
    size_t es = accel_dtype_size(o->type);
    void *a = NULL, *b = NULL;
    int rc = 1;

    so.nonce = accel_store_nonce("nccl_bench", "0");
    so.rank = rank;
    so.world = world;
    if (accel_store_connect(&s, &so, &err) != ACCEL_OK)
        return fail(rank, "store", &err);
    if (accel_comm_init(&c, s, rank, world, &co, &err) != ACCEL_OK) {
        rc = fail(rank, "init", &err);
        goto out;
    }
    if (comm__nccl_dev_alloc(&a, o->max_bytes, &err) != ACCEL_OK ||
        comm__nccl_dev_alloc(&b, o->max_bytes, &err) != ACCEL_OK ||
        comm__nccl_fill(a, 0, o->max_bytes, &err) != ACCEL_OK ||
        comm__nccl_fill(b, 0, o->max_bytes, &err) != ACCEL_OK) {
        rc = fail(rank, "buffers", &err);
        goto out;
    }
    if (rank == 0) {
        printf("# nccl_bench: NCCL %d, world %u (one process per GPU), %s, sum, %u+ "
               "iterations after %u warm-up\n",
               comm__nccl_version(), world, accel_dtype_name(o->type), o->iters, o->warmup);
        printf("# size: bytes of the whole buffer (all_gather: received, reduce_scatter: sent); "
               "count: elements per rank's slice\n");
        printf("# busbw = algbw x 2(n-1)/n (all_reduce), x (n-1)/n (all_gather, reduce_scatter), "
               "as nccl-tests defines it%s\n",
               world == 1 ? "; world 1: busbw is 0 by definition and algbw is this GPU's "
                            "local copy rate, not a link figure"
                          : "");
        printf("# x memcpy: algbw / the rate of a synchronous cudaMemcpy device to device of the "
               "same bytes in this run\n");
        printf("# %12s %12s %-15s %11s %11s %11s %9s\n", "size", "count", "op", "time(us)",
               "algbw(GB/s)", "busbw(GB/s)", "x memcpy");
        fflush(stdout);
    }
    for (int k = 0; k < OP_COUNT; k++) {
        if (!o->ops[k])
            continue;
        for (size_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes *= o->factor) {
            size_t count = bytes / es / (k == OP_ALL_REDUCE ? 1 : world);
            size_t size = count * es * (k == OP_ALL_REDUCE ? 1 : world); /* <= bytes */
            unsigned n = iters_for(o, bytes);
            double t0, t, peer;

            if (count == 0)
                continue;
            for (unsigned i = 0; i < o->warmup; i++)
                if (run_op(c, (enum bench_op)k, a, b, count, o->type, &err) != ACCEL_OK) {
                    rc = fail(rank, op_name[k], &err);
                    goto out;
                }
            if (accel_comm_barrier(c, &err) != ACCEL_OK) {
                rc = fail(rank, "barrier", &err);
                goto out;
            }
            t0 = now_s();
            for (unsigned i = 0; i < n; i++)
                if (run_op(c, (enum bench_op)k, a, b, count, o->type, &err) != ACCEL_OK) {
                    rc = fail(rank, op_name[k], &err);
                    goto out;
                }
            if (accel_comm_sync(c, &err) != ACCEL_OK) {
                rc = fail(rank, "sync", &err);
                goto out;
            }
            t = (now_s() - t0) / n;
            peer = memcpy_time(b, a, size, n < 50 ? n : 50, &err);
            if (peer < 0) {
                rc = fail(rank, "memcpy", &err);
                goto out;
            }
            if (rank == 0) {
                double alg = (double)size / t / 1e9;
                printf("  %12zu %12zu %-15s %11.2f %11.2f %11.2f %9.2f\n", size, count, op_name[k],
                       t * 1e6, alg, alg * bus_factor((enum bench_op)k, world),
                       alg / ((double)size / peer / 1e9));
                fflush(stdout);
            }
            if (bytes > o->max_bytes / o->factor)
                break;
        }
    }
    rc = 0;
out:
    accel_comm_free(c);
    comm__nccl_dev_free(a);
    comm__nccl_dev_free(b);
    accel_store_close(s);
    return rc;
}

/* The device count, from a child: a process that forks ranks must not have
 * initialised CUDA itself. */
static int probe(char *why, size_t n)
{
    int fd[2], status = 0, count = 0;
    pid_t pid;

    if (pipe(fd) != 0)
        return 0;
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        char buf[300];
        int k = comm__nccl_device_count(buf + sizeof(int), sizeof(buf) - sizeof(int));
        memcpy(buf, &k, sizeof(int));
        if (write(fd[1], buf, sizeof(buf)) != (ssize_t)sizeof(buf))
            _exit(1);
        _exit(0);
    }
    close(fd[1]);
    if (pid > 0) {
        char buf[300];
        if (read(fd[0], buf, sizeof(buf)) == (ssize_t)sizeof(buf)) {
            memcpy(&count, buf, sizeof(int));
            snprintf(why, n, "%.*s", (int)(sizeof(buf) - sizeof(int) - 1), buf + sizeof(int));
        }
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
    }
    close(fd[0]);
    return count;
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    struct accel_store_server_opts so = {.bind_addr = "127.0.0.1", .port = 0};
    struct accel_store_server *srv = NULL;
    struct accel_error err;
    pid_t pid[MAX_RANKS];
    unsigned world, left, bad = 0;
    char why[300] = "";
    double deadline;
    int ngpu;

    if (parse_args(argc, argv, &o) != 0) {
        fprintf(stderr, "usage: nccl_bench [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] "
                        "[-g NGPUS] [-t f32|bf16|f16] [-o OPS] [-T SECONDS]\n");
        return 2;
    }
    ngpu = probe(why, sizeof(why));
    if (ngpu <= 0) {
        printf("nccl_bench: SKIP: no CUDA device (%s)\n", why);
        return 0;
    }
    world = o.ngpus > 0 ? o.ngpus : (unsigned)ngpu;
    if (world > (unsigned)ngpu || world > MAX_RANKS) {
        fprintf(stderr, "nccl_bench: %u GPUs asked for, %d here\n", world, ngpu);
        return 2;
    }
    so.nonce = accel_store_nonce("nccl_bench", "0");
    if (accel_store_server_start(&srv, &so, &err) != ACCEL_OK) {
        fprintf(stderr, "nccl_bench: store: %s\n", err.msg);
        return 1;
    }
    for (unsigned r = 0; r < world; r++) {
        fflush(stdout);
        pid[r] = fork();
        if (pid[r] < 0) {
            fprintf(stderr, "nccl_bench: fork: %s\n", strerror(errno));
            world = r;
            bad++;
            break;
        }
        if (pid[r] == 0)
            _exit(bench_rank(&o, accel_store_server_port(srv), r, world));
    }
    /* waits for every rank, up to the limit; then kills what is left */
    deadline = now_s() + o.limit_s;
    left = world;
    while (left > 0) {
        int status = 0;
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p > 0) {
            for (unsigned r = 0; r < world; r++)
                if (pid[r] == p)
                    pid[r] = 0; /* reaped: never signalled again */
            left--;
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                bad++;
            continue;
        }
        if (p < 0 && errno != EINTR)
            break;
        if (now_s() > deadline) {
            fprintf(stderr, "nccl_bench: still running after %.0f s: killing the ranks\n",
                    o.limit_s);
            for (unsigned r = 0; r < world; r++)
                if (pid[r] > 0)
                    kill(pid[r], SIGKILL);
            while (waitpid(-1, &status, 0) > 0)
                ;
            bad++;
            break;
        }
        usleep(20000); /* polling the children's exit: nothing else to wait on */
    }
    accel_store_server_stop(srv);
    return bad ? 1 : 0;
}

#else /* !ACCEL_HAVE_NCCL */

int main(void)
{
    printf("nccl_bench: SKIP: built without NCCL (NO_CUDA=1 or no CUDA toolkit)\n");
    return 0;
}

#endif
