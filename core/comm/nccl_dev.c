/*
 * nccl_dev.c: device memory for the nccl backend's tests and benchmarks
 * (nccl_int.h): how many CUDA devices there are, NCCL's version, and
 * allocation, copies and fills that complete on return.
 */
#include <stdio.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "nccl_int.h"

int comm__nccl_device_count(char *why, size_t why_len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);

    if (e != cudaSuccess) {
        if (why != NULL && why_len > 0)
            snprintf(why, why_len, "cudaGetDeviceCount: %s (%s)", cudaGetErrorName(e),
                     cudaGetErrorString(e));
        (void)cudaGetLastError(); /* not sticky: clear it for the next call */
        return 0;
    }
    if (n <= 0 && why != NULL && why_len > 0)
        snprintf(why, why_len, "cudaGetDeviceCount: 0 devices");
    return n > 0 ? n : 0;
}

int comm__nccl_version(void)
{
    int v = 0;

    return ncclGetVersion(&v) == ncclSuccess ? v : 0;
}

enum accel_err comm__nccl_dev_alloc(void **p, size_t bytes, struct accel_error *err)
{
    cudaError_t e;

    *p = NULL;
    e = cudaMalloc(p, bytes > 0 ? bytes : 1);
    if (e != cudaSuccess) {
        *p = NULL;
        (void)cudaGetLastError();
        return accel_error_set(err, e == cudaErrorMemoryAllocation ? ACCEL_ENOMEM : ACCEL_EIO,
                               "nccl: couldn't allocate %zu bytes of device memory: %s", bytes,
                               cudaGetErrorString(e));
    }
    return ACCEL_OK;
}

void comm__nccl_dev_free(void *p)
{
    if (p != NULL)
        (void)cudaFree(p);
}

enum accel_err comm__nccl_copy(void *dst, const void *src, size_t bytes, struct accel_error *err)
{
    cudaError_t e;

    if (bytes == 0)
        return ACCEL_OK;
    /* a copy device to device may return before it is done: wait for it on
     * the legacy default stream, which does not wait for the non-blocking
     * streams the communicators queue on */
    e = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(0);
    if (e != cudaSuccess)
        return accel_error_set(err, ACCEL_EIO, "nccl: couldn't copy %zu bytes: %s", bytes,
                               cudaGetErrorString(e));
    return ACCEL_OK;
}

enum accel_err comm__nccl_fill(void *p, int byte, size_t bytes, struct accel_error *err)
{
    cudaError_t e;

    if (bytes == 0)
        return ACCEL_OK;
    e = cudaMemset(p, byte, bytes);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(0);
    if (e != cudaSuccess)
        return accel_error_set(err, ACCEL_EIO, "nccl: couldn't fill %zu bytes of device memory: %s",
                               bytes, cudaGetErrorString(e));
    return ACCEL_OK;
}
