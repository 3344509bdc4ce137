#!/bin/sh
# make demo: the project's main job on one machine.  A config is checked
# before it would wait in a queue; then `accelrun launch` starts 4 ranks of
# the example trainer (examples/gpt, docs/train-gpt.md), each with the
# environment `accelerate launch` would give it, and they train a small GPT
# sharded FSDP-style over the socket collectives; rank 0 prints the loss.
set -eu
bin=${1:-build/bin/accelrun}
dir=$(dirname "$bin")
cfg=examples/gpt-cpu.yaml

echo "== accelrun check $cfg"
"$bin" check "$cfg"
echo
echo "== a broken config is caught before anything starts"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'distributed_type: FSDP\nmixed_precison: bf16\nuse_cpu: true\nfsdp_config:\n  fsdp_sharding_stratgy: FULL_SHARD\n' \
    >"$tmp/broken.yaml"
"$bin" check "$tmp/broken.yaml" || true
echo
echo "== what rank 2 of 4 gets (accelrun launch --dry-run)"
"$bin" launch --dry-run --config "$cfg" -n 4 2>/dev/null |
    awk '/^# rank 2 /{p=1; print; next} /^# rank/{p=0} p && /^(RANK|LOCAL_RANK|WORLD_SIZE|MASTER_|ACCELERATE_USE_FSDP|FSDP_SHARDING|ACCELERATE_MIXED)/'
echo
echo "== accelrun launch -n 4 --config $cfg -- $dir/train_gpt"
"$bin" launch -n 4 --config "$cfg" -- "$dir/train_gpt"
