/*
 * err.c: strerror for the project's error enum and the helpers that fill the
 * caller-owned error struct.  The switch has no default so that -Wswitch-enum
 * reports a new enum value without a description.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "accel/err.h"

const char *accel_strerror(enum accel_err code)
{
    switch (code) {
    case ACCEL_OK: return "success";
    case ACCEL_ENOMEM: return "out of memory";
    case ACCEL_EINVAL: return "invalid argument";
    case ACCEL_EIO: return "input/output error";
    case ACCEL_ETOOBIG: return "input too large";
    case ACCEL_EPARSE: return "syntax error";
    case ACCEL_ECONFIG: return "invalid configuration";
    case ACCEL_EPOLICY: return "conflicts with the site policy";
    case ACCEL_ENOTFOUND: return "not found";
    case ACCEL_EPERM: return "permission denied";
    case ACCEL_EUNSUPPORTED: return "not supported by accelrun";
    case ACCEL_ELAYOUT: return "job layout does not fit the config";
    case ACCEL_ERR__LAST: break;
    }
    return "unknown error";
}

const char *accel_errname(enum accel_err code)
{
    switch (code) {
    case ACCEL_OK: return "ACCEL_OK";
    case ACCEL_ENOMEM: return "ACCEL_ENOMEM";
    case ACCEL_EINVAL: return "ACCEL_EINVAL";
    case ACCEL_EIO: return "ACCEL_EIO";
    case ACCEL_ETOOBIG: return "ACCEL_ETOOBIG";
    case ACCEL_EPARSE: return "ACCEL_EPARSE";
    case ACCEL_ECONFIG: return "ACCEL_ECONFIG";
    case ACCEL_EPOLICY: return "ACCEL_EPOLICY";
    case ACCEL_ENOTFOUND: return "ACCEL_ENOTFOUND";
    case ACCEL_EPERM: return "ACCEL_EPERM";
    case ACCEL_EUNSUPPORTED: return "ACCEL_EUNSUPPORTED";
    case ACCEL_ELAYOUT: return "ACCEL_ELAYOUT";
    case ACCEL_ERR__LAST: break;
    }
    return "ACCEL_E?";
}

void accel_error_clear(struct accel_error *e)
{
    if (e == NULL)
        return;
    memset(e, 0, sizeof(*e));
}

static void vset(struct accel_error *e, enum accel_err code, const char *fmt, va_list ap)
    ACCEL_PRINTF(3, 0);

static void vset(struct accel_error *e, enum accel_err code, const char *fmt, va_list ap)
{
    e->code = code;
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
}

enum accel_err accel_error_set(struct accel_error *e, enum accel_err code, const char *fmt, ...)
{
    va_list ap;

    if (e == NULL)
        return code;
    va_start(ap, fmt);
    vset(e, code, fmt, ap);
    va_end(ap);
    return code;
}

enum accel_err accel_error_sys(struct accel_error *e, enum accel_err code, const char *fmt, ...)
{
    int saved = errno;
    size_t n;
    va_list ap;

    if (e == NULL)
        return code;
    va_start(ap, fmt);
    vset(e, code, fmt, ap);
    va_end(ap);
    e->sys_errno = saved;
    n = strlen(e->msg);
    snprintf(e->msg + n, sizeof(e->msg) - n, ": %s", strerror(saved));
    return code;
}

void accel_error_at(struct accel_error *e, const char *file, unsigned line, unsigned column,
                    const char *key)
{
    if (e == NULL)
        return;
    snprintf(e->file, sizeof(e->file), "%s", file ? file : "");
    snprintf(e->key, sizeof(e->key), "%s", key ? key : "");
    e->line = line;
    e->column = column;
}
