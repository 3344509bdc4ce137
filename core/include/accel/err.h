/*
 * accel/err.h: the project's one error enum and the caller-owned error struct.
 *
 * Every fallible function in libaccelrun returns an `enum accel_err` (ACCEL_OK
 * is 0) and, where the caller passes one, fills a `struct accel_error` with the
 * details: a message, the file:line:column and key of a config problem, and
 * the errno of a failed system call.  Nothing is kept in globals.  The enum is
 * append-only: values are never renumbered or reused.
 *
 * Thread-safety: accel_strerror returns static strings, safe from any
 * thread; a struct accel_error belongs to its caller.
 */
#ifndef ACCEL_ERR_H
#define ACCEL_ERR_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ACCEL_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define ACCEL_WUR __attribute__((warn_unused_result))

/* The error list, append-only: X(name, value, description). */
#define ACCEL_ERRORS(X)                                                                            \
    X(ACCEL_OK, 0, "success")                                                                      \
    X(ACCEL_ENOMEM, 1, "out of memory")                                                            \
    X(ACCEL_EINVAL, 2, "invalid argument")                                                         \
    X(ACCEL_EIO, 3, "input/output error")                                                          \
    X(ACCEL_ETOOBIG, 4, "input too large")                                                         \
    X(ACCEL_EPARSE, 5, "syntax error")                                                             \
    X(ACCEL_ECONFIG, 6, "invalid configuration")                                                   \
    X(ACCEL_EPOLICY, 7, "conflicts with the site policy")                                          \
    X(ACCEL_ENOTFOUND, 8, "not found")                                                             \
    X(ACCEL_EPERM, 9, "permission denied")                                                         \
    X(ACCEL_EUNSUPPORTED, 10, "not supported by accelrun")                                         \
    X(ACCEL_ELAYOUT, 11, "job layout does not fit the config")                                     \
    X(ACCEL_ETIMEDOUT, 12, "timed out")                                                            \
    X(ACCEL_EPEER, 13, "a peer failed or closed its connection")                                   \
    X(ACCEL_ENONCE, 14, "refused: the peer belongs to another job")                                \
    X(ACCEL_EBUSY, 15, "in use by another job or operation")                                       \
    X(ACCEL_ENOSPC, 16, "no space left on the file system")

#define ACCEL_ERR_ENUM(name, value, text) name = value,
enum accel_err { ACCEL_ERRORS(ACCEL_ERR_ENUM) ACCEL_ERR__LAST };
#undef ACCEL_ERR_ENUM

/* Caller-owned details of the last failure.  Strings are truncated, never
 * overflowed.  line and column are 1-based; 0 means "not known". */
struct accel_error {
    enum accel_err code;
    int sys_errno;
    unsigned line;
    unsigned column;
    char file[256];
    char key[128];
    char msg[768];
};

/* Short, static, never-NULL description of `code` ("out of memory"). */
const char *accel_strerror(enum accel_err code);

/* Name of the enum constant ("ACCEL_ENOMEM"); "ACCEL_E?" for unknown values. */
const char *accel_errname(enum accel_err code);

/* Resets `e` to ACCEL_OK with empty fields.  NULL is allowed and ignored. */
void accel_error_clear(struct accel_error *e);

/* Sets e->code and a formatted message; returns `code` so callers can write
 * `return accel_error_set(e, ACCEL_EINVAL, "...")`.  NULL `e` is allowed. */
enum accel_err accel_error_set(struct accel_error *e, enum accel_err code, const char *fmt, ...)
    ACCEL_PRINTF(3, 4);

/* Like accel_error_set, and also saves `errno` (read on entry) in sys_errno and
 * appends ": strerror(errno)" to the message. */
enum accel_err accel_error_sys(struct accel_error *e, enum accel_err code, const char *fmt, ...)
    ACCEL_PRINTF(3, 4);

/* Records where a config problem is: file (copied), line, column, key. */
void accel_error_at(struct accel_error *e, const char *file, unsigned line, unsigned column,
                    const char *key);

#ifdef __cplusplus
}
#endif

#endif
