/*
 * dtype.c: names and sizes of the element types (accel/dtype.h).
 */
#include <string.h>

#include "accel/dtype.h"

static const struct {
    const char *name, *st_name;
    size_t size;
} types[] = {
    [ACCEL_F32] = {"f32", "F32", 4},
    [ACCEL_BF16] = {"bf16", "BF16", 2},
    [ACCEL_F16] = {"f16", "F16", 2},
};

#define NTYPES (sizeof types / sizeof types[0])

size_t accel_dtype_size(enum accel_dtype t)
{
    return (unsigned)t < NTYPES ? types[t].size : 0;
}

const char *accel_dtype_name(enum accel_dtype t)
{
    return (unsigned)t < NTYPES ? types[t].name : "?";
}

const char *accel_dtype_st_name(enum accel_dtype t)
{
    return (unsigned)t < NTYPES ? types[t].st_name : NULL;
}

bool accel_dtype_from_st_name(const char *name, enum accel_dtype *t)
{
    for (size_t i = 0; i < NTYPES; i++)
        if (!strcmp(name, types[i].st_name)) {
            *t = (enum accel_dtype)i;
            return true;
        }
    return false;
}
