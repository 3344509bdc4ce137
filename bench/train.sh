#!/bin/bash
# bench/train.sh: the example trainer (build/bin/train_gpt, FULL_SHARD, fp32,
# CPU) at N = 1, 2 and 4 ranks on one machine: peak RSS per rank against the
# ZeRO-3 estimate, and step time against N = 1 (the peer: the same trainer,
# unsharded by construction).
#
#   bash bench/train.sh [BUILD]        (make bench calls it with the build folder)
#
# Estimate per rank, each term printed (MiB = 2^20 bytes):
#   16 Psi / N      fp32 master slice 4 + gradient slice 4 + AdamW m and v 8
#                   bytes a parameter, over N ranks (padding ignored)
#   activations     what the model keeps for its micro-batch of B/N sequences
#                   (train_gpt reports its allocation: acts=)
#   buffers         one unit gathered (4 bytes x largest unit) and its full
#                   gradient (4 x largest unit), plus the head kept gathered
#                   through its backward (4 x head), plus the corpus bytes
#   process         VmRSS at the start of main (program, libc, libraries)
# Measured: VmHWM of each rank at exit (the maximum over ranks is shown) and
# the shard's own peak (accel_shard_bytes) against 16 Psi / N + unit buffers.
# Step time: the mean over steps 2..STEPS of rank 0.  The ranks share this
# machine's cores: with fewer cores than ranks, N = 4 is oversubscribed and the
# ratio shows that, not the communication cost (nproc is printed).
# Environment: STEPS (4), ARGS (the model: --layers 4 --channels 256 --heads 8
# --seq 64 --batch 16), RANKS ("1 2 4").
set -u
build=${1:-build}
steps=${STEPS:-4}
ranks=${RANKS:-1 2 4}
args=${ARGS:---layers 4 --channels 256 --heads 8 --seq 64 --batch 16}
train=$build/bin/train_gpt
accelrun=$build/bin/accelrun
root=$(cd "$(dirname "$0")/.." && pwd)
cfg=$root/examples/gpt-cpu.yaml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

for f in "$train" "$accelrun"; do
    if [ ! -x "$f" ]; then
        echo "train.sh: SKIP: $f not built (make all)"
        exit 0
    fi
done

echo "train.sh: train_gpt $args --steps $steps, FULL_SHARD fp32, $(nproc) CPUs"
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

printf '%-3s %8s %8s %8s %8s %9s %8s %8s %9s %10s %8s %7s\n' N "16Psi/N" acts buffers process \
    estimate "HWM max" "HWM/est" "shard pk" "16Psi/N+u" "ms/step" "vs N=1"
base_ms=
for n in $ranks; do
    # shellcheck disable=SC2086 # ARGS is split on purpose
    if ! timeout 600 "$accelrun" launch -n "$n" --config "$cfg" -- "$train" $args --steps "$steps" \
        --eval-batches 1 >"$tmp/out.$n" 2>&1; then
        echo "train.sh: N=$n failed:"
        tail -n 5 "$tmp/out.$n"
        continue
    fi
    # one memory line per rank: the largest HWM, and rank 0's figures
    read -r psi hwm base shard_peak acts umax data <<<"$(awk '/train_gpt: memory/ {
            for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
            if (v["hwm_kb"] > hwm) hwm = v["hwm_kb"]
            if (v["rank"] == 0) { psi = v["psi"]; base = v["base_kb"]; sp = v["shard_peak"];
                                  acts = v["acts"]; um = v["unit_max"]; data = v["data"] } }
        END { print psi, hwm, base, sp, acts, um, data }' "$tmp/out.$n")"
    ms=$(sed -n 's/.*; \([0-9.]*\) ms\/step (steps.*/\1/p' "$tmp/out.$n" | head -n 1)
    [ -z "$base_ms" ] && [ "$n" -eq 1 ] && base_ms=$ms
    # the head (ln_f + lm_head: 2C + 256C + 256) is kept gathered through its backward
    c=$(echo "$args" | sed -n 's/.*--channels \([0-9]*\).*/\1/p')
    head_numel=$((2 * c + 256 * c + 256))
    zero=$(awk -v p="$psi" -v n="$n" 'BEGIN { print 16 * p / n }')
    buffers=$(awk -v u="$umax" -v h="$head_numel" -v d="$data" 'BEGIN { print 8 * u + 4 * h + d }')
    process=$((base * 1024))
    est=$(awk -v a="$zero" -v b="$acts" -v c="$buffers" -v d="$process" \
        'BEGIN { print a + b + c + d }')
    shard_est=$(awk -v a="$zero" -v u="$umax" -v h="$head_numel" \
        'BEGIN { print a + 8 * u + 4 * h }')
    ratio=$(awk -v m="$hwm" -v e="$est" 'BEGIN { printf "%.2f", m * 1024 / e }')
    vs=$(awk -v a="$ms" -v b="${base_ms:-0}" \
        'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')
    printf '%-3s %8s %8s %8s %8s %9s %8s %8s %9s %10s %8s %7s\n' "$n" "$(mib "$zero")" \
        "$(mib "$acts")" "$(mib "$buffers")" "$(mib "$process")" "$(mib "$est")" \
        "$(mib $((hwm * 1024)))" "$ratio" "$(mib "$shard_peak")" "$(mib "$shard_est")" "$ms" "$vs"
done
echo "train.sh: Psi = $psi parameters; sizes in MiB; HWM = VmHWM at exit, the largest over ranks;"
echo "train.sh: 'shard pk' = accel_shard_bytes peak of rank 0;" \
    "'16Psi/N+u' = its estimate (slices + unit buffers);"
echo "train.sh: ms/step = rank 0's mean over steps 2..$steps; 'vs N=1' = ms/step over N=1's."
