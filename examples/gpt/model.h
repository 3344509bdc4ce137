/*
 * model.h: the example GPT, a byte-level (V = 256) transformer language
 * model cut into units for core/shard: unit 0 the embeddings (wte, wpe),
 * units 1..L the pre-LayerNorm blocks (causal multi-head attention, GELU MLP
 * of 4C), unit L+1 the final LayerNorm and an untied lm head.
 *
 * The model owns its activations for one micro-batch of B sequences of T
 * bytes, never its parameters: each unit's forward and backward take the
 * unit's flat parameters (the packing of gpt_units) and ADD the unit's
 * gradient into a flat buffer of the same layout, which is exactly what
 * accel_shard_params and accel_shard_grads hand out.  The compute goes
 * through a backend table (ops.h): gpt_init uses the CPU one (kernels.c), so
 * this file links with nothing but kernels.c, rng.c and libm
 * (tests/examples/gradcheck.c builds it alone); gpt_init_on takes another,
 * e.g. the CUDA one of gpu.h, and then activations, parameters and
 * gradients are that backend's (device) memory.  Units run forward in order
 * 0..L+1 and backward in order L+1..0 on the same micro-batch.
 *
 * Ownership: gpt_init allocates the activations, gpt_free frees them (a
 * zeroed or failed model is allowed); a backend's context stays the
 * caller's and must outlive the model.
 */
#ifndef GPT_MODEL_H
#define GPT_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accel/shard.h"
#include "ops.h"

#define GPT_VOCAB 256
#define GPT_MAX_LAYERS 64
#define GPT_EMBED_PARAMS 2
#define GPT_BLOCK_PARAMS 12
#define GPT_HEAD_PARAMS 4

struct gpt_config {
    size_t T;  /* context length, bytes */
    size_t C;  /* channels */
    size_t L;  /* blocks, 1..GPT_MAX_LAYERS */
    size_t NH; /* heads; divides C */
};

/* Activations of one block for a micro-batch (N = B*T rows). */
struct gpt_block_acts {
    float *ln1, *ln1_mean, *ln1_rstd; /* (N, C), (N), (N) */
    float *qkv;                       /* (N, 3C) */
    float *att;                       /* (B, NH, T, T) softmax probabilities */
    float *atty;                      /* (N, C) attention output, before the projection */
    float *res2;                      /* (N, C) input + attention branch */
    float *ln2, *ln2_mean, *ln2_rstd; /* (N, C), (N), (N) */
    float *fch, *fch_gelu;            /* (N, 4C) */
    float *res3;                      /* (N, C) the block's output */
};

struct gpt_model {
    struct gpt_config cfg;
    size_t B;       /* sequences in a micro-batch */
    bool bf16_acts; /* round every matmul input to bf16, as autocast casts it */
    size_t nunits;  /* L + 2 */
    struct accel_shard_unit units[GPT_MAX_LAYERS + 2];
    struct accel_shard_param embed[GPT_EMBED_PARAMS], block[GPT_BLOCK_PARAMS],
        head[GPT_HEAD_PARAMS];
    char names[GPT_MAX_LAYERS][24]; /* "h.0" ... (room for any size_t) */
    size_t numel[GPT_MAX_LAYERS + 2];
    const struct gpt_ops *ops; /* the backend; every buffer below is its memory... */
    void *ctx;                 /* ...except tok, tgt and loss_sum (host) */

    /* inputs, filled by the caller before forward: (B, T) bytes each, host */
    unsigned char *tok, *tgt;
    unsigned char *dtok, *dtgt; /* their copies in the backend (tok, tgt on the CPU) */
    /* activations */
    float *x0;                        /* (N, C) embeddings */
    struct gpt_block_acts *blk;       /* L (the array is host memory) */
    float *lnf, *lnf_mean, *lnf_rstd; /* (N, C), (N), (N) */
    float *probs;                     /* (N, V) softmax, then dlogits in backward */
    float *losses;                    /* (N) */
    /* the head forward's loss sum (fp64): *loss_cell = this micro-batch's,
     * *loss_acc += it; loss_cell is &loss_sum on a host backend */
    double loss_sum, *loss_cell, *loss_acc;
    float *loss_mean; /* (2) gpt_loss_mean's result, gpt_loss_flag's flag */
    /* gradient scratch */
    float *dres;      /* (N, C) gradient of the residual stream */
    float *scr_a;     /* (N, 4C) */
    float *scr_b;     /* (N, C) */
    float *scr_t;     /* attention backward's (ops->attention_scratch: T on the CPU) */
    size_t act_bytes; /* everything above, in the backend's memory */
};

/* Checks the config (C % NH == 0, sizes in range) and allocates the
 * activations for micro-batches of B sequences on the CPU backend.  Returns
 * 0, or -1 with a reason in why (invalid config or out of memory). */
int gpt_init(struct gpt_model *m, const struct gpt_config *cfg, size_t B, bool bf16_acts, char *why,
             size_t whylen);
/* The same on backend `ops` with its context `ctx` (ops.h). */
int gpt_init_on(struct gpt_model *m, const struct gpt_config *cfg, size_t B, bool bf16_acts,
                const struct gpt_ops *ops, void *ctx, char *why, size_t whylen);
void gpt_free(struct gpt_model *m);

/* Parameters (elements) of the whole model. */
size_t gpt_num_params(const struct gpt_model *m);

/* Initial values of unit u's flat parameters (numel[u] floats): N(0, 0.02)
 * weights, N(0, 0.02/sqrt(2L)) for the projections into the residual
 * stream, zero biases, unit LayerNorm gains.  A function of (seed, u) only. */
void gpt_init_params(const struct gpt_model *m, size_t u, float *full, uint64_t seed);

/* Unit u's forward on the micro-batch in m->tok / m->tgt (unit 0 copies them
 * to the backend); the head sets m->loss_sum (host backend) and
 * *m->loss_cell (sum over the B*T tokens of -log p(target)) and adds it to
 * *m->loss_acc. */
void gpt_forward(struct gpt_model *m, size_t u, const float *params);

/* Unit u's backward, ADDING into grads (numel[u] floats).  The head starts
 * from d(loss)/d(loss_i) = dloss for every token (e.g. loss scale / tokens
 * in the global batch on this rank's share); it destroys m->probs. */
void gpt_backward(struct gpt_model *m, size_t u, const float *params, float *grads, float dloss);

/* 0, or -1 with the backend's first failure in why (a CUDA launch, cuBLAS):
 * forward and backward queue work and return nothing, so the caller asks
 * after each unit.  Nothing waits. */
int gpt_check(const struct gpt_model *m, char *why, size_t whylen);

/* Zeroes the loss accumulator *m->loss_acc (before the micro-steps of a
 * step or the batches of a validation). */
void gpt_loss_reset(struct gpt_model *m);

/* Stores (float)(*loss_acc / denom) in m->loss_mean[0] (backend memory, for
 * an all-reduce) and returns m->loss_mean; gpt_loss_flag stores `flag` in
 * m->loss_mean[1], which the trainer all-reduces with it (a stop request
 * that every rank then sees). */
float *gpt_loss_mean(struct gpt_model *m, double denom);
void gpt_loss_flag(struct gpt_model *m, float flag);

/* Copies `bytes` of backend memory src to host dst once the work queued
 * before is done; 0, or -1 with the backend's first failure in why. */
int gpt_read(const struct gpt_model *m, void *dst, const void *src, size_t bytes, char *why,
             size_t whylen);

#endif
