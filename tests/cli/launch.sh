# tests/cli/launch.sh: `accelrun launch`, sourced by tests/cli/run.sh (its
# $bin, $tmp, ok/bad/expect/contains and counters).

# three ranks, prefixed lines, one port for all
expect "launch: -n 3 runs three ranks" 0 "$bin" launch -n 3 -- sh -c 'echo "r=$RANK w=$WORLD_SIZE l=$LOCAL_RANK lw=$LOCAL_WORLD_SIZE p=$MASTER_PORT a=$MASTER_ADDR"'
contains "launch: rank 0's line is prefixed" "[0] r=0 w=3 l=0 lw=3"
contains "launch: rank 2's line is prefixed" "[2] r=2 w=3 l=2 lw=3"
if [ "$(printf '%s\n' "$out" | sed -n 's/.* p=\([0-9]*\) a=127.0.0.1$/\1/p' | sort -u | wc -l)" -eq 1 ]; then
    ok "launch: every rank has the same MASTER_PORT and MASTER_ADDR=127.0.0.1"
else
    bad "launch: every rank has the same MASTER_PORT and MASTER_ADDR=127.0.0.1" "$out"
fi

# a failing rank stops the others; its code is the launcher's
expect "launch: a failing rank's exit code is the launcher's" 3 "$bin" launch -n 3 --grace 5 -- \
    sh -c 'if [ "$RANK" = 1 ]; then sleep 0.3; echo failing; exit 3; fi; sleep 20; echo survived'
contains "launch: the summary names the rank" "accelrun: rank 1 exited with status 3; stopped the other 2 ranks"
if printf '%s' "$out" | grep -q survived; then bad "launch: the other ranks were stopped" "$out"; else ok "launch: the other ranks were stopped"; fi
expect "launch: a rank killed by a signal" 137 "$bin" launch -n 2 -- sh -c '[ "$RANK" = 0 ] && kill -9 $$; sleep 20'
contains "launch: the summary names the signal" "accelrun: rank 0 was killed by signal 9"

# SIGTERM to the launcher reaches every rank (the file exists before the
# background launch opens it: else the wait below may end at once, and the
# SIGTERM come before the launcher handles it)
: >"$tmp/term.out"
"$bin" launch -n 2 -- sh -c 'trap "echo got TERM; exit 0" TERM; echo ready; while :; do sleep 0.1; done' >"$tmp/term.out" 2>&1 &
lpid=$!
i=0
while [ "$(grep -c ready "$tmp/term.out")" -lt 2 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
kill -TERM $lpid
wait $lpid
rc=$?
out=$(cat "$tmp/term.out")
if [ $rc -eq 143 ] && [ "$(grep -c 'got TERM' "$tmp/term.out")" -eq 2 ]; then
    ok "launch: SIGTERM is forwarded to both ranks, exit 143"
else
    bad "launch: SIGTERM is forwarded to both ranks, exit 143 (exit $rc)" "$out"
fi

# --tee and --main-only
expect "launch: --tee --main-only" 0 "$bin" launch -n 3 --tee "$tmp/logs" --main-only -- sh -c 'echo "out $RANK"; echo "err $RANK" >&2'
if printf '%s\n' "$out" | grep -q '^\[[12]\]'; then bad "launch: --main-only shows only rank 0" "$out"; else ok "launch: --main-only shows only rank 0"; fi
contains "launch: --main-only shows rank 0" "[0] out 0"
if grep -qx "out 2" "$tmp/logs/rank-2.log" && grep -qx "err 2" "$tmp/logs/rank-2.log"; then
    ok "launch: --tee keeps rank 2's stdout and stderr in rank-2.log"
else
    bad "launch: --tee keeps rank 2's stdout and stderr in rank-2.log" "$(cat "$tmp/logs/rank-2.log" 2>&1)"
fi

expect "launch: a command that does not exist" 127 "$bin" launch -n 2 -- /nonexistent/cmd
contains "launch: names the command" "cannot run /nonexistent/cmd"
expect "launch: one rank that cannot run" 127 "$bin" launch -n 1 -- /nonexistent/cmd
if printf '%s' "$out" | grep -qx "accelrun: rank 0 exited with status 127"; then
    ok "launch: no 'stopped the other 0 ranks' when none was running"
else
    bad "launch: no 'stopped the other 0 ranks' when none was running" "$out"
fi
expect "launch: no command" 2 "$bin" launch -n 2
expect "launch --help" 0 "$bin" launch --help

# --dry-run prints exactly what `accelrun env` gives each local rank
fsdp=examples/fsdp-2x4.yaml
expect "launch --dry-run of node 1 of $fsdp" 0 "$bin" launch --dry-run --config "$fsdp" --nnodes 2 --node-rank 1 \
    --master-addr n1 --master-port 29511 -n 4
printf '%s\n' "$out" | grep -v '^#' | grep -v -e ': note: ' -e ': warning: ' >"$tmp/dry.txt"
: >"$tmp/env.txt"
for l in 0 1 2 3; do
    "$bin" env "$fsdp" --nnodes 2 --node-rank 1 --nproc-per-node 4 --local-rank $l --master-addr n1 \
        --master-port 29511 2>/dev/null >>"$tmp/env.txt"
done
if cmp -s "$tmp/dry.txt" "$tmp/env.txt" && [ -s "$tmp/env.txt" ]; then
    ok "launch --dry-run: every rank's variables equal accelrun env's ($(wc -l <"$tmp/env.txt") lines)"
else
    bad "launch --dry-run: every rank's variables equal accelrun env's" "$(diff "$tmp/dry.txt" "$tmp/env.txt" | head -20)"
fi

# node-level variables of a pod give the layout
out=$(env PET_NNODES=2 PET_NODE_RANK=1 PET_NPROC_PER_NODE=2 PET_MASTER_ADDR=job-0.svc PET_MASTER_PORT=29600 \
    "$bin" launch -- sh -c 'echo "r=$RANK w=$WORLD_SIZE a=$MASTER_ADDR p=$MASTER_PORT"' 2>&1)
contains "launch: PET_* layout: rank 3 of 4 on node 1" "[3] r=3 w=4 a=job-0.svc p=29600"

# the plan on a topology: GPU order, NIC and CPUs per rank
expect "launch --dry-run on two-socket.xml" 0 env CUDA_VISIBLE_DEVICES=0,1,2,3 "$bin" launch --dry-run \
    --topology-xml tests/topo/two-socket.xml -n 4
contains "launch: rank 2 is on socket 1's CPU" "# rank 2 (node 0, local rank 2), CPUs 1"
contains "launch: every rank sees the list in plan order" "CUDA_VISIBLE_DEVICES=0,1,2,3"
contains "launch: rank 3 uses socket 1's HCA" "NCCL_IB_HCA==mlx5_1"
contains "launch: the built-in config is MULTI_GPU" "ACCELERATE_MIXED_PRECISION=no"
out=$(env CUDA_VISIBLE_DEVICES=0,1,2,3 NCCL_IB_HCA=mlx5_9 "$bin" launch --topology-xml tests/topo/two-socket.xml -n 2 -- \
    sh -c 'echo "hca=$NCCL_IB_HCA cvd=$CUDA_VISIBLE_DEVICES order=$CUDA_DEVICE_ORDER"' 2>&1)
contains "launch: the user's NCCL_IB_HCA is kept" "[1] hca=mlx5_9 cvd=0,1,2,3 order=PCI_BUS_ID"

# in a pod without --config, the node-level config variables the webhook set
# win over the built-in config's; the layout is still launch's
out=$(env ACCELERATE_MIXED_PRECISION=bf16 ACCELERATE_USE_FSDP=true FSDP_SHARDING_STRATEGY=FULL_SHARD \
    "$bin" launch -n 2 -- sh -c 'echo "mp=$ACCELERATE_MIXED_PRECISION fsdp=$ACCELERATE_USE_FSDP s=$FSDP_SHARDING_STRATEGY r=$RANK"' 2>&1)
contains "launch: a pod's ACCELERATE_*/FSDP_* win over the built-in config" "[1] mp=bf16 fsdp=true s=FULL_SHARD r=1"
out=$(env ACCELERATE_MIXED_PRECISION=bf16 "$bin" launch -n 1 --config examples/gpt-cpu.yaml -- sh -c 'echo "mp=$ACCELERATE_MIXED_PRECISION"' 2>&1)
contains "launch: with --config, the config's value wins" "[0] mp=no"
# --dry-run lists what the rank gets: the pod's value where it is kept
out=$(env ACCELERATE_MIXED_PRECISION=bf16 "$bin" launch -n 2 --dry-run 2>&1)
contains "launch --dry-run: a kept pod value is listed as the rank gets it" "ACCELERATE_MIXED_PRECISION=bf16"
contains "launch --dry-run: and says so" "# ACCELERATE_MIXED_PRECISION: the environment's value is kept (no would be set)"
if printf '%s\n' "$out" | grep -q '^ACCELERATE_MIXED_PRECISION=no$'; then
    bad "launch --dry-run: the built-in config's value is not listed where the pod's is kept" "$out"
else
    ok "launch --dry-run: the built-in config's value is not listed where the pod's is kept"
fi
out=$(env ACCELERATE_MIXED_PRECISION=bf16 "$bin" launch -n 1 --dry-run --config examples/gpt-cpu.yaml 2>&1)
contains "launch --dry-run with --config: the config's value" "ACCELERATE_MIXED_PRECISION=no"

# alive PID: the process exists and is not a zombie
alive() { [ -n "$1" ] && [ -r "/proc/$1/stat" ] && ! sed 's/.*) //' "/proc/$1/stat" | grep -q '^Z'; }

# nothing a rank started outlives the launcher: rank 0's leader dies of the
# SIGTERM, its child ignores it and gets the SIGKILL of its (leaderless) group
"$bin" launch -n 2 --grace 1 -- env T="$tmp" sh -c 'if [ $LOCAL_RANK = 0 ]; then (trap "" TERM; exec sleep 300) & echo $! >"$T/left.pid"; sleep 300; else sleep .5; exit 5; fi' >"$tmp/left.out" 2>&1
rc=$?
left=$(cat "$tmp/left.pid" 2>/dev/null)
if [ $rc -eq 5 ] && [ -n "$left" ] && ! alive "$left"; then
    ok "launch: a TERM-ignoring child of a reaped rank leader is killed, exit 5"
else
    bad "launch: a TERM-ignoring child of a reaped rank leader is killed, exit 5 (exit $rc)" "$(cat "$tmp/left.out"; ps -o pid,ppid,stat,args -p "${left:-0}")"
fi
[ -n "$left" ] && kill -KILL "$left" 2>/dev/null
# ranks that all exit 0 but leave a process in a session of its own
"$bin" launch -n 2 --grace 1 -- env T="$tmp" sh -c 'setsid sh -c "echo \$\$ >\"$T/sess-$RANK.pid\"; exec sleep 300" </dev/null >/dev/null 2>&1 &
    while [ ! -s "$T/sess-$RANK.pid" ]; do sleep 0.05; done; echo started' >"$tmp/left.out" 2>&1
rc=$?
left=$(cat "$tmp"/sess-*.pid 2>/dev/null)
survivors=
for p in $left; do alive "$p" && survivors="$survivors $p"; done
if [ $rc -eq 0 ] && [ "$(printf '%s\n' $left | wc -l)" -eq 2 ] && [ -z "$survivors" ]; then
    ok "launch: what ranks left in another session is stopped, exit 0"
else
    bad "launch: what ranks left in another session is stopped, exit 0 (exit $rc)" "$(cat "$tmp/left.out"; echo "left: $left, alive:$survivors")"
fi
for p in $left; do kill -KILL "$p" 2>/dev/null; done

# the reader of the launcher's output goes away: the ranks are stopped, the
# launcher is not killed by SIGPIPE
(
    "$bin" launch -n 2 --grace 1 -- env T="$tmp" sh -c 'echo $$ >"$T/pipe-$RANK.pid"; echo hi; sleep 1; [ $RANK = 0 ] && echo more; exec sleep 40' 2>"$tmp/pipe.err"
    echo $? >"$tmp/pipe.rc"
) | head -c 3 >/dev/null
out=$(cat "$tmp/pipe.err")
contains "launch: a closed output stops the job" "accelrun: the output was closed (Broken pipe): stopped 2 ranks"
left=$(cat "$tmp"/pipe-*.pid 2>/dev/null)
survivors=
for p in $left; do alive "$p" && survivors="$survivors $p"; done
if [ "$(cat "$tmp/pipe.rc")" = 141 ] && [ -z "$survivors" ]; then
    ok "launch: a closed output leaves no rank behind, exit 141"
else
    bad "launch: a closed output leaves no rank behind, exit 141 (exit $(cat "$tmp/pipe.rc"))" "alive:$survivors"
fi
for p in $left; do kill -KILL "$p" 2>/dev/null; done

# --tee that cannot be written fails before any rank starts, with one error
: >"$tmp/notdir"
expect "launch: --tee on a file exits 2" 2 env T="$tmp" "$bin" launch -n 2 --tee "$tmp/notdir" -- sh -c 'touch "$T/ran"'
contains "launch: --tee on a file names it and the fix" "accelrun launch: --tee: couldn't open the directory $tmp/notdir: Not a directory; give --tee a directory"
if [ ! -e "$tmp/ran" ] && [ "$(printf '%s\n' "$out" | grep -c -e '--tee')" -eq 1 ]; then
    ok "launch: --tee on a file: one error, no rank started"
else
    bad "launch: --tee on a file: one error, no rank started" "$out"
fi
mkdir "$tmp/tl" && echo keep >"$tmp/victim" && ln -s "$tmp/victim" "$tmp/tl/rank-1.log"
expect "launch: --tee over a planted symlink exits 2" 2 env T="$tmp" "$bin" launch -n 2 --tee "$tmp/tl" -- sh -c 'touch "$T/ran"'
contains "launch: --tee over a symlink names the log" "accelrun launch: --tee: couldn't open $tmp/tl/rank-1.log: Too many levels of symbolic links; it is a symbolic link, which --tee does not follow"
if [ "$(cat "$tmp/victim")" = keep ] && [ ! -e "$tmp/ran" ]; then
    ok "launch: --tee does not follow a planted symlink, no rank started"
else
    bad "launch: --tee does not follow a planted symlink, no rank started" "$(cat "$tmp/victim")"
fi
# a directory the user cannot write: root writes anywhere, so as root the
# launcher runs as nobody (setpriv), with the binary's absolute path
as_user=
if [ "$(id -u)" = 0 ]; then
    as_user="setpriv --reuid=nobody --regid=nogroup --clear-groups"
    chmod 711 "$tmp"
fi
mkdir "$tmp/ro" && chmod 555 "$tmp/ro"
# shellcheck disable=SC2086  # as_user is a command of several words
expect "launch: --tee into a read-only directory exits 2" 2 $as_user "$(realpath "$bin")" launch -n 2 --tee "$tmp/ro" -- true
contains "launch: --tee into a read-only directory names the log" "couldn't open $tmp/ro/rank-0.log: Permission denied; give --tee a directory you can write to"
# sysfs refuses a new file even to root: an unwritable directory wherever the tests run
expect "launch: --tee /sys exits 2" 2 env T="$tmp" "$bin" launch -n 2 --main-only --tee /sys -- sh -c 'touch "$T/ran"'
contains "launch: --tee /sys names the log and the fix" "accelrun launch: --tee: couldn't open /sys/rank-0.log: "
if [ ! -e "$tmp/ran" ] && [ "$(printf '%s\n' "$out" | grep -c -e '--tee')" -eq 1 ]; then
    ok "launch: --tee /sys: one error, no rank started"
else
    bad "launch: --tee /sys: one error, no rank started" "$out"
fi
# a planted FIFO does not hang the launcher (timeout's 124 if it does); a
# planted hard link is not emptied
mkdir "$tmp/tf" && mkfifo "$tmp/tf/rank-0.log"
expect "launch: --tee over a planted FIFO exits 2" 2 timeout -s KILL 20 "$bin" launch -n 1 --tee "$tmp/tf" -- true
contains "launch: --tee over a FIFO says it is not a file" "couldn't open $tmp/tf/rank-0.log: not a regular file of yours with no other link"
mkdir "$tmp/th" && ln "$tmp/victim" "$tmp/th/rank-0.log"
expect "launch: --tee over a planted hard link exits 2" 2 "$bin" launch -n 1 --tee "$tmp/th" -- true
if [ "$(cat "$tmp/victim")" = keep ]; then ok "launch: --tee does not empty a hard-linked file"; else bad "launch: --tee does not empty a hard-linked file"; fi
expect "launch: --tee creates a missing directory" 0 "$bin" launch -n 2 --tee "$tmp/newlogs" -- sh -c 'echo "log $RANK"'
if grep -qx "log 1" "$tmp/newlogs/rank-1.log"; then ok "launch: --tee into a created directory keeps rank 1's log"; else bad "launch: --tee into a created directory keeps rank 1's log"; fi

# more ranks than the open-file limit allows: one error before any rank
# starts, not a rank "exiting with status 127" and none said to be stopped
expect "launch: -n 4096 under ulimit -n 256 exits 2" 2 sh -c 'ulimit -n 256 && T="$1" exec "$0" launch -n 4096 -- sh -c "touch \"\$T/fd-\$RANK\""' "$bin" "$tmp"
contains "launch: names the open files needed and the fix" "accelrun launch: couldn't start 4096 ranks: the launcher needs "
contains "launch: says how to raise the limit" "and the limit is 256; raise it (ulimit -n "
if ls "$tmp"/fd-* >/dev/null 2>&1; then bad "launch: no rank started under a too-low limit" "$(ls "$tmp" | grep -c fd-) ranks ran"; else ok "launch: no rank started under a too-low limit"; fi
# a soft limit below the need is raised for the launcher (the hard one allows
# it), and the ranks get the soft limit they were given
if [ "$(ulimit -H -n)" = unlimited ] || [ "$(ulimit -H -n)" -ge 256 ]; then
    expect "launch: 40 ranks under a soft ulimit -n 64" 0 sh -c 'ulimit -S -n 64 && exec "$0" launch -n 40 -- sh -c "ulimit -n"' "$bin"
    if [ "$(printf '%s\n' "$out" | grep -c '^\[[0-9]*\] 64$')" -eq 40 ]; then
        ok "launch: every rank has the soft limit of 64 back"
    else
        bad "launch: every rank has the soft limit of 64 back" "$out"
    fi
else
    skip=$((skip + 1)); echo "ok - launch: soft ulimit -n raised # SKIP the hard limit is $(ulimit -H -n)"
fi
