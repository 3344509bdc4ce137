/*
 * accel/alloc.h: the allocator hook.  Every allocation in libaccelrun goes
 * through these functions so that tests can count allocations and fail the
 * Nth one (the counting allocator of tests/harness/test.c, which test_config,
 * test_env, test_site, test_topo and the other unit programs install).
 * libyaml's own allocations inside the parser are not hooked; a libyaml
 * failure is reported as ACCEL_ENOMEM.
 *
 * Thread-safety: accel_alloc_set is not: call it once, before any other
 * thread uses libaccelrun.  The allocation functions are safe from any thread
 * when the installed hooks are (malloc, realloc and free are).
 */
#ifndef ACCEL_ALLOC_H
#define ACCEL_ALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct accel_alloc_hooks {
    void *(*malloc_fn)(size_t size);
    void *(*realloc_fn)(void *ptr, size_t size);
    void (*free_fn)(void *ptr);
};

/* Installs the hooks (NULL restores libc).  Set before any allocation: memory
 * allocated by one set of hooks must be freed by the same set. */
void accel_alloc_set(const struct accel_alloc_hooks *hooks);

/* malloc/calloc/realloc/free through the hooks.  accel_calloc checks n*size
 * for overflow.  All return NULL on failure; accel_free(NULL) does nothing. */
void *accel_malloc(size_t size);
void *accel_calloc(size_t n, size_t size);
void *accel_realloc(void *ptr, size_t size);
void accel_free(void *ptr);

/* Copies of `s` (or its first `n` bytes); caller frees with accel_free.
 * NULL on allocation failure. */
char *accel_strdup(const char *s);
char *accel_strndup(const char *s, size_t n);

#ifdef __cplusplus
}
#endif

#endif
