/*
 * accel/sock.h: writing a socket to a deadline.  The store's client and the
 * collectives' connections send their frames through it.
 *
 * Thread-safety: safe from any thread; two threads must not write the same
 * socket at once (their bytes would interleave).
 */
#ifndef ACCEL_SOCK_H
#define ACCEL_SOCK_H

#include <stddef.h>

#include "accel/err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sends all `len` bytes on the socket `fd` by `deadline` (accel_now()
 * units), waiting with poll() when the socket is full (MSG_NOSIGNAL: a
 * closed peer is EPIPE, not a signal).  ACCEL_OK; ACCEL_ETIMEDOUT after the
 * deadline; ACCEL_EPEER when the socket failed (closed, reset: errno says
 * which, for the caller's message). */
enum accel_err accel_send_all(int fd, const void *buf, size_t len, double deadline) ACCEL_WUR;

#ifdef __cplusplus
}
#endif

#endif
