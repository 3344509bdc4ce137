/*
 * opts.c: the options of a sharded run, their defaults and their reading
 * from the environment that accelerate launch (and accelrun, which exports
 * the same variables, core/env/accelerate_vars.c) gives a worker.  Values
 * are accepted exactly as accelerate's FSDP plugin and Accelerator parse
 * them; the ones this runtime cannot honour are refused, not ignored, so a
 * run never silently trains differently from what its config says.  The
 * variables that only steer PyTorch's wrapping, prefetching or state dicts
 * (FSDP_AUTO_WRAP_POLICY, FSDP_BACKWARD_PREFETCH, ...) are not read: the
 * trainer decides its units, and checkpoints are ckpt's.
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "shard_int.h"

#define VALUE_MAX 64 /* bytes of a value we parse; every valid one is far shorter */

void accel_shard_opts_default(struct accel_shard_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->compute = ACCEL_F32;
    o->strategy = ACCEL_FULL_SHARD;
    o->grad_accum = 1;
    o->max_grad_norm = 0.0;
    o->optimizer = ACCEL_ADAMW;
    o->lr = 1e-3;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->weight_decay = 0.01;
    o->momentum = 0.0;
    o->loss_scale = 65536.0; /* PyTorch GradScaler's default */
    o->scale_window = 2000;
}

static bool finite_in(double v, double lo, double hi)
{
    return isfinite(v) && v >= lo && v <= hi;
}

enum accel_err shard__opts_check(const struct accel_shard_opts *o, struct accel_error *err)
{
    if (o->compute != ACCEL_F32 && o->compute != ACCEL_BF16 && o->compute != ACCEL_F16)
        return accel_error_set(err, ACCEL_EINVAL, "shard: unknown compute type %d",
                               (int)o->compute);
    if (o->strategy != ACCEL_FULL_SHARD && o->strategy != ACCEL_SHARD_GRAD_OP &&
        o->strategy != ACCEL_NO_SHARD)
        return accel_error_set(err, ACCEL_EINVAL, "shard: unknown sharding strategy %d",
                               (int)o->strategy);
    if (o->optimizer != ACCEL_ADAMW && o->optimizer != ACCEL_SGD)
        return accel_error_set(err, ACCEL_EINVAL, "shard: unknown optimizer %d", (int)o->optimizer);
    if (o->grad_accum < 1 || o->grad_accum > ACCEL_SHARD_MAX_ACCUM)
        return accel_error_set(err, ACCEL_EINVAL, "shard: grad_accum %u is not in 1..%u",
                               o->grad_accum, ACCEL_SHARD_MAX_ACCUM);
    if (!finite_in(o->max_grad_norm, 0.0, HUGE_VAL))
        return accel_error_set(err, ACCEL_EINVAL,
                               "shard: max_grad_norm %g must be finite and >= 0 (0 = no clipping)",
                               o->max_grad_norm);
    if (!finite_in(o->lr, 0.0, HUGE_VAL))
        return accel_error_set(err, ACCEL_EINVAL, "shard: lr %g must be finite and >= 0", o->lr);
    if (!finite_in(o->beta1, 0.0, 1.0) || o->beta1 >= 1.0 || !finite_in(o->beta2, 0.0, 1.0) ||
        o->beta2 >= 1.0)
        return accel_error_set(err, ACCEL_EINVAL, "shard: betas %g, %g must be in [0, 1)", o->beta1,
                               o->beta2);
    if (!finite_in(o->eps, 0.0, HUGE_VAL) || !finite_in(o->weight_decay, 0.0, HUGE_VAL))
        return accel_error_set(err, ACCEL_EINVAL,
                               "shard: eps %g and weight_decay %g must be finite and >= 0", o->eps,
                               o->weight_decay);
    if (!finite_in(o->momentum, 0.0, 1.0) || o->momentum >= 1.0)
        return accel_error_set(err, ACCEL_EINVAL, "shard: momentum %g must be in [0, 1)",
                               o->momentum);
    /* the scale is a power of two so that scaling and unscaling are exact */
    if (o->compute == ACCEL_F16) {
        int e;
        if (!finite_in(o->loss_scale, 1.0, 0x1p64) || frexp(o->loss_scale, &e) != 0.5)
            return accel_error_set(err, ACCEL_EINVAL,
                                   "shard: loss_scale %g must be a power of two in [1, 2^64]",
                                   o->loss_scale);
        if (o->scale_window < 1)
            return accel_error_set(err, ACCEL_EINVAL, "shard: scale_window must be >= 1");
    }
    return ACCEL_OK;
}

/* ---------------------------------------------------------------- environment */

/* The variable's value, NULL when unset; an over-long one is an error. */
static enum accel_err env_get(const char *name, const char **out, struct accel_error *err)
{
    const char *v = getenv(name);

    *out = NULL;
    if (v == NULL)
        return ACCEL_OK;
    if (strlen(v) > VALUE_MAX) {
        accel_error_set(err, ACCEL_ETOOBIG, "shard: %s: the value is %zu bytes; the limit is %d",
                        name, strlen(v), VALUE_MAX);
        accel_error_at(err, NULL, 0, 0, name);
        return ACCEL_ETOOBIG;
    }
    *out = v;
    return ACCEL_OK;
}

static enum accel_err bad(struct accel_error *err, enum accel_err code, const char *name,
                          const char *value, const char *why)
{
    accel_error_set(err, code, "shard: %s=%s: %s", name, value, why);
    accel_error_at(err, NULL, 0, 0, name);
    return code;
}

/* Decimal digits only, no sign or blanks (what accelrun exports); 0 when
 * there are none or the value passes `max`. */
static unsigned long digits(const char *v, unsigned long max)
{
    unsigned long n = 0;

    if (*v == '\0')
        return 0;
    for (; *v; v++) {
        if (!isdigit((unsigned char)*v))
            return 0;
        n = n * 10 + (unsigned long)(*v - '0');
        if (n > max)
            return 0;
    }
    return n;
}

/* accelerate's str_to_bool: 1 true, 0 false, -1 neither. */
static int truth(const char *v)
{
    static const char *const yes[] = {"y", "yes", "t", "true", "on", "1"};
    static const char *const no[] = {"n", "no", "f", "false", "off", "0"};

    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(v, yes[i]) == 0)
            return 1;
        if (strcasecmp(v, no[i]) == 0)
            return 0;
    }
    return -1;
}

/* FSDP1 strategy names and numbers (ShardingStrategy, 1-based): index 0..4,
 * -1 for anything else. */
static int strategy_index(const char *v)
{
    static const char *const names[] = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD",
                                        "HYBRID_SHARD_ZERO2"};

    for (int i = 0; i < 5; i++)
        if (strcasecmp(v, names[i]) == 0 || (v[0] == '1' + i && v[1] == '\0'))
            return i;
    return -1;
}

static enum accel_err strategy_of(const char *name, const char *v, enum accel_shard_strategy *out,
                                  struct accel_error *err)
{
    static const enum accel_shard_strategy map[] = {ACCEL_FULL_SHARD, ACCEL_SHARD_GRAD_OP,
                                                    ACCEL_NO_SHARD};
    int i = strategy_index(v);

    if (i < 0)
        return bad(err, ACCEL_EINVAL, name, v,
                   "not a sharding strategy (FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, "
                   "HYBRID_SHARD_ZERO2, or 1..5)");
    if (i > 2)
        return bad(err, ACCEL_EUNSUPPORTED, name, v,
                   "hybrid sharding is not supported by core/shard; supported: FULL_SHARD (1), "
                   "SHARD_GRAD_OP (2), NO_SHARD (3)");
    *out = map[i];
    return ACCEL_OK;
}

static enum accel_err precision(struct accel_shard_opts *o, struct accel_error *err)
{
    const char *name = "ACCELERATE_MIXED_PRECISION", *v;
    enum accel_err rc = env_get(name, &v, err);

    if (rc != ACCEL_OK || v == NULL) /* unset: accelerate's default "no" */
        return rc;
    /* accelerate compares the variable as it is with its lowercase values */
    if (strcmp(v, "no") == 0)
        o->compute = ACCEL_F32;
    else if (strcmp(v, "bf16") == 0)
        o->compute = ACCEL_BF16;
    else if (strcmp(v, "fp16") == 0)
        o->compute = ACCEL_F16;
    else if (strcmp(v, "fp8") == 0)
        return bad(err, ACCEL_EUNSUPPORTED, name, v,
                   "fp8 is not supported by core/shard; supported: no, bf16, fp16");
    else
        return bad(err, ACCEL_EINVAL, name, v,
                   "not one of accelerate's values no, fp16, bf16, fp8 (lowercase)");
    return ACCEL_OK;
}

static enum accel_err sharding(struct accel_shard_opts *o, struct accel_error *err)
{
    const char *ver, *ss, *raf, *off;
    enum accel_err rc;
    unsigned long version = 1;
    int b;

    if ((rc = env_get("FSDP_VERSION", &ver, err)) != ACCEL_OK ||
        (rc = env_get("FSDP_SHARDING_STRATEGY", &ss, err)) != ACCEL_OK ||
        (rc = env_get("FSDP_RESHARD_AFTER_FORWARD", &raf, err)) != ACCEL_OK ||
        (rc = env_get("FSDP_OFFLOAD_PARAMS", &off, err)) != ACCEL_OK)
        return rc;
    /* accelrun exports str(None) for a key the YAML sets to null, and the
     * plugin then falls back as if it were unset */
    if (ss != NULL && (ss[0] == '\0' || strcmp(ss, "None") == 0))
        ss = NULL;
    if (raf != NULL && (raf[0] == '\0' || strcmp(raf, "None") == 0))
        raf = NULL;
    if (ver != NULL && strcmp(ver, "None") != 0) {
        version = digits(ver, 1000);
        if (version == 0)
            return bad(err, ACCEL_EINVAL, "FSDP_VERSION", ver, "not 1 or 2");
        if (version > 2)
            return bad(err, ACCEL_EUNSUPPORTED, "FSDP_VERSION", ver,
                       "accelerate knows FSDP versions 1 and 2");
    }
    if (off != NULL && strcmp(off, "None") != 0) {
        b = truth(off);
        if (b < 0)
            return bad(err, ACCEL_EINVAL, "FSDP_OFFLOAD_PARAMS", off, "not a truth value");
        if (b == 1)
            return bad(err, ACCEL_EUNSUPPORTED, "FSDP_OFFLOAD_PARAMS", off,
                       "offloading is not supported by core/shard (its buffers are host memory "
                       "on the socket backend already, device memory on nccl); set "
                       "fsdp_offload_params: false");
    }
    if (version == 2) {
        /* FSDP2 ignores FSDP_SHARDING_STRATEGY; reshard_after_forward is a
         * truth value and a strategy name there is an error */
        if (raf == NULL)
            return ACCEL_OK;
        b = truth(raf);
        if (b < 0)
            return bad(err, ACCEL_EINVAL, "FSDP_RESHARD_AFTER_FORWARD", raf,
                       "FSDP2 (FSDP_VERSION=2) takes a truth value here: true (FULL_SHARD) or "
                       "false (SHARD_GRAD_OP)");
        o->strategy = b ? ACCEL_FULL_SHARD : ACCEL_SHARD_GRAD_OP;
        return ACCEL_OK;
    }
    if (ss != NULL)
        return strategy_of("FSDP_SHARDING_STRATEGY", ss, &o->strategy, err);
    /* FSDP1 without a strategy: the plugin takes a strategy name from
     * reshard_after_forward; a truth value maps as `accelerate to-fsdp2`
     * maps the names back */
    if (raf == NULL)
        return ACCEL_OK;
    b = truth(raf);
    if (b >= 0) {
        o->strategy = b ? ACCEL_FULL_SHARD : ACCEL_SHARD_GRAD_OP;
        return ACCEL_OK;
    }
    return strategy_of("FSDP_RESHARD_AFTER_FORWARD", raf, &o->strategy, err);
}

static enum accel_err accumulation(struct accel_shard_opts *o, struct accel_error *err)
{
    const char *name = "ACCELERATE_GRADIENT_ACCUMULATION_STEPS", *v;
    enum accel_err rc = env_get(name, &v, err);
    unsigned long n;

    if (rc != ACCEL_OK || v == NULL)
        return rc;
    n = digits(v, ACCEL_SHARD_MAX_ACCUM);
    if (n == 0)
        return bad(err, ACCEL_EINVAL, name, v, "not a whole number of micro-steps in 1..65536");
    o->grad_accum = (unsigned)n;
    return ACCEL_OK;
}

static enum accel_err clipping(struct accel_shard_opts *o, struct accel_error *err)
{
    const char *name = "ACCELERATE_GRADIENT_CLIPPING", *v;
    enum accel_err rc = env_get(name, &v, err);
    char *end;
    double d;

    /* DeepSpeed's "auto" means "the training script's value": keep ours */
    if (rc != ACCEL_OK || v == NULL || strcmp(v, "auto") == 0)
        return rc;
    d = strtod(v, &end);
    if (end == v || *end != '\0' || isspace((unsigned char)v[0]) || !isfinite(d) || d < 0.0)
        return bad(err, ACCEL_EINVAL, name, v, "not a finite number >= 0 or auto");
    o->max_grad_norm = d;
    return ACCEL_OK;
}

enum accel_err accel_shard_opts_from_env(struct accel_shard_opts *o, struct accel_error *err)
{
    enum accel_err rc;

    accel_shard_opts_default(o);
    if ((rc = precision(o, err)) != ACCEL_OK || (rc = sharding(o, err)) != ACCEL_OK ||
        (rc = accumulation(o, err)) != ACCEL_OK || (rc = clipping(o, err)) != ACCEL_OK)
        return rc;
    return ACCEL_OK;
}
