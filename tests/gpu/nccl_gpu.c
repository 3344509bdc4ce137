/*
 * nccl_gpu.c: the nccl backend on a machine with an NVIDIA GPU, built and run
 * by tests/gpu/run.sh (never by `make unit`: it needs a device).
 *
 * On one GPU: every operation, type and reduction of a world-1 communicator
 * against a host reference, in place and out of place, on the
 * communicator's own stream and on the caller's; split; a world-2 init whose
 * rank 1 never comes (ACCEL_ETIMEDOUT at the deadline, the abort returns, the
 * GPU is usable afterwards); a world-2 init whose rank 1 fails (no device)
 * and says so in the store (ACCEL_EPEER well before the deadline); two ranks
 * on the one device, which NCCL 2.28 refuses: both fail, neither hangs.  So a
 * world above 1 with real traffic needs two GPUs: with N >= 2 the same checks run over N forked
 * ranks, then one rank dies and the others must fail within the deadline.
 *
 * Values are small integers, so sums are exact in every type and the
 * comparison is exact except for avg over a world that is not a power of 2.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "accel/alloc.h"
#include "accel/comm.h"
#include "accel/store.h"
#include "test.h"
#include "../../core/comm/dtype_int.h"
#include "../../core/comm/nccl_int.h"

#define MAX_RANKS 8

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- store */

static uint64_t nonce(void)
{
    return accel_store_nonce("nccl_gpu", "0");
}

static struct accel_store_server *start_server(void)
{
    struct accel_store_server_opts so = {.bind_addr = "127.0.0.1", .port = 0};
    struct accel_store_server *srv = NULL;
    struct accel_error err;

    so.nonce = nonce();
    if (accel_store_server_start(&srv, &so, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "accel_store_server_start: %s", err.msg);
    return srv;
}

static struct accel_store *connect_store(unsigned port, unsigned rank, unsigned world)
{
    struct accel_store_opts o = {.host = "127.0.0.1", .port = port, .timeout_s = 30};
    struct accel_store *s = NULL;
    struct accel_error err;

    o.nonce = nonce();
    o.rank = rank;
    o.world = world;
    if (accel_store_connect(&s, &o, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "rank %u: accel_store_connect: %s", rank, err.msg);
    return s;
}

static struct accel_comm *comm_open(struct accel_store *s, unsigned rank, unsigned world, int dev,
                                    void *stream, double timeout_s)
{
    struct accel_comm_opts o = {.backend = "nccl", .timeout_s = timeout_s, .cuda_device = dev};
    struct accel_comm *c = NULL;
    struct accel_error err;

    o.cuda_stream = stream;
    if (accel_comm_init(&c, s, rank, world, &o, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "rank %u of %u: accel_comm_init: %s", rank, world, err.msg);
    ASSERT_STR_EQ(accel_comm_backend(c), "nccl");
    ASSERT_INT_EQ(accel_comm_rank(c), rank);
    ASSERT_INT_EQ(accel_comm_size(c), world);
    return c;
}

/* ---------------------------------------------------------------- checks */

enum kind { K_ALL_REDUCE, K_REDUCE_SCATTER, K_ALL_GATHER, K_BROADCAST };
static const char *const kind_name[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast"};

/* Element i of rank r's send buffer: a small integer, exact in bf16. */
static float value(unsigned r, size_t i)
{
    return (float)((int)((i * 7 + r * 3) % 9) - 4);
}

static void *host_buf(size_t n, enum accel_dtype t)
{
    void *p = accel_malloc(n * accel_dtype_size(t) + 1);
    ASSERT(p != NULL);
    return p;
}

/* Runs one operation on `count` elements (per rank's slice) and compares it
 * with the host reference. */
static void check_one(struct accel_comm *c, enum kind k, enum accel_dtype t, enum accel_redop op,
                      size_t count, bool inplace)
{
    unsigned rank = accel_comm_rank(c), n = accel_comm_size(c), root = n - 1;
    size_t es = accel_dtype_size(t);
    size_t nsend = k == K_REDUCE_SCATTER ? (size_t)n * count : count;
    size_t nrecv = k == K_ALL_GATHER ? (size_t)n * count : count;
    size_t nbig = nsend > nrecv ? nsend : nrecv;
    float *f = accel_malloc((nbig + 1) * sizeof(float)), *want = accel_malloc((nbig + 1) * 4);
    void *h = host_buf(nbig, t), *got = host_buf(nbig, t);
    float *gotf = accel_malloc((nbig + 1) * sizeof(float));
    void *dsend = NULL, *drecv = NULL;
    struct accel_error err;
    enum accel_err rc = ACCEL_OK;
    /* sums of small integers are exact; avg over a world that is not a power
     * of 2 rounds (NCCL may scale each input before adding: several
     * roundings), so it gets a few units in the last place of the type */
    double tol = t == ACCEL_F32 ? 1e-6 : t == ACCEL_F16 ? 4e-3 : 3e-2;

    ASSERT(f != NULL && want != NULL && gotf != NULL);
    ASSERT_OK(comm__nccl_dev_alloc(&drecv, nbig * es, &err));
    dsend = drecv;
    if (!inplace)
        ASSERT_OK(comm__nccl_dev_alloc(&dsend, nbig * es, &err));
    ASSERT_OK(comm__nccl_fill(drecv, 0xff, nbig * es, &err)); /* NaN pattern */

    /* the send data, and where it goes */
    for (size_t i = 0; i < nsend; i++)
        f[i] = value(rank, i);
    comm__from_f32(h, f, nsend, t);
    if (k == K_ALL_GATHER && inplace)
        ASSERT_OK(comm__nccl_copy((char *)drecv + (size_t)rank * count * es, h, count * es, &err));
    else
        ASSERT_OK(comm__nccl_copy(dsend, h, nsend * es, &err));

    switch (k) {
    case K_ALL_REDUCE:
        rc = accel_all_reduce(c, dsend, drecv, count, t, op, &err);
        break;
    case K_REDUCE_SCATTER:
        rc = accel_reduce_scatter(c, dsend,
                                  inplace ? (char *)dsend + (size_t)rank * count * es : drecv,
                                  count, t, op, &err);
        break;
    case K_ALL_GATHER:
        rc = accel_all_gather(c, inplace ? (char *)drecv + (size_t)rank * count * es : dsend, drecv,
                              count, t, &err);
        break;
    case K_BROADCAST:
        rc = accel_broadcast(c, dsend, drecv, count, t, root, &err);
        break;
    }
    if (rc == ACCEL_OK)
        rc = accel_comm_sync(c, &err);
    if (rc != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "rank %u: %s %s %s count %zu%s: %s", rank, kind_name[k],
                  accel_dtype_name(t), op == ACCEL_SUM ? "sum" : "avg", count,
                  inplace ? " in place" : "", err.msg);

    /* the reference, in fp32 then rounded once to t */
    for (size_t i = 0; i < nrecv; i++) {
        double s = 0;
        switch (k) {
        case K_ALL_REDUCE:
        case K_REDUCE_SCATTER:
            for (unsigned r = 0; r < n; r++)
                s += value(r, k == K_REDUCE_SCATTER ? (size_t)rank * count + i : i);
            if (op == ACCEL_AVG)
                s /= n;
            break;
        case K_ALL_GATHER:
            s = value((unsigned)(i / (count ? count : 1)), i % (count ? count : 1));
            break;
        case K_BROADCAST:
            s = value(root, i);
            break;
        }
        want[i] = (float)s;
    }
    {
        const char *from = k == K_REDUCE_SCATTER && inplace
                               ? (const char *)dsend + (size_t)rank * count * es
                               : (const char *)drecv;
        ASSERT_OK(comm__nccl_copy(got, from, nrecv * es, &err));
    }
    comm__to_f32(gotf, got, nrecv, t);
    for (size_t i = 0; i < nrecv; i++) {
        double d = fabs((double)gotf[i] - (double)want[i]);
        if (!(d <= tol * (fabs((double)want[i]) > 1 ? fabs((double)want[i]) : 1)))
            test_fail(__FILE__, __LINE__,
                      "rank %u of %u: %s %s %s count %zu%s: element %zu is %g, want %g", rank, n,
                      kind_name[k], accel_dtype_name(t), op == ACCEL_SUM ? "sum" : "avg", count,
                      inplace ? " in place" : "", i, (double)gotf[i], (double)want[i]);
    }
    if (!inplace)
        comm__nccl_dev_free(dsend);
    comm__nccl_dev_free(drecv);
    accel_free(f);
    accel_free(want);
    accel_free(gotf);
    accel_free(h);
    accel_free(got);
}

/* Every operation, type, reduction and placement; returns the checks run. */
static unsigned check_all(struct accel_comm *c)
{
    static const size_t counts[] = {0, 1, 7, 4099, (1u << 20) + 5};
    static const enum accel_dtype types[] = {ACCEL_F32, ACCEL_BF16, ACCEL_F16};
    unsigned done = 0;
    struct accel_error err;

    for (size_t ti = 0; ti < 3; ti++)
        for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
            for (int inplace = 0; inplace < 2; inplace++) {
                for (int k = K_ALL_REDUCE; k <= K_BROADCAST; k++) {
                    check_one(c, (enum kind)k, types[ti], ACCEL_SUM, counts[ci], inplace);
                    done++;
                    if (k == K_ALL_REDUCE || k == K_REDUCE_SCATTER) {
                        check_one(c, (enum kind)k, types[ti], ACCEL_AVG, counts[ci], inplace);
                        done++;
                    }
                }
            }
    ASSERT_OK(accel_comm_barrier(c, &err));
    return done;
}

/* ---------------------------------------------------------------- one GPU */

TEST(world1_every_op_and_type)
{
    struct accel_store_server *srv = start_server();
    struct accel_store *s = connect_store(accel_store_server_port(srv), 0, 1);
    struct accel_comm *c = comm_open(s, 0, 1, 0, NULL, 60);
    double t0 = now_s();
    unsigned n = check_all(c);

    test_note("%u checks in %.2f s", n, now_s() - t0);
    accel_comm_free(c);
    accel_store_close(s);
    accel_store_server_stop(srv);
}

TEST(world1_on_the_callers_stream)
{
    struct accel_store_server *srv = start_server();
    struct accel_store *s = connect_store(accel_store_server_port(srv), 0, 1);
    cudaStream_t st = NULL;
    struct accel_comm *c;

    ASSERT_INT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_INT_EQ(cudaStreamCreate(&st), cudaSuccess);
    c = comm_open(s, 0, 1, 0, st, 60);
    check_one(c, K_ALL_REDUCE, ACCEL_BF16, ACCEL_AVG, 100003, false);
    check_one(c, K_ALL_GATHER, ACCEL_F16, ACCEL_SUM, 4099, true);
    accel_comm_free(c);
    ASSERT_INT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    ASSERT_INT_EQ(cudaStreamDestroy(st), cudaSuccess);
    accel_store_close(s);
    accel_store_server_stop(srv);
}

TEST(world1_split)
{
    struct accel_store_server *srv = start_server();
    struct accel_store *s = connect_store(accel_store_server_port(srv), 0, 1);
    struct accel_comm *c = comm_open(s, 0, 1, 0, NULL, 60), *child = NULL, *none = NULL;
    struct accel_error err;

    if (accel_comm_split(c, 5, 0, &child, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "split: %s", err.msg);
    ASSERT(child != NULL);
    ASSERT_STR_EQ(accel_comm_backend(child), "nccl");
    ASSERT_INT_EQ(accel_comm_size(child), 1);
    ASSERT_INT_EQ(accel_comm_rank(child), 0);
    check_one(child, K_ALL_REDUCE, ACCEL_F32, ACCEL_SUM, 1000, false);
    check_one(c, K_REDUCE_SCATTER, ACCEL_F32, ACCEL_AVG, 1000, true);
    if (accel_comm_split(c, -1, 0, &none, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "split with no color: %s", err.msg);
    ASSERT(none == NULL);
    check_one(child, K_BROADCAST, ACCEL_BF16, ACCEL_SUM, 1000, true);
    accel_comm_free(child);
    accel_comm_free(c);
    accel_store_close(s);
    accel_store_server_stop(srv);
}

/* Rank 1 of 2 never comes: rank 0's init ends with ACCEL_ETIMEDOUT at the
 * deadline, the abort returns, and the GPU still works afterwards. */
TEST(init_deadline_rank_missing)
{
    struct accel_store_server *srv = start_server();
    struct accel_store *s = connect_store(accel_store_server_port(srv), 0, 2);
    struct accel_comm_opts o = {.backend = "nccl", .timeout_s = 5, .cuda_device = 0};
    struct accel_comm *c = NULL;
    struct accel_error err;
    double t0 = now_s(), dt;
    enum accel_err rc = accel_comm_init(&c, s, 0, 2, &o, &err);

    dt = now_s() - t0;
    test_note("%.2f s: %s", dt, err.msg);
    ASSERT_INT_EQ(rc, ACCEL_ETIMEDOUT);
    ASSERT(c == NULL);
    ASSERT_CONTAINS(err.msg, "rank 0 of 2");
    ASSERT_CONTAINS(err.msg, "within 5.0 s");
    ASSERT(dt >= 4.5 && dt < 15);
    accel_store_close(s);
    accel_store_server_stop(srv);

    /* the device is usable after the abort */
    srv = start_server();
    s = connect_store(accel_store_server_port(srv), 0, 1);
    c = comm_open(s, 0, 1, 0, NULL, 30);
    check_one(c, K_ALL_REDUCE, ACCEL_F32, ACCEL_SUM, 4099, false);
    accel_comm_free(c);
    accel_store_close(s);
    accel_store_server_stop(srv);
}

/* Rank 1 of 2 has no device (CUDA_VISIBLE_DEVICES=""): it says so in the
 * store, and rank 0, waiting inside NCCL's init for rank 1 (whichever came
 * first), fails with ACCEL_EPEER naming rank 1's reason long before its 60 s
 * deadline. */
TEST(init_peer_failure_reported)
{
    struct accel_store_server *srv = start_server();
    unsigned port = accel_store_server_port(srv);
    struct accel_comm_opts o = {.backend = "nccl", .timeout_s = 60, .cuda_device = 0};
    struct accel_comm *c = NULL;
    struct accel_error err;
    struct accel_store *s;
    int status = 0;
    double t0, dt;
    enum accel_err rc;
    pid_t pid;

    fflush(stdout);
    pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) { /* rank 1: CUDA not touched in this process before */
        struct accel_store *s1 = connect_store(port, 1, 2);
        setenv("CUDA_VISIBLE_DEVICES", "", 1);
        rc = accel_comm_init(&c, s1, 1, 2, &o, &err);
        printf("#   rank 1: %s\n", err.msg);
        accel_store_close(s1);
        _exit(rc == ACCEL_EUNSUPPORTED ? 0 : 1);
    }
    s = connect_store(port, 0, 2);
    t0 = now_s();
    rc = accel_comm_init(&c, s, 0, 2, &o, &err);
    dt = now_s() - t0;
    test_note("rank 0: %.2f s: %s", dt, err.msg);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ASSERT_INT_EQ(rc, ACCEL_EPEER);
    ASSERT(c == NULL);
    ASSERT_CONTAINS(err.msg, "another rank failed");
    ASSERT_CONTAINS(err.msg, "rank 1 of 2: nccl: no CUDA device");
    ASSERT(dt < 20);
    accel_store_close(s);
    accel_store_server_stop(srv);
}

/* Two ranks on the one GPU: NCCL 2.28 refuses it (ncclInvalidUsage); both
 * ranks must get an error well before the 60 s deadline, none may hang. */
TEST(two_ranks_on_one_gpu_refused)
{
    struct accel_store_server *srv = start_server();
    unsigned port = accel_store_server_port(srv);
    struct accel_comm_opts o = {.backend = "nccl", .timeout_s = 60, .cuda_device = 0};
    struct accel_comm *c = NULL;
    struct accel_error err;
    struct accel_store *s;
    int status = 0;
    double t0 = now_s(), dt;
    enum accel_err rc;
    pid_t pid;

    fflush(stdout);
    pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        struct accel_store *s1 = connect_store(port, 1, 2);
        rc = accel_comm_init(&c, s1, 1, 2, &o, &err);
        printf("#   rank 1: %.2f s: %s\n", now_s() - t0, err.msg);
        accel_comm_free(c);
        accel_store_close(s1);
        _exit(rc != ACCEL_OK ? 0 : 1);
    }
    s = connect_store(port, 0, 2);
    rc = accel_comm_init(&c, s, 0, 2, &o, &err);
    dt = now_s() - t0;
    test_note("rank 0: %.2f s: %s", dt, err.msg);
    accel_comm_free(c);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ASSERT(rc != ACCEL_OK);
    ASSERT(dt < 30);
    accel_store_close(s);
    accel_store_server_stop(srv);
}

/* ---------------------------------------------------------------- N GPUs */

/* CUDA must not be initialised in a process that forks ranks: count the
 * devices in a child. */
static int probe_ngpu(void)
{
    int status = 0;
    pid_t pid;

    fflush(stdout);
    pid = fork();
    if (pid == 0)
        _exit(comm__nccl_device_count(NULL, 0) & 0x7f);
    if (pid < 0)
        return 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
}

/* One rank of the N-GPU test: every check, a split into two halves, then
 * the last rank dies and the others must fail within the 10 s deadline. */
static int gpu_rank(unsigned port, unsigned rank, unsigned world)
{
    struct accel_store *s = connect_store(port, rank, world);
    struct accel_comm *c = comm_open(s, rank, world, (int)rank, NULL, 10), *half = NULL;
    struct accel_error err;
    void *d = NULL;
    double t0;
    enum accel_err rc;

    check_all(c);
    if (accel_comm_split(c, (int)(rank % 2), (int)rank, &half, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "rank %u: split: %s", rank, err.msg);
    ASSERT_INT_EQ(accel_comm_size(half), (world + 1 - rank % 2) / 2);
    ASSERT_INT_EQ(accel_comm_rank(half), rank / 2);
    check_one(half, K_ALL_REDUCE, ACCEL_BF16, ACCEL_SUM, 4099, false);
    check_one(half, K_ALL_GATHER, ACCEL_F32, ACCEL_SUM, 4099, true);
    accel_comm_free(half);
    ASSERT_OK(accel_comm_barrier(c, &err));
    if (rank == world - 1)
        _exit(0); /* dies without a word */
    ASSERT_OK(comm__nccl_dev_alloc(&d, 1 << 20, &err));
    t0 = now_s();
    rc = accel_all_reduce(c, d, d, 1 << 18, ACCEL_F32, ACCEL_SUM, &err);
    if (rc == ACCEL_OK)
        rc = accel_comm_sync(c, &err);
    printf("#   rank %u after rank %u died: %s (%.2f s)\n", rank, world - 1, err.msg, now_s() - t0);
    ASSERT(rc == ACCEL_ETIMEDOUT || rc == ACCEL_EPEER);
    ASSERT(now_s() - t0 < 30);
    accel_comm_free(c); /* aborts: must return */
    comm__nccl_dev_free(d);
    accel_store_close(s);
    return 0;
}

TEST(world_n_every_op_and_dead_peer)
{
    int ngpu = probe_ngpu();
    unsigned world = ngpu > MAX_RANKS ? MAX_RANKS : (unsigned)ngpu;
    struct accel_store_server *srv;
    pid_t pid[MAX_RANKS];
    unsigned failed = 0;

    if (ngpu < 2)
        SKIP("one GPU: NCCL refuses two ranks on one device");
    srv = start_server();
    for (unsigned r = 0; r < world; r++) {
        fflush(stdout);
        pid[r] = fork();
        ASSERT(pid[r] >= 0);
        if (pid[r] == 0)
            _exit(gpu_rank(accel_store_server_port(srv), r, world));
    }
    for (unsigned r = 0; r < world; r++) {
        int status = 0;
        while (waitpid(pid[r], &status, 0) < 0 && errno == EINTR)
            ;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            test_note("rank %u ended with status 0x%x", r, (unsigned)status);
            failed++;
        }
    }
    accel_store_server_stop(srv);
    ASSERT_INT_EQ(failed, 0);
    test_note("world %u: every check passed; the survivors of a dead rank failed in time", world);
}

TEST_LIST(T(world1_every_op_and_type), T(world1_on_the_callers_stream), T(world1_split),
          T(init_deadline_rank_missing), T(init_peer_failure_reported),
          T(two_ranks_on_one_gpu_refused), T(world_n_every_op_and_dead_peer))
