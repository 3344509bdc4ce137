/*
 * err.c: strerror and the constant names of the project's error enum, both
 * generated from the one list in accel/err.h, and the helpers that fill the
 * caller-owned error struct.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "accel/err.h"

#define ERR_TEXT(name, value, text)                                                                \
    case name:                                                                                     \
        return text;
#define ERR_NAME(name, value, text)                                                                \
    case name:                                                                                     \
        return #name;

const char *accel_strerror(enum accel_err code)
{
    switch (code) {
        ACCEL_ERRORS(ERR_TEXT)
    case ACCEL_ERR__LAST:
        break;
    }
    return "unknown error";
}

const char *accel_errname(enum accel_err code)
{
    switch (code) {
        ACCEL_ERRORS(ERR_NAME)
    case ACCEL_ERR__LAST:
        break;
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
