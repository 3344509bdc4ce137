/*
 * gpu_none.c: gpu.h where the trainer is built without CUDA (no nvcc or no
 * NCCL at build time, or NO_CUDA=1): no table, and every call fails with a
 * message saying so.  With ACCEL_HAVE_CUDA the .cu files define these and
 * this file is empty.
 */
#ifndef ACCEL_HAVE_CUDA
#include <stdio.h>

#include "gpu.h"

#define NO_CUDA "train_gpt was built without CUDA (no nvcc or NCCL under CUDA_HOME, or NO_CUDA=1)"

const struct gpt_ops *gpt_cuda_ops(void)
{
    return NULL;
}

int gpt_cuda_select(unsigned local_rank, int *device, char *why, size_t whylen)
{
    (void)local_rank;
    *device = -1;
    snprintf(why, whylen, "%s", NO_CUDA);
    return -1;
}

int gpt_cuda_init(struct gpt_cuda **out, void *comm_stream, char *why, size_t whylen)
{
    (void)comm_stream;
    *out = NULL;
    snprintf(why, whylen, "%s", NO_CUDA);
    return -1;
}

void gpt_cuda_free(struct gpt_cuda *g)
{
    (void)g;
}

void *gpt_cuda_stream(const struct gpt_cuda *g)
{
    (void)g;
    return NULL;
}

int gpt_cuda_comm_after(struct gpt_cuda *g, char *why, size_t whylen)
{
    (void)g;
    snprintf(why, whylen, "%s", NO_CUDA);
    return -1;
}

int gpt_cuda_compute_after(struct gpt_cuda *g, char *why, size_t whylen)
{
    (void)g;
    snprintf(why, whylen, "%s", NO_CUDA);
    return -1;
}

void gpt_cuda_describe(const struct gpt_cuda *g, char *buf, size_t len)
{
    (void)g;
    snprintf(buf, len, "none");
}
#endif
