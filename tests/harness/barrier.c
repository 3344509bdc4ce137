/*
 * tests/harness/barrier.c: test_barrier_min (barrier.h).
 */
#include <errno.h>
#include <time.h>

#include "barrier.h"

enum accel_err test_barrier_min(struct test_barrier *b, unsigned rank, uint64_t mine, uint64_t *min,
                                unsigned timeout_s, struct accel_error *err)
{
    enum accel_err rc = ACCEL_OK;
    struct timespec deadline;

    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_s;
    pthread_mutex_lock(&b->mu);
    if (mine < b->acc)
        b->acc = mine;
    if (++b->arrived == b->world) {
        b->result = b->acc;
        b->acc = UINT64_MAX;
        b->arrived = 0;
        b->gen++;
        pthread_cond_broadcast(&b->cv);
    } else {
        unsigned long gen = b->gen;
        while (b->gen == gen && rc == ACCEL_OK)
            if (pthread_cond_timedwait(&b->cv, &b->mu, &deadline) == ETIMEDOUT && b->gen == gen)
                rc = accel_error_set(err, ACCEL_ETIMEDOUT, "barrier: rank %u waited %u s", rank,
                                     timeout_s);
    }
    *min = b->result;
    pthread_mutex_unlock(&b->mu);
    return rc;
}
