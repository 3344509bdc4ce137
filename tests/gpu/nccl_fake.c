/*
 * nccl_fake.c: the control flow of core/comm/nccl.c on any machine, against
 * a scripted stand-in for NCCL and the CUDA runtime defined in this file
 * (tests/gpu/fake.sh links it instead of -lnccl -lcudart).  The real
 * libraries are tested on a GPU by nccl_gpu.c; this file checks what a GPU
 * run cannot force on demand: every wait ends at its deadline with an abort,
 * an asynchronous error fails the call, another rank's reported failure ends
 * a wait early, split's result is read only after NCCL's thread wrote it,
 * and free finalizes, destroys or aborts as it should.
 *
 * The stand-in: a communicator's state (ncclCommGetAsyncError) stays
 * ncclInProgress for a scripted number of polls (or forever), then becomes
 * the scripted result; a stream is busy for a scripted number of queries.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "accel/comm.h"
#include "accel/store.h"
#include "test.h"
#include "../../core/comm/nccl_int.h"

#define FOREVER (-1)

/* ---------------------------------------------------------------- the script */

static struct {
    int devices;                /* cudaGetDeviceCount */
    ncclResult_t uid_result;    /* ncclGetUniqueId */
    ncclResult_t init_result;   /* returned by ncclCommInitRankConfig */
    int init_polls;             /* polls in progress after init, FOREVER */
    ncclResult_t init_final;    /* state after those polls */
    int op_polls;               /* polls in progress after a collective */
    int stream_busy;            /* cudaStreamQuery answers NotReady this often, FOREVER */
    ncclResult_t async_after;   /* state once the stream has been queried async_polls times */
    int async_polls;            /* 0 = never */
    int split_polls;            /* parent in progress after ncclCommSplit */
    ncclResult_t split_final;   /* parent's state after those polls */
    int split_rank, split_size; /* of the new communicator */
    int finalize_polls;         /* FOREVER: finalize never completes */
} fake;

static struct {
    unsigned inits, aborts, destroys, finalizes, splits, colls, streams, streams_destroyed;
    char log[512]; /* "A" abort, "D" destroy, "F" finalize, "S" split, ... in order */
} seen;

struct ncclComm {
    int rank, nranks, polls;
    ncclResult_t state, final;
    ncclComm_t *split_out; /* where a split in progress writes its result */
    ncclComm_t split_child;
};

struct CUstream_st {
    int busy;
};

static void note(char ch)
{
    size_t n = strlen(seen.log);
    if (n + 1 < sizeof(seen.log)) {
        seen.log[n] = ch;
        seen.log[n + 1] = '\0';
    }
}

static void script_defaults(void)
{
    memset(&fake, 0, sizeof(fake));
    memset(&seen, 0, sizeof(seen));
    fake.devices = 1;
    fake.init_polls = 3;
    fake.op_polls = 2;
    fake.stream_busy = 3;
    fake.split_polls = 3;
    fake.split_rank = 0;
    fake.split_size = 1;
    fake.finalize_polls = 2;
}

static ncclComm_t new_comm(int rank, int nranks, int polls, ncclResult_t final)
{
    ncclComm_t c = calloc(1, sizeof(*c));
    ASSERT(c != NULL);
    c->rank = rank;
    c->nranks = nranks;
    c->polls = polls;
    c->state = polls == 0 ? final : ncclInProgress;
    c->final = final;
    return c;
}

/* ---------------------------------------------------------------- CUDA stand-in */

cudaError_t cudaGetDeviceCount(int *count)
{
    *count = fake.devices;
    return fake.devices > 0 ? cudaSuccess : cudaErrorNoDevice;
}

const char *cudaGetErrorName(cudaError_t e)
{
    return e == cudaSuccess ? "cudaSuccess" : "cudaErrorFake";
}

const char *cudaGetErrorString(cudaError_t e)
{
    return e == cudaSuccess ? "no error" : "fake CUDA error";
}

cudaError_t cudaGetLastError(void)
{
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int d)
{
    return d < fake.devices ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaGetDevice(int *d)
{
    *d = 0;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t n)
{
    *p = malloc(n);
    return *p != NULL ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void *p)
{
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int v, size_t n)
{
    memset(p, v, n);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
    (void)s;
    memset(p, v, n);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k)
{
    (void)k;
    memmove(d, s, n);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    (void)s;
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    (void)flags;
    *s = calloc(1, sizeof(**s));
    seen.streams++;
    return *s != NULL ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    seen.streams_destroyed++;
    free(s);
    return cudaSuccess;
}

/* The stream is busy after each collective for fake.stream_busy queries. */
static unsigned queries;
static ncclComm_t last_comm;

cudaError_t cudaStreamQuery(cudaStream_t s)
{
    queries++;
    if (fake.async_polls > 0 && queries >= (unsigned)fake.async_polls && last_comm != NULL)
        last_comm->state = fake.async_after;
    if (s->busy == FOREVER)
        return cudaErrorNotReady;
    if (s->busy > 0) {
        s->busy--;
        return cudaErrorNotReady;
    }
    return cudaSuccess;
}

/* ---------------------------------------------------------------- NCCL stand-in */

const char *ncclGetErrorString(ncclResult_t r)
{
    return r == ncclSuccess ? "no error" : "fake NCCL error";
}

const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return "fake last error";
}

ncclResult_t ncclGetVersion(int *v)
{
    *v = 22809;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    if (fake.uid_result != ncclSuccess)
        return fake.uid_result;
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++)
        id->internal[i] = (char)(i * 7 + (int)getpid());
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *cfg)
{
    (void)id;
    ASSERT_INT_EQ(cfg->blocking, 0);
    seen.inits++;
    note('I');
    *comm = new_comm(rank, nranks, fake.init_polls, fake.init_final);
    last_comm = *comm;
    return fake.init_result != ncclSuccess ? fake.init_result : (*comm)->state;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *st)
{
    if (c == NULL)
        return ncclInvalidArgument;
    if (c->state == ncclInProgress && c->polls != FOREVER && --c->polls <= 0) {
        c->state = c->final;
        if (c->split_out != NULL) { /* NCCL's thread writes the result, then reports */
            *c->split_out = c->split_child;
            c->split_out = NULL;
        }
    }
    *st = c->state;
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t c)
{
    if (c == NULL)
        return ncclSuccess;
    seen.aborts++;
    note('A');
    if (c->split_out != NULL) /* joins the split thread, which writes its result */
        *c->split_out = c->split_child;
    if (last_comm == c)
        last_comm = NULL;
    free(c);
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t c)
{
    seen.finalizes++;
    note('F');
    c->polls = fake.finalize_polls;
    c->final = ncclSuccess;
    c->state = ncclInProgress;
    return ncclInProgress;
}

ncclResult_t ncclCommDestroy(ncclComm_t c)
{
    seen.destroys++;
    note('D');
    ASSERT(c->state == ncclSuccess); /* NCCL refuses a comm still in progress */
    if (last_comm == c)
        last_comm = NULL;
    free(c);
    return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *cfg)
{
    (void)key;
    ASSERT_INT_EQ(cfg->blocking, 0);
    ASSERT(comm->state == ncclSuccess);
    seen.splits++;
    note('S');
    *newcomm = NULL; /* NULL until the split completes */
    comm->polls = fake.split_polls;
    comm->final = fake.split_final;
    comm->state = ncclInProgress;
    comm->split_out = newcomm;
    comm->split_child = color == NCCL_SPLIT_NOCOLOR || fake.split_final != ncclSuccess
                            ? NULL
                            : new_comm(fake.split_rank, fake.split_size, 0, ncclSuccess);
    return ncclInProgress;
}

ncclResult_t ncclCommUserRank(const ncclComm_t c, int *r)
{
    *r = c->rank;
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t c, int *n)
{
    *n = c->nranks;
    return ncclSuccess;
}

static ncclResult_t coll(ncclComm_t c, cudaStream_t s)
{
    ASSERT(c->state == ncclSuccess); /* NCCL refuses a comm still in progress */
    seen.colls++;
    note('C');
    s->busy = fake.stream_busy;
    c->polls = fake.op_polls;
    c->final = ncclSuccess;
    c->state = fake.op_polls == 0 ? ncclSuccess : ncclInProgress;
    last_comm = c;
    return c->state;
}

ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t c, cudaStream_t st)
{
    (void)s, (void)r, (void)n, (void)t, (void)op;
    return coll(c, st);
}

ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t c, cudaStream_t st)
{
    (void)s, (void)r, (void)n, (void)t, (void)op;
    return coll(c, st);
}

ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c,
                           cudaStream_t st)
{
    (void)s, (void)r, (void)n, (void)t;
    return coll(c, st);
}

ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                           ncclComm_t c, cudaStream_t st)
{
    (void)s, (void)r, (void)n, (void)t, (void)root;
    return coll(c, st);
}

/* ---------------------------------------------------------------- helpers */

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct accel_store_server *srv;
static struct accel_store *st;

static void store_up(unsigned rank, unsigned world)
{
    struct accel_store_server_opts so = {.bind_addr = "127.0.0.1", .port = 0};
    struct accel_store_opts o = {.host = "127.0.0.1", .timeout_s = 10};
    struct accel_error err;

    so.nonce = o.nonce = accel_store_nonce("nccl_fake", "0");
    if (srv == NULL && accel_store_server_start(&srv, &so, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "server: %s", err.msg);
    o.port = accel_store_server_port(srv);
    o.rank = rank;
    o.world = world;
    if (accel_store_connect(&st, &o, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "connect: %s", err.msg);
}

static enum accel_err open_comm(struct accel_comm **c, unsigned rank, unsigned world,
                                double timeout_s, struct accel_error *err)
{
    struct accel_comm_opts o = {.backend = "nccl", .timeout_s = timeout_s, .cuda_device = 0};

    return accel_comm_init(c, st, rank, world, &o, err);
}

static char buf_a[4096], buf_b[4096];

/* ---------------------------------------------------------------- cases */

TEST(healthy_life_cycle)
{
    struct accel_comm *c = NULL, *child = NULL, *none = NULL;
    struct accel_error err;

    script_defaults();
    store_up(0, 1);
    ASSERT_OK(open_comm(&c, 0, 1, 5, &err));
    ASSERT_STR_EQ(accel_comm_backend(c), "nccl");
    ASSERT_OK(accel_all_reduce(c, buf_a, buf_b, 10, ACCEL_BF16, ACCEL_AVG, &err));
    ASSERT_OK(accel_reduce_scatter(c, buf_a, buf_b, 10, ACCEL_F16, ACCEL_SUM, &err));
    ASSERT_OK(accel_all_gather(c, buf_a, buf_b, 10, ACCEL_F32, &err));
    ASSERT_OK(accel_broadcast(c, buf_a, buf_b, 10, ACCEL_F32, 0, &err));
    ASSERT_OK(accel_comm_sync(c, &err));
    ASSERT_OK(accel_comm_barrier(c, &err));
    fake.split_rank = 0;
    fake.split_size = 1;
    ASSERT_OK(accel_comm_split(c, 2, 0, &child, &err));
    ASSERT(child != NULL);
    ASSERT_INT_EQ(accel_comm_size(child), 1);
    ASSERT_OK(accel_all_reduce(child, buf_a, buf_b, 10, ACCEL_F32, ACCEL_SUM, &err));
    ASSERT_OK(accel_comm_sync(child, &err));
    ASSERT_OK(accel_comm_split(c, -1, 0, &none, &err));
    ASSERT(none == NULL);
    accel_comm_free(child);
    accel_comm_free(c);
    test_note("calls: %s", seen.log);
    ASSERT_INT_EQ(seen.aborts, 0);
    ASSERT_INT_EQ(seen.finalizes, 2);
    ASSERT_INT_EQ(seen.destroys, 2);
    ASSERT_INT_EQ(seen.streams, seen.streams_destroyed);
    ASSERT_INT_EQ(seen.colls, 6); /* 4 + barrier + child's */
}

TEST(init_deadline_aborts)
{
    struct accel_comm *c = NULL;
    struct accel_error err;
    double t0;

    script_defaults();
    fake.init_polls = FOREVER;
    store_up(0, 2);
    t0 = now_s();
    ASSERT_INT_EQ(open_comm(&c, 0, 2, 0.5, &err), ACCEL_ETIMEDOUT);
    test_note("%.2f s: %s", now_s() - t0, err.msg);
    ASSERT(c == NULL);
    ASSERT(now_s() - t0 >= 0.5 && now_s() - t0 < 3);
    ASSERT_CONTAINS(err.msg, "rank 0 of 2: nccl: init did not complete within 0.5 s");
    ASSERT_INT_EQ(seen.aborts, 1);
    ASSERT_INT_EQ(seen.destroys, 0);
    ASSERT_INT_EQ(seen.streams, seen.streams_destroyed);
}

TEST(init_errors)
{
    struct accel_comm *c = NULL;
    struct accel_error err;

    script_defaults();
    fake.init_result = ncclInvalidUsage;
    store_up(0, 1);
    ASSERT_INT_EQ(open_comm(&c, 0, 1, 5, &err), ACCEL_EINVAL);
    test_note("%s", err.msg);
    ASSERT_CONTAINS(err.msg, "init failed after");
    ASSERT_CONTAINS(err.msg, "ncclInvalidUsage (fake NCCL error): fake last error");
    ASSERT_INT_EQ(seen.aborts, 1);

    script_defaults();
    fake.init_final = ncclRemoteError; /* an asynchronous error while it polls */
    ASSERT_INT_EQ(open_comm(&c, 0, 1, 5, &err), ACCEL_EPEER);
    ASSERT_CONTAINS(err.msg, "ncclRemoteError");
    ASSERT_INT_EQ(seen.aborts, 1);

    script_defaults();
    fake.devices = 0;
    ASSERT_INT_EQ(open_comm(&c, 0, 1, 5, &err), ACCEL_EUNSUPPORTED);
    ASSERT_CONTAINS(err.msg, "no CUDA device");
    ASSERT_INT_EQ(seen.inits, 0);

    script_defaults();
    fake.devices = 2;
    {
        struct accel_comm_opts o = {.backend = "nccl", .timeout_s = 5, .cuda_device = 2};
        ASSERT_INT_EQ(accel_comm_init(&c, st, 0, 1, &o, &err), ACCEL_EINVAL);
        ASSERT_CONTAINS(err.msg, "CUDA device 2 asked for, this process sees 2");
    }
    ASSERT(c == NULL);
}

/* One forked rank of a world-2 init; returns its code, message in msg. */
static int fake_rank(unsigned port, unsigned rank, int devices, int init_polls, char *msg, size_t n,
                     double *seconds)
{
    struct accel_store_opts o = {.host = "127.0.0.1", .port = port, .timeout_s = 10};
    struct accel_comm *c = NULL;
    struct accel_error err;
    struct accel_store *s = NULL;
    double t0 = now_s();
    int rc;

    script_defaults();
    fake.devices = devices;
    fake.init_polls = init_polls;
    o.nonce = accel_store_nonce("nccl_fake", "0");
    o.rank = rank;
    o.world = 2;
    if (accel_store_connect(&s, &o, &err) != ACCEL_OK)
        return -1;
    {
        struct accel_comm_opts co = {.backend = "nccl", .timeout_s = 20, .cuda_device = 0};
        rc = accel_comm_init(&c, s, rank, 2, &co, &err);
    }
    *seconds = now_s() - t0;
    snprintf(msg, n, "%s", err.msg);
    accel_comm_free(c);
    accel_store_close(s);
    return rc;
}

/* Rank 1 has no device and says so; rank 0, whose init would never finish,
 * stops at once with ACCEL_EPEER and rank 1's reason.  Then the other way
 * round: rank 0 has no device, and rank 1 learns it from the id key. */
TEST(peer_failure_ends_the_wait)
{
    int fd[2];
    char msg[768];
    double secs = 0;
    pid_t pid;
    int status = 0, rc;
    unsigned port;

    script_defaults();
    store_up(0, 2);
    port = accel_store_server_port(srv);
    accel_store_close(st);
    st = NULL;
    for (int round = 0; round < 2; round++) {
        unsigned failing = round == 0 ? 1 : 0;
        ASSERT_INT_EQ(pipe(fd), 0);
        fflush(stdout);
        pid = fork();
        ASSERT(pid >= 0);
        if (pid == 0) {
            int r = fake_rank(port, failing, 0, FOREVER, msg, sizeof(msg), &secs);
            if (write(fd[1], msg, sizeof(msg)) != (ssize_t)sizeof(msg))
                _exit(2);
            _exit(r == ACCEL_EUNSUPPORTED ? 0 : 1);
        }
        close(fd[1]);
        rc = fake_rank(port, 1 - failing, 1, FOREVER, msg, sizeof(msg), &secs);
        test_note("rank %u: %.2f s: %s", 1 - failing, secs, msg);
        ASSERT_INT_EQ(rc, ACCEL_EPEER);
        ASSERT(secs < 5);
        if (failing == 1) {
            ASSERT_CONTAINS(msg, "rank 0 of 2: nccl: init: another rank failed after");
            ASSERT_CONTAINS(msg, "rank 1 of 2: nccl: no CUDA device");
        } else {
            ASSERT_CONTAINS(msg, "rank 1 of 2: nccl: rank 0 failed: rank 0 of 2: nccl: no CUDA");
        }
        ASSERT_INT_EQ(read(fd[0], msg, sizeof(msg)), (long long)sizeof(msg));
        test_note("rank %u: %s", failing, msg);
        close(fd[0]);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
}

TEST(sync_deadline_and_async_error)
{
    struct accel_comm *c = NULL;
    struct accel_error err;
    double t0;

    script_defaults();
    store_up(0, 1);
    ASSERT_OK(open_comm(&c, 0, 1, 0.4, &err));
    fake.stream_busy = FOREVER;
    ASSERT_OK(accel_all_reduce(c, buf_a, buf_b, 10, ACCEL_F32, ACCEL_SUM, &err));
    t0 = now_s();
    ASSERT_INT_EQ(accel_comm_sync(c, &err), ACCEL_ETIMEDOUT);
    test_note("%.2f s: %s", now_s() - t0, err.msg);
    ASSERT(now_s() - t0 >= 0.4 && now_s() - t0 < 3);
    ASSERT_CONTAINS(err.msg, "rank 0 of 1: nccl: sync: the queued operations did not complete");
    ASSERT_INT_EQ(seen.aborts, 1);
    /* comm.c refuses everything after that; free does not abort twice */
    ASSERT_INT_EQ(accel_all_reduce(c, buf_a, buf_b, 10, ACCEL_F32, ACCEL_SUM, &err), ACCEL_EINVAL);
    accel_comm_free(c);
    ASSERT_INT_EQ(seen.aborts, 1);
    ASSERT_INT_EQ(seen.destroys, 0);
    ASSERT_INT_EQ(seen.streams, seen.streams_destroyed);

    /* a peer dies while the stream waits: NCCL's asynchronous error */
    script_defaults();
    ASSERT_OK(open_comm(&c, 0, 1, 30, &err));
    fake.stream_busy = FOREVER;
    fake.async_after = ncclRemoteError;
    fake.async_polls = 50;
    queries = 0;
    ASSERT_OK(accel_all_gather(c, buf_a, buf_b, 10, ACCEL_F32, &err));
    t0 = now_s();
    ASSERT_INT_EQ(accel_comm_sync(c, &err), ACCEL_EPEER);
    test_note("%.2f s: %s", now_s() - t0, err.msg);
    ASSERT(now_s() - t0 < 5);
    ASSERT_CONTAINS(err.msg, "ncclRemoteError");
    accel_comm_free(c);
    ASSERT_INT_EQ(seen.aborts, 1);

    /* an error raised since the last call fails the next one at once */
    script_defaults();
    ASSERT_OK(open_comm(&c, 0, 1, 30, &err));
    ASSERT_OK(accel_broadcast(c, buf_a, buf_b, 10, ACCEL_F32, 0, &err));
    ASSERT(last_comm != NULL);
    ASSERT_OK(accel_comm_sync(c, &err));
    last_comm->state = ncclSystemError;
    ASSERT_INT_EQ(accel_all_reduce(c, buf_a, buf_b, 10, ACCEL_F32, ACCEL_SUM, &err), ACCEL_EPEER);
    ASSERT_CONTAINS(err.msg, "all_reduce: ncclSystemError");
    accel_comm_free(c);
    ASSERT_INT_EQ(seen.aborts, 1);
}

TEST(queuing_that_never_ends)
{
    struct accel_comm *c = NULL;
    struct accel_error err;

    script_defaults();
    store_up(0, 1);
    ASSERT_OK(open_comm(&c, 0, 1, 0.3, &err));
    fake.op_polls = FOREVER;
    ASSERT_INT_EQ(accel_reduce_scatter(c, buf_a, buf_b, 10, ACCEL_F32, ACCEL_AVG, &err),
                  ACCEL_ETIMEDOUT);
    ASSERT_CONTAINS(err.msg, "reduce_scatter did not complete within 0.3 s");
    accel_comm_free(c);
    ASSERT_INT_EQ(seen.aborts, 1);
}

TEST(split_failure_aborts_parent_first)
{
    struct accel_comm *c = NULL, *child = NULL;
    struct accel_error err;

    script_defaults();
    store_up(0, 1);
    ASSERT_OK(open_comm(&c, 0, 1, 0.3, &err));
    fake.split_polls = FOREVER;
    ASSERT_INT_EQ(accel_comm_split(c, 1, 0, &child, &err), ACCEL_ETIMEDOUT);
    test_note("%s; calls %s", err.msg, seen.log);
    ASSERT(child == NULL);
    ASSERT_CONTAINS(err.msg, "split did not complete within 0.3 s");
    /* the parent's abort lets the split thread write its result, which is
     * then aborted too: parent first, then child */
    ASSERT_CONTAINS(seen.log, "SAA");
    accel_comm_free(c);
    ASSERT_INT_EQ(seen.aborts, 2);

    script_defaults();
    ASSERT_OK(open_comm(&c, 0, 1, 5, &err));
    fake.split_final = ncclInternalError;
    ASSERT_INT_EQ(accel_comm_split(c, 1, 0, &child, &err), ACCEL_EIO);
    ASSERT_CONTAINS(err.msg, "split failed after");
    accel_comm_free(c);
    ASSERT_INT_EQ(seen.aborts, 1);
}

TEST(free_aborts_when_finalize_hangs)
{
    struct accel_comm *c = NULL;
    struct accel_error err;
    double t0;

    script_defaults();
    store_up(0, 1);
    ASSERT_OK(open_comm(&c, 0, 1, 0.3, &err));
    fake.finalize_polls = FOREVER;
    t0 = now_s();
    accel_comm_free(c);
    ASSERT(now_s() - t0 >= 0.3 && now_s() - t0 < 3);
    ASSERT_STR_EQ(seen.log, "IFA");
}

TEST(unique_id_failure_reaches_the_others)
{
    unsigned char id[ACCEL_NCCL_ID_BYTES];
    struct accel_error err;
    struct accel_store *s1 = NULL;
    struct accel_store_opts o = {.host = "127.0.0.1", .timeout_s = 5};

    script_defaults();
    fake.uid_result = ncclSystemError;
    store_up(0, 2);
    ASSERT_INT_EQ(comm__nccl_exchange_id(st, "u/", 0, 2, id, &err), ACCEL_EIO);
    ASSERT_CONTAINS(err.msg, "couldn't make the unique id: ncclSystemError");
    o.port = accel_store_server_port(srv);
    o.nonce = accel_store_nonce("nccl_fake", "0");
    o.rank = 1;
    o.world = 2;
    ASSERT_OK(accel_store_connect(&s1, &o, &err));
    ASSERT_INT_EQ(comm__nccl_exchange_id(s1, "u/", 1, 2, id, &err), ACCEL_EPEER);
    test_note("%s", err.msg);
    ASSERT_CONTAINS(err.msg, "rank 0 failed: nccl: couldn't make the unique id: ncclSystemError");
    accel_store_close(s1);
}

TEST_LIST(T(healthy_life_cycle), T(init_deadline_aborts), T(init_errors),
          T(peer_failure_ends_the_wait), T(sync_deadline_and_async_error),
          T(queuing_that_never_ends), T(split_failure_aborts_parent_first),
          T(free_aborts_when_finalize_hangs), T(unique_id_failure_reaches_the_others))
