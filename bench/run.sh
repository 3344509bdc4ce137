#!/bin/sh
# make bench: time to build one task's environment with accelrun against the
# start-up of the real `accelerate launch` for the same config, side by side,
# as a ratio.  The peer needs the oracle's virtual environment (make oracle);
# without it the peer column says SKIP and why.
set -u
bin=${1:-build/bin/accelrun}
venv=build/oracle-venv
cfg=${ACCEL_SHARED:-../shared}/corpus/accelerate-configs/templates__multi_gpu.yaml
runs=${BENCH_RUNS:-20}

now_ns() { date +%s%N; }

# median of the numbers on stdin
median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) printf "%d\n", a[(NR+1)/2]; else printf "%d\n", (a[NR/2]+a[NR/2+1])/2}'; }

time_cmd() { # runs "$@" $runs times, prints the median in microseconds
    i=0
    while [ $i -lt "$runs" ]; do
        t0=$(now_ns)
        "$@" >/dev/null 2>&1
        t1=$(now_ns)
        echo $(((t1 - t0) / 1000))
        i=$((i + 1))
    done | median
}

echo "bench: environment for rank 1 of $(basename "$cfg") (MULTI_GPU, 2 processes), median of $runs runs"
lib_us=$(build/bench/env_build "$cfg" 2000)
cli_us=$(time_cmd "$bin" env "$cfg" --nnodes 1 --node-rank 0 --nproc-per-node 2 --local-rank 1)
printf '%-52s %12s\n' "accelrun: accel_cfg_load + accel_env_build (in-process)" "${lib_us} us"
printf '%-52s %12s\n' "accelrun env (whole process: exec, parse, print)" "${cli_us} us"

if [ -x "$venv/bin/accelerate" ]; then
    top=$(pwd)
    abs_cfg=$(realpath "$cfg")
    tmpd=$(mktemp -d)
    # The oracle's clean environment; the child is /bin/true, so this is the
    # launcher's own start-up: Python, torch import, torchrun, one worker.
    peer_us=$(cd "$tmpd" && time_cmd env -i PATH="$top/$venv/bin:/usr/bin:/bin" HOME="$tmpd" \
        "$top/$venv/bin/accelerate" launch --config_file "$abs_cfg" --main_process_port 29555 \
        --no_python /bin/true)
    rm -rf "$tmpd"
    printf '%-52s %12s\n' "accelerate launch --no_python /bin/true (peer)" "${peer_us} us"
    awk -v p="$peer_us" -v c="$cli_us" -v l="$lib_us" 'BEGIN {
        printf "ratio peer/accelrun-process: %.0fx   peer/accelrun-in-process: %.0fx\n", p / c, p / l }'
else
    echo "accelerate launch (peer): SKIP: $venv missing; run 'make oracle' to create it"
fi
