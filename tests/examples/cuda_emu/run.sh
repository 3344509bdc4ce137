#!/bin/bash
# tests/examples/cuda_emu/run.sh: examples/gpt's CUDA backend (the .cu files)
# run on the CPU, for machines without a GPU: each .cu is rewritten to plain
# C++ (cu2cpp.py: a launch kernel<<<grid, block, ...>>>(args) becomes a call
# of the emulator) and built with g++ against the stand-ins for CUDA, cuBLAS
# and dlopen in this folder (cuda_runtime.h says what they can and cannot
# check).  Builds nothing of the project's; needs g++ and python3.
#
#   bash tests/examples/cuda_emu/run.sh [BUILD_DIR] [--train STEPS]
#
# Always: emu_test (emu_test.c says what it compares, and its tolerances):
# the CUDA backend against the CPU backend through model.c, for several
# shapes, and bit-identical under two thread schedules.
#
# --train STEPS (slow: about 3 s a step on one core): train.c in device mode
# on the emulated kernels (linked with BUILD_DIR/lib/libaccelrun.a; the socket
# communicator and the host shard serve the emulator's host "device" memory),
# against BUILD_DIR/bin/train_gpt on the CPU, STEPS steps of the default model
# at world 1: the loss curves, with tests/gpu/train.sh's tolerances (step 1
# within 1e-5, every step and the validation loss within 1e-3).  Measured
# here over 200 steps: max 6.8e-7 (step 22), final and validation 0.
#
# Prints TAP-like lines, then "cuda-emu: N passed, N failed, N skipped".
set -u
build=build
steps=0
while [ $# -gt 0 ]; do
    case $1 in
    --train) steps=${2:?--train STEPS}; shift 2 ;;
    *) build=$1; shift ;;
    esac
done
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
src=$root/examples/gpt
cd "$root" || exit 1
TAP_NAME=cuda-emu
TAP_TAIL=20
# shellcheck source=tests/lib/tap.sh
. "$here/../../lib/tap.sh"

for tool in g++ gcc python3; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "cuda-emu: SKIP: no $tool"
        skip=1
        finish
    fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# fused multiply-adds as nvcc emits them, where the CPU has them
fma=
if [ "$(uname -m)" = x86_64 ] && grep -qw fma /proc/cpuinfo 2>/dev/null; then fma=-mfma; fi
cxx="g++ -std=c++17 -O2 -g $fma -ffp-contract=fast -Wall -Wextra -Wno-unknown-pragmas"
cc="gcc -std=gnu11 -O2 -g -Wall -Wextra -Wno-missing-field-initializers"
inc="-I$here -I$src -I$root/core/include -I$root/ckpt/include"

# ---------------------------------------------------------------- build
built=1
for f in "$src"/*.cu; do
    b=$(basename "$f" .cu)
    # shellcheck disable=SC2086 # flags: one per word
    if ! python3 "$here/cu2cpp.py" "$f" >"$tmp/$b.cpp" ||
        ! $cxx $inc -c "$tmp/$b.cpp" -o "$tmp/$b.o" 2>"$tmp/cc.err"; then
        bad "$b.cu builds for the emulator" "$(cat "$tmp/cc.err")"
        built=0
    fi
done
# shellcheck disable=SC2086
if ! $cxx $inc -c "$here/emu.cpp" -o "$tmp/emu.o" 2>"$tmp/cc.err"; then
    bad "emu.cpp builds" "$(cat "$tmp/cc.err")"
    built=0
fi
[ "$built" -eq 1 ] || finish
mkdir -p "$tmp/model"
# shellcheck disable=SC2086
if (cd "$tmp/model" && $cc $inc -c "$here/emu_test.c" "$src/model.c" "$src/kernels.c" \
    "$src/rng.c" 2>"$tmp/cc.err") &&
    g++ -o "$tmp/emu_test" "$tmp"/model/*.o "$tmp"/*.o -lm 2>"$tmp/cc.err"; then
    ok "the CUDA backend builds for the emulator ($(cd "$src" && echo *.cu))"
else
    bad "emu_test builds" "$(cat "$tmp/cc.err")"
    finish
fi

# ---------------------------------------------------------------- kernels
out=$(timeout -k 10 600 "$tmp/emu_test" 2>&1)
rc=$?
printf '%s\n' "$out" | grep -v '^ok \|^not ok ' | sed 's/^#* */# /'
printf '%s\n' "$out" | grep '^ok \|^not ok '
pass=$((pass + $(printf '%s\n' "$out" | grep -c '^ok ')))
fail=$((fail + $(printf '%s\n' "$out" | grep -c '^not ok ')))
if [ "$rc" -ne 0 ] && ! printf '%s\n' "$out" | grep -q '^not ok '; then
    bad "emu_test exited $rc"
fi

# ---------------------------------------------------------------- training
if [ "$steps" -eq 0 ]; then
    skipped "training on the emulated device" "run with --train STEPS"
    finish
fi
lib=$build/lib/libaccelrun.a
for f in "$lib" "$build/bin/accelrun" "$build/bin/train_gpt"; do
    if [ ! -e "$f" ]; then
        skipped "training on the emulated device" "$f not found (make all)"
        finish
    fi
done
libs="$(pkg-config --libs yaml-0.1 libcjson hwloc libxxhash 2>/dev/null || echo -lyaml -lcjson -lhwloc -lxxhash)"
if nm "$lib" 2>/dev/null | grep -q ' U ncclCommInitRankConfig'; then
    # the toolkit the build used (/usr/local/cuda, or make test's CUDA kit)
    libs="$libs $(make -s --no-print-directory print-cuda-libs)"
fi
mkdir -p "$tmp/train"
# train.c asks accel_comm_backend, accel_comm_cuda_stream and
# accel_shard_on_device whether it is in device mode: emu.cpp answers
# shellcheck disable=SC2086
if (cd "$tmp/train" && $cc $inc -DACCEL_HAVE_CUDA=1 -Daccel_comm_backend=emu_comm_backend \
    -Daccel_comm_cuda_stream=emu_comm_stream -Daccel_shard_on_device=emu_shard_on_device \
    -c "$src"/train.c "$src"/args.c "$src"/data.c "$src"/model.c "$src"/kernels.c \
    "$src"/rng.c "$src"/resume.c "$src"/setup.c 2>"$tmp/cc.err") &&
    g++ -o "$tmp/train_gpt_emu" "$tmp"/train/*.o "$tmp"/*.o "$lib" $libs -ldl -lm -pthread \
        2>"$tmp/cc.err"; then
    ok "train.c builds on the emulated device"
else
    bad "train.c builds on the emulated device" "$(cat "$tmp/cc.err")"
    finish
fi
for r in cpu emu; do
    t=$build/bin/train_gpt
    [ "$r" = emu ] && t=$tmp/train_gpt_emu
    if ! timeout -k 10 $((60 + 10 * steps)) "$build/bin/accelrun" launch -n 1 \
        --config examples/gpt-cpu.yaml -- "$t" --steps "$steps" --loss-log "$tmp/$r.log" \
        >"$tmp/$r.out" 2>&1; then
        bad "train_gpt ($r) failed" "$(cat "$tmp/$r.out")"
        finish
    fi
done
if grep -q "device cuda:0 emulated" "$tmp/emu.out"; then
    ok "the emulated run trained in device mode"
else
    bad "the emulated run trained in device mode" "$(cat "$tmp/emu.out")"
fi
read -r first max at val <<<"$(paste "$tmp/cpu.log" "$tmp/emu.log" | awk '
    function rel(a, b) { d = (a - b) / a; return d < 0 ? -d : d }
    $1 == "#" && $2 == "val" { val = rel($3, $6); next }
    $1 == 1 { first = rel($2, $4) }
    { r = rel($2, $4); if (r >= max) { max = r; at = $1 } }
    END { printf "%.3g %.3g %d %.3g\n", first, max, at, val }')"
echo "# emulated device vs CPU ($steps steps): step 1 $first, max $max (step $at), validation $val"
for c in "step 1 within 1e-5 ($first)|$first|1e-5" \
    "every step within 1e-3 (max $max at step $at)|$max|1e-3" \
    "validation loss within 1e-3 ($val)|$val|1e-3"; do
    IFS='|' read -r what v tol <<<"$c"
    within "emulated device vs CPU: $what" "$v" "$tol"
done
finish
