#!/bin/bash
# bench/slurm.sh PLUGIN CLI: the cost of the plugin on a launch.  In the
# two-node lab (tests/slurm/lab.sh), time `srun -N2 -n4 true` with
# --accel-config against the same without it, interleaved, median of
# BENCH_SLURM_RUNS (default 21) each, and print the ratio (goal <= 1.05).
# Needs root and network namespaces, like the lab; prints SKIP otherwise.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tests/slurm/lock.sh
. "$ROOT/tests/slurm/lock.sh"
lab_lock "$0" "$@" # the lab's names are fixed: one lab per host
PLUGIN=$(realpath "${1:-$ROOT/build/spank/accelrun.so}")
runs=${BENCH_SLURM_RUNS:-21}
LAB=$ROOT/tests/slurm/lab.sh
user=alice

if [ "$(id -u)" != 0 ] || ! command -v srun >/dev/null 2>&1 || [ ! -f "$PLUGIN" ]; then
    echo "slurm bench: SKIP: needs root, Slurm's packages (make test-slurm installs them) and $PLUGIN"
    exit 0
fi
export ACCELRUN_SPANK=$PLUGIN ACCELRUN_PLUGSTACK_ARGS=
# Never take down a lab someone else brought up (a test run, a developer).
if "$LAB" status >/dev/null 2>&1; then
    echo "slurm bench: SKIP: the Slurm lab is already up (another run uses it); try again after it"
    exit 0
fi
if ! "$LAB" up >/tmp/accelrun-bench-lab.log 2>&1; then
    echo "slurm bench: SKIP: the lab did not come up (see /tmp/accelrun-bench-lab.log)"
    "$LAB" down >/dev/null 2>&1
    exit 0
fi
home=$(getent passwd "$user" | cut -d: -f6)
cfg=$home/bench.yaml
trap 'rm -f "$cfg"; "$LAB" down >/dev/null 2>&1' EXIT INT TERM
printf 'distributed_type: MULTI_GPU\nmixed_precision: bf16\nnum_machines: 2\nnum_processes: 4\n' >"$cfg"
chown "$user": "$cfg"

as_user() { (cd "$home" && runuser -u "$user" -- env -i PATH=/usr/bin:/bin HOME="$home" "$@"); }
one() { # prints microseconds for one srun
    local t0 t1
    t0=$(date +%s%N)
    as_user srun -N2 -n4 "$@" true >/dev/null 2>&1 || echo "srun failed: $*" >&2
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000))
}
median() { sort -n | awk '{a[NR]=$1} END {printf "%d\n", (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

one >/dev/null # warm-up: first step of a job
with=() without=()
for _ in $(seq "$runs"); do
    without+=("$(one)")
    with+=("$(one --accel-config=bench.yaml)")
done
w=$(printf '%s\n' "${with[@]}" | median)
wo=$(printf '%s\n' "${without[@]}" | median)
printf '%-52s %12s\n' "srun -N2 -n4 true (median of $runs)" "$wo us"
printf '%-52s %12s\n' "srun -N2 -n4 --accel-config=bench.yaml true" "$w us"
awk -v a="$w" -v b="$wo" 'BEGIN { printf "ratio with/without --accel-config: %.3f (goal <= 1.05)\n", a / b }'
