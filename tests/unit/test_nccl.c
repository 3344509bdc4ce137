/*
 * test_nccl.c: the parts of the nccl backend that run without a GPU: the
 * unique id (ncclGetUniqueId needs only a socket interface), its exchange
 * through a real TCP store between forked ranks, and a communicator init on a
 * machine without a CUDA device, which must fail at once with a clear error.
 * The communicator and the collectives on a GPU are tested by
 * tests/gpu/run.sh.  Built without NCCL (NO_CUDA=1, no toolkit), the NCCL
 * cases SKIP and the init case checks that "nccl" is refused as not built.
 */
#include <errno.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/comm.h"
#include "accel/store.h"
#include "store_proc.h"
#include "test.h"

#ifdef ACCEL_HAVE_NCCL
#include "../../core/comm/nccl_int.h"
#endif

#define NO_NCCL "built without NCCL (NO_CUDA=1 or no CUDA toolkit)"
#define MAX_RANKS 8

static uint64_t test_nonce(void)
{
    return accel_store_nonce("test_nccl", "0");
}

static struct accel_store *connect_store(unsigned port, unsigned rank, unsigned world,
                                         double timeout_s, struct accel_error *err)
{
    struct accel_store_opts o = {.host = "127.0.0.1", .port = port};
    struct accel_store *s = NULL;

    o.nonce = test_nonce();
    o.rank = rank;
    o.world = world;
    o.timeout_s = timeout_s;
    if (accel_store_connect(&s, &o, err) != ACCEL_OK)
        return NULL;
    return s;
}

/* One forked rank's result, sent to the parent through a pipe. */
struct rank_result {
    int rc;
    double seconds;
    unsigned char id[128];
    char msg[768];
};

typedef void (*rank_fn)(unsigned port, unsigned rank, unsigned world, struct rank_result *out);

/* Runs fn in `world` forked processes and collects their results. */
static void run_ranks(unsigned port, unsigned world, rank_fn fn, struct rank_result *res)
{
    pid_t pid[MAX_RANKS];
    int fd[MAX_RANKS][2];

    ASSERT(world <= MAX_RANKS);
    for (unsigned r = 0; r < world; r++) {
        ASSERT_INT_EQ(pipe(fd[r]), 0);
        fflush(stdout);
        pid[r] = fork();
        ASSERT(pid[r] >= 0);
        if (pid[r] == 0) {
            struct rank_result out;
            memset(&out, 0, sizeof(out));
            close(fd[r][0]);
            fn(port, r, world, &out);
            if (write(fd[r][1], &out, sizeof(out)) != (ssize_t)sizeof(out))
                _exit(2);
            _exit(0);
        }
        close(fd[r][1]);
    }
    for (unsigned r = 0; r < world; r++) {
        size_t got = 0;
        int status = 0;
        while (got < sizeof(res[r])) {
            ssize_t n = read(fd[r][0], (char *)&res[r] + got, sizeof(res[r]) - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        close(fd[r][0]);
        while (waitpid(pid[r], &status, 0) < 0 && errno == EINTR)
            ;
        if (got != sizeof(res[r]))
            test_fail(__FILE__, __LINE__, "rank %u died without a result (status 0x%x)", r,
                      (unsigned)status);
    }
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* accel_comm_init with backend "nccl"; a communicator must not come back. */
static void init_rank(unsigned port, unsigned rank, unsigned world, struct rank_result *out)
{
    struct accel_comm_opts o = {.backend = "nccl", .timeout_s = 20, .cuda_device = -1};
    struct accel_comm *c = NULL;
    struct accel_error err;
    struct accel_store *s = connect_store(port, rank, world, 20, &err);
    double t0 = now_s();

    if (s == NULL) {
        out->rc = -1;
        snprintf(out->msg, sizeof(out->msg), "connect: %.700s", err.msg);
        return;
    }
    accel_error_clear(&err);
    out->rc = accel_comm_init(&c, s, rank, world, &o, &err);
    out->seconds = now_s() - t0;
    snprintf(out->msg, sizeof(out->msg), "%s", err.msg);
    if (c != NULL) {
        out->rc = 1000; /* must not have a communicator */
        accel_comm_free(c);
    }
    accel_store_close(s);
}

#ifdef ACCEL_HAVE_NCCL

static bool all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0)
            return false;
    return true;
}

TEST(unique_id_without_gpu)
{
    unsigned char a[ACCEL_NCCL_ID_BYTES], b[ACCEL_NCCL_ID_BYTES];
    struct accel_error err;
    char why[256] = "";

    test_note("CUDA devices here: %d (%s)", comm__nccl_device_count(why, sizeof(why)), why);
    ASSERT_INT_EQ(ACCEL_NCCL_ID_BYTES, 128);
    memset(a, 0, sizeof(a));
    memset(b, 0, sizeof(b));
    if (comm__nccl_unique_id(a, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "comm__nccl_unique_id: %s", err.msg);
    ASSERT(!all_zero(a, sizeof(a)));
    /* two ids name two bootstrap roots: they differ */
    ASSERT_OK(comm__nccl_unique_id(b, &err));
    ASSERT(memcmp(a, b, sizeof(a)) != 0);
}

static void exchange_rank(unsigned port, unsigned rank, unsigned world, struct rank_result *out)
{
    struct accel_error err;
    struct accel_store *s = connect_store(port, rank, world, 20, &err);
    double t0 = now_s();

    if (s == NULL) {
        out->rc = err.code;
        snprintf(out->msg, sizeof(out->msg), "connect: %.700s", err.msg);
        return;
    }
    accel_error_clear(&err);
    out->rc = comm__nccl_exchange_id(s, "t0/", rank, world, out->id, &err);
    out->seconds = now_s() - t0;
    snprintf(out->msg, sizeof(out->msg), "%s", err.msg);
    accel_store_close(s);
}

TEST(id_exchange_through_store)
{
    struct test_store_proc srv;

    test_store_proc_start(&srv, test_nonce());
    unsigned port = srv.port;
    struct rank_result res[4];

    memset(res, 0, sizeof(res));
    run_ranks(port, 4, exchange_rank, res);
    test_store_proc_stop(&srv);
    for (unsigned r = 0; r < 4; r++) {
        if (res[r].rc != ACCEL_OK)
            test_fail(__FILE__, __LINE__, "rank %u: %s", r, res[r].msg);
        ASSERT(memcmp(res[r].id, res[0].id, ACCEL_NCCL_ID_BYTES) == 0);
    }
    ASSERT(!all_zero(res[0].id, ACCEL_NCCL_ID_BYTES));
    test_note("4 ranks got the same %d-byte id", ACCEL_NCCL_ID_BYTES);
}

/* Rank 0 published a failure instead of an id, or something that is not an
 * id: the other ranks fail at once, naming why. */
TEST(id_exchange_failure_and_garbage)
{
    struct test_store_proc srv;

    test_store_proc_start(&srv, test_nonce());
    unsigned port = srv.port;
    struct accel_error err;
    struct accel_store *w = connect_store(port, 0, 2, 5, &err);
    struct accel_store *s = connect_store(port, 1, 2, 5, &err);
    unsigned char id[ACCEL_NCCL_ID_BYTES];
    static const char fail[] = "!rank 0 of 2: nccl: no CUDA device (test)";

    ASSERT(w != NULL && s != NULL);
    ASSERT_OK(accel_store_set(w, "f/nccl/id", fail, sizeof(fail) - 1, &err));
    ASSERT_INT_EQ(comm__nccl_exchange_id(s, "f/", 1, 2, id, &err), ACCEL_EPEER);
    ASSERT_CONTAINS(err.msg, "rank 1 of 2: nccl: rank 0 failed: rank 0 of 2");
    ASSERT_CONTAINS(err.msg, "no CUDA device (test)");

    ASSERT_OK(accel_store_set(w, "g/nccl/id", "short", 5, &err));
    ASSERT_INT_EQ(comm__nccl_exchange_id(s, "g/", 1, 2, id, &err), ACCEL_EIO);
    ASSERT_CONTAINS(err.msg, "g/nccl/id holds 5 bytes");

    ASSERT_INT_EQ(comm__nccl_exchange_id(s, "g/", 2, 2, id, &err), ACCEL_EINVAL);
    ASSERT_INT_EQ(comm__nccl_exchange_id(NULL, "g/", 0, 2, id, &err), ACCEL_EINVAL);
    accel_store_close(s);
    accel_store_close(w);
    test_store_proc_stop(&srv);
}

/* Rank 0 never comes: the wait for the id ends at the store's deadline. */
TEST(id_exchange_deadline)
{
    struct test_store_proc srv;

    test_store_proc_start(&srv, test_nonce());
    struct accel_error err;
    struct accel_store *s = connect_store(srv.port, 1, 2, 1.0, &err);
    unsigned char id[ACCEL_NCCL_ID_BYTES];
    double t0;

    ASSERT(s != NULL);
    t0 = now_s();
    ASSERT_INT_EQ(comm__nccl_exchange_id(s, "d/", 1, 2, id, &err), ACCEL_ETIMEDOUT);
    test_note("%.2f s: %s", now_s() - t0, err.msg);
    ASSERT(now_s() - t0 < 10);
    accel_store_close(s);
    test_store_proc_stop(&srv);
}

/* No CUDA device here: every rank's init fails within a few seconds, with
 * ACCEL_EUNSUPPORTED and a message that says so, and nothing crashes or
 * waits for the 20 s deadline. */
TEST(comm_init_without_gpu)
{
    struct test_store_proc srv;
    struct rank_result res[3];
    char why[256] = "";

    if (comm__nccl_device_count(why, sizeof(why)) > 0)
        SKIP("a CUDA device is present: tests/gpu/run.sh tests the communicator");
    test_note("%s", why);
    test_store_proc_start(&srv, test_nonce());
    memset(res, 0, sizeof(res));
    run_ranks(srv.port, 1, init_rank, res);
    test_note("world 1: %.2f s: %s", res[0].seconds, res[0].msg);
    ASSERT_INT_EQ(res[0].rc, ACCEL_EUNSUPPORTED);
    ASSERT_CONTAINS(res[0].msg, "rank 0 of 1: nccl: no CUDA device (cudaGetDeviceCount: ");

    memset(res, 0, sizeof(res));
    run_ranks(srv.port, 3, init_rank, res);
    test_store_proc_stop(&srv);
    for (unsigned r = 0; r < 3; r++) {
        char want[64];
        test_note("world 3: %.2f s: %s", res[r].seconds, res[r].msg);
        ASSERT_INT_EQ(res[r].rc, ACCEL_EUNSUPPORTED);
        snprintf(want, sizeof(want), "rank %u of 3: nccl: no CUDA device", r);
        ASSERT_CONTAINS(res[r].msg, want);
        ASSERT(res[r].seconds < 10);
    }
}

TEST_LIST(T(unique_id_without_gpu), T(id_exchange_through_store),
          T(id_exchange_failure_and_garbage), T(id_exchange_deadline), T(comm_init_without_gpu))

#else /* !ACCEL_HAVE_NCCL */

TEST(unique_id_without_gpu)
{
    SKIP(NO_NCCL);
}

TEST(id_exchange_through_store)
{
    SKIP(NO_NCCL);
}

TEST(id_exchange_failure_and_garbage)
{
    SKIP(NO_NCCL);
}

TEST(id_exchange_deadline)
{
    SKIP(NO_NCCL);
}

/* Without NCCL built in, asking for it is ACCEL_EUNSUPPORTED (comm.h). */
TEST(comm_init_without_gpu)
{
    struct test_store_proc srv;

    test_store_proc_start(&srv, test_nonce());
    struct rank_result res[1];

    ASSERT(!accel_comm_has_nccl());
    memset(res, 0, sizeof(res));
    run_ranks(srv.port, 1, init_rank, res);
    test_store_proc_stop(&srv);
    test_note("%s", res[0].msg);
    ASSERT_INT_EQ(res[0].rc, ACCEL_EUNSUPPORTED);
}

TEST_LIST(T(unique_id_without_gpu), T(id_exchange_through_store),
          T(id_exchange_failure_and_garbage), T(id_exchange_deadline), T(comm_init_without_gpu))

#endif
