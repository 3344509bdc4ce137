/*
 * buf.c: the capped string buffer.  Growth doubles the allocation; a failed
 * append leaves the previous content intact.
 */
#include <stdio.h>
#include <string.h>

#include "accel/alloc.h"
#include "accel/buf.h"

void accel_buf_init(struct accel_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

enum accel_err accel_buf_reserve(struct accel_buf *b, size_t extra)
{
    size_t need, cap;
    char *p;

    if (extra > b->max || b->len > b->max - extra)
        return ACCEL_ETOOBIG;
    need = b->len + extra + 1;
    if (need <= b->cap)
        return ACCEL_OK;
    cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap *= 2;
    p = accel_realloc(b->data, cap);
    if (p == NULL)
        return ACCEL_ENOMEM;
    p[b->len] = '\0'; /* a first allocation is a string too, before any append */
    b->data = p;
    b->cap = cap;
    return ACCEL_OK;
}

enum accel_err accel_buf_add(struct accel_buf *b, const char *s, size_t n)
{
    enum accel_err rc = accel_buf_reserve(b, n);

    if (rc != ACCEL_OK)
        return rc;
    if (n > 0)
        memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return ACCEL_OK;
}

enum accel_err accel_buf_puts(struct accel_buf *b, const char *s)
{
    return accel_buf_add(b, s, strlen(s));
}

enum accel_err accel_buf_printf(struct accel_buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;
    enum accel_err rc;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return ACCEL_EINVAL;
    rc = accel_buf_reserve(b, (size_t)n);
    if (rc != ACCEL_OK)
        return rc;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return ACCEL_OK;
}

const char *accel_buf_str(const struct accel_buf *b)
{
    return b->data ? b->data : "";
}

void accel_buf_reset(struct accel_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

char *accel_buf_take(struct accel_buf *b)
{
    char *p = b->data;

    if (p == NULL)
        p = accel_strdup("");
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    return p;
}

void accel_buf_free(struct accel_buf *b)
{
    accel_free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}
