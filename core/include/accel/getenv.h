/*
 * accel/getenv.h: reading the variables a launcher exported (RANK,
 * WORLD_SIZE, MASTER_PORT, ACCELRUN_TIMEOUT, ...), with errors that name the
 * variable and its value.  `who` starts every message ("bootstrap: RANK is
 * not set").
 *
 * Thread-safety: safe from any thread as long as no thread changes the
 * environment (setenv, putenv) at the same time, as for getenv itself.
 */
#ifndef ACCEL_GETENV_H
#define ACCEL_GETENV_H

#include <stdbool.h>

#include "accel/err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACCEL_GETENV_MAX 4096 /* bytes of one value */

/* *out = the value of `name`; an unset or empty one is ACCEL_EINVAL when
 * `required`, else ACCEL_OK with *out = NULL.  ACCEL_ETOOBIG past
 * ACCEL_GETENV_MAX bytes. */
enum accel_err accel_getenv_str(const char *who, const char *name, bool required, const char **out,
                                struct accel_error *err) ACCEL_WUR;

/* A required decimal integer in [lo, hi]: digits only (no sign, no spaces). */
enum accel_err accel_getenv_uint(const char *who, const char *name, unsigned long lo,
                                 unsigned long hi, unsigned *out,
                                 struct accel_error *err) ACCEL_WUR;

/* The same, optional: `dflt` when unset or empty (a malformed value is
 * still an error). */
enum accel_err accel_getenv_uint_or(const char *who, const char *name, unsigned long lo,
                                    unsigned long hi, unsigned dflt, unsigned *out,
                                    struct accel_error *err) ACCEL_WUR;

/* ACCELRUN_TIMEOUT in seconds, in (0, 1e6]; `dflt` when it is unset. */
enum accel_err accel_getenv_timeout(const char *who, double dflt, double *out,
                                    struct accel_error *err) ACCEL_WUR;

#ifdef __cplusplus
}
#endif

#endif
