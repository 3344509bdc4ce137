#!/bin/sh
# tests/gpu/fake.sh: runs core/comm/nccl.c against the scripted NCCL and CUDA
# of tests/gpu/nccl_fake.c, on any machine with the CUDA toolkit's headers and
# nccl.h (no GPU, no driver): deadlines, aborts, asynchronous errors, the
# failure board, split and free.  The Makefile links that test without -lnccl
# -lcudart, so that the stand-ins are the only definitions (it is also part
# of `make unit`).  Prints the TAP output; SKIP without the headers.
set -u
cd "$(dirname "$0")/../.." || exit 1
if [ -z "$(make -s print-cuda-cflags)" ]; then
    echo "nccl_fake: SKIP: no nccl.h under NCCL_HOME (${NCCL_HOME:-${CUDA_HOME:-/usr/local/cuda}}), or no cuda_runtime.h under ${CUDA_HOME:-/usr/local/cuda}"
    exit 0
fi
make -s build/tests/test_nccl_fake || exit 1
timeout -k 5 120 build/tests/test_nccl_fake
