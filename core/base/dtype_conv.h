/*
 * dtype_conv.h (private to libaccelrun; core/comm and core/shard use it): the
 * one definition of the element conversions between fp32 and the two 16-bit
 * types, as inline
 * functions that compile as C (dtype.c, core/shard's host path) and as CUDA
 * device code (core/shard/device.cu), so that the host and the device round
 * the same way, bit for bit.
 *
 * They work on bit patterns: the result does not depend on the rounding mode
 * or on flush-to-zero, on either side.  The rules (core/comm/dtype_int.h): round to
 * nearest, ties to even; an fp32 value past the largest finite result becomes
 * an infinity; fp16 subnormals are produced; a NaN stays a NaN (quiet, with
 * the payload's top bits).  Nothing here allocates or fails.
 */
#ifndef ACCEL_COMM_DTYPE_CONV_H
#define ACCEL_COMM_DTYPE_CONV_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define COMM_CONV_FN static __host__ __device__ inline
#else
#define COMM_CONV_FN static inline
#endif

COMM_CONV_FN uint32_t comm__cvt_bits(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    return x;
#endif
}

COMM_CONV_FN float comm__cvt_float(uint32_t x)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(x);
#else
    float f;
    memcpy(&f, &x, sizeof(f));
    return f;
#endif
}

COMM_CONV_FN float comm__cvt_bf16_to_f32(uint16_t h)
{
    return comm__cvt_float((uint32_t)h << 16);
}

COMM_CONV_FN uint16_t comm__cvt_f32_to_bf16(float f)
{
    uint32_t x = comm__cvt_bits(f);

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

COMM_CONV_FN float comm__cvt_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;

    if (exp == 0) {
        /* zero or subnormal: man x 2^-24, exact in fp32 (a normal fp32
         * number, so flush-to-zero cannot touch it) */
        float v = (float)man * 0x1p-24f;
        return comm__cvt_float(comm__cvt_bits(v) | sign);
    }
    if (exp == 31) /* infinity or NaN, payload kept */
        return comm__cvt_float(sign | 0x7f800000u | (man << 13));
    return comm__cvt_float(sign | ((exp + 112u) << 23) | (man << 13));
}

COMM_CONV_FN uint16_t comm__cvt_f32_to_f16(float f)
{
    uint32_t x = comm__cvt_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    uint32_t q, rem, half, man;
    unsigned shift;

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
    /* fp16 subnormal or zero: the result is round(|f| x 2^24).  Exactly
     * 2^-25 is a tie between 0 and the smallest subnormal and goes to 0. */
    if (ax <= 0x33000000u)
        return (uint16_t)sign;
    man = (ax & 0x7fffffu) | 0x800000u;
    shift = 126u - (ax >> 23); /* 14 .. 24 */
    q = man >> shift;
    rem = man & ((1u << shift) - 1u);
    half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u)))
        q++; /* may reach 0x400, the smallest normal: still right */
    return (uint16_t)(sign | q);
}

#endif
