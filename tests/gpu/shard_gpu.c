/*
 * shard_gpu.c: core/shard's device path (the nccl backend, core/shard/
 * device.cu) on a machine with an NVIDIA GPU, against its host path (the
 * socket backend) in the same process.  Built and run by hand or by
 * tests/gpu/run.sh, never by `make unit`: it needs a device.  Without one it
 * prints one SKIP line with CUDA's reason and exits 0.
 *
 * World 1, so that every collective is an exact copy on both backends (a
 * world-1 average divides by 1) and the two paths run the same arithmetic:
 *
 *   - the same units (one of 1,500,500 elements, past one grid of the
 *     kernels, so their grid-stride loops turn; one of 4,160; one of 5,
 *     smaller than ACCEL_SHARD_ALIGN) and the same synthetic gradients (a
 *     function of the gathered parameters, the step and the micro-step; two
 *     micro-steps a step) are trained 5 steps with AdamW, AdamW clipped by
 *     the global norm, SGD with momentum and plain SGD, in fp32, bf16 and
 *     fp16, FULL_SHARD, SHARD_GRAD_OP and NO_SHARD; fp16 gets an overflow at
 *     step 2, which both must skip (the scale halved);
 *   - tolerances: without clipping the master weights must be bit-identical
 *     in every type: the element-wise work is the same IEEE operations in the
 *     same order on both sides (core/shard/elem_int.h, no FMA contraction)
 *     and the norm, the one reduction whose order differs (the device adds
 *     per-block fp64 partials), only feeds the clip factor.  The norm itself
 *     must agree within n x 2^-53 relative, n the elements summed (1.5 M:
 *     1.7e-10): a sum of n non-negative fp64 terms in any order is within
 *     (n - 1) x 2^-53 relative of the exact one, and the square root halves
 *     that; the measured difference is printed (of order 1e-13 for a
 *     million elements).  NaN payloads are not compared (a GPU makes the
 *     canonical NaN, x86 keeps the operand's; the test makes none).  With
 *     clipping the factor
 *     (float)(coef) may, rarely, round to the neighbouring fp32 value, which
 *     moves an update by one part in 2^24: the weights must agree within
 *     1e-6 x max(1, |w|), and the count of differing weights is printed
 *     (expected 0);
 *   - buffers: accel_shard_on_device, device pointers from params, grads,
 *     master and optim_state, the accounting of the 16-bit staging buffer,
 *     set_full copying from host memory, the caller's own stream;
 *   - a compute stream of the trainer's (accel_shard_set_compute_stream,
 *     a second, non-blocking stream): the trainer's reads of the gathered
 *     parameters and its writes of the gradients go on that stream, waited
 *     for on that stream alone, with the prefetching call order (gather of
 *     the next unit, and its gradient buffer, before this unit's release
 *     and reduce), in every strategy: the weights must still equal the
 *     host's bit for bit, which a missing hand-off would break (a read of
 *     parameters not yet gathered, of a gradient not yet zeroed, a reduce
 *     of a gradient not yet written);
 *   - a unit too large for the device: ACCEL_ENOMEM naming the unit and the
 *     size, and the device usable afterwards;
 *   - checkpoints (core/shard/ckpt.c): master weights and AdamW state set on
 *     the device, saved, loaded into the host shard; then set on the host,
 *     saved, loaded into the device shard: bit-exact both ways, the device's
 *     slices copied through host memory on the communicator's stream.
 *
 * Build (from the repository root, after make):
 *   cc -std=gnu11 -O2 -g -Wall -Wextra -Wshadow -Werror -Icore/include -Ickpt/include \
 *      -Itopology/include -Itests/harness -DACCEL_HAVE_NCCL=1 \
 *      -isystem $CUDA_HOME/include tests/gpu/shard_gpu.c tests/harness/test.c \
 *      build/lib/libaccelrun.a $(pkg-config --libs yaml-0.1 libcjson hwloc) \
 *      -ldl -lm -L$CUDA_HOME/lib64 -Wl,-rpath,$CUDA_HOME/lib64 -lnccl -lcudart \
 *      -lstdc++ -pthread -o build/gpu/shard_gpu
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "accel/alloc.h"
#include "accel/ckpt.h"
#include "accel/comm.h"
#include "accel/shard.h"
#include "accel/store.h"
#include "test.h"
#include "../../core/comm/nccl_int.h"

#define STEPS 5
#define ACCUM 2
#define NUNITS 3
#define BIG 1500500 /* elements of unit 0 */

static const struct accel_shard_param p_emb[] = {{"w", 2, {3001, 500}}};
static const struct accel_shard_param p_blk[] = {{"w", 2, {64, 64}}, {"b", 1, {64}}};
static const struct accel_shard_param p_head[] = {{"w", 1, {5}}};
static const struct accel_shard_unit units[] = {
    {"emb", p_emb, 1}, {"h.0", p_blk, 2}, {"head", p_head, 1}};

/* ---------------------------------------------------------------- setup */

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A value in [-1, 1) from two integers, the same in every run. */
static float rnd(uint32_t a, uint32_t b)
{
    return (float)(test_mix32(a * 2654435761u ^ test_mix32(b + 0x9e37u)) >> 8) * 0x1p-23f - 1.0f;
}

static uint64_t nonce(void)
{
    return accel_store_nonce("shard_gpu", "0");
}

/* One process's world of 1: a store, a socket and a nccl communicator. */
struct world {
    struct accel_store_server *srv;
    struct accel_store *store;
    struct accel_comm *sock, *nccl;
};

static void world_open(struct world *w, void *stream)
{
    struct accel_store_server_opts so = {.bind_addr = "127.0.0.1", .port = 0};
    struct accel_store_opts o = {.host = "127.0.0.1", .timeout_s = 30, .rank = 0, .world = 1};
    struct accel_comm_opts sock = {.backend = "socket", .timeout_s = 30, .ifaddr = "127.0.0.1"};
    struct accel_comm_opts nccl = {.backend = "nccl", .timeout_s = 60, .cuda_device = 0};
    struct accel_error err;

    memset(w, 0, sizeof(*w));
    so.nonce = o.nonce = sock.nonce = nonce();
    nccl.cuda_stream = stream;
    if (accel_store_server_start(&w->srv, &so, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "accel_store_server_start: %s", err.msg);
    o.port = accel_store_server_port(w->srv);
    if (accel_store_connect(&w->store, &o, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "accel_store_connect: %s", err.msg);
    if (accel_comm_init(&w->sock, w->store, 0, 1, &sock, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "socket comm: %s", err.msg);
    if (accel_comm_init(&w->nccl, w->store, 0, 1, &nccl, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "nccl comm: %s", err.msg);
    ASSERT_STR_EQ(accel_comm_backend(w->nccl), "nccl");
    ASSERT(accel_comm_cuda_stream(w->nccl) != NULL);
    if (stream != NULL)
        ASSERT(accel_comm_cuda_stream(w->nccl) == stream);
}

static void world_close(struct world *w)
{
    accel_comm_free(w->nccl);
    accel_comm_free(w->sock);
    accel_store_close(w->store);
    accel_store_server_stop(w->srv);
}

/* ---------------------------------------------------------------- memory of either path */

/* Copies between the shard's memory and the host: a device's copies wait
 * for the communicator's stream (bounded, through accel_comm_sync) and go on
 * that stream, as a trainer's would. */
static void fetch(struct accel_comm *c, bool dev, void *host, const void *src, size_t bytes)
{
    struct accel_error err;

    if (!dev) {
        memcpy(host, src, bytes);
        return;
    }
    if (accel_comm_sync(c, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "accel_comm_sync: %s", err.msg);
    ASSERT_INT_EQ(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost,
                                  (cudaStream_t)accel_comm_cuda_stream(c)),
                  cudaSuccess);
    ASSERT_INT_EQ(cudaStreamSynchronize((cudaStream_t)accel_comm_cuda_stream(c)), cudaSuccess);
}

static void store_back(struct accel_comm *c, bool dev, void *dst, const void *host, size_t bytes)
{
    struct accel_error err;

    if (!dev) {
        memcpy(dst, host, bytes);
        return;
    }
    ASSERT_INT_EQ(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice,
                                  (cudaStream_t)accel_comm_cuda_stream(c)),
                  cudaSuccess);
    if (accel_comm_sync(c, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "accel_comm_sync: %s", err.msg);
}

/* The trainer's compute stream, NULL for the communicator's: micro's
 * copies of parameters and gradients go there, ordered by the shard's
 * hand-offs alone (the host waits for this stream only). */
static cudaStream_t compute_stream;

static void cfetch(struct accel_comm *c, bool dev, void *host, const void *src, size_t bytes)
{
    if (!dev || compute_stream == NULL) {
        fetch(c, dev, host, src, bytes);
        return;
    }
    ASSERT_INT_EQ(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, compute_stream),
                  cudaSuccess);
    ASSERT_INT_EQ(cudaStreamSynchronize(compute_stream), cudaSuccess);
}

static void cstore(struct accel_comm *c, bool dev, void *dst, const void *host, size_t bytes)
{
    if (!dev || compute_stream == NULL) {
        store_back(c, dev, dst, host, bytes);
        return;
    }
    ASSERT_INT_EQ(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, compute_stream),
                  cudaSuccess);
    /* the copy, not the communicator's stream: the reduce's hand-off must
     * order the communicator's stream after it */
    ASSERT_INT_EQ(cudaStreamSynchronize(compute_stream), cudaSuccess);
}

static bool is_device_pointer(const void *p)
{
    struct cudaPointerAttributes a;

    memset(&a, 0, sizeof(a));
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return a.type == cudaMemoryTypeDevice;
}

/* ---------------------------------------------------------------- training */

struct cfg {
    enum accel_dtype t;
    enum accel_shard_strategy strategy;
    enum accel_optimizer optim;
    double momentum, max_norm;
    const char *name;
};

struct run {
    float *master[NUNITS]; /* [numel]: at world 1 the slice is the unit */
    double norm[STEPS];
    bool skipped[STEPS];
    double scale;
    unsigned long step;
};

static size_t numel_of(size_t u)
{
    static const size_t n[NUNITS] = {BIG, 64 * 64 + 64, 5};
    return n[u];
}

static void opts_of(const struct cfg *cf, struct accel_shard_opts *o)
{
    accel_shard_opts_default(o);
    o->compute = cf->t;
    o->strategy = cf->strategy;
    o->optimizer = cf->optim;
    o->momentum = cf->momentum;
    o->max_grad_norm = cf->max_norm;
    o->grad_accum = ACCUM;
    o->lr = 1e-2;
    o->loss_scale = 1024;
    o->scale_window = 2;
}

static void init_weights(struct accel_shard *s, float *buf)
{
    struct accel_error err;

    for (size_t u = 0; u < NUNITS; u++) {
        for (size_t i = 0; i < numel_of(u); i++)
            buf[i] = 0.1f * rnd(999, (uint32_t)(u * BIG + i));
        if (accel_shard_set_full(s, u, buf, &err) != ACCEL_OK)
            test_fail(__FILE__, __LINE__, "set_full: %s", err.msg);
    }
}

/* The trainer's side of one micro-step: forward reads every unit's
 * parameters; backward ADDS a gradient that depends on them.  With a
 * compute stream, in train_gpt's order: the next unit's gather (and in
 * backward its gradient buffer) after this unit's work, before its release
 * and reduce. */
static void micro(struct accel_shard *s, struct accel_comm *c, bool dev, unsigned step, unsigned k,
                  float **held, float *tmp, bool fp16)
{
    bool ahead = dev && compute_stream != NULL;
    struct accel_error err;

    for (size_t u = 0; u < NUNITS; u++) {
        const float *p;
        if (accel_shard_gather(s, u, &err) != ACCEL_OK)
            test_fail(__FILE__, __LINE__, "gather %zu: %s", u, err.msg);
        ASSERT((p = accel_shard_params(s, u)) != NULL);
        cfetch(c, dev, held[u], p, numel_of(u) * sizeof(float));
        if (ahead && u + 1 < NUNITS && accel_shard_gather(s, u + 1, &err) != ACCEL_OK)
            test_fail(__FILE__, __LINE__, "gather %zu ahead: %s", u + 1, err.msg);
        accel_shard_release(s, u);
    }
    for (size_t u = NUNITS; u-- > 0;) {
        float scale = (float)accel_shard_loss_scale(s) / ACCUM, *g;
        size_t n = numel_of(u);
        if (accel_shard_gather(s, u, &err) != ACCEL_OK)
            test_fail(__FILE__, __LINE__, "gather %zu: %s", u, err.msg);
        ASSERT((g = accel_shard_grads(s, u)) != NULL);
        cfetch(c, dev, tmp, g, n * sizeof(float));
        for (size_t i = 0; i < n; i++)
            tmp[i] +=
                scale * (0.5f * held[u][i] + 0.01f * rnd(step * 4 + k, (uint32_t)(u * BIG + i)));
        if (fp16 && step == 2 && u == 0)
            tmp[7] = 1e5f * scale; /* past 65504 once narrowed */
        cstore(c, dev, g, tmp, n * sizeof(float));
        if (ahead && u > 0) {
            if (accel_shard_gather(s, u - 1, &err) != ACCEL_OK)
                test_fail(__FILE__, __LINE__, "gather %zu ahead: %s", u - 1, err.msg);
            ASSERT(accel_shard_grads(s, u - 1) != NULL);
        }
        if (accel_shard_reduce(s, u, k + 1 == ACCUM, &err) != ACCEL_OK)
            test_fail(__FILE__, __LINE__, "reduce %zu: %s", u, err.msg);
        accel_shard_release(s, u);
    }
}

static void train(struct accel_comm *c, const struct cfg *cf, struct run *out)
{
    struct accel_shard_opts o;
    struct accel_shard *s = NULL;
    struct accel_error err;
    float *held[NUNITS], *tmp = accel_malloc(BIG * sizeof(float));
    bool dev;

    ASSERT(tmp != NULL);
    opts_of(cf, &o);
    if (accel_shard_init(&s, c, units, NUNITS, &o, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "%s on %s: init: %s", cf->name, accel_comm_backend(c),
                  err.msg);
    dev = accel_shard_on_device(s);
    ASSERT(dev == (strcmp(accel_comm_backend(c), "nccl") == 0));
    /* the host shard accepts the stream and ignores it */
    if (compute_stream != NULL &&
        accel_shard_set_compute_stream(s, compute_stream, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "%s on %s: set_compute_stream: %s", cf->name,
                  accel_comm_backend(c), err.msg);
    for (size_t u = 0; u < NUNITS; u++) {
        held[u] = accel_malloc(numel_of(u) * sizeof(float));
        ASSERT(held[u] != NULL);
    }
    init_weights(s, tmp);
    for (unsigned t = 0; t < STEPS; t++) {
        struct accel_shard_stats st;
        for (unsigned k = 0; k < ACCUM; k++)
            micro(s, c, dev, t, k, held, tmp, cf->t == ACCEL_F16);
        if (accel_shard_step(s, &st, &err) != ACCEL_OK)
            test_fail(__FILE__, __LINE__, "%s on %s: step %u: %s", cf->name, accel_comm_backend(c),
                      t, err.msg);
        out->norm[t] = st.grad_norm;
        out->skipped[t] = st.skipped;
        out->scale = st.loss_scale;
        out->step = st.step;
    }
    for (size_t u = 0; u < NUNITS; u++) {
        size_t b, e;
        const float *m = accel_shard_master(s, u, &b, &e);
        ASSERT(b == 0 && e == numel_of(u));
        ASSERT(dev == is_device_pointer(m));
        out->master[u] = accel_malloc(numel_of(u) * sizeof(float));
        ASSERT(out->master[u] != NULL);
        fetch(c, dev, out->master[u], m, numel_of(u) * sizeof(float));
        accel_free(held[u]);
    }
    accel_shard_free(s);
    accel_free(tmp);
}

static void run_free(struct run *r)
{
    for (size_t u = 0; u < NUNITS; u++)
        accel_free(r->master[u]);
}

/* Host and device runs of cf; see the file's comment for the tolerances. */
static void compare(struct world *w, const struct cfg *cf)
{
    struct run h, d;
    size_t differ = 0, summed = 0;
    double worst = 0, norm_rel = 0;

    memset(&h, 0, sizeof(h));
    memset(&d, 0, sizeof(d));
    train(w->sock, cf, &h);
    train(w->nccl, cf, &d);
    for (size_t u = 0; u < NUNITS; u++)
        summed += numel_of(u) + 2 * 16; /* with padding */
    for (unsigned t = 0; t < STEPS; t++) {
        ASSERT_INT_EQ(h.skipped[t], d.skipped[t]);
        if (h.skipped[t])
            continue;
        double rel = fabs(h.norm[t] - d.norm[t]) / (h.norm[t] > 0 ? h.norm[t] : 1);
        if (!(rel <= (double)summed * 0x1p-53))
            test_fail(__FILE__, __LINE__,
                      "%s: step %u: norm %.17g on the host, %.17g on the device", cf->name, t,
                      h.norm[t], d.norm[t]);
        if (rel > norm_rel)
            norm_rel = rel;
    }
    ASSERT(h.scale == d.scale);
    ASSERT_INT_EQ(h.step, d.step);
    if (cf->t == ACCEL_F16) {
        ASSERT(h.skipped[2]);
        ASSERT_INT_EQ(h.step, STEPS - 1);
    }
    for (size_t u = 0; u < NUNITS; u++)
        for (size_t i = 0; i < numel_of(u); i++) {
            float a = h.master[u][i], b = d.master[u][i];
            double diff = fabs((double)a - (double)b);
            if (memcmp(&a, &b, sizeof(a)) == 0)
                continue;
            differ++;
            if (diff > worst)
                worst = diff;
            if (cf->max_norm == 0 || !(diff <= 1e-6 * (fabs(a) > 1 ? fabs(a) : 1)))
                test_fail(__FILE__, __LINE__,
                          "%s: unit %zu element %zu: %.9g on the host, %.9g on the device "
                          "(bits %s)",
                          cf->name, u, i, (double)a, (double)b,
                          cf->max_norm == 0 ? "must be equal without clipping" : "1e-6 allowed");
        }
    test_note("%-28s norm rel %.1e, %zu weights differ (max %.1e)", cf->name, norm_rel, differ,
              worst);
    run_free(&h);
    run_free(&d);
}

/* Every strategy and optimizer in type t. */
static void matches_host(enum accel_dtype t)
{
    static const struct {
        enum accel_shard_strategy s;
        const char *name;
    } strategies[] = {{ACCEL_FULL_SHARD, "FULL_SHARD"},
                      {ACCEL_SHARD_GRAD_OP, "SHARD_GRAD_OP"},
                      {ACCEL_NO_SHARD, "NO_SHARD"}};
    static const struct {
        enum accel_optimizer o;
        double momentum, max_norm;
        const char *name;
    } optims[] = {{ACCEL_ADAMW, 0, 0, "AdamW"},
                  {ACCEL_ADAMW, 0, 0.05, "AdamW clip"},
                  {ACCEL_SGD, 0.9, 0, "SGD mom"},
                  {ACCEL_SGD, 0, 0, "SGD"}};
    struct world w;
    double t0 = now_s();

    world_open(&w, NULL);
    for (size_t si = 0; si < 3; si++)
        for (size_t oi = 0; oi < 4; oi++) {
            char name[64];
            struct cfg cf = {
                t, strategies[si].s, optims[oi].o, optims[oi].momentum, optims[oi].max_norm, name};
            snprintf(name, sizeof(name), "%s %s %s", accel_dtype_name(t), strategies[si].name,
                     optims[oi].name);
            compare(&w, &cf);
        }
    world_close(&w);
    test_note("%.1f s", now_s() - t0);
}

TEST(matches_host_f32)
{
    matches_host(ACCEL_F32);
}

TEST(matches_host_bf16)
{
    matches_host(ACCEL_BF16);
}

TEST(matches_host_f16)
{
    matches_host(ACCEL_F16);
}

/* The trainer on a compute stream of its own, every strategy, bf16 (the
 * staging buffers) and fp32 (NO_SHARD: the compute copy is the master, which
 * the step rewrites); see the file's comment. */
TEST(matches_host_on_a_compute_stream)
{
    static const enum accel_shard_strategy strategies[] = {ACCEL_FULL_SHARD, ACCEL_SHARD_GRAD_OP,
                                                           ACCEL_NO_SHARD};
    static const enum accel_dtype types[] = {ACCEL_BF16, ACCEL_F32};
    struct world w;
    double t0 = now_s();

    ASSERT_INT_EQ(cudaStreamCreateWithFlags(&compute_stream, cudaStreamNonBlocking), cudaSuccess);
    world_open(&w, NULL);
    for (size_t ti = 0; ti < 2; ti++)
        for (size_t si = 0; si < 3; si++) {
            char name[64];
            struct cfg cf = {types[ti], strategies[si], ACCEL_ADAMW, 0, 0, name};
            snprintf(name, sizeof(name), "%s %s compute stream", accel_dtype_name(types[ti]),
                     si == 0   ? "FULL_SHARD"
                     : si == 1 ? "SHARD_GRAD_OP"
                               : "NO_SHARD");
            compare(&w, &cf);
        }
    world_close(&w);
    ASSERT_INT_EQ(cudaStreamDestroy(compute_stream), cudaSuccess);
    compute_stream = NULL;
    test_note("%.1f s", now_s() - t0);
}

/* Device pointers, the staging buffer in the accounting, set_full from host
 * memory, on the caller's own stream. */
TEST(device_buffers_on_the_callers_stream)
{
    struct cfg cf = {ACCEL_BF16, ACCEL_FULL_SHARD, ACCEL_ADAMW, 0, 0, "bf16 caller's stream"};
    struct accel_shard_opts o;
    struct accel_shard *s = NULL;
    struct accel_error err;
    cudaStream_t st = NULL;
    struct world w;
    size_t state, peak, padded0 = 0, b, e;
    float *host = accel_malloc(BIG * sizeof(float)), *back = accel_malloc(BIG * sizeof(float));

    ASSERT(host != NULL && back != NULL);
    ASSERT_INT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_INT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
    world_open(&w, st);
    opts_of(&cf, &o);
    if (accel_shard_init(&s, w.nccl, units, NUNITS, &o, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "init: %s", err.msg);
    ASSERT(accel_shard_on_device(s));
    for (size_t u = 0; u < NUNITS; u++)
        padded0 += accel_shard_unit_padded(s, u);
    state = accel_shard_bytes(s, &peak);
    ASSERT_INT_EQ(state, 16 * padded0); /* master, gradient, m, v */
    ASSERT_INT_EQ(peak, state);
    padded0 = accel_shard_unit_padded(s, 0);

    /* set_full copies from host memory, complete on return */
    init_weights(s, host);
    for (size_t i = 0; i < BIG; i++)
        host[i] = 0.1f * rnd(999, (uint32_t)i);
    ASSERT_OK(accel_shard_set_full(s, 0, host, &err));
    host[0] = 12345.0f;
    fetch(w.nccl, true, back, accel_shard_master(s, 0, &b, &e), BIG * sizeof(float));
    ASSERT(back[0] == 0.1f * rnd(999, 0));
    ASSERT(is_device_pointer(accel_shard_optim_state(s, 0, 0)));
    ASSERT(is_device_pointer(accel_shard_optim_state(s, 0, 1)));

    /* a bf16 gather holds a 16-bit staging buffer during the call */
    ASSERT_OK(accel_shard_gather(s, 0, &err));
    ASSERT(is_device_pointer(accel_shard_params(s, 0)));
    ASSERT_INT_EQ(accel_shard_bytes(s, &peak), state + 4 * padded0);
    ASSERT_INT_EQ(peak, state + 6 * padded0);
    fetch(w.nccl, true, back, accel_shard_params(s, 0), BIG * sizeof(float));
    for (size_t i = 0; i < BIG; i++) {
        float m = 0.1f * rnd(999, (uint32_t)i), r;
        uint32_t x;
        memcpy(&x, &m, sizeof(x));
        x = (x + 0x7fffu + ((x >> 16) & 1u)) & 0xffff0000u; /* bf16, nearest even */
        memcpy(&r, &x, sizeof(r));
        if (memcmp(&r, &back[i], sizeof(r)) != 0)
            test_fail(__FILE__, __LINE__, "compute copy %zu: %.9g, want %.9g", i, (double)back[i],
                      (double)r);
    }
    ASSERT(is_device_pointer(accel_shard_grads(s, 0)));
    ASSERT_OK(accel_shard_reduce(s, 0, true, &err));
    accel_shard_release(s, 0);
    for (size_t u = 1; u < NUNITS; u++)
        ASSERT_OK(accel_shard_reduce(s, u, true, &err));
    ASSERT_OK(accel_shard_step(s, NULL, &err));
    ASSERT_INT_EQ(accel_shard_bytes(s, NULL), state);
    accel_shard_free(s);
    world_close(&w);
    ASSERT_INT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    ASSERT_INT_EQ(cudaStreamDestroy(st), cudaSuccess);

    /* training on the caller's stream gives the same weights */
    world_open(&w, NULL);
    cf.t = ACCEL_F32;
    cf.name = "f32 FULL_SHARD AdamW";
    compare(&w, &cf);
    world_close(&w);
    accel_free(host);
    accel_free(back);
}

/* A unit too large for the device: ACCEL_ENOMEM naming it, nothing left
 * behind, and the device still trains afterwards. */
TEST(unit_too_large_is_enomem)
{
    static const struct accel_shard_param p_huge[] = {{"w", 2, {1u << 20, 1u << 20}}}; /* 4 TiB */
    static const struct accel_shard_unit huge[] = {{"huge", p_huge, 1}};
    struct cfg cf = {ACCEL_F32, ACCEL_FULL_SHARD, ACCEL_SGD, 0, 0, "f32 FULL_SHARD SGD after OOM"};
    struct accel_shard_opts o;
    struct accel_shard *s = NULL;
    struct accel_error err;
    struct world w;
    enum accel_err rc;

    world_open(&w, NULL);
    accel_shard_opts_default(&o);
    rc = accel_shard_init(&s, w.nccl, huge, 1, &o, &err);
    test_note("%s: %s", accel_errname(rc), err.msg);
    ASSERT_INT_EQ(rc, ACCEL_ENOMEM);
    ASSERT(s == NULL);
    ASSERT_CONTAINS(err.msg, "rank 0 of 1: shard: cudaMallocAsync of unit huge's master weights");
    ASSERT_CONTAINS(err.msg, "MiB");
    compare(&w, &cf);
    world_close(&w);
}

/* The values a checkpoint case sets: buffer k (0 the master, 1 and 2 AdamW's
 * moments) of unit u, element i, from seed `seed`. */
static float ck_value(unsigned seed, unsigned k, size_t u, size_t i)
{
    return 0.1f * rnd(seed * 4 + k, (uint32_t)(u * BIG + i));
}

/* Writes those values into shard s (device or host memory). */
static void ck_set(struct accel_shard *s, struct accel_comm *c, bool dev, unsigned seed, float *buf)
{
    struct accel_error err;

    for (size_t u = 0; u < NUNITS; u++) {
        size_t b, e;
        float *m = accel_shard_master(s, u, &b, &e);
        for (unsigned k = 0; k < 3; k++) {
            float *dst = k ? accel_shard_optim_state(s, u, k - 1) : m;
            for (size_t i = b; i < e; i++)
                buf[i - b] = ck_value(seed, k, u, i);
            ASSERT(dst != NULL);
            store_back(c, dev, dst, buf, (e - b) * sizeof(float));
        }
    }
    if (accel_shard_restore(s, 3 + seed, 1.0, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "restore: %s", err.msg);
}

/* Checks that shard s holds them, bit for bit. */
static void ck_check_values(struct accel_shard *s, struct accel_comm *c, bool dev, unsigned seed,
                            float *buf)
{
    for (size_t u = 0; u < NUNITS; u++) {
        size_t b, e;
        float *m = accel_shard_master(s, u, &b, &e);
        for (unsigned k = 0; k < 3; k++) {
            fetch(c, dev, buf, k ? accel_shard_optim_state(s, u, k - 1) : m,
                  (e - b) * sizeof(float));
            for (size_t i = b; i < e; i++) {
                float want = ck_value(seed, k, u, i);
                if (memcmp(&buf[i - b], &want, sizeof want) != 0)
                    test_fail(__FILE__, __LINE__, "%s: unit %zu buffer %u [%zu]: %a, want %a",
                              dev ? "device" : "host", u, k, i, (double)buf[i - b], (double)want);
            }
        }
    }
}

static void ck_save_load(struct world *w, struct accel_shard *from, bool from_dev,
                         struct accel_shard *to, bool to_dev, unsigned seed, float *buf)
{
    char dir[] = "/tmp/shard-gpu-ckpt-XXXXXX", cmd[64];
    struct accel_ckpt *ck = NULL;
    struct accel_error err;

    ASSERT(mkdtemp(dir) != NULL);
    ck_set(from, from_dev ? w->nccl : w->sock, from_dev, seed, buf);
    if (accel_shard_save(from, dir, 3 + seed, NULL, 0, 0, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "save: %s", err.msg);
    if (accel_ckpt_open(&ck, dir, &err) != ACCEL_OK || accel_shard_load(to, ck, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "load: %s", err.msg);
    accel_ckpt_close(ck);
    ck_check_values(to, to_dev ? w->nccl : w->sock, to_dev, seed, buf);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        test_note("could not remove %s", dir);
}

TEST(checkpoint_device_to_host_and_back)
{
    struct cfg cf = {ACCEL_F32, ACCEL_FULL_SHARD, ACCEL_ADAMW, 0, 0, "f32 FULL_SHARD AdamW"};
    struct accel_shard_opts o;
    struct accel_shard *dev = NULL, *host = NULL;
    struct accel_error err;
    struct world w;
    float *buf = malloc(BIG * sizeof(float));

    ASSERT(buf != NULL);
    world_open(&w, NULL);
    opts_of(&cf, &o);
    if (accel_shard_init(&dev, w.nccl, units, NUNITS, &o, &err) != ACCEL_OK ||
        accel_shard_init(&host, w.sock, units, NUNITS, &o, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "init: %s", err.msg);
    ASSERT(accel_shard_on_device(dev) && !accel_shard_on_device(host));
    ck_save_load(&w, dev, true, host, false, 1, buf);
    ck_save_load(&w, host, false, dev, true, 2, buf);
    accel_shard_free(dev);
    accel_shard_free(host);
    world_close(&w);
    free(buf);
}

/* Each case forks (tests/harness/test.c), and CUDA must not be initialised
 * before a fork: the device count is asked in a child of its own. */
static int probe(char *why, size_t n)
{
    int fds[2], status = 0, count = 0;
    pid_t pid;

    if (pipe(fds) != 0)
        return 0;
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        char buf[300] = "";
        int c = comm__nccl_device_count(buf, sizeof(buf));
        if (write(fds[1], buf, strlen(buf) + 1) < 0)
            _exit(0);
        _exit(c > 0 ? 1 : 0);
    }
    close(fds[1]);
    if (pid > 0) {
        ssize_t got = read(fds[0], why, n - 1);
        why[got > 0 ? got : 0] = '\0';
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        count = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
    }
    close(fds[0]);
    return count;
}

static const struct test_case cases[] = {
    T(device_buffers_on_the_callers_stream),
    T(matches_host_f32),
    T(matches_host_bf16),
    T(matches_host_f16),
    T(matches_host_on_a_compute_stream),
    T(unit_too_large_is_enomem),
    T(checkpoint_device_to_host_and_back),
};

int main(int argc, char **argv)
{
    char why[300] = "";

    if (argc == 1 && probe(why, sizeof(why)) == 0) {
        printf("1..1\n#   SKIP: no CUDA device (%s)\nok 1 - shard_gpu # SKIP\n",
               why[0] != '\0' ? why : "no reason given");
        return 0;
    }
    return test_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}
