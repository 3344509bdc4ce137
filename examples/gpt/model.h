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
 * accel_shard_params and accel_shard_grads hand out.  So this file links
 * with nothing but kernels.c, rng.c and libm (tests/examples/gradcheck.c
 * builds it alone).  Units run forward in order 0..L+1 and backward in order
 * L+1..0 on the same micro-batch.
 *
 * Ownership: gpt_init allocates the activations, gpt_free frees them (a
 * zeroed or failed model is allowed).
 */
#ifndef GPT_MODEL_H
#define GPT_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accel/shard.h"

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

    /* inputs, filled by the caller before forward: (B, T) bytes each */
    unsigned char *tok, *tgt;
    /* activations */
    float *x0;                        /* (N, C) embeddings */
    struct gpt_block_acts *blk;       /* L */
    float *lnf, *lnf_mean, *lnf_rstd; /* (N, C), (N), (N) */
    float *probs;                     /* (N, V) softmax, then dlogits in backward */
    float *losses;                    /* (N) */
    double loss_sum;                  /* sum of losses of the last head forward */
    /* gradient scratch */
    float *dres;      /* (N, C) gradient of the residual stream */
    float *scr_a;     /* (N, 4C) */
    float *scr_b;     /* (N, C) */
    float *scr_t;     /* (T) */
    size_t act_bytes; /* everything above */
};

/* Checks the config (C % NH == 0, sizes in range) and allocates the
 * activations for micro-batches of B sequences.  Returns 0, or -1 with a
 * reason in why (invalid config or out of memory). */
int gpt_init(struct gpt_model *m, const struct gpt_config *cfg, size_t B, bool bf16_acts, char *why,
             size_t whylen);
void gpt_free(struct gpt_model *m);

/* Parameters (elements) of the whole model. */
size_t gpt_num_params(const struct gpt_model *m);

/* Initial values of unit u's flat parameters (numel[u] floats): N(0, 0.02)
 * weights, N(0, 0.02/sqrt(2L)) for the projections into the residual
 * stream, zero biases, unit LayerNorm gains.  A function of (seed, u) only. */
void gpt_init_params(const struct gpt_model *m, size_t u, float *full, uint64_t seed);

/* Unit u's forward on the micro-batch in m->tok / m->tgt; the head sets
 * m->loss_sum (sum over the B*T tokens of -log p(target)). */
void gpt_forward(struct gpt_model *m, size_t u, const float *params);

/* Unit u's backward, ADDING into grads (numel[u] floats).  The head starts
 * from d(loss)/d(loss_i) = dloss for every token (e.g. loss scale / tokens
 * in the global batch on this rank's share); it destroys m->probs. */
void gpt_backward(struct gpt_model *m, size_t u, const float *params, float *grads, float dloss);

#endif
