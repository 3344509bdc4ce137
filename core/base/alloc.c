/*
 * alloc.c: the allocation hooks.  Tests replace them with a counting
 * allocator that can fail the Nth call; production uses libc.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "accel/alloc.h"

static struct accel_alloc_hooks hooks = {malloc, realloc, free};

void accel_alloc_set(const struct accel_alloc_hooks *h)
{
    if (h == NULL) {
        hooks.malloc_fn = malloc;
        hooks.realloc_fn = realloc;
        hooks.free_fn = free;
        return;
    }
    hooks = *h;
}

void *accel_malloc(size_t size)
{
    return hooks.malloc_fn(size ? size : 1);
}

void *accel_calloc(size_t n, size_t size)
{
    void *p;

    if (size != 0 && n > SIZE_MAX / size)
        return NULL;
    p = accel_malloc(n * size);
    if (p != NULL)
        memset(p, 0, n * size);
    return p;
}

void *accel_realloc(void *ptr, size_t size)
{
    return hooks.realloc_fn(ptr, size ? size : 1);
}

void accel_free(void *ptr)
{
    if (ptr != NULL)
        hooks.free_fn(ptr);
}

char *accel_strndup(const char *s, size_t n)
{
    char *p = accel_malloc(n + 1);

    if (p == NULL)
        return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *accel_strdup(const char *s)
{
    return accel_strndup(s, strlen(s));
}
