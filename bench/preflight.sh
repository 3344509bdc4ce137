#!/bin/bash
# bench/preflight.sh PLUGIN CLI: what srun --accel-preflight adds to a step.
# In the two-node lab (tests/slurm/lab.sh), 2 nodes x 2 tasks on the 1.15
# stack (scripts/lab-venv.sh 1.15), interleaved rounds, median of
# BENCH_PREFLIGHT_RUNS (default 5) each:
#
#   step        srun -N2 -n4 --accel-config=cpu4.yaml true
#   python      `srun -N2 -n2 python -c "from accelerate import Accelerator;
#               import accelerate.big_modeling"`: one Python per node, the
#               start-up any check in the job's Python pays (the preflight
#               runs one per node)
#   preflight   the step with --accel-preflight
#   full        the step with --accel-preflight=full
#
# and prints the added seconds: preflight - step (goal: <= 2 s with =full)
# and preflight - python (goal: <= 0.3 s beyond the Python start-up).  The
# lab's two "nodes" share this machine's cores: every Python of both nodes
# imports torch on the same two cores at once.
# Needs root and network namespaces, like the lab; prints SKIP otherwise.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tests/slurm/lock.sh
. "$ROOT/tests/slurm/lock.sh"
lab_lock "$0" "$@"
PLUGIN=$(realpath "${1:-$ROOT/build/spank/accelrun.so}")
CLI=$(realpath "${2:-$ROOT/build/bin/accelrun}")
runs=${BENCH_PREFLIGHT_RUNS:-5}
LAB=$ROOT/tests/slurm/lab.sh
user=alice

if [ "$(id -u)" != 0 ] || ! command -v srun >/dev/null 2>&1 || [ ! -f "$PLUGIN" ]; then
    echo "preflight bench: SKIP: needs root, Slurm's packages (make test-slurm installs them) and $PLUGIN"
    exit 0
fi
if ! py=$(sh "$ROOT/scripts/lab-venv.sh" 1.15 2>/tmp/accelrun-bench-pf.err); then
    echo "preflight bench: SKIP: scripts/lab-venv.sh 1.15: $(tail -n 1 /tmp/accelrun-bench-pf.err)"
    exit 0
fi
venv=$(dirname "$py")
export ACCELRUN_SPANK=$PLUGIN ACCELRUN_PLUGSTACK_ARGS="accelrun=$CLI"
if "$LAB" status >/dev/null 2>&1; then
    echo "preflight bench: SKIP: the Slurm lab is already up (another run uses it); try again after it"
    exit 0
fi
if ! "$LAB" up >/tmp/accelrun-bench-lab.log 2>&1; then
    echo "preflight bench: SKIP: the lab did not come up (see /tmp/accelrun-bench-lab.log)"
    "$LAB" down >/dev/null 2>&1
    exit 0
fi
home=$(getent passwd "$user" | cut -d: -f6)
cfg=$home/bench-preflight.yaml
trap 'rm -f "$cfg"; "$LAB" down >/dev/null 2>&1' EXIT INT TERM
printf 'distributed_type: MULTI_CPU\nuse_cpu: true\nmixed_precision: "no"\nnum_machines: 2\nnum_processes: 4\n' >"$cfg"
chown "$user": "$cfg"

as_user() { (cd "$home" && runuser -u "$user" -- env -i PATH="$venv:/usr/bin:/bin" HOME="$home" "$@"); }
one() { # SRUN-ARGS...: prints milliseconds for one srun
    local t0 t1
    t0=$(date +%s%N)
    as_user srun -N2 "$@" >/dev/null 2>&1 || echo "srun failed: $*" >&2
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000000))
}
C=(-n4 --accel-config=bench-preflight.yaml)
median() { sort -n | awk '{a[NR]=$1} END {printf "%d\n", (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
IMPORT='from accelerate import Accelerator; import accelerate.big_modeling'

one "${C[@]}" true >/dev/null # warm-up: the page cache, the first step of a job
one "${C[@]}" --accel-preflight true >/dev/null
step=() pyth=() pre=() full=()
for _ in $(seq "$runs"); do
    step+=("$(one "${C[@]}" true)")
    pyth+=("$(one -n2 python -c "$IMPORT")")
    pre+=("$(one "${C[@]}" --accel-preflight true)")
    full+=("$(one "${C[@]}" --accel-preflight=full true)")
done
s=$(printf '%s\n' "${step[@]}" | median)
p=$(printf '%s\n' "${pyth[@]}" | median)
f1=$(printf '%s\n' "${pre[@]}" | median)
f2=$(printf '%s\n' "${full[@]}" | median)
printf '%-62s %8s\n' "2 nodes x 2 tasks, median of $runs" "ms"
printf '%-62s %8s\n' "srun --accel-config true" "$s"
printf '%-62s %8s\n' "srun -n2 python -c 'import accelerate...' (one per node)" "$p"
printf '%-62s %8s\n' "srun --accel-config --accel-preflight true" "$f1"
printf '%-62s %8s\n' "srun --accel-config --accel-preflight=full true" "$f2"
awk -v s="$s" -v p="$p" -v a="$f1" -v b="$f2" 'BEGIN {
    printf "added by the preflight: %.2f s, =full %.2f s (goal <= 2 s)\n", (a - s) / 1e3, (b - s) / 1e3
    printf "beyond the Python start-up: %.2f s, =full %.2f s (goal <= 0.3 s without =full)\n", (a - p) / 1e3, (b - p) / 1e3
}'
