/*
 * accel/clock.h: deadlines.  Every wait in the runtime (store, collectives,
 * launcher) is measured against a monotonic deadline in seconds; writing a
 * socket by one is accel/sock.h's.
 *
 * Thread-safety: both functions are safe from any thread.
 */
#ifndef ACCEL_CLOCK_H
#define ACCEL_CLOCK_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Seconds on the monotonic clock. */
double accel_now(void);

/* Milliseconds left until `deadline` (accel_now() units) for poll(): 0 when
 * it has passed, rounded up, at most an hour (a longer wait polls again). */
int accel_ms_left(double deadline);

#ifdef __cplusplus
}
#endif

#endif
