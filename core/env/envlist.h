/*
 * env__list.h (private to core/env): a small NAME=VALUE builder with caps, a
 * replace-on-set rule (the last set wins, as with Python's dict) and a final
 * sort.
 */
#ifndef ACCEL_ENV_ENVLIST_H
#define ACCEL_ENV_ENVLIST_H

#include "accel/env.h"
#include "accel/value.h"

struct env__list {
    struct accel_env *env;
    size_t cap;
    enum accel_err rc; /* sticky: the first failure */
};

void env__list_set(struct env__list *l, const char *name, const char *value);
void env__list_setf(struct env__list *l, const char *name, const char *fmt, ...) ACCEL_PRINTF(3, 4);
/* Sets NAME to Python's str(v), lowercased when `lower`. */
void env__list_set_py(struct env__list *l, const char *name, const struct accel_val *v, bool lower);
void env__list_unset(struct env__list *l, const char *name);
void env__list_sort(struct env__list *l);

#endif
