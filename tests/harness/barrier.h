/*
 * tests/harness/barrier.h: ranks as threads of one test process, and their
 * collective step: a barrier that hands every thread the smallest value
 * passed (a MIN all-reduce; a boolean AND is the minimum of 0s and 1s).
 * For the checkpoint tests, whose agreement and saver functions are such a
 * step.  Reusable: each call is a generation of its own.
 */
#ifndef ACCEL_TEST_BARRIER_H
#define ACCEL_TEST_BARRIER_H

#include <pthread.h>
#include <stdint.h>

#include "accel/err.h"

struct test_barrier {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned world, arrived;
    unsigned long gen;
    uint64_t acc, result;
};

#define TEST_BARRIER_INIT(world)                                                                   \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, (world), 0, 0, UINT64_MAX, 0          \
    }

/* Waits for every one of b->world threads (at most timeout_s seconds: then
 * ACCEL_ETIMEDOUT naming `rank`); *min is the smallest `mine` of them. */
enum accel_err test_barrier_min(struct test_barrier *b, unsigned rank, uint64_t mine, uint64_t *min,
                                unsigned timeout_s, struct accel_error *err);

#endif
