/*
 * ops.h: the table through which model.c drives a compute backend: memory
 * (allocate, zero, copy in and out) and every kernel of kernels.h.  One body
 * of model code runs on either backend:
 *
 *   gpt_cpu_ops   (kernels.c)   host memory, the kernels of kernels.c, each
 *                               entry calling that kernel unchanged, so the
 *                               CPU path computes the same bits as before
 *   gpu.h         (the .cu)     device memory and CUDA kernels with cuBLAS,
 *                               queued on one stream (the backend's compute
 *                               stream, beside the communicator's)
 *
 * Every entry takes the backend's context first (NULL for the CPU).  Pointer
 * arguments are the backend's memory (alloc), except where "host" is said.
 * Shapes and semantics are those of kernels.h: backward entries ADD into
 * their gradients, gelu_backward sets its output.  Entries return nothing:
 * a backend that fails (a CUDA launch, cuBLAS) keeps the first failure and
 * skips what follows until status() reports it; download() reports it too.
 * This header compiles as C and as C++ (the CUDA backend includes it).
 */
#ifndef GPT_OPS_H
#define GPT_OPS_H

#include <stddef.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

struct gpt_ops {
    const char *name; /* "cpu", "cuda" */
    bool host;        /* its memory is host memory (the model then reads it directly) */

    /* Zeroed memory of `bytes`, NULL when that fails; free accepts NULL. */
    void *(*alloc)(void *ctx, size_t bytes);
    void (*free)(void *ctx, void *p);
    void (*zero)(void *ctx, void *p, size_t bytes);
    /* dst (backend) = src (host), `bytes`; src may be reused on return.  A
     * host backend skips dst == src. */
    void (*upload)(void *ctx, void *dst, const void *src, size_t bytes);
    /* dst (host) = src (backend) once everything queued before is done;
     * returns 0, or -1 with the backend's first failure in why. */
    int (*download)(void *ctx, void *dst, const void *src, size_t bytes, char *why, size_t whylen);
    /* 0, or -1 with the first failure so far in why (nothing waits). */
    int (*status)(void *ctx, char *why, size_t whylen);
    /* floats of scratch attention_backward needs */
    size_t (*attention_scratch)(size_t B, size_t T, size_t NH);

    /* kernels.h, with the context first */
    void (*encoder_forward)(void *ctx, float *out, const unsigned char *tok, const float *wte,
                            const float *wpe, size_t B, size_t T, size_t C);
    void (*encoder_backward)(void *ctx, float *dwte, float *dwpe, const float *dout,
                             const unsigned char *tok, size_t B, size_t T, size_t C);
    void (*layernorm_forward)(void *ctx, float *out, float *mean, float *rstd, const float *inp,
                              const float *w, const float *b, size_t N, size_t C);
    void (*layernorm_backward)(void *ctx, float *dinp, float *dw, float *db, const float *dout,
                               const float *inp, const float *w, const float *mean,
                               const float *rstd, size_t N, size_t C);
    void (*matmul_forward)(void *ctx, float *out, const float *inp, const float *w, const float *b,
                           size_t N, size_t C, size_t OC);
    void (*matmul_backward)(void *ctx, float *dinp, float *dw, float *db, const float *dout,
                            const float *inp, const float *w, size_t N, size_t C, size_t OC);
    void (*attention_forward)(void *ctx, float *out, float *att, const float *qkv, size_t B,
                              size_t T, size_t C, size_t NH);
    void (*attention_backward)(void *ctx, float *dqkv, const float *dout, const float *qkv,
                               const float *att, float *scratch, size_t B, size_t T, size_t C,
                               size_t NH);
    void (*gelu_forward)(void *ctx, float *out, const float *inp, size_t n);
    void (*gelu_backward)(void *ctx, float *dinp, const float *inp, const float *dout, size_t n);
    void (*residual_forward)(void *ctx, float *out, const float *a, const float *b, size_t n);
    /* kernels.h's crossentropy_forward, its sum of the N losses (fp64, a
     * fixed order) stored to *sum and added to *acc (both backend memory) */
    void (*crossentropy_forward)(void *ctx, float *probs, float *losses, const float *logits,
                                 const unsigned char *targets, size_t N, size_t V, double *sum,
                                 double *acc);
    void (*crossentropy_backward)(void *ctx, float *probs, const unsigned char *targets,
                                  float dloss, size_t N, size_t V);
    void (*round_bf16)(void *ctx, float *x, size_t n);
    /* *out = (float)(*acc / denom): a mean for the communicator to reduce */
    void (*loss_mean)(void *ctx, float *out, const double *acc, double denom);
};

/* The CPU backend (kernels.c): host memory (calloc), kernels.h's kernels. */
extern const struct gpt_ops gpt_cpu_ops;

#ifdef __cplusplus
}
#endif

#endif
