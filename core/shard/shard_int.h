/*
 * shard_int.h (private to core/shard): the state behind accel/shard.h and
 * the pieces its files share.  shard.c owns the lifecycle and the
 * communication of gather and reduce, layout.c the unit table, step.c the
 * norm, clipping and loss scale, optim.c the element-wise updates, opts.c
 * the options and the environment.
 */
#ifndef ACCEL_SHARD_INT_H
#define ACCEL_SHARD_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accel/shard.h"

/* One parameter tensor of the copied unit table. */
struct shard_param {
    char *name;
    unsigned ndim;
    size_t shape[4];
    size_t offset; /* in the unit's flat buffer */
    size_t numel;
};

/* One unit on this rank.  Slices are [off, off + slen) of the padded flat
 * buffer; for NO_SHARD the slice is the whole buffer (off 0, slen padded). */
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
    unsigned rank, world;
    struct accel_shard_opts o;
    struct shard_unit *units;
    size_t nunits;

    double scale;       /* fp16 loss scale; 1 otherwise */
    unsigned good;      /* fp16: finite steps since the scale last changed */
    unsigned long step; /* optimizer steps taken (skipped ones not counted) */

    size_t bytes, peak;   /* of the float buffers above */
    uint64_t calls, sent; /* collectives issued, bytes passed into them */
    double *partials;     /* [world] per-rank sums of squares, for the norm */
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

/* shard.c: float buffers counted in bytes/peak.  shard__alloc zeroes. */
float *shard__alloc(struct accel_shard *s, size_t n);
void shard__release_buf(struct accel_shard *s, float **p, size_t n);
/* After an update (or a skipped one): gathered copies dropped (they are
 * stale once the master moves), slice gradients zeroed, reduce marks reset. */
void shard__after_step(struct accel_shard *s);
/* A collective's bookkeeping: one call of `bytes` sent. */
void shard__count(struct accel_shard *s, size_t bytes);

/* optim.c: one update of n elements of a slice.  `gmul` multiplies each
 * gradient first (unscale and clip); `t` is the step number from 1. */
void shard__adamw(const struct accel_shard_opts *o, unsigned long t, float gmul, float *p,
                  const float *g, float *m, float *v, size_t n);
void shard__sgd(const struct accel_shard_opts *o, unsigned long t, float gmul, float *p,
                const float *g, float *buf, size_t n);

#endif
