/*
 * optim.c: the element-wise optimizer updates on one slice, in fp32, as
 * PyTorch defines them: AdamW with decoupled weight decay and bias
 * correction (torch.optim.AdamW), SGD with L2 weight decay added to the
 * gradient and heavy-ball momentum whose buffer starts as the first gradient
 * (torch.optim.SGD, dampening 0, no Nesterov).  Scalars are formed in double
 * and rounded to fp32 once per step; each element then sees the same fp32
 * operations in the same order on every rank and whatever the world size, so
 * a slice's update never depends on where the slice boundaries fall.  Not
 * here: which elements (step.c passes the unpadded part of each slice).
 */
#include <math.h>

#include "shard_int.h"

void shard__adamw(const struct accel_shard_opts *o, unsigned long t, float gmul, float *p,
                  const float *g, float *m, float *v, size_t n)
{
    double bc1 = 1.0 - pow(o->beta1, (double)t), bc2 = 1.0 - pow(o->beta2, (double)t);
    float b1 = (float)o->beta1, b2 = (float)o->beta2;
    float c1 = (float)(1.0 - o->beta1), c2 = (float)(1.0 - o->beta2);
    float step = (float)(o->lr / bc1), bc2_sqrt = (float)sqrt(bc2), eps = (float)o->eps;
    float decay = (float)(1.0 - o->lr * o->weight_decay);

    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * gmul;
        float mi = b1 * m[i] + c1 * gi;
        float vi = b2 * v[i] + c2 * (gi * gi);
        float pi = p[i] * decay;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step * (mi / (sqrtf(vi) / bc2_sqrt + eps));
    }
}

void shard__sgd(const struct accel_shard_opts *o, unsigned long t, float gmul, float *p,
                const float *g, float *buf, size_t n)
{
    float lr = (float)o->lr, wd = (float)o->weight_decay, mu = (float)o->momentum;

    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * gmul;
        if (wd != 0.0f)
            gi = gi + wd * p[i];
        if (buf != NULL) {
            buf[i] = t == 1 ? gi : mu * buf[i] + gi;
            gi = buf[i];
        }
        p[i] = p[i] - lr * gi;
    }
}
