/*
 * cuda_backend.cu: the CUDA backend's context and table (gpu.h): device
 * selection, the compute stream and cuBLAS (loaded with dlopen) with its
 * handle on that stream, device memory (cudaMalloc, and cudaMemsetAsync /
 * cudaMemcpyAsync on that stream), the hand-offs between the compute stream
 * and the communicator's (two events), the first-failure record every call
 * of the backend goes through, and the gpt_ops table that points at the
 * kernels of kernels_cuda.cu, matmul_cuda.cu and attention_cuda.cu.  It
 * launches no kernel itself.
 *
 * The compute stream is the backend's own so that the shard's all-gathers
 * and reductions (on the communicator's stream) run while the model
 * computes; core/shard orders its buffers with it (accel_shard_set_compute_
 * stream) and train.c the loss's all-reduce (gpt_cuda_comm_after,
 * gpt_cuda_compute_after).  Nothing here changes what a kernel computes or
 * in which order on its stream: runs stay bit-identical.
 *
 * The one wait is download(): a copy to the host and cudaStreamSynchronize
 * of the compute stream.  train.c hands the compute stream's work to the
 * communicator's stream and calls accel_comm_sync (bounded by the
 * communicator's timeout, aborting NCCL on a dead peer) just before, then
 * hands back, so the compute stream has nothing left but that copy of a few
 * bytes when the unbounded call runs.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <dlfcn.h>

#include "cuda_int.cuh"
#include "gpu.h"

bool gpt_cuda__ok(struct gpt_cuda *g, cudaError_t e, const char *op, const char *call)
{
    if (e == cudaSuccess)
        return true;
    if (!g->failed) {
        g->failed = true;
        snprintf(g->err, sizeof g->err, "cuda:%d: %s: %s: %s (%s)", g->device, op, call,
                 cudaGetErrorString(e), cudaGetErrorName(e));
    }
    return false;
}

bool gpt_cuda__blas_ok(struct gpt_cuda *g, cublasStatus_t s, const char *op, const char *call)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return true;
    if (!g->failed) {
        g->failed = true;
        snprintf(g->err, sizeof g->err, "cuda:%d: %s: %s: %s (cublasStatus_t %d)", g->device, op,
                 call, g->blas.status_string ? g->blas.status_string(s) : "?", (int)s);
    }
    return false;
}

void gpt_cuda__fail(struct gpt_cuda *g, const char *op, const char *what)
{
    if (!g->failed) {
        g->failed = true;
        snprintf(g->err, sizeof g->err, "cuda:%d: %s: %s", g->device, op, what);
    }
}

bool gpt_cuda__launched(struct gpt_cuda *g, const char *op, const char *kernel)
{
    char call[96];

    snprintf(call, sizeof call, "launch of %s", kernel);
    return gpt_cuda__ok(g, cudaGetLastError(), op, call);
}

/* ---------------------------------------------------------------- memory */

extern "C" {

static void *cu_alloc(void *ctx, size_t bytes)
{
    struct gpt_cuda *g = (struct gpt_cuda *)ctx;
    void *p = NULL;

    if (g->failed)
        return NULL;
    if (!gpt_cuda__ok(g, cudaMalloc(&p, bytes ? bytes : 1), "alloc", "cudaMalloc"))
        return NULL;
    if (bytes &&
        !gpt_cuda__ok(g, cudaMemsetAsync(p, 0, bytes, g->stream), "alloc", "cudaMemsetAsync")) {
        (void)cudaFree(p);
        return NULL;
    }
    return p;
}

static void cu_free(void *ctx, void *p)
{
    struct gpt_cuda *g = (struct gpt_cuda *)ctx;

    if (p)
        (void)gpt_cuda__ok(g, cudaFree(p), "free", "cudaFree");
}

static void cu_zero(void *ctx, void *p, size_t bytes)
{
    struct gpt_cuda *g = (struct gpt_cuda *)ctx;

    if (g->failed || bytes == 0)
        return;
    (void)gpt_cuda__ok(g, cudaMemsetAsync(p, 0, bytes, g->stream), "zero", "cudaMemsetAsync");
}

/* From pageable host memory: cudaMemcpyAsync stages the bytes before it
 * returns, so src may be rewritten at once (the next micro-batch). */
static void cu_upload(void *ctx, void *dst, const void *src, size_t bytes)
{
    struct gpt_cuda *g = (struct gpt_cuda *)ctx;

    if (g->failed || bytes == 0)
        return;
    (void)gpt_cuda__ok(g, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, g->stream),
                       "upload", "cudaMemcpyAsync (host to device)");
}

static int cu_status(void *ctx, char *why, size_t whylen)
{
    struct gpt_cuda *g = (struct gpt_cuda *)ctx;

    if (!g->failed)
        return 0;
    snprintf(why, whylen, "%s", g->err);
    return -1;
}

static int cu_download(void *ctx, void *dst, const void *src, size_t bytes, char *why,
                       size_t whylen)
{
    struct gpt_cuda *g = (struct gpt_cuda *)ctx;

    if (!g->failed && bytes > 0 &&
        gpt_cuda__ok(g, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, g->stream),
                     "download", "cudaMemcpyAsync (device to host)"))
        (void)gpt_cuda__ok(g, cudaStreamSynchronize(g->stream), "download",
                           "cudaStreamSynchronize");
    return cu_status(ctx, why, whylen);
}

} /* extern "C" */

/* ---------------------------------------------------------------- the table */

static struct gpt_ops make_ops()
{
    struct gpt_ops o;

    memset(&o, 0, sizeof o);
    o.name = "cuda";
    o.host = false;
    o.alloc = cu_alloc;
    o.free = cu_free;
    o.zero = cu_zero;
    o.upload = cu_upload;
    o.download = cu_download;
    o.status = cu_status;
    o.attention_scratch = gpt_cuda__attention_scratch;
    o.encoder_forward = gpt_cuda__encoder_forward;
    o.encoder_backward = gpt_cuda__encoder_backward;
    o.layernorm_forward = gpt_cuda__layernorm_forward;
    o.layernorm_backward = gpt_cuda__layernorm_backward;
    o.matmul_forward = gpt_cuda__matmul_forward;
    o.matmul_backward = gpt_cuda__matmul_backward;
    o.attention_forward = gpt_cuda__attention_forward;
    o.attention_backward = gpt_cuda__attention_backward;
    o.gelu_forward = gpt_cuda__gelu_forward;
    o.gelu_backward = gpt_cuda__gelu_backward;
    o.residual_forward = gpt_cuda__residual_forward;
    o.crossentropy_forward = gpt_cuda__crossentropy_forward;
    o.crossentropy_backward = gpt_cuda__crossentropy_backward;
    o.round_bf16 = gpt_cuda__round_bf16;
    o.loss_mean = gpt_cuda__loss_mean;
    return o;
}

const struct gpt_ops *gpt_cuda_ops(void)
{
    static const struct gpt_ops ops = make_ops();
    return &ops;
}

/* ---------------------------------------------------------------- context */

int gpt_cuda_select(unsigned local_rank, int *device, char *why, size_t whylen)
{
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    int n = 0, dev;
    cudaError_t e = cudaGetDeviceCount(&n);

    *device = -1;
    if (e != cudaSuccess || n <= 0) {
        snprintf(why, whylen, "no CUDA device: cudaGetDeviceCount: %s (CUDA_VISIBLE_DEVICES=%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices", vis ? vis : "unset");
        return -1;
    }
    dev = (int)(local_rank % (unsigned)n);
    e = cudaSetDevice(dev);
    if (e != cudaSuccess) {
        snprintf(why, whylen,
                 "cudaSetDevice(%d) (LOCAL_RANK %u of %d visible, "
                 "CUDA_VISIBLE_DEVICES=%s): %s",
                 dev, local_rank, n, vis ? vis : "unset", cudaGetErrorString(e));
        return -1;
    }
    *device = dev;
    return 0;
}

#define GC_STR(x) GC_STR_(x)
#define GC_STR_(x) #x

/* cuBLAS's entry points (struct gpt_blas) by their exported names: the
 * macros of cublas_v2.h expanded (cublasSgemm is cublasSgemm_v2).  The
 * library is looked up as the executable's own libraries are (its RUNPATH:
 * the toolkit's lib64, from the Makefile; LD_LIBRARY_PATH; ldconfig's cache)
 * and stays loaded until the process ends. */
static bool load_blas(struct gpt_cuda *g)
{
    const char *name = "libcublas.so." GC_STR(CUBLAS_VER_MAJOR);
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    char why[320];

    if (!lib) {
        const char *e = dlerror();
        snprintf(why, sizeof why, "dlopen(%s): %s", name, e ? e : "?");
        gpt_cuda__fail(g, "init", why);
        return false;
    }
    struct {
        void **slot;
        const char *name;
    } fns[] = {
        {(void **)&g->blas.create, GC_STR(cublasCreate)},
        {(void **)&g->blas.destroy, GC_STR(cublasDestroy)},
        {(void **)&g->blas.set_stream, GC_STR(cublasSetStream)},
        {(void **)&g->blas.set_pointer_mode, GC_STR(cublasSetPointerMode)},
        {(void **)&g->blas.set_math_mode, GC_STR(cublasSetMathMode)},
        {(void **)&g->blas.set_atomics_mode, GC_STR(cublasSetAtomicsMode)},
        {(void **)&g->blas.sgemm, GC_STR(cublasSgemm)},
        {(void **)&g->blas.status_string, GC_STR(cublasGetStatusString)},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        *fns[i].slot = dlsym(lib, fns[i].name);
        if (!*fns[i].slot) {
            snprintf(why, sizeof why, "dlsym(%s) in %s: not found", fns[i].name, name);
            gpt_cuda__fail(g, "init", why);
            return false;
        }
    }
    return true;
}

void gpt_cuda_free(struct gpt_cuda *g)
{
    if (!g)
        return;
    if (g->handle)
        (void)g->blas.destroy(g->handle);
    /* pending work and events are released once the device completes them */
    if (g->to_comm)
        (void)cudaEventDestroy(g->to_comm);
    if (g->to_compute)
        (void)cudaEventDestroy(g->to_compute);
    if (g->stream)
        (void)cudaStreamDestroy(g->stream);
    (void)cudaGetLastError();
    free(g);
}

void *gpt_cuda_stream(const struct gpt_cuda *g)
{
    return g ? (void *)g->stream : NULL;
}

/* Records ev on `from` and makes `to` wait for it (on the device). */
static int handoff(struct gpt_cuda *g, cudaEvent_t ev, cudaStream_t from, cudaStream_t to,
                   const char *op, char *why, size_t whylen)
{
    if (!g->failed && gpt_cuda__ok(g, cudaEventRecord(ev, from), op, "cudaEventRecord"))
        (void)gpt_cuda__ok(g, cudaStreamWaitEvent(to, ev, 0), op, "cudaStreamWaitEvent");
    return cu_status(g, why, whylen);
}

int gpt_cuda_comm_after(struct gpt_cuda *g, char *why, size_t whylen)
{
    return handoff(g, g->to_comm, g->stream, g->comm, "communicator after compute", why, whylen);
}

int gpt_cuda_compute_after(struct gpt_cuda *g, char *why, size_t whylen)
{
    return handoff(g, g->to_compute, g->comm, g->stream, "compute after communicator", why, whylen);
}

int gpt_cuda_init(struct gpt_cuda **out, void *comm_stream, char *why, size_t whylen)
{
    struct gpt_cuda *g = (struct gpt_cuda *)calloc(1, sizeof *g);
    cudaFuncAttributes fa;

    *out = NULL;
    if (!g) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    g->device = -1;
    g->comm = (cudaStream_t)comm_stream;
    if (!comm_stream)
        gpt_cuda__fail(g, "init", "no CUDA stream (the communicator is not nccl)");
    /* on the current device, the communicator's */
    if (!g->failed &&
        gpt_cuda__ok(g, cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking), "init",
                     "cudaStreamCreateWithFlags") &&
        gpt_cuda__ok(g, cudaEventCreateWithFlags(&g->to_comm, cudaEventDisableTiming), "init",
                     "cudaEventCreateWithFlags"))
        (void)gpt_cuda__ok(g, cudaEventCreateWithFlags(&g->to_compute, cudaEventDisableTiming),
                           "init", "cudaEventCreateWithFlags");
    if (!g->failed && gpt_cuda__ok(g, cudaGetDevice(&g->device), "init", "cudaGetDevice") &&
        gpt_cuda__ok(g, cudaGetDeviceProperties(&g->prop, g->device), "init",
                     "cudaGetDeviceProperties")) {
        /* a binary without code for this GPU fails every launch: say so once */
        (void)gpt_cuda__ok(g, cudaFuncGetAttributes(&fa, gpt_cuda__probe_kernel()), "init",
                           "cudaFuncGetAttributes (are the kernels built for this GPU? "
                           "make CUDA_ARCH=...)");
    }
    if (!g->failed && load_blas(g) &&
        gpt_cuda__blas_ok(g, g->blas.create(&g->handle), "init", "cublasCreate") &&
        gpt_cuda__blas_ok(g, g->blas.set_stream(g->handle, g->stream), "init", "cublasSetStream") &&
        gpt_cuda__blas_ok(g, g->blas.set_pointer_mode(g->handle, CUBLAS_POINTER_MODE_HOST), "init",
                          "cublasSetPointerMode") &&
        /* fp32 arithmetic and storage in every phase: no TF32, no BF16x9
         * emulation, whatever the environment allows the default mode
         * (docs/train-gpt.md, "GPU") */
        gpt_cuda__blas_ok(g, g->blas.set_math_mode(g->handle, CUBLAS_PEDANTIC_MATH), "init",
                          "cublasSetMathMode (CUBLAS_PEDANTIC_MATH)"))
        /* the default, said: no atomics, so GEMMs repeat bit for bit */
        (void)gpt_cuda__blas_ok(g, g->blas.set_atomics_mode(g->handle, CUBLAS_ATOMICS_NOT_ALLOWED),
                                "init", "cublasSetAtomicsMode");
    if (g->failed) {
        snprintf(why, whylen, "%s", g->err);
        gpt_cuda_free(g);
        return -1;
    }
    *out = g;
    return 0;
}

void gpt_cuda_describe(const struct gpt_cuda *g, char *buf, size_t len)
{
    if (!g) {
        snprintf(buf, len, "none");
        return;
    }
    snprintf(buf, len, "cuda:%d %s (sm_%d%d, %.1f GiB)", g->device, g->prop.name, g->prop.major,
             g->prop.minor, (double)g->prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
}
