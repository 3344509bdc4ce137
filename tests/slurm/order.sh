#!/bin/bash
# tests/slurm/order.sh [PLUGIN [CLI]]: the plugin's node order from Slurm's
# topology.conf, end to end, in a 4-node lab (tests/slurm/lab.sh with
# ACCELRUN_LAB_NODES=4).  The leaf switches interleave the node names:
#
#   SwitchName=leaf1 Nodes=n[1,3]
#   SwitchName=leaf2 Nodes=n[2,4]
#
# so the order (nodes under one leaf adjacent, the step's first host first)
# is n1 n3 n2 n4, not Slurm's n1 n2 n3 n4: srun -N4 -n8 must give GROUP_RANK
# 0 on n1, 1 on n3, 2 on n2, 3 on n4, and RANK = 2*GROUP_RANK + LOCAL_RANK.
#
# Prints TAP-like lines and the closing "order: N passed, N failed, N skipped";
# exits 1 when a case failed; "order: SKIP: reason" (exit 0) exactly when
# run.sh skips.  run.sh calls it at its end (unless ACCELRUN_LAB_ORDER=0).
#   ACCELRUN_LAB_KEEP=1   leave the 4-node lab up afterwards (then `tests/slurm/lab.sh down`)
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
TIER=order
# shellcheck source=tests/slurm/common.sh
. "$HERE/common.sh"
lab_lock "$0" "$@"
export ACCELRUN_SPANK=$PLUGIN ACCELRUN_PLUGSTACK_ARGS=${ACCELRUN_PLUGSTACK_ARGS:-}

preflight
rm -f "$apt_log"

require_binaries

TOPO=$(mktemp)
W=""
cleanup() {
    rm -f "$TOPO"
    if [ "${ACCELRUN_LAB_KEEP:-0}" = 1 ]; then
        echo "# lab left up (ACCELRUN_LAB_KEEP=1); tear down with: $LAB down"
        return
    fi
    [ -n "$W" ] && rm -rf "$W"
    "$LAB" down >/dev/null 2>&1 || echo "# warning: lab down failed"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cat >"$TOPO" <<'T'
# written by accelrun tests/slurm/order.sh: leaf switches that interleave the node names
SwitchName=leaf1 Nodes=n[1,3]
SwitchName=leaf2 Nodes=n[2,4]
SwitchName=spine Switches=leaf[1-2]
T
export ACCELRUN_LAB_NODES=4 ACCELRUN_LAB_TOPOLOGY=$TOPO

t_start=$SECONDS
lab_up "order: lab up with 4 nodes" "order: lab up: slurmd n1..n4, leaf1 = n[1,3], leaf2 = n[2,4]"

out=$(scontrol show topology 2>&1)
if printf '%s\n' "$out" | grep -qE '^SwitchName=leaf1 .*Nodes=n\[1,3\]' &&
    printf '%s\n' "$out" | grep -qE '^SwitchName=leaf2 .*Nodes=n\[2,4\]'; then
    ok "order: scontrol show topology: leaf1 n[1,3], leaf2 n[2,4]"
else
    bad "order: scontrol show topology: want leaf1 Nodes=n[1,3], leaf2 Nodes=n[2,4]" "$out"
fi

lab_workdir acclab-order "order: "
mkdir -p "$W/o"
cat >"$W/cfg.yaml" <<'Y'
# 4 nodes x 2 processes, bf16
compute_environment: LOCAL_MACHINE
distributed_type: MULTI_GPU
mixed_precision: bf16
num_machines: 4
num_processes: 8
Y
chown -R "$LAB_USER:" "$W"

A "$W" 90 srun -N4 -n8 --accel-config=cfg.yaml /usr/bin/python3 "$W/dumpenv.py" "$W/o"
if ran "order: srun -N4 -n8 --accel-config=cfg.yaml"; then
    check "order: GROUP_RANK n1=0 n3=1 n2=2 n4=3, RANK = 2*GROUP_RANK + LOCAL_RANK, MASTER_ADDR=n1, WORLD_SIZE=8" \
        order "$W/o" --tasks 8 --nproc-per-node 2 --nodes n1,n3,n2,n4 --master-addr n1
    check "order: each task's environment equals accelrun env --node-rank GROUP_RANK" \
        contract "$W/o" "$CLI" "$W/cfg.yaml" --tasks 8 --nproc-per-node 2 --master-addr n1 \
        --node-rank-from group
fi

# the job's SLURM_CONF is the user's, not slurmd's: a topology.conf beside
# a copy of slurm.conf in the user's folder must not change the order
mkdir -p "$W/conf" "$W/o2"
cp -r /etc/slurm/. "$W/conf/" # plugstack.conf too: srun reads it beside slurm.conf
printf 'SwitchName=flat Nodes=n[1-4]\n' >"$W/conf/topology.conf"
chown -R "$LAB_USER:" "$W"
A "$W" 90 env SLURM_CONF="$W/conf/slurm.conf" srun -N4 -n8 --accel-config=cfg.yaml \
    /usr/bin/python3 "$W/dumpenv.py" "$W/o2"
if ran "order: srun with the user's own SLURM_CONF"; then
    check "order: the user's SLURM_CONF and topology.conf do not change the order (n1 n3 n2 n4)" \
        order "$W/o2" --tasks 8 --nproc-per-node 2 --nodes n1,n3,n2,n4 --master-addr n1
fi

echo "# order cases took $((SECONDS - t_start)) s"
finish
