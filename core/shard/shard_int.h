/*
 * shard_int.h (private to core/shard): the state behind accel/shard.h and
 * the pieces its files share.  shard.c owns the lifecycle, the buffers'
 * accounting and the accessors, gather.c the communication of gather and
 * reduce, layout.c the unit table, step.c the norm, clipping and loss scale,
 * optim.c the optimizers' scalars and the update of every slice, opts.c the
 * options and the environment.  Where the buffers live and the element-wise
 * work on them is mem_int.h's (host: mem_host.c; CUDA: device.cu).
 */
#ifndef ACCEL_SHARD_INT_H
#define ACCEL_SHARD_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accel/shard.h"
#include "mem_int.h"

/* One parameter tensor of the copied unit table. */
struct shard_param {
    char *name;
    unsigned ndim;
    size_t shape[4];
    size_t offset; /* in the unit's flat buffer */
    size_t numel;
};

/* One unit on this rank.  Slices are [off, off + slen) of the padded flat
 * buffer; for NO_SHARD the slice is the whole buffer (off 0, slen padded).
 * The float buffers are in the memory of s->mem (device memory for cuda). */
struct shard_unit {
    char *name;
    struct shard_param *tensors; /* [nparams] */
    size_t nparams;
    size_t numel;  /* unpadded */
    size_t padded; /* multiple of world x ACCEL_SHARD_ALIGN */
    size_t off, slen;
    /* the slice's unpadded part, [begin, end) of the flat buffer: it always
     * starts the slice (begin == off), or is empty (begin == end == numel) */
    size_t begin, end;

    float *master;   /* [slen] fp32 master weights */
    float *grad;     /* [slen] reduced gradient, summed over reduces of a step */
    float *state[2]; /* [slen] AdamW m, v; SGD momentum in state[0]; NULL when unused */

    float *params; /* [padded] gathered compute copy; NULL when not held */
    bool gathered; /* params holds the current weights */
    float *grads;  /* [padded] full local gradient; NULL until first use in a step */
    bool reduced;  /* reduce(last) ran for this unit in this step */
};

struct accel_shard {
    struct accel_comm *comm;
    const struct shard_mem_ops *mem; /* where the buffers live */
    void *ctx;                       /* mem's context */
    unsigned rank, world;
    struct accel_shard_opts o;
    struct shard_unit *units;
    size_t nunits;

    double scale;       /* fp16 loss scale; 1 otherwise */
    unsigned good;      /* fp16: finite steps since the scale last changed */
    unsigned long step; /* optimizer steps taken (skipped ones not counted) */

    size_t bytes, peak;   /* of the float buffers above and staging buffers */
    uint64_t calls, sent; /* collectives issued, bytes passed into them */
    /* [world] per-rank sums of squares for the norm (and the hash exchange
     * of init): in mem's memory, where the collective works, and their host
     * copy, where the step reads them */
    double *partials, *partials_host;

    struct accel_ckpt_saver *saver; /* accel_shard_ckpt_open's; NULL: none (ckpt.c) */
};

/* opts.c: checks every field; the message names the bad one. */
enum accel_err shard__opts_check(const struct accel_shard_opts *o, struct accel_error *err);

/* layout.c: copies the unit specs and lays them out over `world` ranks,
 * this one being `rank` (buffers not allocated); a hash of the table and the
 * options that every rank must share. */
enum accel_err shard__layout(struct accel_shard *s, const struct accel_shard_unit *units,
                             size_t nunits, struct accel_error *err);
void shard__layout_free(struct accel_shard *s);
uint64_t shard__layout_hash(const struct accel_shard *s);

/* shard.c: buffers in mem's memory counted in bytes/peak.  shard__alloc
 * zeroes; NULL with *rc and err set on failure; `unit` (may be NULL) and
 * `what` name the buffer in the message.  shard__free accepts NULL, and
 * shard__release_buf (n floats) sets *p to NULL. */
void *shard__alloc(struct accel_shard *s, size_t bytes, const char *unit, const char *what,
                   enum accel_err *rc, struct accel_error *err);
void shard__free(struct accel_shard *s, void *p, size_t bytes);
void shard__release_buf(struct accel_shard *s, float **p, size_t n);
/* A collective's bookkeeping: one call of `bytes` sent. */
void shard__count(struct accel_shard *s, size_t bytes);

/* shard.c: every rank's 64-bit value, all-gathered (its bits travel as two
 * fp32 elements, which all_gather copies without arithmetic) through the
 * norm's partial-sum buffer, in the memory the collectives work on; then
 * shard__exchanged(s, r) is rank r's.  Collective. */
enum accel_err shard__exchange(struct accel_shard *s, uint64_t mine, struct accel_error *err);
uint64_t shard__exchanged(const struct accel_shard *s, unsigned r);

/* ckpt.c: the saver's end (accel_shard_free); and the fence every change
 * of the master weights or the optimizer state passes first: a save in
 * flight may still be copying them (accel_shard_save_start). */
void shard__ckpt_close(struct accel_shard *s);
void shard__fence(struct accel_shard *s);

/* gather.c: after an update (or a skipped one): gathered copies dropped
 * (they are stale once the master moves), slice gradients zeroed, reduce
 * marks reset. */
enum accel_err shard__after_step(struct accel_shard *s, struct accel_error *err);

/* optim.c: the update of every unit's slice (its unpadded part) as step
 * number `t` (from 1).  `gmul` multiplies each gradient first (unscale and
 * clip). */
enum accel_err shard__update(struct accel_shard *s, unsigned long t, float gmul,
                             struct accel_error *err);

#endif
