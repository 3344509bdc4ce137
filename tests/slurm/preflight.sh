#!/bin/bash
# tests/slurm/preflight.sh [PLUGIN [CLI]]: srun --accel-preflight[=full] in
# the two-node Slurm lab (tests/slurm/lab.sh), with real Pythons: the 1.15
# stack (accelerate 1.15.0, torch 2.13.0 from PyPI) and the 0.32 stack
# (accelerate 0.32.1 on Debian's torch 1.13), made and cached by
# scripts/lab-venv.sh, and Debian's /usr/bin/python3 without accelerate.
# The plugstack line names the helper (accelrun=CLI) and a record folder.
#
# Cases: a clean pass (and =full's all_reduce); a node whose Python lacks
# accelerate; a 1.15 key under 0.32.1; a broken interface name; drift on
# the second run after a version change; a planted import cycle; and each
# stack's real Accelerator() with a gloo all_reduce in every task.  On every
# FAIL the program does not start, srun exits non-zero and no node drains.
#
# Prints TAP-like lines and "slurm-preflight: N passed, N failed, N
# skipped"; "slurm-preflight: SKIP: reason" (exit 0) where the lab cannot run.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck disable=SC2034  # common.sh reads it
TIER=slurm-preflight
# shellcheck source=tests/slurm/common.sh
. "$HERE/common.sh"
lab_lock "$0" "$@"
export ACCELRUN_SPANK=$PLUGIN ACCELRUN_PLUGSTACK_ARGS=${ACCELRUN_PLUGSTACK_ARGS:-}
BASE_ARGS=$ACCELRUN_PLUGSTACK_ARGS

preflight
# shellcheck disable=SC2154  # preflight sets it
rm -f "$apt_log"
require_binaries

W=""
cleanup() {
    if [ "${ACCELRUN_LAB_KEEP:-0}" = 1 ]; then
        echo "# lab left up (ACCELRUN_LAB_KEEP=1); tear down with: $LAB down"
        return
    fi
    [ -n "$W" ] && rm -rf "$W"
    "$LAB" down >/dev/null 2>&1 || echo "# warning: lab down failed"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t_start=$SECONDS
# the venvs first (the 1.15 one is a 3 GB download when not cached)
V115="" V032=""
if p=$(sh "$ROOT/scripts/lab-venv.sh" 1.15 2>"${TMPDIR:-/tmp}/pf-v115.$$"); then
    V115=$(dirname "$p")
else
    skipped "the 1.15 stack" "scripts/lab-venv.sh 1.15: $(tail -n 1 "${TMPDIR:-/tmp}/pf-v115.$$")"
fi
if p=$(sh "$ROOT/scripts/lab-venv.sh" 0.32 2>"${TMPDIR:-/tmp}/pf-v032.$$"); then
    V032=$(dirname "$p")
else
    skipped "the 0.32 stack" "scripts/lab-venv.sh 0.32: $(tail -n 1 "${TMPDIR:-/tmp}/pf-v032.$$")"
fi
rm -f "${TMPDIR:-/tmp}/pf-v115.$$" "${TMPDIR:-/tmp}/pf-v032.$$"

lab_up "slurm-preflight: lab up" "slurm-preflight: lab up: slurmd n1 n2"
lab_workdir acclab-preflight "slurm-preflight: "
mkdir -p "$W/records" "$W/bin"
cp -r "$ROOT/tests/preflight/cycle" "$W/cycle"
cp "$ROOT/tests/interop/accelerate_reduce.py" "$W/"
# the one-machine configs of tests/preflight, on 2 nodes x 2 tasks
for f in cpu2 cpu2_regional; do
    sed -e 's/^num_machines: 1/num_machines: 2/' -e 's/^num_processes: 2/num_processes: 4/' \
        "$ROOT/tests/preflight/configs/$f.yaml" >"$W/${f/cpu2/cpu4}.yaml"
done
chown -R "$LAB_USER:" "$W"
# shellcheck disable=SC2086  # the plugstack arguments are words
out=$("$LAB" plugstack accelrun="$CLI" preflight_dir="$W/records" $BASE_ARGS 2>&1) ||
    { bad "slurm-preflight: plugstack accelrun= preflight_dir=" "$out"; finish; }
nodes_idle() { [ "$(sinfo -h -o '%T' | sort -u | tr '\n' ' ')" = "idle " ]; }
# line NODE CHECK STATUS PATTERN: the table has that line
line() { printf '%s\n' "$out" | grep -Eq "^$1 +$2 +$3 +.*$4"; }
want() { if line "$2" "$3" "$4" "$5"; then ok "$1"; else bad "$1" "$out"; fi; }
not_started() {
    # shellcheck disable=SC2154  # A sets rc
    if [ "$rc" -ne 0 ] && ! printf '%s\n' "$out" | grep -q '^started' && nodes_idle; then
        ok "$1: srun exits $rc, the program did not start, no node drained"
    else
        bad "$1: want a non-zero exit, no 'started', idle nodes (exit $rc; $(sinfo -h -o '%T'))" "$out"
    fi
}
PROG='import os; print("started", os.environ["RANK"])'

# a. a clean pass on the 1.15 stack; =full adds the all_reduce
if [ -n "$V115" ]; then
    A "$W" 180 env PATH="$V115:/usr/bin:/bin" srun -N2 -n4 --accel-config=cpu4.yaml \
        --accel-preflight=full python -c "$PROG"
    if ran "a: srun -N2 -n4 --accel-preflight=full on the 1.15 stack"; then
        [ "$(printf '%s\n' "$out" | grep -c '^started')" -eq 4 ] &&
            ok "a: the program started in all 4 tasks after the preflight" || bad "a: 4 started" "$out"
        want "a: n1: versions PASS, torch 2.13.0 and accelerate 1.15.0" n1 versions PASS \
            "torch 2\.13\.0.*accelerate 1\.15\.0"
        want "a: n2: the same" n2 versions PASS "torch 2\.13\.0.*accelerate 1\.15\.0"
        want "a: the config checked against 1.15.0 on n2" n2 config PASS "against accelerate 1\.15\.0"
        want "a: every node reached the rendezvous at MASTER_ADDR:MASTER_PORT" n2 rendezvous PASS \
            "reached the store at n1:[0-9]+"
        want "a: =full: an all_reduce over the 4 tasks" n2 all-reduce PASS "4 ranks, 4 KiB over socket"
        printf '%s\n' "$out" | grep -Eq "^preflight: .*cpu4.yaml: (PASS|WARN) on 2 nodes \(0 failed" &&
            ok "a: one table for both nodes, printed once, no FAIL" || bad "a: summary" "$out"
        printf '%s\n' "$out" | grep -E '^(n1|n2) +threads' | cut -c1-220 | sed 's/^/#   /'
    fi
fi

# b. a node whose Python lacks accelerate (n2 finds Debian's python first)
if [ -n "$V115" ]; then
    printf '#!/bin/sh\n[ "$(hostname)" = n2 ] && exec /usr/bin/python3 "$@"\nexec %s/python "$@"\n' \
        "$V115" >"$W/bin/python"
    chmod 755 "$W/bin/python"
    A "$W" 180 env PATH="$W/bin:/usr/bin:/bin" srun -N2 -n4 --accel-config=cpu4.yaml \
        --accel-preflight python -c "$PROG"
    want "b: n2's Python without accelerate is a FAIL naming the node and accelerate" n2 versions \
        FAIL "accelerate is not installed"
    want "b: n1 passes" n1 versions PASS "accelerate 1\.15\.0"
    not_started "b"
fi

# c. a key accelerate 0.32.1 does not know
if [ -n "$V032" ]; then
    A "$W" 180 env PATH="$V032:/usr/bin:/bin" srun -N2 -n4 --accel-config=cpu4_regional.yaml \
        --accel-preflight python -c "$PROG"
    want "c: a 1.15 key under 0.32.1 is a FAIL naming the key and both versions" n1 config FAIL \
        "dynamo_use_regional_compilation.*added in accelerate 1\.7\.0.*0\.32\.1"
    not_started "c"
fi

# d. a broken interface name
A "$W" 180 env PATH="${V115:-$V032}:/usr/bin:/bin" srun -N2 -n4 --accel-config=cpu4.yaml \
    --export=ALL,NCCL_SOCKET_IFNAME=ib9 --accel-preflight python -c "$PROG"
want "d: NCCL_SOCKET_IFNAME=ib9 is a FAIL naming it and the node's interfaces" n2 network FAIL \
    "NCCL_SOCKET_IFNAME=ib9: no interface on this node is ib9\* \(it has: .*eth0"
not_started "d"

# e. drift: the 0.32 stack, then the 1.15 stack, on a config of its own
if [ -n "$V115" ] && [ -n "$V032" ]; then
    cp "$W/cpu4.yaml" "$W/drift.yaml"
    chown "$LAB_USER:" "$W/drift.yaml"
    A "$W" 180 env PATH="$V032:/usr/bin:/bin" srun -N2 -n4 --accel-config=drift.yaml \
        --accel-preflight python -c "$PROG"
    ran "e: the first run (0.32 stack)" && want "e: the first record" n1 drift PASS "first record"
    job1=$(ls "$W/records"/drift-*/ 2>/dev/null | head -n 1)
    A "$W" 180 env PATH="$V115:/usr/bin:/bin" srun -N2 -n4 --accel-config=drift.yaml \
        --accel-preflight python -c "$PROG"
    ran "e: the second run (1.15 stack)"
    want "e: the second run reports the drift on n2: accelerate 0.32.1 → 1.15.0, torch 1.13 → 2.13.0" \
        n2 drift WARN "torch 1\.13[^ ]* → 2\.13\.0.*accelerate 0\.32\.1 → 1\.15\.0.* on n2 since job ${job1%.json} "
    [ "$(ls "$W/records"/drift-*/ | wc -l)" -eq 2 ] &&
        ok "e: one JSON lock per job under preflight_dir" || bad "e: records" "$(ls -lR "$W/records")"
fi

# f. a planted import cycle, caught by the threaded import (Debian's python: no accelerate)
A "$W" 180 env PATH=/usr/bin:/bin srun -N2 -n4 --accel-config=cpu4.yaml \
    --export=ALL,PYTHONPATH="$W/cycle",ACCELRUN_PREFLIGHT_IMPORTS=cyclepkg --accel-preflight true
want "f: the planted cycle imports alone" n1 imports PASS "import cyclepkg"
want "f: and is caught from threads, naming the module" n2 threads WARN \
    "cyclepkg\.[ab].*partially initialized module 'cyclepkg\.[ab]'"

# g. the real accelerate of each stack in every task: Accelerator() and a
# gloo all_reduce through accelerate's reduce(), after a preflight that
# reports the two stacks apart
for stack in 1.15 0.32; do
    v=$V115 want="accelerate=1\.15\.0 torch=2\.13\.0"
    [ "$stack" = 0.32 ] && v=$V032 want="accelerate=0\.32\.1 torch=1\.13[^ ]*"
    [ -n "$v" ] || continue
    A "$W" 180 env PATH="$v:/usr/bin:/bin" srun -N2 -n4 --accel-config=cpu4.yaml \
        --export=ALL,GLOO_SOCKET_IFNAME=eth0 --accel-preflight python "$W/accelerate_reduce.py"
    if ran "g: srun -N2 -n4 --accel-preflight python accelerate_reduce.py on the $stack stack"; then
        n=$(printf '%s\n' "$out" | grep -cE "^reduce $want num_processes=4 process_index=[0-3] distributed_type=MULTI_CPU backend=gloo sum=10 ")
        [ "$n" -eq 4 ] &&
            ok "g: $stack stack: Accelerator() in 4 tasks on 2 nodes, gloo all_reduce sum=10" ||
            bad "g: $stack stack: want 4 lines 'reduce $want ... backend=gloo sum=10'" "$out"
        want "g: $stack stack: the preflight reports it as such" n2 versions PASS \
            "$(printf '%s' "$want" | sed 's/accelerate=\(.*\) torch=\(.*\)/torch \2.*accelerate \1/')"
        printf '%s\n' "$out" | grep '^reduce' | sort | sed 's/^/#   /'
    fi
done

# shellcheck disable=SC2086
"$LAB" plugstack $BASE_ARGS >/dev/null 2>&1 || bad "slurm-preflight: plugstack restored"
echo "# slurm-preflight cases took $((SECONDS - t_start)) s"
finish
