#!/bin/sh
# tests/gpu/fake.sh: runs core/comm/nccl.c against the scripted NCCL and CUDA
# of tests/gpu/nccl_fake.c, on any machine with the CUDA toolkit's headers (no
# GPU, no driver): deadlines, aborts, asynchronous errors, the failure board,
# split and free.  Builds libaccelrun with NCCL (make), then links the test
# without -lnccl -lcudart so that the stand-ins are the only definitions.
# Prints the TAP output; SKIP without the toolkit's headers.
set -u
cd "$(dirname "$0")/../.." || exit 1
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$CUDA_HOME/include/nccl.h" ] || [ ! -f "$CUDA_HOME/include/cuda_runtime.h" ]; then
    echo "nccl_fake: SKIP: no nccl.h and cuda_runtime.h under $CUDA_HOME"
    exit 0
fi
make -s build/lib/libaccelrun.a || exit 1
mkdir -p build/gpu
libs="$(pkg-config --libs yaml-0.1 libcjson hwloc 2>/dev/null || echo -lyaml -lcjson -lhwloc)"
# shellcheck disable=SC2086 # $libs: one flag per word
cc -std=gnu11 -O1 -g -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Werror \
    -Icore/include -Itopology/include -Ickpt/include -Itests/harness -DACCEL_HAVE_NCCL=1 \
    -isystem "$CUDA_HOME/include" tests/gpu/nccl_fake.c tests/harness/test.c \
    build/lib/libaccelrun.a $libs -ldl -lm -pthread -o build/gpu/nccl_fake || exit 1
timeout -k 5 120 build/gpu/nccl_fake
