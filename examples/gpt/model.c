/*
 * model.c: the example GPT's units (see model.h): parameter layout and
 * initialisation, activations, and each unit's forward and backward written
 * as calls through the backend table of ops.h (the CPU's calls kernels.c
 * unchanged; the CUDA one queues kernels on a stream).  Does not
 * communicate, shard, allocate per step or wait for a device.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "rng.h"

/* Block parameters, packed in this order. */
enum {
    P_LN1W,
    P_LN1B,
    P_QKVW,
    P_QKVB,
    P_PROJW,
    P_PROJB,
    P_LN2W,
    P_LN2B,
    P_FCW,
    P_FCB,
    P_FCPROJW,
    P_FCPROJB
};

static void set_param(struct accel_shard_param *p, const char *name, size_t d0, size_t d1)
{
    p->name = name;
    p->ndim = d1 ? 2 : 1;
    p->shape[0] = d0;
    p->shape[1] = d1;
    p->shape[2] = p->shape[3] = 0;
}

static size_t param_numel(const struct accel_shard_param *p)
{
    size_t n = 1;
    for (unsigned i = 0; i < p->ndim; i++)
        n *= p->shape[i];
    return n;
}

/* Offsets of a unit's parameters in its flat buffer: packed, in order. */
static void offsets(const struct accel_shard_unit *u, size_t *off)
{
    size_t o = 0;
    for (size_t i = 0; i < u->nparams; i++) {
        off[i] = o;
        o += param_numel(&u->params[i]);
    }
}

static void layout(struct gpt_model *m)
{
    size_t V = GPT_VOCAB, T = m->cfg.T, C = m->cfg.C, L = m->cfg.L;

    set_param(&m->embed[0], "wte.weight", V, C);
    set_param(&m->embed[1], "wpe.weight", T, C);
    set_param(&m->block[P_LN1W], "ln_1.weight", C, 0);
    set_param(&m->block[P_LN1B], "ln_1.bias", C, 0);
    set_param(&m->block[P_QKVW], "attn.c_attn.weight", 3 * C, C);
    set_param(&m->block[P_QKVB], "attn.c_attn.bias", 3 * C, 0);
    set_param(&m->block[P_PROJW], "attn.c_proj.weight", C, C);
    set_param(&m->block[P_PROJB], "attn.c_proj.bias", C, 0);
    set_param(&m->block[P_LN2W], "ln_2.weight", C, 0);
    set_param(&m->block[P_LN2B], "ln_2.bias", C, 0);
    set_param(&m->block[P_FCW], "mlp.c_fc.weight", 4 * C, C);
    set_param(&m->block[P_FCB], "mlp.c_fc.bias", 4 * C, 0);
    set_param(&m->block[P_FCPROJW], "mlp.c_proj.weight", C, 4 * C);
    set_param(&m->block[P_FCPROJB], "mlp.c_proj.bias", C, 0);
    set_param(&m->head[0], "ln_f.weight", C, 0);
    set_param(&m->head[1], "ln_f.bias", C, 0);
    set_param(&m->head[2], "lm_head.weight", V, C);
    set_param(&m->head[3], "lm_head.bias", V, 0);

    m->nunits = L + 2;
    m->units[0] = (struct accel_shard_unit){"transformer", m->embed, GPT_EMBED_PARAMS};
    for (size_t l = 0; l < L; l++) {
        snprintf(m->names[l], sizeof m->names[l], "h.%zu", l);
        m->units[1 + l] = (struct accel_shard_unit){m->names[l], m->block, GPT_BLOCK_PARAMS};
    }
    m->units[L + 1] = (struct accel_shard_unit){"head", m->head, GPT_HEAD_PARAMS};
    for (size_t u = 0; u < m->nunits; u++) {
        m->numel[u] = 0;
        for (size_t i = 0; i < m->units[u].nparams; i++)
            m->numel[u] += param_numel(&m->units[u].params[i]);
    }
}

/* One zeroed allocation per buffer in the backend's memory, counted in
 * act_bytes; NULL sets *fail. */
static void *buf(struct gpt_model *m, size_t bytes, int *fail)
{
    void *p = m->ops->alloc(m->ctx, bytes);
    if (!p)
        *fail = 1;
    m->act_bytes += bytes;
    return p;
}

static float *act(struct gpt_model *m, size_t n, int *fail)
{
    return buf(m, n * sizeof(float), fail);
}

int gpt_init(struct gpt_model *m, const struct gpt_config *cfg, size_t B, bool bf16_acts, char *why,
             size_t whylen)
{
    return gpt_init_on(m, cfg, B, bf16_acts, &gpt_cpu_ops, NULL, why, whylen);
}

int gpt_init_on(struct gpt_model *m, const struct gpt_config *cfg, size_t B, bool bf16_acts,
                const struct gpt_ops *ops, void *ctx, char *why, size_t whylen)
{
    size_t T = cfg->T, C = cfg->C, L = cfg->L, NH = cfg->NH, N, V = GPT_VOCAB;
    int fail = 0;

    memset(m, 0, sizeof *m);
    if (T < 1 || T > 4096 || C < 1 || C > 4096 || NH < 1 || C % NH || L < 1 || L > GPT_MAX_LAYERS ||
        B < 1 || B > 65536) {
        snprintf(why, whylen,
                 "invalid model: T=%zu (1..4096) C=%zu (1..4096) L=%zu (1..%d) NH=%zu "
                 "(must divide C) B=%zu (1..65536)",
                 T, C, L, GPT_MAX_LAYERS, NH, B);
        return -1;
    }
    m->cfg = *cfg;
    m->B = B;
    m->bf16_acts = bf16_acts;
    m->ops = ops;
    m->ctx = ctx;
    layout(m);
    N = B * T;
    m->tok = calloc(N, 1);
    m->tgt = calloc(N, 1);
    m->blk = calloc(L, sizeof *m->blk);
    if (!m->tok || !m->tgt || !m->blk)
        fail = 1;
    m->act_bytes = 2 * N + L * sizeof *m->blk;
    /* a host backend reads the inputs and the loss where they are */
    m->dtok = ops->host ? m->tok : buf(m, N, &fail);
    m->dtgt = ops->host ? m->tgt : buf(m, N, &fail);
    m->loss_cell = ops->host ? &m->loss_sum : buf(m, sizeof(double), &fail);
    m->loss_acc = buf(m, sizeof(double), &fail);
    m->loss_mean = act(m, 2, &fail);
    m->x0 = act(m, N * C, &fail);
    for (size_t l = 0; l < L && m->blk; l++) {
        struct gpt_block_acts *a = &m->blk[l];
        a->ln1 = act(m, N * C, &fail);
        a->ln1_mean = act(m, N, &fail);
        a->ln1_rstd = act(m, N, &fail);
        a->qkv = act(m, N * 3 * C, &fail);
        a->att = act(m, B * NH * T * T, &fail);
        a->atty = act(m, N * C, &fail);
        a->res2 = act(m, N * C, &fail);
        a->ln2 = act(m, N * C, &fail);
        a->ln2_mean = act(m, N, &fail);
        a->ln2_rstd = act(m, N, &fail);
        a->fch = act(m, N * 4 * C, &fail);
        a->fch_gelu = act(m, N * 4 * C, &fail);
        a->res3 = act(m, N * C, &fail);
    }
    m->lnf = act(m, N * C, &fail);
    m->lnf_mean = act(m, N, &fail);
    m->lnf_rstd = act(m, N, &fail);
    m->probs = act(m, N * V, &fail);
    m->losses = act(m, N, &fail);
    m->dres = act(m, N * C, &fail);
    m->scr_a = act(m, N * 4 * C, &fail);
    m->scr_b = act(m, N * C, &fail);
    m->scr_t = act(m, ops->attention_scratch(B, T, NH), &fail);
    if (fail) {
        char more[384];
        int n = snprintf(why, whylen, "out of %s memory for the activations (%zu bytes)", ops->name,
                         m->act_bytes);
        if (ops->status(ctx, more, sizeof more) && n >= 0 && (size_t)n < whylen)
            snprintf(why + n, whylen - (size_t)n, ": %s", more);
        gpt_free(m);
        return -1;
    }
    return 0;
}

void gpt_free(struct gpt_model *m)
{
    if (!m)
        return;
    if (m->ops) {
        const struct gpt_ops *o = m->ops;
        for (size_t l = 0; l < m->cfg.L && m->blk; l++) {
            struct gpt_block_acts *a = &m->blk[l];
            float *p[] = {a->ln1, a->ln1_mean, a->ln1_rstd, a->qkv, a->att,      a->atty, a->res2,
                          a->ln2, a->ln2_mean, a->ln2_rstd, a->fch, a->fch_gelu, a->res3};
            for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
                o->free(m->ctx, p[i]);
        }
        if (m->dtok != m->tok)
            o->free(m->ctx, m->dtok);
        if (m->dtgt != m->tgt)
            o->free(m->ctx, m->dtgt);
        if (m->loss_cell != &m->loss_sum)
            o->free(m->ctx, m->loss_cell);
        void *p[] = {m->loss_acc, m->loss_mean, m->x0,   m->lnf,   m->lnf_mean, m->lnf_rstd,
                     m->probs,    m->losses,    m->dres, m->scr_a, m->scr_b,    m->scr_t};
        for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
            o->free(m->ctx, p[i]);
    }
    free(m->blk);
    free(m->tok);
    free(m->tgt);
    memset(m, 0, sizeof *m);
}

size_t gpt_num_params(const struct gpt_model *m)
{
    size_t n = 0;
    for (size_t u = 0; u < m->nunits; u++)
        n += m->numel[u];
    return n;
}

void gpt_init_params(const struct gpt_model *m, size_t u, float *full, uint64_t seed)
{
    const struct accel_shard_unit *unit = &m->units[u];
    double std = 0.02, proj_std = 0.02 / sqrt(2.0 * (double)m->cfg.L);
    size_t off[GPT_BLOCK_PARAMS];
    struct gpt_rng r;

    gpt_rng_init(&r, gpt_rng_hash(seed, 0x9a17, u));
    offsets(unit, off);
    for (size_t i = 0; i < unit->nparams; i++) {
        const struct accel_shard_param *p = &unit->params[i];
        const char *name = p->name;
        size_t n = param_numel(p);
        float *x = full + off[i];
        if (strstr(name, "ln_") && strstr(name, ".weight")) {
            for (size_t k = 0; k < n; k++)
                x[k] = 1.0f;
        } else if (p->ndim == 1) {
            memset(x, 0, n * sizeof *x);
        } else {
            double s = strstr(name, "c_proj") ? proj_std : std;
            for (size_t k = 0; k < n; k++)
                x[k] = (float)(s * gpt_rng_normal(&r));
        }
    }
}

/* The input of block l (N, C): the embeddings or the previous block's output. */
static float *block_input(const struct gpt_model *m, size_t l)
{
    return l == 0 ? m->x0 : m->blk[l - 1].res3;
}

static float *head_input(const struct gpt_model *m)
{
    return block_input(m, m->cfg.L);
}

static void maybe_bf16(const struct gpt_model *m, float *x, size_t n)
{
    if (m->bf16_acts)
        m->ops->round_bf16(m->ctx, x, n);
}

static void block_forward(struct gpt_model *m, size_t l, const float *p, const size_t *off)
{
    size_t B = m->B, T = m->cfg.T, C = m->cfg.C, NH = m->cfg.NH, N = B * T;
    const struct gpt_ops *o = m->ops;
    void *c = m->ctx;
    struct gpt_block_acts *a = &m->blk[l];
    const float *x = block_input(m, l);
    float *tmp = m->scr_b; /* (N, C) a projection before the residual add */

    o->layernorm_forward(c, a->ln1, a->ln1_mean, a->ln1_rstd, x, p + off[P_LN1W], p + off[P_LN1B],
                         N, C);
    maybe_bf16(m, a->ln1, N * C);
    o->matmul_forward(c, a->qkv, a->ln1, p + off[P_QKVW], p + off[P_QKVB], N, C, 3 * C);
    o->attention_forward(c, a->atty, a->att, a->qkv, B, T, C, NH);
    maybe_bf16(m, a->atty, N * C);
    o->matmul_forward(c, tmp, a->atty, p + off[P_PROJW], p + off[P_PROJB], N, C, C);
    o->residual_forward(c, a->res2, x, tmp, N * C);
    o->layernorm_forward(c, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, p + off[P_LN2W],
                         p + off[P_LN2B], N, C);
    maybe_bf16(m, a->ln2, N * C);
    o->matmul_forward(c, a->fch, a->ln2, p + off[P_FCW], p + off[P_FCB], N, C, 4 * C);
    o->gelu_forward(c, a->fch_gelu, a->fch, N * 4 * C);
    maybe_bf16(m, a->fch_gelu, N * 4 * C);
    o->matmul_forward(c, tmp, a->fch_gelu, p + off[P_FCPROJW], p + off[P_FCPROJB], N, 4 * C, C);
    o->residual_forward(c, a->res3, a->res2, tmp, N * C);
}

/* m->dres holds d(loss)/d(res3) on entry and d(loss)/d(input) on return: the
 * residual adds pass it through, and each branch ADDS its part. */
static void block_backward(struct gpt_model *m, size_t l, const float *p, float *g,
                           const size_t *off)
{
    size_t B = m->B, T = m->cfg.T, C = m->cfg.C, NH = m->cfg.NH, N = B * T;
    const struct gpt_ops *o = m->ops;
    void *c = m->ctx;
    struct gpt_block_acts *a = &m->blk[l];
    const float *x = block_input(m, l);
    float *d4 = m->scr_a, *d1 = m->scr_b;

    /* MLP branch: res3 = res2 + fcproj(gelu(fc(ln2(res2)))) */
    o->zero(c, d4, N * 4 * C * sizeof *d4);
    o->matmul_backward(c, d4, g + off[P_FCPROJW], g + off[P_FCPROJB], m->dres, a->fch_gelu,
                       p + off[P_FCPROJW], N, 4 * C, C);
    o->gelu_backward(c, d4, a->fch, d4, N * 4 * C); /* in place: d(fch) from d(fch_gelu) */
    o->zero(c, d1, N * C * sizeof *d1);
    o->matmul_backward(c, d1, g + off[P_FCW], g + off[P_FCB], d4, a->ln2, p + off[P_FCW], N, C,
                       4 * C);
    o->layernorm_backward(c, m->dres, g + off[P_LN2W], g + off[P_LN2B], d1, a->res2,
                          p + off[P_LN2W], a->ln2_mean, a->ln2_rstd, N, C);

    /* attention branch: res2 = x + proj(attn(qkv(ln1(x)))) */
    o->zero(c, d1, N * C * sizeof *d1);
    o->matmul_backward(c, d1, g + off[P_PROJW], g + off[P_PROJB], m->dres, a->atty,
                       p + off[P_PROJW], N, C, C);
    o->zero(c, d4, N * 3 * C * sizeof *d4);
    o->attention_backward(c, d4, d1, a->qkv, a->att, m->scr_t, B, T, C, NH);
    o->zero(c, d1, N * C * sizeof *d1);
    o->matmul_backward(c, d1, g + off[P_QKVW], g + off[P_QKVB], d4, a->ln1, p + off[P_QKVW], N, C,
                       3 * C);
    o->layernorm_backward(c, m->dres, g + off[P_LN1W], g + off[P_LN1B], d1, x, p + off[P_LN1W],
                          a->ln1_mean, a->ln1_rstd, N, C);
}

void gpt_forward(struct gpt_model *m, size_t u, const float *params)
{
    size_t T = m->cfg.T, C = m->cfg.C, L = m->cfg.L, N = m->B * T, V = GPT_VOCAB;
    const struct gpt_ops *o = m->ops;
    void *c = m->ctx;
    size_t off[GPT_BLOCK_PARAMS];

    offsets(&m->units[u], off);
    if (u == 0) {
        o->upload(c, m->dtok, m->tok, N);
        o->upload(c, m->dtgt, m->tgt, N);
        o->encoder_forward(c, m->x0, m->dtok, params + off[0], params + off[1], m->B, T, C);
    } else if (u <= L) {
        block_forward(m, u - 1, params, off);
    } else {
        o->layernorm_forward(c, m->lnf, m->lnf_mean, m->lnf_rstd, head_input(m), params + off[0],
                             params + off[1], N, C);
        maybe_bf16(m, m->lnf, N * C);
        o->matmul_forward(c, m->probs, m->lnf, params + off[2], params + off[3], N, C, V);
        o->crossentropy_forward(c, m->probs, m->losses, m->probs, m->dtgt, N, V, m->loss_cell,
                                m->loss_acc);
    }
}

void gpt_backward(struct gpt_model *m, size_t u, const float *params, float *grads, float dloss)
{
    size_t T = m->cfg.T, C = m->cfg.C, L = m->cfg.L, N = m->B * T, V = GPT_VOCAB;
    const struct gpt_ops *o = m->ops;
    void *c = m->ctx;
    size_t off[GPT_BLOCK_PARAMS];

    offsets(&m->units[u], off);
    if (u == 0) {
        o->encoder_backward(c, grads + off[0], grads + off[1], m->dres, m->dtok, m->B, T, C);
    } else if (u <= L) {
        block_backward(m, u - 1, params, grads, off);
    } else {
        o->crossentropy_backward(c, m->probs, m->dtgt, dloss, N, V);
        o->zero(c, m->scr_b, N * C * sizeof *m->scr_b);
        o->matmul_backward(c, m->scr_b, grads + off[2], grads + off[3], m->probs, m->lnf,
                           params + off[2], N, C, V);
        o->zero(c, m->dres, N * C * sizeof *m->dres);
        o->layernorm_backward(c, m->dres, grads + off[0], grads + off[1], m->scr_b, head_input(m),
                              params + off[0], m->lnf_mean, m->lnf_rstd, N, C);
    }
}

int gpt_check(const struct gpt_model *m, char *why, size_t whylen)
{
    return m->ops->status(m->ctx, why, whylen);
}

void gpt_loss_reset(struct gpt_model *m)
{
    m->ops->zero(m->ctx, m->loss_acc, sizeof *m->loss_acc);
}

float *gpt_loss_mean(struct gpt_model *m, double denom)
{
    m->ops->loss_mean(m->ctx, m->loss_mean, m->loss_acc, denom);
    return m->loss_mean;
}

void gpt_loss_flag(struct gpt_model *m, float flag)
{
    m->ops->upload(m->ctx, m->loss_mean + 1, &flag, sizeof flag);
}

int gpt_read(const struct gpt_model *m, void *dst, const void *src, size_t bytes, char *why,
             size_t whylen)
{
    return m->ops->download(m->ctx, dst, src, bytes, why, whylen);
}
