/*
 * mem_host.c: core/shard's buffers in host memory (the socket backend): the
 * "host" table of mem_int.h.  Plain loops, in element order, complete on
 * return; the element arithmetic is elem_int.h's and the conversions are
 * core/base's (dtype_conv.h), so that this path and the CUDA one (device.cu)
 * compute the same bits.
 *
 * The conversions run in order, which is what lets a 16-bit image share its
 * fp32 buffer (in_place): narrowing from the first element up writes 16-bit
 * element i into fp32 element i/2 <= i, already read; widening from the last
 * element down writes fp32 element i over 16-bit elements 2i and 2i+1, read
 * at steps 2i, 2i+1 >= i.
 */
#include <string.h>

#include "../base/dtype_conv.h"
#include "accel/alloc.h"
#include "mem_int.h"

static enum accel_err host_open(void **ctx, struct accel_comm *comm, struct accel_error *err)
{
    (void)comm;
    (void)err;
    *ctx = NULL;
    return ACCEL_OK;
}

static void host_close(void *ctx)
{
    (void)ctx;
}

static void *host_alloc(void *ctx, size_t bytes, const char *unit, const char *what,
                        enum accel_err *rc, struct accel_error *err)
{
    void *p = accel_calloc(bytes ? bytes : 1, 1);

    (void)ctx;
    if (p == NULL)
        *rc = accel_error_set(err, ACCEL_ENOMEM, "shard: out of memory for %s%s%s%s (%.1f MiB)",
                              unit != NULL ? "unit " : "", unit != NULL ? unit : "",
                              unit != NULL ? "'s " : "", what, (double)bytes / (1 << 20));
    return p;
}

static void host_free(void *ctx, void *p)
{
    (void)ctx;
    accel_free(p);
}

static void *host_pinned_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    return accel_malloc(bytes ? bytes : 1);
}

static enum accel_err host_zero(void *ctx, void *p, size_t bytes, struct accel_error *err)
{
    (void)ctx;
    (void)err;
    if (bytes > 0)
        memset(p, 0, bytes);
    return ACCEL_OK;
}

static enum accel_err host_copy(void *ctx, void *dst, const void *src, size_t bytes,
                                struct accel_error *err)
{
    (void)ctx;
    (void)err;
    if (bytes > 0)
        memmove(dst, src, bytes);
    return ACCEL_OK;
}

static enum accel_err host_narrow(void *ctx, void *dst, const float *src, size_t n,
                                  enum accel_dtype t, struct accel_error *err)
{
    uint16_t *h = dst;

    switch (t) {
    case ACCEL_F32:
        return host_copy(ctx, dst, src, n * sizeof(float), err);
    case ACCEL_BF16:
        for (size_t i = 0; i < n; i++) {
            float f = src[i];
            h[i] = comm__cvt_f32_to_bf16(f);
        }
        break;
    case ACCEL_F16:
        for (size_t i = 0; i < n; i++) {
            float f = src[i];
            h[i] = comm__cvt_f32_to_f16(f);
        }
        break;
    }
    return ACCEL_OK;
}

static enum accel_err host_widen(void *ctx, float *dst, const void *src, size_t n,
                                 enum accel_dtype t, struct accel_error *err)
{
    const uint16_t *h = src;

    switch (t) {
    case ACCEL_F32:
        return host_copy(ctx, dst, src, n * sizeof(float), err);
    case ACCEL_BF16:
        for (size_t i = n; i-- > 0;) {
            uint16_t x = h[i];
            dst[i] = comm__cvt_bf16_to_f32(x);
        }
        break;
    case ACCEL_F16:
        for (size_t i = n; i-- > 0;) {
            uint16_t x = h[i];
            dst[i] = comm__cvt_f16_to_f32(x);
        }
        break;
    }
    return ACCEL_OK;
}

static enum accel_err host_round(void *ctx, float *dst, const float *src, size_t n,
                                 enum accel_dtype t, struct accel_error *err)
{
    switch (t) {
    case ACCEL_F32:
        return host_copy(ctx, dst, src, n * sizeof(float), err);
    case ACCEL_BF16:
        for (size_t i = 0; i < n; i++)
            dst[i] = comm__cvt_bf16_to_f32(comm__cvt_f32_to_bf16(src[i]));
        break;
    case ACCEL_F16:
        for (size_t i = 0; i < n; i++)
            dst[i] = comm__cvt_f16_to_f32(comm__cvt_f32_to_f16(src[i]));
        break;
    }
    return ACCEL_OK;
}

static enum accel_err host_accumulate(void *ctx, float *acc, const void *src, size_t n,
                                      enum accel_dtype t, struct accel_error *err)
{
    const float *f = src;
    const uint16_t *h = src;

    (void)ctx;
    (void)err;
    switch (t) {
    case ACCEL_F32:
        for (size_t i = 0; i < n; i++)
            acc[i] = SHARD_FADD(acc[i], f[i]);
        break;
    case ACCEL_BF16:
        for (size_t i = 0; i < n; i++)
            acc[i] = SHARD_FADD(acc[i], comm__cvt_bf16_to_f32(h[i]));
        break;
    case ACCEL_F16:
        for (size_t i = 0; i < n; i++)
            acc[i] = SHARD_FADD(acc[i], comm__cvt_f16_to_f32(h[i]));
        break;
    }
    return ACCEL_OK;
}

static enum accel_err host_sumsq(void *ctx, const float *g, size_t n, double *acc,
                                 struct accel_error *err)
{
    double a = *acc;

    (void)ctx;
    (void)err;
    for (size_t i = 0; i < n; i++)
        a = shard__sumsq_elem(a, g[i]);
    *acc = a;
    return ACCEL_OK;
}

static enum accel_err host_adamw(void *ctx, const struct shard_adamw_k *k, float gmul, float *p,
                                 const float *g, float *m, float *v, size_t n,
                                 struct accel_error *err)
{
    struct shard_adamw_k kk = *k; /* locals: no reload through a pointer that may alias p */

    (void)ctx;
    (void)err;
    for (size_t i = 0; i < n; i++)
        shard__adamw_elem(&kk, gmul, &p[i], g[i], &m[i], &v[i]);
    return ACCEL_OK;
}

static enum accel_err host_sgd(void *ctx, const struct shard_sgd_k *k, float gmul, float *p,
                               const float *g, float *buf, size_t n, struct accel_error *err)
{
    struct shard_sgd_k kk = *k;

    (void)ctx;
    (void)err;
    for (size_t i = 0; i < n; i++)
        shard__sgd_elem(&kk, gmul, &p[i], g[i], buf != NULL ? &buf[i] : NULL);
    return ACCEL_OK;
}

/* Every call is complete on return: there is nothing to order with a
 * stream, so one is accepted and ignored. */
static enum accel_err host_set_compute(void *ctx, void *stream, struct accel_error *err)
{
    (void)ctx;
    (void)stream;
    (void)err;
    return ACCEL_OK;
}

static enum accel_err host_handoff(void *ctx, struct accel_error *err)
{
    (void)ctx;
    (void)err;
    return ACCEL_OK;
}

const struct shard_mem_ops shard__host_ops = {
    .name = "host",
    .in_place = true,
    .open = host_open,
    .close = host_close,
    .alloc = host_alloc,
    .free = host_free,
    .pinned_alloc = host_pinned_alloc,
    .pinned_free = host_free,
    .zero = host_zero,
    .copy = host_copy,
    .put = host_copy,
    .get = host_copy,
    .narrow = host_narrow,
    .widen = host_widen,
    .round = host_round,
    .accumulate = host_accumulate,
    .sumsq = host_sumsq,
    .adamw = host_adamw,
    .sgd = host_sgd,
    .set_compute = host_set_compute,
    .to_compute = host_handoff,
    .from_compute = host_handoff,
};
