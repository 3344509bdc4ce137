/*
 * bench/comm.c: time the socket backend's collectives the way nccl-tests
 * does, for bench/comm.sh to set beside Open MPI.
 *
 *   comm [--env | --ranks N] [--op all_reduce|all_gather|reduce_scatter]
 *        [--min BYTES] [--max BYTES] [--chunk BYTES]
 *
 * Starts a store server, forks N ranks that meet in it (one process each, as
 * in a job), and for each size from --min to --max (x4) runs warm-up
 * iterations, a barrier, then `iters` back-to-back operations on fp32.  A
 * rank's time is the mean over its iterations; the line printed is the
 * slowest rank's: "op ranks bytes time_us".  bytes is nccl-tests' size: the
 * whole buffer (all_reduce: count x 4; all_gather: the gathered buffer;
 * reduce_scatter: the scattered one).  With --env it is one rank of a job
 * its launcher started (srun --accel-config, accelrun launch: RANK,
 * WORLD_SIZE, MASTER_ADDR, MASTER_PORT), on one host or several, and rank 0
 * prints the same lines.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "accel/comm.h"
#include "accel/store.h"

#define NONCE 0xbe9c4a11u

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* iterations for a size: about 512 MiB moved, within [3, 200] */
static int iters_for(size_t bytes)
{
    size_t n = (512u << 20) / bytes;
    return n < 3 ? 3 : n > 200 ? 200 : (int)n;
}

static int run_op(struct accel_comm *c, const char *op, float *send, float *recv, size_t bytes,
                  struct accel_error *err)
{
    unsigned n = accel_comm_size(c);
    size_t count = bytes / 4;

    if (strcmp(op, "all_reduce") == 0)
        return accel_all_reduce(c, send, recv, count, ACCEL_F32, ACCEL_SUM, err);
    if (strcmp(op, "all_gather") == 0)
        return accel_all_gather(c, send, recv, count / n, ACCEL_F32, err);
    return accel_reduce_scatter(c, send, recv, count / n, ACCEL_F32, ACCEL_SUM, err);
}

/* Runs every size on communicator c; each size's mean time per operation
 * (seconds) goes to `fd` (a forked rank) or, with fd < 0 (--env), is
 * gathered, and rank 0 prints the slowest rank's. */
static int run_sizes(struct accel_comm *c, const char *op, size_t min, size_t max, int fd,
                     struct accel_error *err)
{
    unsigned n = accel_comm_size(c);
    float *send = malloc(max), *recv = malloc(max), times[64];

    if (send == NULL || recv == NULL) {
        snprintf(err->msg, sizeof(err->msg), "out of memory");
        return 1;
    }
    for (size_t i = 0; i < max / 4; i++)
        send[i] = recv[i] = 1.0f;
    for (size_t bytes = min; bytes <= max; bytes *= 4) {
        int iters = iters_for(bytes), warm = bytes < (1u << 20) ? 5 : 1;
        double t0, t;
        float tf;

        for (int i = 0; i < warm; i++)
            if (run_op(c, op, send, recv, bytes, err) != ACCEL_OK)
                return 1;
        if (accel_comm_barrier(c, err) != ACCEL_OK)
            return 1;
        t0 = now_s();
        for (int i = 0; i < iters; i++)
            if (run_op(c, op, send, recv, bytes, err) != ACCEL_OK)
                return 1;
        t = (now_s() - t0) / iters;
        if (fd >= 0) {
            if (write(fd, &t, sizeof(t)) != (ssize_t)sizeof(t))
                return 1;
            continue;
        }
        tf = (float)t;
        if (accel_all_gather(c, &tf, times, 1, ACCEL_F32, err) != ACCEL_OK)
            return 1;
        for (unsigned r = 0; r < n; r++)
            if (times[r] > tf)
                tf = times[r];
        if (accel_comm_rank(c) == 0) {
            printf("%s %u %zu %.1f\n", op, n, bytes, tf * 1e6);
            fflush(stdout);
        }
    }
    free(send);
    free(recv);
    return 0;
}

static int rank_main(unsigned port, unsigned rank, unsigned n, const char *op, size_t min,
                     size_t max, size_t chunk, int fd)
{
    struct accel_store_opts so = {0};
    struct accel_comm_opts co = {0};
    struct accel_store *st = NULL;
    struct accel_comm *c = NULL;
    struct accel_error err;

    so.host = "127.0.0.1";
    so.port = port;
    so.nonce = NONCE;
    so.rank = rank;
    so.world = n;
    so.timeout_s = 120;
    co.backend = "socket";
    co.timeout_s = 120;
    co.chunk_bytes = chunk;
    co.nonce = NONCE;
    if (accel_store_connect(&st, &so, &err) != ACCEL_OK ||
        accel_comm_init(&c, st, rank, n, &co, &err) != ACCEL_OK ||
        run_sizes(c, op, min, max, fd, &err) != 0) {
        fprintf(stderr, "comm: rank %u: %s\n", rank, err.msg);
        return 1;
    }
    accel_comm_free(c);
    accel_store_close(st);
    return 0;
}

/* --env: one rank of a job whose launcher set RANK, WORLD_SIZE, MASTER_ADDR
 * and MASTER_PORT (srun --accel-config, accelrun launch): the ranks may be
 * on several hosts. */
static int env_main(const char *op, size_t min, size_t max, size_t chunk)
{
    struct accel_bootstrap b = {0};
    struct accel_comm_opts co = {0};
    struct accel_comm *c = NULL;
    struct accel_error err;
    int rc = 1;

    if (accel_bootstrap_init(&b, &err) != ACCEL_OK) {
        fprintf(stderr, "comm: %s\n", err.msg);
        return 1;
    }
    co.backend = "socket";
    co.timeout_s = b.timeout_s;
    co.chunk_bytes = chunk;
    co.nonce = b.nonce;
    if (b.world > 64 || min < 4 * b.world)
        snprintf(err.msg, sizeof(err.msg), "64 ranks at most, and --min of 4 bytes a rank");
    else if (accel_comm_init(&c, b.store, b.rank, b.world, &co, &err) == ACCEL_OK)
        rc = run_sizes(c, op, min, max, -1, &err);
    if (rc != 0) {
        fprintf(stderr, "comm: rank %u: %s\n", b.rank, err.msg);
        b.failed = true;
    }
    accel_comm_free(c);
    accel_bootstrap_free(&b);
    return rc;
}

int main(int argc, char **argv)
{
    const char *op = "all_reduce";
    unsigned n = 2;
    size_t min = 4096, max = 256u << 20, chunk = 0;
    struct accel_store_server_opts so = {0};
    struct accel_store_server *srv = NULL;
    struct accel_error err;
    pid_t pids[64];
    int fds[64], rc = 0;
    bool env = false;

    for (int i = 1; i < argc; i += 2) {
        if (strcmp(argv[i], "--env") == 0) {
            env = true;
            i--;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "comm: %s needs a value\n", argv[i]);
            return 2;
        }
        if (strcmp(argv[i], "--op") == 0)
            op = argv[i + 1];
        else if (strcmp(argv[i], "--ranks") == 0)
            n = (unsigned)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--min") == 0)
            min = strtoull(argv[i + 1], NULL, 0);
        else if (strcmp(argv[i], "--max") == 0)
            max = strtoull(argv[i + 1], NULL, 0);
        else if (strcmp(argv[i], "--chunk") == 0)
            chunk = strtoull(argv[i + 1], NULL, 0);
        else {
            fprintf(stderr, "comm: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (n < 1 || n > 64 || min < 4 * n || max < min ||
        (strcmp(op, "all_reduce") != 0 && strcmp(op, "all_gather") != 0 &&
         strcmp(op, "reduce_scatter") != 0)) {
        fprintf(stderr, "usage: comm [--env | --ranks N] [--op all_reduce|all_gather|reduce_scatter] "
                        "[--min BYTES] [--max BYTES] [--chunk BYTES]\n");
        return 2;
    }
    if (env)
        return env_main(op, min, max, chunk);
    so.bind_addr = "127.0.0.1";
    so.nonce = NONCE;
    if (accel_store_server_start(&srv, &so, &err) != ACCEL_OK) {
        fprintf(stderr, "comm: %s\n", err.msg);
        return 1;
    }
    for (unsigned r = 0; r < n; r++) {
        int p[2];
        if (pipe(p) != 0)
            return 1;
        fflush(stdout);
        pids[r] = fork();
        if (pids[r] == 0) {
            close(p[0]);
            _exit(rank_main(accel_store_server_port(srv), r, n, op, min, max, chunk, p[1]));
        }
        close(p[1]);
        fds[r] = p[0];
    }
    for (size_t bytes = min; bytes <= max; bytes *= 4) {
        double worst = 0, t;
        for (unsigned r = 0; r < n; r++) {
            if (read(fds[r], &t, sizeof(t)) != (ssize_t)sizeof(t)) {
                rc = 1;
                goto out;
            }
            if (t > worst)
                worst = t;
        }
        printf("%s %u %zu %.1f\n", op, n, bytes, worst * 1e6);
        fflush(stdout);
    }
out:
    for (unsigned r = 0; r < n; r++) {
        int status;
        close(fds[r]);
        waitpid(pids[r], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            rc = 1;
    }
    accel_store_server_stop(srv);
    return rc;
}
