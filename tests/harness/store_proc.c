/*
 * tests/harness/store_proc.c: see store_proc.h.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accel/store.h"
#include "store_proc.h"
#include "test.h"

void test_store_proc_start(struct test_store_proc *p, uint64_t nonce)
{
    int up[2], down[2];

    ASSERT(pipe(up) == 0 && pipe(down) == 0);
    fflush(stdout);
    p->pid = fork();
    ASSERT(p->pid >= 0);
    if (p->pid == 0) {
        struct accel_store_server_opts so;
        struct accel_store_server *srv = NULL;
        struct accel_error err;
        unsigned port = 0;
        char b;

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(up[0]);
        close(down[1]);
        memset(&so, 0, sizeof(so));
        so.bind_addr = "127.0.0.1";
        so.nonce = nonce;
        if (accel_store_server_start(&srv, &so, &err) == ACCEL_OK)
            port = accel_store_server_port(srv);
        else
            fprintf(stderr, "store server: %s\n", err.msg);
        if (write(up[1], &port, sizeof(port)) != (ssize_t)sizeof(port))
            _exit(1);
        /* until every holder of the write end (the test, its ranks) is gone */
        while (read(down[0], &b, 1) < 0 && errno == EINTR)
            ;
        accel_store_server_stop(srv);
        _exit(0);
    }
    close(up[1]);
    close(down[0]);
    ASSERT(read(up[0], &p->port, sizeof(p->port)) == (ssize_t)sizeof(p->port));
    ASSERT(p->port != 0);
    close(up[0]);
    p->fd = down[1];
}

void test_store_proc_stop(struct test_store_proc *p)
{
    int status;

    close(p->fd);
    while (waitpid(p->pid, &status, 0) < 0 && errno == EINTR)
        ;
}

enum accel_err test_comm_join(unsigned port, uint64_t nonce, unsigned rank, unsigned world,
                              double timeout_s, struct accel_store **st, struct accel_comm **c,
                              struct accel_error *err)
{
    struct accel_store_opts so;
    struct accel_comm_opts co;
    enum accel_err rc;

    memset(&so, 0, sizeof(so));
    so.host = "127.0.0.1";
    so.port = port;
    so.nonce = nonce;
    so.rank = rank;
    so.world = world;
    so.timeout_s = timeout_s;
    memset(&co, 0, sizeof(co));
    co.backend = "socket";
    co.timeout_s = timeout_s;
    co.nonce = nonce;
    co.ifaddr = "127.0.0.1";
    *st = NULL;
    *c = NULL;
    rc = accel_store_connect(st, &so, err);
    return rc != ACCEL_OK ? rc : accel_comm_init(c, *st, rank, world, &co, err);
}

struct rank_out {
    int code;
    char msg[600];
};

static struct rank_out *outs; /* [TEST_MAX_WORLD], shared with the forked ranks */

int test_rank_fail(unsigned rank, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (outs == NULL || rank >= TEST_MAX_WORLD)
        return 1;
    n = snprintf(outs[rank].msg, sizeof(outs[rank].msg), "%s:%d: ", file, line);
    va_start(ap, fmt);
    vsnprintf(outs[rank].msg + n, sizeof(outs[rank].msg) - (size_t)n, fmt, ap);
    va_end(ap);
    return 1;
}

static void world_child(unsigned port, uint64_t nonce, unsigned rank, unsigned world,
                        test_rank_fn fn, const void *arg)
{
    struct accel_store *st = NULL;
    struct accel_comm *c = NULL;
    struct accel_error err;

    if (test_comm_join(port, nonce, rank, world, 20, &st, &c, &err) != ACCEL_OK) {
        outs[rank].code = test_rank_fail(rank, __FILE__, __LINE__, "rank %u: %s", rank, err.msg);
        _exit(0);
    }
    outs[rank].code = fn(c, rank, arg);
    accel_comm_free(c);
    accel_store_close(st);
    _exit(0);
}

void test_world_run(unsigned world, uint64_t nonce, test_rank_fn fn, const void *arg)
{
    struct test_store_proc srv;
    pid_t pids[TEST_MAX_WORLD];

    ASSERT(world >= 1 && world <= TEST_MAX_WORLD);
    if (outs == NULL) {
        outs = mmap(NULL, sizeof(*outs) * TEST_MAX_WORLD, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        ASSERT(outs != MAP_FAILED);
    }
    /* served from a process of its own: forking ranks after starting the
     * server's thread here would deadlock ASan's allocator */
    test_store_proc_start(&srv, nonce);
    for (unsigned r = 0; r < world; r++) {
        outs[r].code = -1;
        snprintf(outs[r].msg, sizeof(outs[r].msg), "rank %u died", r);
    }
    fflush(stdout);
    for (unsigned r = 0; r < world; r++) {
        pids[r] = fork();
        ASSERT(pids[r] >= 0);
        if (pids[r] == 0)
            world_child(srv.port, nonce, r, world, fn, arg);
    }
    for (unsigned r = 0; r < world; r++) {
        int status;
        while (waitpid(pids[r], &status, 0) < 0 && errno == EINTR)
            ;
    }
    test_store_proc_stop(&srv);
    for (unsigned r = 0; r < world; r++)
        if (outs[r].code != 0)
            test_fail(__FILE__, __LINE__, "world %u: %s", world, outs[r].msg);
}
