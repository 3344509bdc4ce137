#!/bin/sh
# make demo: what accelrun does today, on an example config for a 2-node x
# 4-process job: check it, then print what each of the 8 processes gets.
set -eu
bin=${1:-build/bin/accelrun}
cfg=examples/cpu-2x4.yaml

echo "== accelrun check $cfg --nodes 2"
"$bin" check "$cfg" --nodes 2
echo
echo "== the rank variables of all 8 processes (accelrun env ... --format dotenv)"
printf '%-6s %-5s %-6s %-11s %-17s %-11s %s\n' node local RANK LOCAL_RANK WORLD_SIZE MASTER_ADDR MASTER_PORT
for node in 0 1; do
    for local in 0 1 2 3; do
        "$bin" env "$cfg" --nnodes 2 --node-rank $node --nproc-per-node 4 --local-rank $local \
            --master-addr node0 --master-port 29512 --format dotenv 2>/dev/null |
            awk -F= -v n=$node -v l=$local '{v[$1]=$2} END {printf "%-6s %-5s %-6s %-11s %-17s %-11s %s\n",
                n, l, v["RANK"], v["LOCAL_RANK"], v["WORLD_SIZE"], v["MASTER_ADDR"], v["MASTER_PORT"]}'
    done
done
echo
echo "== the whole environment of rank 6 (node 1, local rank 2)"
"$bin" env "$cfg" --nnodes 2 --node-rank 1 --nproc-per-node 4 --local-rank 2 \
    --master-addr node0 --master-port 29512 --format sh
echo
echo "== a broken config is caught before it waits in a queue"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'distributed_type: MULTI_GPU\nmixed_precision: no\nnum_processes: 6\nnum_machines: 4\ngpu_ids: 0\n' \
    >"$tmp/broken.yaml"
"$bin" check "$tmp/broken.yaml" || true
