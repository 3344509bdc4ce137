/*
 * store.c: the client interface of accel/store.h.  It checks what both
 * methods would check (arguments, the caps on keys and values, before
 * anything is sent or written) and hands the call to the handle's method
 * (tcp.c or file.c).  It also derives the job nonce.
 */
#include <stdio.h>
#include <string.h>

#include "accel/alloc.h"
#include "store_int.h"

uint64_t accel_store_nonce(const char *job_id, const char *step_id)
{
    uint64_t h = STORE_FNV_OFFSET;

    if (job_id != NULL)
        h = bootstrap__fnv1a(h, job_id, strlen(job_id));
    h = bootstrap__fnv1a(h, ".", 1);
    if (step_id != NULL)
        h = bootstrap__fnv1a(h, step_id, strlen(step_id));
    return h;
}

enum accel_err bootstrap__check_key(const struct accel_store *s, const char *key,
                                    struct accel_error *err)
{
    size_t n;

    if (key == NULL || key[0] == '\0')
        return accel_error_set(err, ACCEL_EINVAL, STORE_WHO ": store: an empty key", s->rank,
                               s->world);
    n = strnlen(key, ACCEL_STORE_MAX_KEY + 1);
    if (n > ACCEL_STORE_MAX_KEY)
        return accel_error_set(err, ACCEL_ETOOBIG,
                               STORE_WHO ": store: key '%.32s...' is longer than %d bytes", s->rank,
                               s->world, key, ACCEL_STORE_MAX_KEY);
    return ACCEL_OK;
}

enum accel_err accel_store_set(struct accel_store *s, const char *key, const void *val, size_t len,
                               struct accel_error *err)
{
    enum accel_err rc;

    if (s == NULL || (val == NULL && len > 0))
        return accel_error_set(err, ACCEL_EINVAL, "store: set: NULL store or value");
    if ((rc = bootstrap__check_key(s, key, err)) != ACCEL_OK)
        return rc;
    if (len > ACCEL_STORE_MAX_VALUE)
        return accel_error_set(err, ACCEL_ETOOBIG,
                               STORE_WHO ": set '%s': a value of %zu bytes; the limit is %u",
                               s->rank, s->world, key, len, ACCEL_STORE_MAX_VALUE);
    return s->ops->set(s, key, val, len, err);
}

enum accel_err accel_store_get(struct accel_store *s, const char *key, void **val, size_t *len,
                               struct accel_error *err)
{
    enum accel_err rc;

    if (s == NULL || val == NULL || len == NULL)
        return accel_error_set(err, ACCEL_EINVAL, "store: get: NULL argument");
    *val = NULL;
    *len = 0;
    if ((rc = bootstrap__check_key(s, key, err)) != ACCEL_OK)
        return rc;
    return s->ops->get(s, key, val, len, err);
}

enum accel_err accel_store_wait(struct accel_store *s, const char *const *keys, size_t n,
                                struct accel_error *err)
{
    enum accel_err rc;

    if (s == NULL || (keys == NULL && n > 0))
        return accel_error_set(err, ACCEL_EINVAL, "store: wait: NULL argument");
    for (size_t i = 0; i < n; i++)
        if ((rc = bootstrap__check_key(s, keys[i], err)) != ACCEL_OK)
            return rc;
    return s->ops->wait(s, keys, n, err);
}

enum accel_err accel_store_add(struct accel_store *s, const char *key, int64_t delta,
                               int64_t *result, struct accel_error *err)
{
    enum accel_err rc;

    if (s == NULL)
        return accel_error_set(err, ACCEL_EINVAL, "store: add: NULL store");
    if ((rc = bootstrap__check_key(s, key, err)) != ACCEL_OK)
        return rc;
    return s->ops->add(s, key, delta, result, err);
}

enum accel_err accel_store_barrier(struct accel_store *s, const char *name, unsigned n,
                                   struct accel_error *err)
{
    enum accel_err rc;

    if (s == NULL)
        return accel_error_set(err, ACCEL_EINVAL, "store: barrier: NULL store");
    if ((rc = bootstrap__check_key(s, name, err)) != ACCEL_OK)
        return rc;
    if (n == 0)
        return accel_error_set(err, ACCEL_EINVAL, STORE_WHO ": barrier '%s' of 0 clients", s->rank,
                               s->world, name);
    return s->ops->barrier(s, name, n, err);
}

double accel_store_set_timeout(struct accel_store *s, double timeout_s)
{
    double old;

    if (s == NULL)
        return 0;
    old = s->timeout_s;
    if (timeout_s > 0)
        s->timeout_s = timeout_s;
    return old;
}

void accel_store_close(struct accel_store *s)
{
    if (s == NULL)
        return;
    s->ops->close(s);
    accel_free(s->dir);
    accel_free(s);
}
