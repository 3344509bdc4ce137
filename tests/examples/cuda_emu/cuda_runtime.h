/*
 * cuda_runtime.h (tests/examples/cuda_emu): a CPU stand-in for the parts of
 * CUDA that examples/gpt's kernels use, so that they run on a machine
 * without a GPU (tests/examples/cuda_emu/run.sh).  Test code only.
 *
 * A launch runs the grid's blocks one after the other; a block's threads are
 * fibers (ucontext for the first entry, then _setjmp/_longjmp) run in
 * rounds: each round resumes every unfinished thread until its next
 * __syncthreads, __syncwarp or shuffle step, in a new pseudo-random order
 * (emu_seed), so a kernel whose result depends on the order of its threads
 * between barriers gives different bits under different seeds.  Shuffles
 * take two rounds (all lanes write, then all read).  __shared__ variables
 * are function statics: one block runs at a time.  "Device" memory is host
 * memory (cudaMalloc fills it with 0xa5, as fresh device memory is not
 * zero); copies and memsets are immediate; nothing fails unless told to
 * (emu_alloc_fail_after).  Streams and events exist only as handles: work is
 * done when it is queued, so every stream is in order with every other, a
 * record and a wait do nothing but check their handles.
 *
 * What it cannot check: the GPU's memory model (a missing __syncwarp before
 * reading another lane's global write passes here), the order between
 * streams (a missing event passes here), occupancy, speed, and
 * CUDA's own libm and cuBLAS's rounding (libm is the host's; cublas_v2.h
 * rounds like a GPU's SGEMM, not bit for bit).
 */
#ifndef EMU_CUDA_RUNTIME_H
#define EMU_CUDA_RUNTIME_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <csetjmp>
#include <cstring>
#include <functional>
#include <ucontext.h>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c)
    {
    }
};
struct uint3 {
    unsigned x, y, z;
};

inline uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

struct emu_fiber {
    ucontext_t ctx; /* to enter its stack the first time */
    jmp_buf jb;     /* then _setjmp/_longjmp: no signal-mask system call a switch */
    bool started, done;
    uint3 tid;
    unsigned linear;
};
inline ucontext_t emu_sched;
inline jmp_buf emu_sched_jb;
inline emu_fiber *emu_cur;
inline std::function<void()> *emu_body;
inline float emu_slots[1024];
inline uint64_t emu_rng = 88172645463325252ull;
inline unsigned long emu_launches, emu_yields;

inline void emu_yield()
{
    emu_yields++;
    if (!_setjmp(emu_cur->jb))
        _longjmp(emu_sched_jb, 1);
}

inline void emu_tramp()
{
    (*emu_body)();
    emu_cur->done = true;
    _longjmp(emu_sched_jb, 1);
}

inline void emu_resume(emu_fiber &f)
{
    if (!_setjmp(emu_sched_jb)) {
        if (!f.started) {
            f.started = true;
            swapcontext(&emu_sched, &f.ctx);
        } else {
            _longjmp(f.jb, 1);
        }
    }
}

inline uint64_t emu_next()
{
    emu_rng ^= emu_rng << 13;
    emu_rng ^= emu_rng >> 7;
    emu_rng ^= emu_rng << 17;
    return emu_rng;
}

inline void emu_launch(dim3 grid, dim3 block, std::function<void()> body)
{
    static std::vector<emu_fiber> fib;
    static std::vector<char> stacks;
    static std::vector<unsigned> order;
    const size_t STACK = 64 * 1024;
    unsigned n = block.x * block.y * block.z;

    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || n == 0 || n > 1024) {
        fprintf(stderr, "emu: bad launch grid (%u,%u,%u) block (%u,%u,%u)\n", grid.x, grid.y,
                grid.z, block.x, block.y, block.z);
        abort();
    }
    emu_launches++;
    if (fib.size() < n) {
        fib.resize(n);
        stacks.resize(n * STACK);
        order.resize(n);
    }
    gridDim = grid;
    blockDim = block;
    emu_body = &body;
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                blockIdx = uint3{bx, by, bz};
                for (unsigned i = 0; i < n; i++) {
                    emu_fiber &f = fib[i];
                    f.done = false;
                    f.started = false;
                    f.linear = i;
                    f.tid = uint3{i % block.x, (i / block.x) % block.y, i / (block.x * block.y)};
                    getcontext(&f.ctx);
                    f.ctx.uc_stack.ss_sp = &stacks[i * STACK];
                    f.ctx.uc_stack.ss_size = STACK;
                    f.ctx.uc_link = &emu_sched;
                    makecontext(&f.ctx, emu_tramp, 0);
                    order[i] = i;
                }
                for (;;) {
                    bool any = false;
                    for (unsigned i = n; i > 1; i--) { /* a new order every round */
                        unsigned j = (unsigned)(emu_next() % i);
                        unsigned t = order[i - 1];
                        order[i - 1] = order[j];
                        order[j] = t;
                    }
                    for (unsigned k = 0; k < n; k++) {
                        emu_fiber &f = fib[order[k]];
                        if (f.done)
                            continue;
                        any = true;
                        emu_cur = &f;
                        threadIdx = f.tid;
                        emu_resume(f);
                    }
                    if (!any)
                        break;
                }
            }
}

inline void __syncthreads()
{
    emu_yield();
}
inline void __syncwarp(unsigned mask = 0xffffffffu)
{
    (void)mask;
    emu_yield();
}
inline float __shfl_xor_sync(unsigned mask, float v, int o)
{
    (void)mask;
    unsigned me = emu_cur->linear, lane = me % 32;
    emu_slots[me] = v;
    emu_yield(); /* every lane has written */
    float r = emu_slots[me - lane + (lane ^ (unsigned)o)];
    emu_yield(); /* every lane has read */
    return r;
}
inline unsigned __float_as_uint(float x)
{
    unsigned u;
    memcpy(&u, &x, sizeof u);
    return u;
}
inline float __uint_as_float(unsigned u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* ---- runtime API */
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorInvalidValue = 1 };
typedef struct emu_stream *cudaStream_t;
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
struct cudaDeviceProp {
    char name[256];
    int major, minor;
    size_t totalGlobalMem;
};
struct cudaFuncAttributes {
    int numRegs;
};
inline const char *cudaGetErrorString(cudaError_t e)
{
    return e ? "emulated error" : "no error";
}
inline const char *cudaGetErrorName(cudaError_t e)
{
    return e ? "cudaErrorEmulated" : "cudaSuccess";
}
inline size_t emu_alloc_fail_after = (size_t)-1; /* cudaMalloc calls that succeed */
inline cudaError_t cudaMalloc(void **p, size_t bytes)
{
    if (emu_alloc_fail_after == 0)
        return cudaErrorMemoryAllocation;
    emu_alloc_fail_after--;
    *p = malloc(bytes);
    /* garbage, as cudaMalloc's memory is: the code must zero what it needs */
    if (*p)
        memset(*p, 0xa5, bytes);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFree(void *p)
{
    free(p);
    return cudaSuccess;
}
/* pinned host memory: plain host memory here */
inline cudaError_t cudaMallocHost(void **p, size_t bytes)
{
    *p = malloc(bytes);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFreeHost(void *p)
{
    free(p);
    return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
    (void)s;
    memset(p, v, n);
    return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind k,
                                   cudaStream_t st)
{
    (void)k;
    (void)st;
    memcpy(d, s, n);
    return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    (void)s;
    return cudaSuccess;
}
/* Streams and events: handles only (work is done when queued). */
typedef struct emu_event *cudaEvent_t;
enum { cudaStreamNonBlocking = 1, cudaEventDisableTiming = 2 };
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    (void)flags;
    *s = (cudaStream_t)malloc(1);
    return *s ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    free((void *)s);
    return cudaSuccess;
}
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    (void)flags;
    *e = (cudaEvent_t)malloc(1);
    return *e ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    free((void *)e);
    return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    return e && s ? cudaSuccess : cudaErrorInvalidValue;
}
inline cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
    return e && s && flags == 0 ? cudaSuccess : cudaErrorInvalidValue;
}
inline cudaError_t cudaGetLastError()
{
    return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int *d)
{
    *d = 0;
    return cudaSuccess;
}
inline cudaError_t cudaGetDeviceCount(int *n)
{
    *n = 1;
    return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int d)
{
    return d == 0 ? cudaSuccess : cudaErrorInvalidValue;
}
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d)
{
    (void)d;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "emulated");
    p->major = 9;
    p->totalGlobalMem = (size_t)1 << 30;
    return cudaSuccess;
}
inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *a, const void *f)
{
    (void)f;
    a->numRegs = 0;
    return cudaSuccess;
}

#endif
