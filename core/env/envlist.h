/*
 * envlist.h (private to core/env): a small NAME=VALUE builder with caps, a
 * replace-on-set rule (the last set wins, as with Python's dict) and a final
 * sort.
 */
#ifndef ACCEL_ENV_ENVLIST_H
#define ACCEL_ENV_ENVLIST_H

#include "accel/env.h"
#include "accel/value.h"

struct envlist {
    struct accel_env *env;
    size_t cap;
    enum accel_err rc; /* sticky: the first failure */
};

void envlist_set(struct envlist *l, const char *name, const char *value);
void envlist_setf(struct envlist *l, const char *name, const char *fmt, ...) ACCEL_PRINTF(3, 4);
/* Sets NAME to Python's str(v), lowercased when `lower`. */
void envlist_set_py(struct envlist *l, const char *name, const struct accel_val *v, bool lower);
void envlist_unset(struct envlist *l, const char *name);
void envlist_sort(struct envlist *l);

#endif
