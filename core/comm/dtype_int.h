/*
 * dtype_int.h (private to core/comm): element conversions and the reduction
 * kernels every CPU path shares (the socket ring and the tests' reference).
 *
 * bf16 and fp16 are widened to fp32 exactly, summed in fp32 and narrowed once,
 * rounding to nearest, ties to even.  Narrowing keeps the sign of zero and of
 * infinities, turns an fp32 value past the largest finite result into an
 * infinity, produces fp16 subnormals (and bf16 ones, which fp32 subnormals
 * map to directly), and keeps a NaN a NaN (quiet, with the payload's top
 * bits).  Nothing here allocates or fails.
 */
#ifndef ACCEL_COMM_DTYPE_INT_H
#define ACCEL_COMM_DTYPE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "accel/comm.h"

/* One element each way. */
float comm__bf16_to_f32(uint16_t h);
uint16_t comm__f32_to_bf16(float f);
float comm__f16_to_f32(uint16_t h);
uint16_t comm__f32_to_f16(float f);

/* dst[i] = (float)src[i] for n elements of type t. */
void comm__to_f32(float *dst, const void *src, size_t n, enum accel_dtype t);

/* dst[i] = narrow(src[i]) for n elements: fp32 to type t. */
void comm__from_f32(void *dst, const float *src, size_t n, enum accel_dtype t);

/* One hop of a ring reduction: acc[i] = part[i] + (float)own[i], where `own`
 * holds type t and `acc` may be `part`. */
void comm__reduce_f32(float *acc, const float *part, const void *own, size_t n, enum accel_dtype t);

/* The last hop: v = part[i] + (float)own[i], then v / avg_n when avg_n > 0,
 * narrowed once into dst (type t).  dst may be `own` (in place). */
void comm__reduce_final(void *dst, const float *part, const void *own, size_t n, enum accel_dtype t,
                        unsigned avg_n);

#endif
