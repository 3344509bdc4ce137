/*
 * getenv.c: see accel/getenv.h.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "accel/getenv.h"

enum accel_err accel_getenv_str(const char *who, const char *name, bool required, const char **out,
                                struct accel_error *err)
{
    const char *v = getenv(name);

    *out = NULL;
    if (v == NULL || v[0] == '\0') {
        if (required)
            return accel_error_set(err, ACCEL_EINVAL, "%s: %s is not set", who, name);
        return ACCEL_OK;
    }
    if (strnlen(v, ACCEL_GETENV_MAX + 1) > ACCEL_GETENV_MAX)
        return accel_error_set(err, ACCEL_ETOOBIG, "%s: %s is longer than %d bytes", who, name,
                               ACCEL_GETENV_MAX);
    *out = v;
    return ACCEL_OK;
}

static enum accel_err parse_uint(const char *who, const char *name, const char *v, unsigned long lo,
                                 unsigned long hi, unsigned *out, struct accel_error *err)
{
    char *end;
    unsigned long n;

    errno = 0;
    n = strtoul(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || *end != '\0' || errno != 0)
        return accel_error_set(err, ACCEL_EINVAL, "%s: %s='%.64s' is not a number", who, name, v);
    if (n < lo || n > hi)
        return accel_error_set(err, ACCEL_EINVAL, "%s: %s=%lu is not in %lu..%lu", who, name, n, lo,
                               hi);
    *out = (unsigned)n;
    return ACCEL_OK;
}

enum accel_err accel_getenv_uint(const char *who, const char *name, unsigned long lo,
                                 unsigned long hi, unsigned *out, struct accel_error *err)
{
    const char *v;
    enum accel_err rc = accel_getenv_str(who, name, true, &v, err);

    return rc != ACCEL_OK ? rc : parse_uint(who, name, v, lo, hi, out, err);
}

enum accel_err accel_getenv_uint_or(const char *who, const char *name, unsigned long lo,
                                    unsigned long hi, unsigned dflt, unsigned *out,
                                    struct accel_error *err)
{
    const char *v;
    enum accel_err rc = accel_getenv_str(who, name, false, &v, err);

    *out = dflt;
    if (rc != ACCEL_OK || v == NULL)
        return rc;
    return parse_uint(who, name, v, lo, hi, out, err);
}

enum accel_err accel_getenv_timeout(const char *who, double dflt, double *out,
                                    struct accel_error *err)
{
    const char *v;
    char *end;
    double t;
    enum accel_err rc = accel_getenv_str(who, "ACCELRUN_TIMEOUT", false, &v, err);

    *out = dflt;
    if (rc != ACCEL_OK || v == NULL)
        return rc;
    errno = 0;
    t = strtod(v, &end);
    if (end == v || *end != '\0' || errno != 0 || !isfinite(t) || t <= 0 || t > 1e6)
        return accel_error_set(
            err, ACCEL_EINVAL,
            "%s: ACCELRUN_TIMEOUT='%.64s' is not a number of seconds in (0, 1e6]", who, v);
    *out = t;
    return ACCEL_OK;
}
