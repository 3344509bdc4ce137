#!/bin/sh
# make demo: the project's main job on one machine.  A config is checked
# before it would wait in a queue; then `accelrun launch` starts 4 ranks of
# the example trainer (examples/gpt, docs/train-gpt.md), each with the
# environment `accelerate launch` would give it, and they train a small GPT
# sharded FSDP-style over the socket collectives; rank 0 prints the loss.
# The run saves a sharded checkpoint every 50 steps and gets SIGTERM after
# the one of step 100 (as from Slurm's --signal or a preemption): the ranks
# agree on a step, save it and stop.  2 ranks then resume it (the checkpoint
# resharded from 4) and finish; the checkpoint is verified and exported in
# the Hugging Face layout (docs/ckpt.md).
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
ck=$tmp/ckpt
echo "== accelrun launch -n 4 --config $cfg -- $dir/train_gpt --ckpt-dir $ck --save-every 50"
echo "   (SIGTERM to the launcher once the checkpoint of step 100 is committed)"
: >"$tmp/run1.out" # there before the loop reads it, not when the background shell opens it
"$bin" launch -n 4 --config "$cfg" -- "$dir/train_gpt" --ckpt-dir "$ck" --save-every 50 \
    >"$tmp/run1.out" 2>&1 &
pid=$!
shown=0
while :; do
    n=$(wc -l <"$tmp/run1.out")
    [ "$n" -gt "$shown" ] && sed -n "$((shown + 1)),${n}p" "$tmp/run1.out" && shown=$n
    grep -q "checkpoint $ck/step-00000100 committed" "$tmp/run1.out" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
kill -TERM "$pid" 2>/dev/null || true
rc=0
wait "$pid" || rc=$?
n=$(wc -l <"$tmp/run1.out")
[ "$n" -gt "$shown" ] && sed -n "$((shown + 1)),${n}p" "$tmp/run1.out"
echo "== stopped (launcher exit $rc); $ck/latest says $(cat "$ck/latest")"
echo
echo "== resumed with 2 ranks: accelrun launch -n 2 --config $cfg -- $dir/train_gpt --ckpt-dir $ck"
"$bin" launch -n 2 --config "$cfg" -- "$dir/train_gpt" --ckpt-dir "$ck" --save-every 50
if "$bin" ckpt --help >/dev/null 2>&1; then
    echo
    echo "== accelrun ckpt ls $ck"
    "$bin" ckpt ls "$ck"
    echo "== accelrun ckpt verify $ck"
    "$bin" ckpt verify "$ck"
    echo "== accelrun ckpt consolidate $ck $tmp/hf"
    "$bin" ckpt consolidate "$ck" "$tmp/hf"
fi
