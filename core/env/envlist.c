/*
 * env__list.c: building the sorted variable list with caps on count, name and
 * value length.  Errors are sticky so the builder reads straight through.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/alloc.h"
#include "envlist.h"

static size_t name_len(const char *kv)
{
    const char *eq = strchr(kv, '=');
    return eq ? (size_t)(eq - kv) : strlen(kv);
}

static char **find(struct env__list *l, const char *name)
{
    size_t n = strlen(name);

    for (size_t i = 0; i < l->env->n; i++)
        if (name_len(l->env->v[i]) == n && memcmp(l->env->v[i], name, n) == 0)
            return &l->env->v[i];
    return NULL;
}

void env__list_set(struct env__list *l, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value);
    char *kv, **slot;

    if (l->rc != ACCEL_OK)
        return;
    if (nl == 0 || nl > ACCEL_MAX_ENV_NAME || vl > ACCEL_MAX_ENV_VALUE) {
        l->rc = ACCEL_ETOOBIG;
        return;
    }
    kv = accel_malloc(nl + vl + 2);
    if (kv == NULL) {
        l->rc = ACCEL_ENOMEM;
        return;
    }
    memcpy(kv, name, nl);
    kv[nl] = '=';
    memcpy(kv + nl + 1, value, vl + 1);
    slot = find(l, name);
    if (slot != NULL) {
        accel_free(*slot);
        *slot = kv;
        return;
    }
    if (l->env->n >= ACCEL_MAX_ENV_VARS) {
        accel_free(kv);
        l->rc = ACCEL_ETOOBIG;
        return;
    }
    if (l->env->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 64;
        char **p = accel_realloc(l->env->v, nc * sizeof(*p));
        if (p == NULL) {
            accel_free(kv);
            l->rc = ACCEL_ENOMEM;
            return;
        }
        l->env->v = p;
        l->cap = nc;
    }
    l->env->v[l->env->n++] = kv;
}

void env__list_setf(struct env__list *l, const char *name, const char *fmt, ...)
{
    char buf[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    env__list_set(l, name, buf);
}

void env__list_set_py(struct env__list *l, const char *name, const struct accel_val *v, bool lower)
{
    struct accel_buf b;
    enum accel_err rc;

    if (l->rc != ACCEL_OK)
        return;
    accel_buf_init(&b, ACCEL_MAX_ENV_VALUE);
    rc = accel_val_pystr(v, &b);
    if (rc != ACCEL_OK) {
        l->rc = rc;
        accel_buf_free(&b);
        return;
    }
    if (lower)
        for (size_t i = 0; i < b.len; i++)
            b.data[i] = (char)tolower((unsigned char)b.data[i]);
    env__list_set(l, name, accel_buf_str(&b));
    accel_buf_free(&b);
}

void env__list_unset(struct env__list *l, const char *name)
{
    char **slot = find(l, name);

    if (slot == NULL)
        return;
    accel_free(*slot);
    *slot = l->env->v[--l->env->n];
}

static int cmp_names(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    size_t nx = name_len(x), ny = name_len(y);
    int c = memcmp(x, y, nx < ny ? nx : ny);
    return c != 0 ? c : (nx > ny) - (nx < ny);
}

void env__list_sort(struct env__list *l)
{
    if (l->env->n > 1)
        qsort(l->env->v, l->env->n, sizeof(char *), cmp_names);
}

const char *accel_env_get(const struct accel_env *env, const char *name)
{
    size_t n = strlen(name);

    for (size_t i = 0; i < env->n; i++)
        if (name_len(env->v[i]) == n && memcmp(env->v[i], name, n) == 0)
            return env->v[i] + n + 1;
    return NULL;
}

void accel_env_free(struct accel_env *env)
{
    if (env == NULL)
        return;
    for (size_t i = 0; i < env->n; i++)
        accel_free(env->v[i]);
    accel_free(env->v);
    env->v = NULL;
    env->n = 0;
}
