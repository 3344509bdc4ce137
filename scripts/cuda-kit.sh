#!/bin/sh
# scripts/cuda-kit.sh: a CUDA toolkit with NCCL for building (not running) the
# GPU code where the machine has none: nvcc, the CUDA runtime's headers and
# libraries, NCCL and cuBLAS's headers (the example trainer opens cuBLAS with
# dlopen on a GPU machine, so its 400 MB of libraries are left out), assembled from NVIDIA's wheels on PyPI (the same ones
# PyTorch's CUDA build depends on) into a cache outside the clone, keyed by
# their versions.  With it, `make` compiles core/comm/nccl.c and the CUDA
# kernels, and `make unit` runs the nccl backend against the scripted NCCL of
# tests/gpu/nccl_fake.c; nothing here needs a GPU or a driver.
#
#   sh scripts/cuda-kit.sh        prints the kit's folder (a CUDA_HOME); builds
#                                 it first when missing; exit 1 with the reason
#                                 on stderr when it cannot
#   sh scripts/cuda-kit.sh --path prints the folder it would use, builds nothing
#
# The Makefile takes /usr/local/cuda when it has cuda_runtime.h and nccl.h,
# else this kit when it is there (CUDA_HOME, NCCL_HOME override both).
set -eu
runtime=13.0.96 nvcc=13.0.88 cccl=13.0.85 nccl=2.28.9 cublas=13.1.0.3
kit=${ACCELRUN_CUDA_KIT:-/var/cache/accelrun-cuda/cuda-$nvcc-nccl-$nccl-cublas-$cublas}
if [ "${1:-}" = --path ]; then
    echo "$kit"
    exit 0
fi
if [ -f "$kit/.complete" ]; then
    echo "$kit"
    exit 0
fi
fail() {
    echo "cuda-kit: $*" >&2
    exit 1
}
command -v python3 >/dev/null 2>&1 || fail "no python3 (apt-get install python3-venv)"
work=$(mktemp -d "${TMPDIR:-/tmp}/cuda-kit.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
python3 -m venv "$work/venv" >"$work/log" 2>&1 || fail "python3 -m venv failed: $(tail -n 1 "$work/log")"
echo "cuda-kit: downloading NVIDIA's CUDA $nvcc, NCCL $nccl and cuBLAS $cublas wheels from PyPI (about 700 MB) for $kit" >&2
if ! timeout 900 "$work/venv/bin/pip" download -q --no-deps --disable-pip-version-check -d "$work/wheels" \
    "nvidia-cuda-runtime==$runtime" "nvidia-cuda-nvcc==$nvcc" "nvidia-cuda-crt==$nvcc" \
    "nvidia-cuda-cccl==$cccl" "nvidia-nvvm==$nvcc" "nvidia-nccl-cu13==$nccl" \
    "nvidia-cublas==$cublas" >"$work/log" 2>&1; then
    fail "pip download failed: $(grep -v '^ *$' "$work/log" | tail -n 1)"
fi
mkdir -p "$work/x"
for w in "$work"/wheels/*.whl; do
    case $(basename "$w") in
    nvidia_cublas-*) # its headers only
        python3 -c 'import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
z.extractall(sys.argv[2], [n for n in z.namelist() if "/include/" in n])' "$w" "$work/x" ;;
    *) python3 -m zipfile -e "$w" "$work/x" ;;
    esac || fail "couldn't unpack $w"
done
cu=$work/x/nvidia/cu13 nc=$work/x/nvidia/nccl
# zipfile keeps no modes: the tools are made executable again
chmod -R a+x "$cu/bin" "$cu/nvvm/bin" 2>/dev/null || true
for f in "$cu/bin/nvcc" "$cu/include/cuda_runtime.h" "$cu/include/cublas_v2.h" "$nc/include/nccl.h"; do
    [ -f "$f" ] || fail "the wheels do not hold ${f#"$work"/x/} where expected"
done
new=$kit.new.$$
rm -rf "$new"
mkdir -p "$new/lib" "$new/targets/x86_64-linux"
cp -a "$cu/bin" "$cu/include" "$cu/nvvm" "$new/"
cp -a "$cu/lib/." "$new/lib/"
cp -a "$nc/include/." "$new/include/"
cp -a "$nc/lib/." "$new/lib/"
# the links a toolkit installer makes and the wheels leave out
ln -sf libcudart.so.13 "$new/lib/libcudart.so"
ln -sf libnccl.so.2 "$new/lib/libnccl.so"
ln -s lib "$new/lib64"
ln -s ../../include "$new/targets/x86_64-linux/include"
ln -s ../../lib "$new/targets/x86_64-linux/lib"
chmod -R a+rX "$new"
echo "nvidia-cuda-nvcc $nvcc, nvidia-cuda-runtime $runtime, nvidia-cuda-cccl $cccl, nvidia-nccl-cu13 $nccl, nvidia-cublas $cublas (headers)" >"$new/.complete"
mkdir -p "$(dirname "$kit")"
rm -rf "$kit"
mv "$new" "$kit"
echo "$kit"
