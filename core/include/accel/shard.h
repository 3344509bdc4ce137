/*
 * accel/shard.h: sharded data-parallel training (FSDP / ZeRO-3 style) for
 * native trainers, configured by the accelerate environment (DESIGN
 * core/shard).
 *
 * A model is a list of units (FSDP's wrapped modules: the embedding, each
 * transformer block, the head).  A unit's parameters are packed in one flat
 * fp32 buffer, padded to a multiple of the world size; rank r owns the
 * contiguous slice r of it: the fp32 master weights, the gradient and the
 * optimizer state of that slice (16 bytes a parameter with AdamW, over N
 * ranks).  Around each unit's compute the trainer calls:
 *
 *   forward:   accel_shard_gather(u)   the unit's full parameters, all-gathered
 *                                      in the compute precision, as fp32
 *              ... compute with accel_shard_params(u) ...
 *              accel_shard_release(u)  FULL_SHARD frees them (SHARD_GRAD_OP
 *                                      and NO_SHARD keep them for backward)
 *   backward:  accel_shard_gather(u)   (again, for FULL_SHARD)
 *              ... compute, ADDING into accel_shard_grads(u) ...
 *              accel_shard_reduce(u)   on the last micro-step: reduce-scatter
 *                                      (average) into this rank's slice; on
 *                                      the others nothing is sent and the full
 *                                      gradient keeps accumulating
 *              accel_shard_release(u)
 *   then:      accel_shard_step()      global gradient norm across ranks,
 *                                      clipping, fp16 loss-scale check, the
 *                                      optimizer on this rank's slices
 *
 * Precision (ACCELERATE_MIXED_PRECISION): "no" gathers and reduces fp32;
 * "bf16" and "fp16" gather the compute copy and reduce the gradients in that
 * type (halving the traffic; each reduction accumulates in fp32 and rounds
 * once), while master weights, the gradient slice and the optimizer state
 * stay fp32.  The compute copy handed to the model is fp32 holding values
 * rounded to the compute type.  fp16 uses dynamic loss scaling: multiply the
 * loss's gradient by accel_shard_loss_scale(); a step whose gradients
 * overflow is skipped and the scale halved; after `scale_window` good steps
 * it doubles.
 *
 * Strategies (FSDP_SHARDING_STRATEGY): FULL_SHARD (parameters, gradients and
 * state sharded; parameters gathered for forward and again for backward),
 * SHARD_GRAD_OP (parameters kept gathered from forward to backward),
 * NO_SHARD (every rank holds everything; gradients all-reduced).
 *
 * Ownership: accel_shard_init copies the unit specs; accel_shard_free frees
 * everything.  The communicator stays the caller's.
 */
#ifndef ACCEL_SHARD_H
#define ACCEL_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accel/comm.h"
#include "accel/err.h"

#define ACCEL_SHARD_MAX_UNITS 4096
#define ACCEL_SHARD_MAX_PARAMS 65536 /* parameters (tensors) over all units */

enum accel_shard_strategy { ACCEL_FULL_SHARD, ACCEL_SHARD_GRAD_OP, ACCEL_NO_SHARD };
enum accel_optimizer { ACCEL_ADAMW, ACCEL_SGD };

struct accel_shard_opts {
    enum accel_dtype compute;          /* F32 ("no"), BF16, F16 */
    enum accel_shard_strategy strategy;
    unsigned grad_accum;               /* micro-steps per step, >= 1 */
    double max_grad_norm;              /* clip the global norm to this; 0 = no clipping */
    enum accel_optimizer optimizer;
    double lr, beta1, beta2, eps, weight_decay; /* AdamW (decoupled weight decay) */
    double momentum;                   /* SGD */
    double loss_scale;                 /* fp16: initial scale (default 65536) */
    unsigned scale_window;             /* fp16: good steps before the scale doubles (default 2000) */
};

/* Defaults (AdamW lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.01,
 * FULL_SHARD, fp32, no accumulation, no clipping), then the environment:
 * ACCELERATE_MIXED_PRECISION (no|bf16|fp16), FSDP_SHARDING_STRATEGY
 * (FULL_SHARD|SHARD_GRAD_OP|NO_SHARD, or accelerate's numbers 1|2|3),
 * ACCELERATE_GRADIENT_ACCUMULATION_STEPS.  A value it does not support
 * (fp8, HYBRID_SHARD, ...) is ACCEL_EUNSUPPORTED, a malformed one
 * ACCEL_EINVAL; the message names the variable, its value and what is
 * supported. */
enum accel_err accel_shard_opts_from_env(struct accel_shard_opts *o,
                                         struct accel_error *err) ACCEL_WUR;

/* One parameter tensor: its name (for checkpoints) and shape. */
struct accel_shard_param {
    const char *name;
    unsigned ndim;     /* 1..4 */
    size_t shape[4];
};

struct accel_shard_unit {
    const char *name;                        /* "h.3" */
    const struct accel_shard_param *params;  /* packed in this order */
    size_t nparams;
};

struct accel_shard;

/* Lays out the units over the communicator's ranks and allocates this
 * rank's slices (master weights zeroed; see accel_shard_set_full).  Errors:
 * ACCEL_EINVAL (an empty unit, a zero dimension, bad options), ACCEL_ETOOBIG
 * (caps, sizes that overflow), ACCEL_ENOMEM. */
enum accel_err accel_shard_init(struct accel_shard **out, struct accel_comm *comm,
                                const struct accel_shard_unit *units, size_t nunits,
                                const struct accel_shard_opts *opts,
                                struct accel_error *err) ACCEL_WUR;

/* Number of elements of unit u (unpadded) and of its parameter p's offset
 * inside the unit's flat buffer. */
size_t accel_shard_unit_numel(const struct accel_shard *s, size_t u);
size_t accel_shard_param_offset(const struct accel_shard *s, size_t u, size_t p);

/* Sets unit u's master weights from the full fp32 values `full` (numel
 * elements, the same on every rank: e.g. initialised from one seed); each
 * rank keeps its slice.  Local, no communication. */
enum accel_err accel_shard_set_full(struct accel_shard *s, size_t u, const float *full,
                                    struct accel_error *err) ACCEL_WUR;

/* This rank's slice of unit u: master weights (fp32) and their range
 * [*begin, *end) in the unpadded flat buffer (empty when the slice is all
 * padding).  For checkpoints. */
float *accel_shard_master(struct accel_shard *s, size_t u, size_t *begin, size_t *end);

/* Gathers unit u's full parameters (in the compute type, as fp32 values).
 * Collective over the communicator, in the same unit order on every rank.
 * A no-op when they are already gathered. */
enum accel_err accel_shard_gather(struct accel_shard *s, size_t u, struct accel_error *err) ACCEL_WUR;

/* The gathered parameters of unit u (numel fp32 values), NULL when not
 * gathered; and its full gradient buffer (numel fp32), which backward ADDS
 * into, allocated and zeroed on first use in a step. */
const float *accel_shard_params(struct accel_shard *s, size_t u);
float *accel_shard_grads(struct accel_shard *s, size_t u);

/* Frees unit u's gathered parameters when the strategy does not keep them
 * (FULL_SHARD).  Never communicates. */
void accel_shard_release(struct accel_shard *s, size_t u);

/* After unit u's backward on a micro-step: on the last micro-step of a step,
 * reduce-scatters (averages) its gradient into this rank's slice and frees
 * the full gradient; on earlier micro-steps does nothing (the gradient keeps
 * accumulating locally, no communication).  `last` is the caller's, so the
 * trainer decides the micro-step count. */
enum accel_err accel_shard_reduce(struct accel_shard *s, size_t u, bool last,
                                  struct accel_error *err) ACCEL_WUR;

struct accel_shard_stats {
    double grad_norm;   /* global L2 norm before clipping (of unscaled gradients) */
    bool skipped;       /* fp16 overflow: no update this step */
    double loss_scale;  /* the scale for the next step (1 unless fp16) */
    unsigned long step; /* optimizer steps taken */
};

/* The optimizer step on this rank's slices: all-reduces the squared norms
 * (one fp32 value per rank... summed in a fixed order), clips, unscales,
 * updates, zeroes the slice gradients.  Collective. */
enum accel_err accel_shard_step(struct accel_shard *s, struct accel_shard_stats *st,
                                struct accel_error *err) ACCEL_WUR;

/* Sets the learning rate of the next steps (a trainer's schedule). */
void accel_shard_set_lr(struct accel_shard *s, double lr);

/* fp16: the factor to multiply the loss gradient by; 1 otherwise. */
double accel_shard_loss_scale(const struct accel_shard *s);

/* Bytes this rank holds now (slices, state, gathered units, gradients) and
 * the most it held since init: for the memory benchmark. */
size_t accel_shard_bytes(const struct accel_shard *s, size_t *peak);

void accel_shard_free(struct accel_shard *s);

#endif
