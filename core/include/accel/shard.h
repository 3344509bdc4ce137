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
 * Gradient scale: accel_shard_reduce averages over ranks, and only over
 * ranks.  Each micro-step's loss gradient is the trainer's to scale: by
 * 1/grad_accum (as accelerate's backward() divides the loss) and, with fp16,
 * by accel_shard_loss_scale().  With that, k micro-steps of batch B equal one
 * step of batch kB.
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
 * Memory follows the communicator's backend.  socket: every buffer is host
 * memory and every call is complete on return.  nccl (where this build has
 * core/shard's CUDA kernels; else ACCEL_EUNSUPPORTED): every buffer (master
 * slices, gradient slices, optimizer state, gathered parameters, full
 * gradients, 16-bit staging) is CUDA device memory of the device current at
 * accel_shard_init, which must stay current; the pointers handed out
 * (accel_shard_params, _grads, _master, _optim_state) are device pointers,
 * and all of the shard's work, collectives and kernels, is queued on the
 * communicator's stream, accel_comm_cuda_stream(comm), and returns without
 * waiting.  The trainer either queues its kernels on that same stream,
 * which orders them with the shard's without a sync (and without overlap),
 * or names a compute stream of its own (accel_shard_set_compute_stream):
 * the shard then orders the two streams by CUDA events, so that the next
 * unit's all-gather runs on the communicator's stream while this unit
 * computes.  Other streams, and host reads, must wait for the stream the
 * value was made on first (accel_comm_sync for the communicator's).  The
 * shard waits only where it needs a value on the host: accel_shard_step (the
 * norm), accel_shard_set_full and accel_shard_init, each through
 * accel_comm_sync (bounded by the communicator's timeout).  Nothing overlaps
 * on socket (docs/shard.md, "Streams and events").
 *
 * Ownership: accel_shard_init copies the unit specs; accel_shard_free frees
 * everything.  The communicator stays the caller's and must outlive the
 * shard.  Not thread-safe: one thread drives a shard.
 */
#ifndef ACCEL_SHARD_H
#define ACCEL_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accel/ckpt.h"
#include "accel/comm.h"
#include "accel/err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACCEL_SHARD_MAX_UNITS 4096
#define ACCEL_SHARD_MAX_PARAMS 65536 /* parameters (tensors) over all units */
#define ACCEL_SHARD_MAX_NAME 256     /* bytes of a unit's or parameter's name */
#define ACCEL_SHARD_MAX_ACCUM 65536  /* ACCELERATE_GRADIENT_ACCUMULATION_STEPS */
/* A unit is padded to a multiple of world size x ACCEL_SHARD_ALIGN elements,
 * so every slice starts 64-byte aligned in fp32 and 32-byte aligned in 16
 * bits, and NO_SHARD's all-reduce blocks are exactly the slices. */
#define ACCEL_SHARD_ALIGN 16

enum accel_shard_strategy { ACCEL_FULL_SHARD, ACCEL_SHARD_GRAD_OP, ACCEL_NO_SHARD };
enum accel_optimizer { ACCEL_ADAMW, ACCEL_SGD };

struct accel_shard_opts {
    /* F32 ("no"), BF16, F16: the type of the compute copy and of the
     * gradient reduction */
    enum accel_dtype compute;
    enum accel_shard_strategy strategy;
    /* micro-steps per step, >= 1: for the trainer (see "Gradient scale") */
    unsigned grad_accum;
    /* clip the global norm to this; 0 = no clipping */
    double max_grad_norm;
    enum accel_optimizer optimizer;
    /* AdamW: decoupled weight decay.  SGD: lr and weight_decay too, the
     * decay as L2 added to the gradient (torch.optim.SGD) */
    double lr, beta1, beta2, eps, weight_decay;
    /* SGD: heavy-ball momentum, 0 = none (and no buffer) */
    double momentum;
    /* fp16: initial scale, a power of two (default 65536), and the good
     * steps before it doubles (default 2000) */
    double loss_scale;
    unsigned scale_window;
};

/* The defaults below, without reading the environment. */
void accel_shard_opts_default(struct accel_shard_opts *o);

/* Defaults (AdamW lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.01,
 * FULL_SHARD, fp32, no accumulation, no clipping), then the environment as
 * accelerate's FSDP plugin reads it (docs/shard.md has the table):
 * ACCELERATE_MIXED_PRECISION (no|bf16|fp16, lowercase), FSDP_VERSION (1|2),
 * FSDP_SHARDING_STRATEGY (FSDP1: FULL_SHARD|SHARD_GRAD_OP|NO_SHARD, any case,
 * or accelerate's numbers 1|2|3), FSDP_RESHARD_AFTER_FORWARD (FSDP2: a truth
 * value, true = FULL_SHARD, false = SHARD_GRAD_OP), FSDP_OFFLOAD_PARAMS (false
 * only), ACCELERATE_GRADIENT_ACCUMULATION_STEPS (1..ACCEL_SHARD_MAX_ACCUM),
 * ACCELERATE_GRADIENT_CLIPPING (a number >= 0, or "auto" = leave it).  A
 * value it does not support (fp8, HYBRID_SHARD, offload, ...) is
 * ACCEL_EUNSUPPORTED, a malformed one ACCEL_EINVAL, one over 64 bytes
 * ACCEL_ETOOBIG; the message names the variable, its value and what is
 * supported, and err->key holds the variable's name.  *o is filled even on
 * error (defaults and the values read before the bad one). */
enum accel_err accel_shard_opts_from_env(struct accel_shard_opts *o,
                                         struct accel_error *err) ACCEL_WUR;

/* One parameter tensor: its name (for checkpoints) and shape. */
struct accel_shard_param {
    const char *name;
    unsigned ndim; /* 1..4 */
    size_t shape[4];
};

struct accel_shard_unit {
    const char *name;                       /* "h.3" */
    const struct accel_shard_param *params; /* packed in this order */
    size_t nparams;
};

struct accel_shard;

/* Lays out the units over the communicator's ranks and allocates this
 * rank's slices (master weights zeroed; see accel_shard_set_full), then
 * checks that every rank passed the same units and options (one all-gather
 * of a hash).  Collective.  Errors: ACCEL_EINVAL (an empty unit, a zero
 * dimension, a NULL name, bad options, ranks that disagree), ACCEL_ETOOBIG
 * (caps, sizes that overflow), ACCEL_EUNSUPPORTED (a backend other than
 * socket and nccl; nccl in a build without core/shard's CUDA kernels; a
 * device without stream-ordered memory pools), ACCEL_ENOMEM (host or device
 * memory), ACCEL_EIO (another CUDA failure: the message names the call and
 * CUDA's reason), and the communicator's errors. */
enum accel_err accel_shard_init(struct accel_shard **out, struct accel_comm *comm,
                                const struct accel_shard_unit *units, size_t nunits,
                                const struct accel_shard_opts *opts,
                                struct accel_error *err) ACCEL_WUR;

/* True when the buffers are CUDA device memory (the nccl backend), false
 * when they are host memory (socket). */
bool accel_shard_on_device(const struct accel_shard *s);

/* Number of elements of unit u (unpadded) and of its parameter p's offset
 * inside the unit's flat buffer. */
size_t accel_shard_unit_numel(const struct accel_shard *s, size_t u);
size_t accel_shard_param_offset(const struct accel_shard *s, size_t u, size_t p);
/* Padded length of unit u (a multiple of world size x ACCEL_SHARD_ALIGN). */
size_t accel_shard_unit_padded(const struct accel_shard *s, size_t u);
size_t accel_shard_nunits(const struct accel_shard *s);

/* Sets unit u's master weights from the full fp32 values `full` (numel
 * elements, the same on every rank: e.g. initialised from one seed); each
 * rank keeps its slice.  `full` is host memory on either backend (copied to
 * the device, complete on return: the caller may reuse it).  Local, no
 * communication.  Errors: ACCEL_EINVAL, and on a device those of the copy
 * and of accel_comm_sync. */
enum accel_err accel_shard_set_full(struct accel_shard *s, size_t u, const float *full,
                                    struct accel_error *err) ACCEL_WUR;

/* This rank's slice of unit u: master weights (fp32) and their range
 * [*begin, *end) in the unpadded flat buffer (empty when the slice is all
 * padding).  For checkpoints.  A device pointer on a device: copy on the
 * communicator's stream, or after accel_comm_sync. */
float *accel_shard_master(struct accel_shard *s, size_t u, size_t *begin, size_t *end);

/* This rank's slice of unit u's optimizer state k, over the same range as
 * accel_shard_master: AdamW k = 0 the first moment, k = 1 the second; SGD
 * k = 0 the momentum buffer.  NULL where there is none (SGD without
 * momentum, k out of range).  For checkpoints; writable, to load one (a
 * device pointer on a device, as accel_shard_master). */
float *accel_shard_optim_state(struct accel_shard *s, size_t u, unsigned k);

/* Resumes from a checkpoint: sets the optimizer step count (AdamW's bias
 * correction, SGD's momentum start) and the fp16 loss scale as a run
 * recorded them (accel_shard_stats.step, .loss_scale), once the master
 * weights and the optimizer state were written through accel_shard_master
 * and accel_shard_optim_state.  Between steps; drops gathered copies, so the
 * next gather sees the loaded weights.  Local.  Errors: ACCEL_EINVAL (fp16:
 * a scale that is not a power of two in [1, 2^64]; otherwise not 1). */
enum accel_err accel_shard_restore(struct accel_shard *s, unsigned long step, double loss_scale,
                                   struct accel_error *err) ACCEL_WUR;

/* Gathers unit u's full parameters (in the compute type, as fp32 values).
 * Collective over the communicator, in the same unit order on every rank.
 * A no-op when they are already gathered. */
enum accel_err accel_shard_gather(struct accel_shard *s, size_t u,
                                  struct accel_error *err) ACCEL_WUR;

/* The gathered parameters of unit u (numel fp32 values), NULL when not
 * gathered (and after accel_shard_step, which makes every gathered copy
 * stale); and its full gradient buffer (numel fp32), which backward ADDS
 * into, allocated and zeroed on first use in a step (NULL when that
 * allocation, or the hand-off to the compute stream, fails; the reason is
 * logged).  Write only the first numel elements.  Device pointers on a
 * device, valid for kernels queued on the compute stream (the communicator's
 * unless one was set) after the accel_shard_gather and the first
 * accel_shard_grads of the unit, until release, reduce or step frees them
 * (in stream order, after the compute stream's work queued before that
 * call). */
const float *accel_shard_params(struct accel_shard *s, size_t u);
float *accel_shard_grads(struct accel_shard *s, size_t u);

/* Frees unit u's gathered parameters when the strategy does not keep them:
 * FULL_SHARD always; SHARD_GRAD_OP once unit u's gradient was reduced in this
 * step (after the last backward); NO_SHARD never.  Never communicates. */
void accel_shard_release(struct accel_shard *s, size_t u);

/* After unit u's backward on a micro-step: on the last micro-step of a step,
 * reduce-scatters (averages over ranks) its gradient in the compute type
 * into this rank's slice (NO_SHARD: all-reduces it) and frees the full
 * gradient; on earlier micro-steps does nothing (the gradient keeps
 * accumulating locally, no communication).  `last` is the caller's, so the
 * trainer decides the micro-step count.  With `last`, collective: every rank
 * calls it for the same units in the same order, a rank with no gradient for
 * the unit too (it sends zeros). */
enum accel_err accel_shard_reduce(struct accel_shard *s, size_t u, bool last,
                                  struct accel_error *err) ACCEL_WUR;

struct accel_shard_stats {
    double grad_norm;   /* global L2 norm before clipping (of unscaled gradients) */
    bool skipped;       /* fp16 overflow: no update this step */
    double loss_scale;  /* the scale for the next step (1 unless fp16) */
    unsigned long step; /* optimizer steps taken */
};

/* The optimizer step on this rank's slices: each rank's sum of squares of
 * its gradient slices in fp64, all-gathered and summed in rank order on
 * every rank (so every rank derives the same norm, clip factor and skip
 * decision, bit for bit); then unscales and clips (one multiply), updates,
 * zeroes the slice gradients and marks gathered parameters stale.  fp16: a
 * non-finite norm skips the update on every rank and halves the scale (not
 * below 1).  Collective.  Errors: ACCEL_EINVAL (a unit's gradient was not
 * reduced with last = true), the communicator's. */
enum accel_err accel_shard_step(struct accel_shard *s, struct accel_shard_stats *st,
                                struct accel_error *err) ACCEL_WUR;

/* The stream the trainer computes on (a cudaStream_t; NULL, or the
 * communicator's own stream: none, the default), so that collectives and
 * compute overlap.  The shard's work stays on the communicator's stream and
 * the hand-offs are device-side (a CUDA event recorded on one stream and
 * waited for by the other; never a host wait), each inserted where its call
 * is made:
 *
 *   accel_shard_gather (when it gathers) and the first accel_shard_grads of
 *   a unit in a step: compute work queued after the call runs after the
 *   communicator's stream's work queued before it (the gathered copy, the
 *   zeroed gradient, and every collective queued earlier);
 *   accel_shard_reduce (last), accel_shard_release (when it frees),
 *   accel_shard_step, accel_shard_set_full, accel_shard_restore and
 *   accel_shard_free: the communicator's stream's work queued by the call
 *   (and after it) runs after the compute work queued before the call.
 *
 * So a trainer prefetches by calling accel_shard_gather(u + 1) AFTER
 * queuing unit u's compute (and before accel_shard_release(u)): the
 * all-gather then runs while unit u computes.  Called before unit u's
 * compute is queued, the wait lands ahead of it and there is no overlap
 * (still correct).  Work of its own on the communicator (a loss all-reduce)
 * the trainer orders itself, with events of its own, as is reading results
 * on the host: accel_comm_sync waits for the communicator's stream only.
 * Switching streams hands the old stream's queued work over to the new one.
 * The stream must outlive the shard, or be unset (NULL) first; it must
 * belong to the shard's device.  NULL means the communicator's stream, so
 * the legacy default stream cannot be named (the communicator's stream is
 * non-blocking and would not be ordered with it): compute on a stream
 * created for it.  The compute stream must not be under CUDA graph capture
 * (the events would pull the collectives into the graph).  Host memory (socket): every call is
 * complete on return, so the stream is accepted and ignored (ACCEL_OK).
 * Errors: ACCEL_EINVAL (no shard), ACCEL_EIO (a CUDA call failed: creating
 * the events, recording, waiting), ACCEL_ENOMEM. */
enum accel_err accel_shard_set_compute_stream(struct accel_shard *s, void *stream,
                                              struct accel_error *err) ACCEL_WUR;

/* Saves the shard's state as checkpoint `step` under `root` (accel/ckpt.h),
 * between steps: each parameter as "<unit>.<param>" with its global shape
 * (the model, which consolidation exports), its optimizer state as
 * "optim.exp_avg.<name>", "optim.exp_avg_sq.<name>" (AdamW) or
 * "optim.momentum_buffer.<name>" (SGD with momentum), all fp32, each rank
 * its slices (NO_SHARD: rank r the r-th of world equal parts); and in the
 * metadata the trainer's pairs (keys not beginning with "shard.") and the
 * shard's: shard.step (optimizer steps), shard.loss_scale, shard.optimizer,
 * shard.compute, shard.strategy.  Keeps `keep` checkpoints (0 = all).
 * Collective; on a device, the slices are copied to host memory first (the
 * one wait).  Errors: accel_ckpt_save's, ACCEL_EINVAL (a "shard." key),
 * ACCEL_ETOOBIG (a name over ACCEL_CKPT_MAX_NAME bytes), ACCEL_ENOMEM. */
enum accel_err accel_shard_save(struct accel_shard *s, const char *root, unsigned long step,
                                const struct accel_ckpt_kv *meta, size_t nmeta, unsigned keep,
                                struct accel_error *err) ACCEL_WUR;

/* Checkpoints through a saver the shard keeps (accel/ckpt.h, savers): the
 * root's lock held for the run, asynchronous saves, a node-local tier. */
struct accel_shard_ckpt_opts {
    const char *root;    /* the shared checkpoint root */
    const char *local;   /* node-local tier; NULL: none */
    unsigned keep;       /* committed checkpoints kept in root; 0 = all */
    unsigned keep_local; /* local copies kept once committed (0: 1) */
    uint64_t copy_rate;  /* bytes/s of the local -> root copy; 0 = unlimited */
    const char *owner;   /* the root lock's holder line; NULL: "a job" */
};

/* Collective: opens the shard's saver (accel_ckpt_saver_open; rank 0 takes
 * the root's lock), its staging memory pinned on a device.  From then on
 * accel_shard_save goes through it (its root and keep arguments are then
 * ignored: the saver's are used), and accel_shard_free closes it.  Errors:
 * ACCEL_EBUSY (another job's root), ACCEL_EINVAL (opened already),
 * accel_ckpt_saver_open's. */
enum accel_err accel_shard_ckpt_open(struct accel_shard *s, const struct accel_shard_ckpt_opts *o,
                                     struct accel_error *err) ACCEL_WUR;

/* Collective, before training: the step to resume from, the same on every
 * rank (accel_ckpt_saver_resume: the root's newest, or a newer one every
 * rank has in its local tier; 0: none), and that checkpoint opened with
 * local copies read first.  A rank that cannot open it gets *c NULL with
 * err set and ACCEL_OK: it passes that to accel_shard_load, whose
 * agreement fails every rank.  Errors: ACCEL_EINVAL (no saver),
 * accel_ckpt_saver_resume's. */
enum accel_err accel_shard_ckpt_resume(struct accel_shard *s, unsigned long *step,
                                       struct accel_ckpt **c, struct accel_error *err) ACCEL_WUR;

/* Starts an asynchronous save of the state as checkpoint `step` (what
 * accel_shard_save writes) and returns once it is copied to staging memory
 * (on a device, the one wait for the copies); the files are written in the
 * background while training goes on.  Every rank calls it at the same
 * step; accel_shard_save_poll ends it.  With a save in flight: busy says
 * whether to finish it first (collective) or to refuse (ACCEL_EBUSY).
 * Errors: ACCEL_EINVAL (no saver, a "shard." key), ACCEL_EBUSY, the
 * previous save's; a problem of this rank's is the poll's, on every rank. */
enum accel_err accel_shard_save_start(struct accel_shard *s, unsigned long step,
                                      const struct accel_ckpt_kv *meta, size_t nmeta,
                                      enum accel_ckpt_busy busy, struct accel_error *err) ACCEL_WUR;

/* Collective: accel_ckpt_saver_poll on the shard's saver; *committed the
 * step committed by this call, 0 when none was (still writing, or no save
 * in flight). */
enum accel_err accel_shard_save_poll(struct accel_shard *s, bool block, unsigned long *committed,
                                     struct accel_error *err) ACCEL_WUR;

/* Loads this rank's slices of the master weights and optimizer state from
 * an open checkpoint that accel_shard_save wrote, at any world size and
 * strategy (a copy of fp32 values: bit-exact), then restores the optimizer
 * step count and, for fp16 after fp16, the loss scale (accel_shard_restore).
 * Collective: every rank learns whether every rank loaded; a rank that
 * could not open the checkpoint passes c = NULL (and gets ACCEL_EINVAL), so
 * that the others fail with it instead of waiting.  Every rank must open
 * the same checkpoint directory (a root's newest can differ between ranks
 * while a save runs, or on NFS: decide on one rank, then open that).  Errors:
 * ACCEL_ENOTFOUND (a tensor of the model is not in it), ACCEL_EINVAL (another
 * shape or optimizer, not a shard's checkpoint), ACCEL_EPEER (another rank
 * failed), accel_ckpt_read's. */
enum accel_err accel_shard_load(struct accel_shard *s, struct accel_ckpt *c,
                                struct accel_error *err) ACCEL_WUR;

/* Sets the learning rate of the next steps (a trainer's schedule). */
void accel_shard_set_lr(struct accel_shard *s, double lr);

/* fp16: the factor to multiply the loss gradient by; 1 otherwise. */
double accel_shard_loss_scale(const struct accel_shard *s);

/* Bytes this rank holds now (slices, state, gathered units, gradients; on a
 * device also the 16-bit staging buffer a gather or reduce holds during the
 * call) and the most it held since init: for the memory benchmark. */
size_t accel_shard_bytes(const struct accel_shard *s, size_t *peak);

/* Collectives this rank has issued and the bytes it passed into them (the
 * send buffers' sizes), since init: to check that non-final micro-steps send
 * nothing, and for the benchmark. */
void accel_shard_traffic(const struct accel_shard *s, uint64_t *calls, uint64_t *bytes);

/* Frees everything; NULL is allowed.  On a device the frees are queued on
 * the communicator's stream after the compute stream's work (work queued
 * before them still completes). */
void accel_shard_free(struct accel_shard *s);

#ifdef __cplusplus
}
#endif

#endif
