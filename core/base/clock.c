/*
 * clock.c: see accel/clock.h.
 */
#include <time.h>

#include "accel/clock.h"

double accel_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int accel_ms_left(double deadline)
{
    double left = deadline - accel_now();

    if (left <= 0)
        return 0;
    if (left > 3600)
        return 3600 * 1000;
    return (int)(left * 1000) + 1;
}
