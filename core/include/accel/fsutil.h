/*
 * accel/fsutil.h: bounded reads and durable writes.
 *
 * accel_read_file() reads a regular file of at most `max` bytes with the
 * caller's current identity; it never follows the path as anyone else (the
 * SPANK plugin switches to the job user before calling it).
 * accel_write_durable() writes a file so that after a crash either the old or
 * the new content is there, never a mix: temp file, fsync, rename, fsync dir.
 *
 * Thread-safety: safe from any thread (no shared state).  The identity a
 * read uses is the process's: a caller that switches it (the SPANK plugin)
 * does so for every thread.
 */
#ifndef ACCEL_FSUTIL_H
#define ACCEL_FSUTIL_H

#include <stddef.h>
#include <sys/types.h>
#include "accel/err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads `path` into a new NUL-terminated buffer (*out, caller frees with
 * accel_free) of *len bytes.  Errors: ACCEL_ENOTFOUND, ACCEL_EPERM, ACCEL_EIO
 * (errno saved), ACCEL_ETOOBIG when the file exceeds `max` bytes, ACCEL_EINVAL
 * when it is not a regular file. */
enum accel_err accel_read_file(const char *path, size_t max, char **out, size_t *len,
                               struct accel_error *err) ACCEL_WUR;

/* Writes `len` bytes to `path` durably with permissions `mode`.  On failure the
 * previous file (if any) is untouched and the temp file is removed. */
enum accel_err accel_write_durable(const char *path, const void *data, size_t len, mode_t mode,
                                   struct accel_error *err) ACCEL_WUR;

/* fsync()s the directory `dir`, so that the renames and creations in it
 * are durable: ACCEL_OK, or ACCEL_EIO with errno saved (for the caller's
 * message, which names what the directory holds). */
enum accel_err accel_fsync_dir(const char *dir) ACCEL_WUR;

#ifdef __cplusplus
}
#endif

#endif
