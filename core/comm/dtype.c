/*
 * dtype.c: conversions between fp32 and the two 16-bit types (accel/dtype.h),
 * and the reduction kernels of the CPU path.
 *
 * The kernels are plain loops over contiguous arrays that the compiler
 * vectorises; the conversions (dtype_conv.h) work on the bit patterns so
 * that the result does not depend on the FPU's rounding mode or on
 * flush-to-zero.  The ring (socket_ring.c) decides the order in which
 * ranks' values are added; this file only adds two operands at a time, in
 * fp32.
 */
#include <string.h>

#include "../base/dtype_conv.h"
#include "dtype_int.h"

/* The conversions themselves live in dtype_conv.h, shared with core/shard's
 * CUDA kernels so that both sides round alike. */
float comm__bf16_to_f32(uint16_t h)
{
    return comm__cvt_bf16_to_f32(h);
}

uint16_t comm__f32_to_bf16(float f)
{
    return comm__cvt_f32_to_bf16(f);
}

float comm__f16_to_f32(uint16_t h)
{
    return comm__cvt_f16_to_f32(h);
}

uint16_t comm__f32_to_f16(float f)
{
    return comm__cvt_f32_to_f16(f);
}

void comm__to_f32(float *dst, const void *src, size_t n, enum accel_dtype t)
{
    const uint16_t *h = src;

    switch (t) {
    case ACCEL_F32:
        memmove(dst, src, n * sizeof(float));
        return;
    case ACCEL_BF16:
        for (size_t i = 0; i < n; i++)
            dst[i] = comm__bf16_to_f32(h[i]);
        return;
    case ACCEL_F16:
        for (size_t i = 0; i < n; i++)
            dst[i] = comm__f16_to_f32(h[i]);
        return;
    }
}

void comm__from_f32(void *dst, const float *src, size_t n, enum accel_dtype t)
{
    uint16_t *h = dst;

    switch (t) {
    case ACCEL_F32:
        memmove(dst, src, n * sizeof(float));
        return;
    case ACCEL_BF16:
        for (size_t i = 0; i < n; i++)
            h[i] = comm__f32_to_bf16(src[i]);
        return;
    case ACCEL_F16:
        for (size_t i = 0; i < n; i++)
            h[i] = comm__f32_to_f16(src[i]);
        return;
    }
}

void comm__reduce_f32(float *acc, const float *part, const void *own, size_t n, enum accel_dtype t)
{
    const float *f = own;
    const uint16_t *h = own;

    switch (t) {
    case ACCEL_F32:
        for (size_t i = 0; i < n; i++)
            acc[i] = part[i] + f[i];
        return;
    case ACCEL_BF16:
        for (size_t i = 0; i < n; i++)
            acc[i] = part[i] + comm__bf16_to_f32(h[i]);
        return;
    case ACCEL_F16:
        for (size_t i = 0; i < n; i++)
            acc[i] = part[i] + comm__f16_to_f32(h[i]);
        return;
    }
}

void comm__reduce_final(void *dst, const float *part, const void *own, size_t n, enum accel_dtype t,
                        unsigned avg_n)
{
    const float *f = own;
    const uint16_t *h = own;
    float *df = dst;
    uint16_t *dh = dst;
    /* avg divides the fp32 sum (not each term), so avg = sum / n exactly as
     * the serial reference computes it */
    float div = avg_n > 0 ? (float)avg_n : 1.0f;

    switch (t) {
    case ACCEL_F32:
        if (avg_n > 0)
            for (size_t i = 0; i < n; i++)
                df[i] = (part[i] + f[i]) / div;
        else
            for (size_t i = 0; i < n; i++)
                df[i] = part[i] + f[i];
        return;
    case ACCEL_BF16:
        for (size_t i = 0; i < n; i++) {
            float v = part[i] + comm__bf16_to_f32(h[i]);
            dh[i] = comm__f32_to_bf16(avg_n > 0 ? v / div : v);
        }
        return;
    case ACCEL_F16:
        for (size_t i = 0; i < n; i++) {
            float v = part[i] + comm__f16_to_f32(h[i]);
            dh[i] = comm__f32_to_f16(avg_n > 0 ? v / div : v);
        }
        return;
    }
}
