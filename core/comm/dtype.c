/*
 * dtype.c: the element types of accel/comm.h, conversions between fp32 and
 * the two 16-bit types, and the reduction kernels of the CPU path.
 *
 * The kernels are plain loops over contiguous arrays that the compiler
 * vectorises; the conversions work on the bit patterns so that the result
 * does not depend on the FPU's rounding mode or on flush-to-zero.  The ring
 * (socket_ring.c) decides the order in which ranks' values are added; this
 * file only adds two operands at a time, in fp32.
 */
#include <string.h>

#include "dtype_int.h"

size_t accel_dtype_size(enum accel_dtype t)
{
    switch (t) {
    case ACCEL_F32:
        return 4;
    case ACCEL_BF16:
    case ACCEL_F16:
        return 2;
    }
    return 0;
}

const char *accel_dtype_name(enum accel_dtype t)
{
    switch (t) {
    case ACCEL_F32:
        return "f32";
    case ACCEL_BF16:
        return "bf16";
    case ACCEL_F16:
        return "f16";
    }
    return "?";
}

static uint32_t bits_of(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    return x;
}

static float float_of(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof(f));
    return f;
}

float comm__bf16_to_f32(uint16_t h)
{
    return float_of((uint32_t)h << 16);
}

uint16_t comm__f32_to_bf16(float f)
{
    uint32_t x = bits_of(f);

    /* A NaN must not round into an infinity: keep its top payload bits and
     * set the quiet bit so that a payload living only in the low half
     * survives as a NaN. */
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x0040u);
    /* Round to nearest even on the 16 bits dropped; a carry out of the
     * mantissa bumps the exponent, and past the largest finite value it
     * gives the infinity, both as IEEE rounding does. */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float comm__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;

    if (exp == 0) {
        /* zero or subnormal: man * 2^-24, exact in fp32 */
        float v = (float)man * 0x1p-24f;
        return float_of(bits_of(v) | sign);
    }
    if (exp == 31) /* infinity or NaN, payload kept */
        return float_of(sign | 0x7f800000u | (man << 13));
    return float_of(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t comm__f32_to_f16(float f)
{
    uint32_t x = bits_of(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    uint32_t q, rem, half;

    if (ax > 0x7f800000u) /* NaN: quiet, top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    /* 65520 is halfway between 65504 (the largest fp16) and 65536; ties go to
     * the even neighbour, which is the infinity */
    if (ax >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) {
        /* normal in fp16: rebias the exponent (127 - 15 = 112) and drop 13
         * mantissa bits, rounding to nearest even; a carry may bump the
         * exponent, which is still the right encoding */
        uint32_t r = ax - 0x38000000u;
        q = r >> 13;
        rem = r & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (q & 1u)))
            q++;
        return (uint16_t)(sign | q);
    }
    /* fp16 subnormal or zero: the result is round(|f| * 2^24).  Exactly
     * 2^-25 is a tie between 0 and the smallest subnormal and goes to 0. */
    if (ax <= 0x33000000u)
        return (uint16_t)sign;
    {
        uint32_t man = (ax & 0x7fffffu) | 0x800000u;
        unsigned shift = 126u - (ax >> 23); /* 14 .. 24 */
        q = man >> shift;
        rem = man & ((1u << shift) - 1u);
        half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u)))
            q++; /* may reach 0x400, the smallest normal: still right */
        return (uint16_t)(sign | q);
    }
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
