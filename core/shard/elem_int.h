/*
 * elem_int.h (private to core/shard): the arithmetic of one element, written
 * once for both memories: the host loops (mem_host.c) and the CUDA kernels
 * (device.cu) call these same inline functions, so the two paths cannot
 * drift apart.  Compiles as C and as CUDA C++.
 *
 * Every fp32 operation goes through SHARD_FMUL/FADD/FSUB/FDIV/FSQRT: plain C
 * operators on the host (x86-64 has no FMA unless asked for, so nothing is
 * contracted: docs/shard.md, LIMITS), and the _rn intrinsics on the device,
 * which nvcc never fuses into an FMA whatever -fmad says and which round to
 * nearest even with subnormals kept (nvcc's default -ftz=false).  Each
 * element therefore sees the same IEEE operations in the same order on both
 * sides, and the updates agree bit for bit (NaN payloads aside: a GPU
 * makes the canonical NaN where x86 keeps an operand's).  The optimizer's
 * scalars are formed once a step on the host (optim.c) and passed in as
 * fp32.
 *
 * Not here: which elements (the callers), reductions over many elements
 * (the order of those is each memory's own: docs/shard.md).
 */
#ifndef ACCEL_SHARD_ELEM_INT_H
#define ACCEL_SHARD_ELEM_INT_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define SHARD_ELEM_FN static __host__ __device__ inline
#else
#include <math.h>
#define SHARD_ELEM_FN static inline
#endif

#ifdef __CUDA_ARCH__
#define SHARD_FMUL(a, b) __fmul_rn((a), (b))
#define SHARD_FADD(a, b) __fadd_rn((a), (b))
#define SHARD_FSUB(a, b) __fsub_rn((a), (b))
#define SHARD_FDIV(a, b) __fdiv_rn((a), (b))
#define SHARD_FSQRT(a) __fsqrt_rn(a)
#define SHARD_DMUL(a, b) __dmul_rn((a), (b))
#define SHARD_DADD(a, b) __dadd_rn((a), (b))
#else
#define SHARD_FMUL(a, b) ((a) * (b))
#define SHARD_FADD(a, b) ((a) + (b))
#define SHARD_FSUB(a, b) ((a) - (b))
#define SHARD_FDIV(a, b) ((a) / (b))
#define SHARD_FSQRT(a) sqrtf(a)
#define SHARD_DMUL(a, b) ((a) * (b))
#define SHARD_DADD(a, b) ((a) + (b))
#endif

/* AdamW's per-step scalars (torch.optim.AdamW), each formed in fp64 and
 * rounded to fp32 once (optim.c). */
struct shard_adamw_k {
    float b1, b2;   /* beta1, beta2 */
    float c1, c2;   /* 1 - beta1, 1 - beta2 */
    float step;     /* lr / (1 - beta1^t) */
    float bc2_sqrt; /* sqrt(1 - beta2^t) */
    float eps;
    float decay; /* 1 - lr x weight_decay */
};

/* SGD's (torch.optim.SGD, dampening 0, no Nesterov). */
struct shard_sgd_k {
    float lr, wd, mu; /* wd: L2 added to the gradient; mu: momentum */
    bool first;       /* step 1: the momentum buffer starts as the gradient */
};

/* One AdamW element; `gmul` unscales and clips the gradient (one multiply). */
SHARD_ELEM_FN void shard__adamw_elem(const struct shard_adamw_k *k, float gmul, float *p, float g,
                                     float *m, float *v)
{
    float gi = SHARD_FMUL(g, gmul);
    float mi = SHARD_FADD(SHARD_FMUL(k->b1, *m), SHARD_FMUL(k->c1, gi));
    float vi = SHARD_FADD(SHARD_FMUL(k->b2, *v), SHARD_FMUL(k->c2, SHARD_FMUL(gi, gi)));
    float pi = SHARD_FMUL(*p, k->decay);

    *m = mi;
    *v = vi;
    *p = SHARD_FSUB(
        pi, SHARD_FMUL(k->step, SHARD_FDIV(mi, SHARD_FADD(SHARD_FDIV(SHARD_FSQRT(vi), k->bc2_sqrt),
                                                          k->eps))));
}

/* One SGD element; buf is NULL without momentum. */
SHARD_ELEM_FN void shard__sgd_elem(const struct shard_sgd_k *k, float gmul, float *p, float g,
                                   float *buf)
{
    float gi = SHARD_FMUL(g, gmul);

    if (k->wd != 0.0f)
        gi = SHARD_FADD(gi, SHARD_FMUL(k->wd, *p));
    if (buf != NULL) {
        *buf = k->first ? gi : SHARD_FADD(SHARD_FMUL(k->mu, *buf), gi);
        gi = *buf;
    }
    *p = SHARD_FSUB(*p, SHARD_FMUL(k->lr, gi));
}

/* acc + g^2 in fp64 (exact square of an fp32 value, one rounding in the add). */
SHARD_ELEM_FN double shard__sumsq_elem(double acc, float g)
{
    return SHARD_DADD(acc, SHARD_DMUL((double)g, (double)g));
}

#endif
