/*
 * tests/harness/store_proc.h: a rendezvous store served by a forked process
 * of its own, for tests that fork ranks.  The test process then stays
 * single-threaded, so its forks never inherit a lock the server's thread
 * held (ASan's allocator and ThreadSanitizer are not fork-safe that way).
 */
#ifndef ACCEL_TEST_STORE_PROC_H
#define ACCEL_TEST_STORE_PROC_H

#include <stdint.h>
#include <sys/types.h>

#include "accel/comm.h"
#include "accel/store.h"

struct test_store_proc {
    pid_t pid;
    int fd;        /* closing it (in every process holding it) stops the server */
    unsigned port; /* on 127.0.0.1 */
};

/* Starts the server (nonce `nonce`) and waits for its port; fails the case
 * when it cannot.  The server dies with the test process (PDEATHSIG). */
void test_store_proc_start(struct test_store_proc *p, uint64_t nonce);

/* Stops the server and reaps it. */
void test_store_proc_stop(struct test_store_proc *p);

/* A rank of a test world: connects to the store on 127.0.0.1:port, then
 * builds a socket communicator on the loopback, both with `timeout_s` and
 * the job nonce `nonce`.  On error *st and *c are what was made (NULL or
 * valid) and err says why. */
enum accel_err test_comm_join(unsigned port, uint64_t nonce, unsigned rank, unsigned world,
                              double timeout_s, struct accel_store **st, struct accel_comm **c,
                              struct accel_error *err);

/* Forked ranks of a test world.  fn runs on each rank with its socket
 * communicator; it returns 0, or non-zero after test_rank_fail recorded why
 * (the RCHECK style of the shard tests).  test_world_run starts a store
 * process, forks `world` ranks (at most TEST_MAX_WORLD) that join it and
 * run fn, waits for them, and fails the case with the first rank's message
 * when a rank failed or died. */
#define TEST_MAX_WORLD 8
typedef int (*test_rank_fn)(struct accel_comm *c, unsigned rank, const void *arg);
void test_world_run(unsigned world, uint64_t nonce, test_rank_fn fn, const void *arg);
/* Records rank's failure message ("file:line: ..."); returns 1. */
int test_rank_fail(unsigned rank, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A rank's checks: return test_rank_fail's 1 from the rank's function when
 * cond is false, or when expr is not ACCEL_OK (the message then has the
 * code's name and err.msg: a struct accel_error err must be in scope). */
#define RCHECK(cond)                                                                               \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return test_rank_fail(rank, __FILE__, __LINE__, "rank %u: %s", rank, #cond);           \
    } while (0)
#define RCHECK_OK(expr)                                                                            \
    do {                                                                                           \
        enum accel_err rc_ = (expr);                                                               \
        if (rc_ != ACCEL_OK)                                                                       \
            return test_rank_fail(rank, __FILE__, __LINE__, "rank %u: %s: %s: %s", rank, #expr,    \
                                  accel_errname(rc_), err.msg);                                    \
    } while (0)

#endif
