#!/bin/bash
# tests/gpu/train.sh: the example trainer on a GPU (docs/train-gpt.md, "GPU")
# against the same training on the CPU.  For a machine with an NVIDIA GPU;
# tests/gpu/run.sh calls it after `make all` (this script builds nothing).
#
#   bash tests/gpu/train.sh [BUILD_DIR]      (default build)
#
# Runs, each for STEPS optimizer steps (default 50) with the default model:
#   cpu   accelrun launch -n 1 --config examples/gpt-cpu.yaml   (socket, CPU kernels)
#   gpu   accelrun launch -n 1 --config examples/gpt-gpu.yaml   (nccl, CUDA kernels), twice
#   gpu-worldN  the same with -n N, N = the most GPUs (up to the count nvidia-smi lists)
#         that divide the global batch of 16, when that is more than 1
# and checks:
#   the GPU runs ran on the GPU          the banner names the nccl backend and a CUDA device
#   two GPU runs, world 1                bit-identical loss logs (deterministic kernels,
#                                        cuBLAS without atomics, one stream)
#   step 1, GPU vs CPU                   |a-b|/a <= STEP1_TOL (1e-5): the same parameters,
#                                        so only the forward's rounding differs
#   every step and the validation loss,  |a-b|/a <= GPU_TOL (1e-3)
#   GPU vs CPU, and world N vs 1 on GPU
#   checkpoints on the GPU: a run that   its second half bit-identical to the
#   saves at STEPS/2, resumed from there uninterrupted GPU run (the device
#                                        slices saved and loaded exactly)
#   the GPU run's checkpoint resumed     every step within GPU_TOL of the CPU run
#   on the CPU                           (the fp32 state crosses devices exactly)
# and prints the step time on each (a figure, not asserted).
#
# The tolerances (docs/train-gpt.md, "GPU"): GPU and CPU compute the same fp32
# math with different summation orders (cuBLAS's GEMM blocking, warp-tree
# sums), fused multiply-adds and CUDA's libm (expf, tanhf, logf within 2 ulp),
# so every activation differs by a few units in the last place: a relative
# perturbation of each step's gradient of about 1e-6 (sqrt(k) u for k-term
# sums, k <= 256, u = 6e-8), up to about 1e-5 in the worst case, where the CPU
# runs of different world sizes (one regrouped sum) see 2e-6.  AdamW passes a
# relative gradient perturbation to the trajectory about 1:1, and the curve's
# most sensitive point, the loss spike at the end of the 20-step warmup,
# amplified the world-size differences about 2x; so the worst step is
# expected near 1e-5 x 10 = 1e-4 at most, and 1e-3 leaves a factor 10.  A
# broken kernel (a transposed GEMM, a lost gradient term, a race) moves the
# loss by 1e-2 or more within the first steps.  Step 1 is tighter: the loss
# of the initial parameters is a mean over 1024 tokens of values that differ
# by a few ulp, so 1e-5 is already 100x the expected difference.
#
# Prints TAP-like "ok - " / "not ok - " lines, then "gpu-train: N passed, N
# failed, N skipped"; SKIP with the reason when there is no GPU.
set -u
build=${1:-build}
steps=${STEPS:-50}
STEP1_TOL=1e-5
GPU_TOL=1e-3
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root" || exit 1
accelrun=$build/bin/accelrun
train=$build/bin/train_gpt
TAP_NAME=gpu-train
# shellcheck source=tests/lib/tap.sh
. "$here/../lib/tap.sh"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu-train: SKIP: no NVIDIA GPU here (nvidia-smi -L fails)"
    skip=1
    finish
fi
for f in "$train" "$accelrun" examples/gpt-cpu.yaml examples/gpt-gpu.yaml; do
    if [ ! -e "$f" ]; then
        echo "gpu-train: SKIP: $f not found (make all)"
        skip=1
        finish
    fi
done
ngpu=$(nvidia-smi -L | grep -c '^GPU ')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# run NAME N CONFIG: trains, loss log in $tmp/NAME.log, output in $tmp/NAME.out
run() {
    local name=$1 n=$2 config=$3
    if timeout -k 10 300 "$accelrun" launch -n "$n" --config "$config" -- "$train" \
        --steps "$steps" --loss-log "$tmp/$name.log" >"$tmp/$name.out" 2>&1; then
        return 0
    fi
    bad "$name: train_gpt at world $n ($config) failed" "$(cat "$tmp/$name.out")"
    return 1
}

# compare A B: "step1_rel max_rel max_step val_rel" of two loss logs
compare() {
    paste "$1" "$2" | awk '
        function rel(a, b) { d = (a - b) / a; return d < 0 ? -d : d }
        $1 == "#" && $2 == "val" { val = rel($3, $6); next }
        $1 == 1 { first = rel($2, $4) }
        { r = rel($2, $4); if (r >= max) { max = r; at = $1 } }
        END { printf "%.3g %.3g %d %.3g\n", first, max, at, val }'
}


# the "ms/step (steps 2..N)" of a run's summary line
ms_per_step() {
    sed -n 's/.*; \([0-9.]*\) ms\/step (steps .*/\1/p' "$1" | tail -n 1
}

# the most GPUs, up to ngpu, that divide the global batch (16)
n=1
for k in 16 8 4 2; do
    if [ "$k" -le "$ngpu" ]; then n=$k; break; fi
done

havec=0 haveg=0 haveg2=0 haven=0
run cpu 1 examples/gpt-cpu.yaml && havec=1
run gpu 1 examples/gpt-gpu.yaml && haveg=1
run gpu-again 1 examples/gpt-gpu.yaml && haveg2=1
if [ "$n" -gt 1 ]; then run "gpu-world$n" "$n" examples/gpt-gpu.yaml && haven=1; fi

for r in gpu gpu-again "gpu-world$n"; do
    [ -s "$tmp/$r.out" ] || continue
    if grep -q "nccl backend" "$tmp/$r.out" && grep -q "device cuda:" "$tmp/$r.out"; then
        ok "$r: ran on the GPU ($(sed -n 's/.*train_gpt: device \(cuda:[^:]*\):.*/\1/p' \
            "$tmp/$r.out" | head -n 1))"
    else
        bad "$r: ran on the GPU (the banner names no nccl backend or CUDA device)" \
            "$(grep 'train_gpt:' "$tmp/$r.out")"
    fi
done

if [ "$haveg" -eq 1 ] && [ "$haveg2" -eq 1 ]; then
    if cmp -s "$tmp/gpu.log" "$tmp/gpu-again.log"; then
        ok "GPU, world 1, two runs: bit-identical loss logs ($steps steps)"
    else
        bad "GPU, world 1, two runs: bit-identical loss logs" \
            "$(diff "$tmp/gpu.log" "$tmp/gpu-again.log" | head)"
    fi
else
    skipped "GPU bit-identical runs" "a GPU run failed"
fi

if [ "$havec" -eq 1 ] && [ "$haveg" -eq 1 ]; then
    read -r first max at val <<<"$(compare "$tmp/cpu.log" "$tmp/gpu.log")"
    echo "# GPU vs CPU (world 1, $steps steps): step 1 $first, max $max (step $at)," \
        "validation $val"
    within "GPU vs CPU: step 1 within $STEP1_TOL ($first)" "$first" $STEP1_TOL
    within "GPU vs CPU: every step within $GPU_TOL (max $max at step $at)" "$max" $GPU_TOL
    within "GPU vs CPU: validation loss within $GPU_TOL ($val)" "$val" $GPU_TOL
else
    skipped "GPU vs CPU" "a run failed"
fi

if [ "$n" -gt 1 ]; then
    if [ "$haven" -eq 1 ] && [ "$haveg" -eq 1 ]; then
        read -r first max at val <<<"$(compare "$tmp/gpu.log" "$tmp/gpu-world$n.log")"
        echo "# GPU world $n vs 1: step 1 $first, max $max (step $at), validation $val"
        within "GPU world $n vs 1: every step within $GPU_TOL (max $max at step $at)" "$max" \
            $GPU_TOL
        within "GPU world $n vs 1: validation loss within $GPU_TOL ($val)" "$val" $GPU_TOL
    else
        skipped "GPU world $n vs 1" "a run failed"
    fi
else
    skipped "GPU world N vs 1" "$ngpu GPU: no second world size"
fi

# ---------------------------------------------------------------- checkpoints
# ckrun NAME CONFIG DIR [ARGS]: a world-1 run with --ckpt-dir DIR
ckrun() {
    local name=$1 config=$2 dir=$3
    shift 3
    if timeout -k 10 300 "$accelrun" launch -n 1 --config "$config" -- "$train" \
        --steps "$steps" --loss-log "$tmp/$name.log" --ckpt-dir "$dir" "$@" \
        >"$tmp/$name.out" 2>&1; then
        return 0
    fi
    bad "$name: train_gpt --ckpt-dir ($config) failed" "$(cat "$tmp/$name.out")"
    return 1
}
half=$((steps / 2))
if [ "$haveg" -eq 1 ] && ckrun gpu-ck examples/gpt-gpu.yaml "$tmp/gck" --save-every "$half"; then
    cp -r "$tmp/gck" "$tmp/gck-cpu"
    rm -rf "$tmp/gck/step-$(printf %08d "$steps")" "$tmp/gck-cpu/step-$(printf %08d "$steps")"
    if ckrun gpu-resumed examples/gpt-gpu.yaml "$tmp/gck" &&
        grep -q "resumed from $tmp/gck/step-$(printf %08d "$half")" "$tmp/gpu-resumed.out"; then
        if tail -n +$((half + 1)) "$tmp/gpu.log" | cmp -s - "$tmp/gpu-resumed.log"; then
            ok "GPU checkpoint at step $half, resumed on the GPU: bit-identical to the uninterrupted GPU run"
        else
            bad "GPU checkpoint at step $half, resumed on the GPU: bit-identical to the uninterrupted GPU run" \
                "$(tail -n +$((half + 1)) "$tmp/gpu.log" | diff - "$tmp/gpu-resumed.log" | head)"
        fi
    fi
    if [ "$havec" -eq 1 ] && ckrun gpu-to-cpu examples/gpt-cpu.yaml "$tmp/gck-cpu"; then
        tail -n +$((half + 1)) "$tmp/cpu.log" >"$tmp/cpu.tail"
        read -r first max at val <<<"$(compare "$tmp/cpu.tail" "$tmp/gpu-to-cpu.log")"
        within "GPU checkpoint resumed on the CPU: every step within $GPU_TOL of the CPU run (max $max)" \
            "$max" $GPU_TOL
    fi
else
    skipped "checkpoints on the GPU" "the GPU run failed"
fi
# asynchronous saves from the GPU (device -> pinned staging) through a local tier
if [ "$haveg" -eq 1 ] && ckrun gpu-async examples/gpt-gpu.yaml "$tmp/gcka" --save-every "$half" \
    --async-save --ckpt-local "$tmp/gcka-local"; then
    if cmp -s "$tmp/gpu.log" "$tmp/gpu-async.log" &&
        grep -q "checkpoint $tmp/gcka/step-$(printf %08d "$half") committed" "$tmp/gpu-async.out"; then
        ok "GPU --async-save --ckpt-local: step $half committed in the background, the loss log bit-identical to the run without"
    else
        bad "GPU --async-save --ckpt-local: the loss log bit-identical, step $half committed" \
            "$(diff "$tmp/gpu.log" "$tmp/gpu-async.log" | head; grep checkpoint "$tmp/gpu-async.out")"
    fi
    rm -rf "$tmp/gcka/step-$(printf %08d "$steps")" "$tmp"/gcka-local/gcka-*/step-"$(printf %08d "$steps")"
    if ckrun gpu-async-resumed examples/gpt-gpu.yaml "$tmp/gcka" --async-save --ckpt-local "$tmp/gcka-local" &&
        tail -n +$((half + 1)) "$tmp/gpu.log" | cmp -s - "$tmp/gpu-async-resumed.log"; then
        ok "GPU: resumed from the asynchronous step-$half checkpoint: bit-identical"
    else
        bad "GPU: resumed from the asynchronous step-$half checkpoint: bit-identical" \
            "$(tail -n +$((half + 1)) "$tmp/gpu.log" | diff - "$tmp/gpu-async-resumed.log" | head)"
    fi
fi

if [ "$havec" -eq 1 ] && [ "$haveg" -eq 1 ]; then
    c=$(ms_per_step "$tmp/cpu.out")
    g=$(ms_per_step "$tmp/gpu.out")
    line="# step time (steps 2..$steps, world 1): CPU $c ms, GPU $g ms"
    if [ -n "$c" ] && [ -n "$g" ]; then
        line="$line: GPU/CPU $(awk -v c="$c" -v g="$g" 'BEGIN { printf "%.3f", g / c }')"
    fi
    if [ "$haven" -eq 1 ]; then line="$line; GPU world $n $(ms_per_step "$tmp/gpu-world$n.out") ms"; fi
    echo "$line"
fi
finish
