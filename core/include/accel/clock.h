/*
 * accel/clock.h: deadlines, and writing a socket by one.  Every wait in the
 * runtime (store, collectives, launcher) is measured against a monotonic
 * deadline in seconds.
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

/* Sends all `len` bytes on the socket `fd` by `deadline`, waiting with
 * poll() when the socket is full (MSG_NOSIGNAL: a closed peer is EPIPE, not
 * a signal).  0, or -1 with errno (ETIMEDOUT after the deadline). */
int accel_send_all(int fd, const void *buf, size_t len, double deadline);

#ifdef __cplusplus
}
#endif

#endif
