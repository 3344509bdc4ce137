/*
 * optim.c: the optimizer updates of a step, as PyTorch defines them: AdamW
 * with decoupled weight decay and bias correction (torch.optim.AdamW), SGD
 * with L2 weight decay added to the gradient and heavy-ball momentum whose
 * buffer starts as the first gradient (torch.optim.SGD, dampening 0, no
 * Nesterov).
 *
 * This file forms the step's scalars, in double and rounded to fp32 once,
 * and hands every unit's slice to the memory's update (mem_int.h), which
 * runs the element arithmetic of elem_int.h in fp32: each element sees the
 * same fp32 operations in the same order on every rank, whatever the world
 * size and whatever the memory, so a slice's update never depends on where
 * the slice boundaries fall, nor on host or device.  Only the slice's
 * unpadded part is updated (it starts the slice).
 */
#include <math.h>

#include "shard_int.h"

static void adamw_consts(const struct accel_shard_opts *o, unsigned long t, struct shard_adamw_k *k)
{
    double bc1 = 1.0 - pow(o->beta1, (double)t), bc2 = 1.0 - pow(o->beta2, (double)t);

    k->b1 = (float)o->beta1;
    k->b2 = (float)o->beta2;
    k->c1 = (float)(1.0 - o->beta1);
    k->c2 = (float)(1.0 - o->beta2);
    k->step = (float)(o->lr / bc1);
    k->bc2_sqrt = (float)sqrt(bc2);
    k->eps = (float)o->eps;
    k->decay = (float)(1.0 - o->lr * o->weight_decay);
}

static void sgd_consts(const struct accel_shard_opts *o, unsigned long t, struct shard_sgd_k *k)
{
    k->lr = (float)o->lr;
    k->wd = (float)o->weight_decay;
    k->mu = (float)o->momentum;
    k->first = t == 1;
}

enum accel_err shard__update(struct accel_shard *s, unsigned long t, float gmul,
                             struct accel_error *err)
{
    struct shard_adamw_k ka;
    struct shard_sgd_k ks;
    enum accel_err rc = ACCEL_OK;

    adamw_consts(&s->o, t, &ka);
    sgd_consts(&s->o, t, &ks);
    for (size_t u = 0; rc == ACCEL_OK && u < s->nunits; u++) {
        struct shard_unit *d = &s->units[u];
        size_t n = d->end - d->begin;
        if (s->o.optimizer == ACCEL_ADAMW)
            rc = s->mem->adamw(s->ctx, &ka, gmul, d->master, d->grad, d->state[0], d->state[1], n,
                               err);
        else
            rc = s->mem->sgd(s->ctx, &ks, gmul, d->master, d->grad, d->state[0], n, err);
    }
    return rc;
}
