/*
 * accel/dtype.h: the element types the runtime moves and stores: fp32 and
 * the two 16-bit floating-point types (collectives, shards, checkpoints).
 *
 * Thread-safety: pure functions, safe from any thread.
 */
#ifndef ACCEL_DTYPE_H
#define ACCEL_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum accel_dtype { ACCEL_F32, ACCEL_BF16, ACCEL_F16 };

/* Bytes of one element; 0 for an unknown type. */
size_t accel_dtype_size(enum accel_dtype t);
/* "f32", "bf16", "f16"; "?" otherwise. */
const char *accel_dtype_name(enum accel_dtype t);
/* safetensors' names: "F32", "BF16", "F16"; NULL otherwise. */
const char *accel_dtype_st_name(enum accel_dtype t);
/* The type of a safetensors name of those three; false for any other. */
bool accel_dtype_from_st_name(const char *name, enum accel_dtype *t);

#ifdef __cplusplus
}
#endif

#endif
