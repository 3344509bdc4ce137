/*
 * accel/buf.h: a growable string buffer with a hard cap.  Appending past
 * `max` bytes fails with ACCEL_ETOOBIG and leaves the buffer as it was, so a
 * hostile input can never make it grow without bound.  The content is always
 * NUL-terminated once anything was appended.
 *
 * Ownership: the buffer owns `data` until accel_buf_take() hands it over or
 * accel_buf_free() releases it.
 *
 * Thread-safety: a buffer belongs to one thread at a time; different buffers
 * may be used from different threads at once.
 */
#ifndef ACCEL_BUF_H
#define ACCEL_BUF_H

#include <stddef.h>
#include "accel/err.h"

#ifdef __cplusplus
extern "C" {
#endif

struct accel_buf {
    char *data; /* NULL until the first append */
    size_t len; /* bytes used, excluding the NUL */
    size_t cap; /* bytes allocated */
    size_t max; /* cap on len */
};

/* Starts an empty buffer that may hold at most `max` bytes. */
void accel_buf_init(struct accel_buf *b, size_t max);

/* Makes room for `extra` more bytes at once, so that a caller that knows
 * its size appends without regrowing.  ACCEL_ETOOBIG past max, ACCEL_ENOMEM. */
enum accel_err accel_buf_reserve(struct accel_buf *b, size_t extra) ACCEL_WUR;

/* Appends `n` bytes of `s`.  ACCEL_ETOOBIG past max, ACCEL_ENOMEM. */
enum accel_err accel_buf_add(struct accel_buf *b, const char *s, size_t n) ACCEL_WUR;

/* Appends a NUL-terminated string. */
enum accel_err accel_buf_puts(struct accel_buf *b, const char *s) ACCEL_WUR;

/* Appends formatted text. */
enum accel_err accel_buf_printf(struct accel_buf *b, const char *fmt, ...)
    ACCEL_PRINTF(2, 3) ACCEL_WUR;

/* The content as a C string ("" when empty); valid until the next change. */
const char *accel_buf_str(const struct accel_buf *b);

/* Empties the buffer, keeping its memory. */
void accel_buf_reset(struct accel_buf *b);

/* Returns the content (caller frees with accel_free; never NULL unless out of
 * memory) and leaves the buffer empty. */
char *accel_buf_take(struct accel_buf *b);

/* Releases the memory; the buffer may be reused after accel_buf_init. */
void accel_buf_free(struct accel_buf *b);

#ifdef __cplusplus
}
#endif

#endif
