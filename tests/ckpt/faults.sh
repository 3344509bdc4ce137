#!/bin/bash
# tests/ckpt/faults.sh: checkpoints under crashes and failing file systems
# (issue 16), with real processes: 2 ranks of tests/ckpt/ckpt_crash started
# by `accelrun launch`, a saver each (asynchronous saves), and
# build/tests/libfaultfs.so (LD_PRELOAD) failing one call that changes the
# checkpoint's file systems.  Every case starts from steps 1 and 2 committed
# (keep 2) and saves step 3; the run after it resumes, checks bit for bit
# that the step it resumed holds that step's values, and saves step 4.
#
#   kill points   rank 0, then rank 1, SIGKILLed at each call in turn (open
#                 for writing, write, fsync, rename, unlink, mkdir, ...) of a
#                 save with a node-local tier, then of one without: the
#                 resume finds step 2, or step 3 where the kill came after
#                 its commit, never anything else; the next save commits
#   enospc        a write failing with ENOSPC (the injector), and a real
#                 full tmpfs (root only): the save fails on every rank with
#                 a message naming the file and the space, step 2 is what a
#                 resume finds, no step-3 manifest
#   eio           an fsync failing with EIO: nothing committed
#   two jobs      a second job on a root whose lock a first one holds is
#                 refused, naming the first; once it is gone, it saves
#   node lost     rank 1 killed while copying its local file up, its node's
#                 local tier gone: the resume takes the root's step 2
#   resume        a run dies with step 3 in the local tiers only; the next,
#                 which commits it from them, is killed at each of its calls:
#                 the run after resumes step 3 or newer, never step 2
#
# Every step resumed or committed is checked bit for bit through the saver
# (a local copy first) and, by rank 0, in the root's own copy.
#
# usage: bash tests/ckpt/faults.sh [BUILD]      TAP lines, then
#        "ckpt-faults: N passed, N failed, N skipped"
set -u
# shellcheck disable=SC2034  # tap.sh reads them
TAP_NAME=ckpt-faults TAP_TAIL=15
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=tests/lib/tap.sh
. "$ROOT/tests/lib/tap.sh"

BUILD=${1:-build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
CLI=$BUILD/bin/accelrun
RANK_BIN=$BUILD/tests/ckpt_crash
FAULTFS=$BUILD/tests/libfaultfs.so
for f in "$CLI" "$RANK_BIN" "$FAULTFS"; do
    [ -e "$f" ] || { skipped "checkpoint faults" "no $f (make test-ckpt-faults builds it)"; finish; }
done
T=$(mktemp -d /tmp/ckpt-faults.XXXXXX)
MNT=
cleanup() {
    [ -n "$MNT" ] && umount "$MNT" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
t_start=$SECONDS

# job OUT ROOT LOCAL STEP [ENV...]: the 2 ranks, ENV (NAME=VALUE) in their
# environment; output in OUT; exit status
job() {
    local out=$1 root=$2 local=$3 step=$4
    shift 4
    env "$@" timeout 60 "$CLI" launch -n 2 --grace 2 -- "$RANK_BIN" "$root" "$local" "$step" \
        >"$out" 2>&1
}

# resumed OUT: the step both ranks resumed (and verified) in OUT, "" unless
# they agree and both verified it (or resumed none)
resumed() {
    local s0 s1 v
    s0=$(sed -n 's/^\[0\] rank 0: resumed \([0-9]*\)$/\1/p' "$1")
    s1=$(sed -n 's/^\[1\] rank 1: resumed \([0-9]*\)$/\1/p' "$1")
    [ -n "$s0" ] && [ "$s0" = "$s1" ] || return 0
    if [ "$s0" != 0 ]; then
        v=$(grep -c "rank [01]: verified $s0\$" "$1")
        [ "$v" = 2 ] && grep -q "rank 0: verified $s0 in the root\$" "$1" || return 0
    fi
    echo "$s0"
}
# committed OUT STEP: both ranks committed STEP, the root's copy verified
committed() {
    [ "$(grep -c "rank [01]: committed $2\$" "$1")" = 2 ] &&
        grep -q "rank 0: verified $2 in the root\$" "$1"
}
# newest ROOT: the newest step with a manifest in ROOT (0: none)
newest() {
    local m n=0
    for m in "$1"/step-*/manifest.json; do
        [ -e "$m" ] || continue
        m=${m%/manifest.json}
        m=${m##*/step-}
        n=$((10#$m))
    done
    echo "$n"
}

# base DIR LOCAL: steps 1 and 2 committed in DIR/root (with LOCAL's tier)
base() {
    mkdir -p "$1"
    job "$1/s1" "$1/root" "$2" 1 && job "$1/s2" "$1/root" "$2" 2 &&
        committed "$1/s1" 1 && committed "$1/s2" 2
}

# ---------------------------------------------------------------- kill points
# short_run OUT STEP: a run not killed at its point had fewer calls than
# the counted run (the ranks share one local tier, and which of them
# removes an old step from it varies), and did its work: counted in SHORT
SHORT=0
short_run() {
    committed "$1" "$2" || return 1
    SHORT=$((SHORT + 1))
}
# kill_each SNAP LW STEP JUDGE: each call of each rank's run of STEP (as
# many as the counting run before it left in $T/count.R) killed in turn,
# on a fresh copy of SNAP at $T/w; after each kill the run of STEP + 1,
# which must resume and verify a step S, commit STEP + 1, and pass JUDGE S
# M (M: the root's newest committed step after the kill).  Sets KILLED,
# BAD_AT and TALLY[S] (the kills after which S was resumed).
kill_each() {
    local snap=$1 lw=$2 step=$3 judge=$4 w=$T/w k r i s m
    KILLED=0 BAD_AT="" TALLY=()
    for r in 0 1; do
        k=$(cat "$T/count.$r" 2>/dev/null)
        if [ -z "$k" ] || [ "$k" -eq 0 ]; then
            BAD_AT="$BAD_AT rank-$r's-calls-not-counted"
            return
        fi
        for i in $(seq 1 "$k"); do
            rm -rf "$w" && cp -a "$snap" "$w"
            if job "$w/kill" "$w/root" "$lw" "$step" LD_PRELOAD="$FAULTFS" FAULTFS_ROOT="$w/root:$w/local" \
                FAULTFS_RANK=$r FAULTFS_AT="$i" FAULTFS_ACTION=kill; then
                short_run "$w/kill" "$step" || BAD_AT="$BAD_AT r$r@$i(not killed)"
                continue
            fi
            m=$(newest "$w/root")
            job "$w/after" "$w/root" "$lw" $((step + 1))
            s=$(resumed "$w/after")
            if [ -n "$s" ] && committed "$w/after" $((step + 1)) && "$judge" "$s" "$m"; then
                TALLY[s]=$((${TALLY[s]:-0} + 1))
            else
                BAD_AT="$BAD_AT r$r@$i(newest $m, resumed '$s')"
                cp "$w/kill" "$T/fail-kill"
                cp "$w/after" "$T/fail-after"
            fi
            KILLED=$((KILLED + 1))
        done
    done
}

# snapshot NAME LW STEP: $T/w (steps 1 and 2 committed, or more) copied to
# $T/NAME-snap, then a run of STEP there counting each rank's calls;
# false, the run's output in $T/NAME-count, when it does not commit STEP.
# Made where the runs run: a root's local tier is named after its path.
snapshot() {
    rm -rf "$T/$1-snap" && cp -a "$T/w" "$T/$1-snap"
    rm -f "$T/count".*
    job "$T/$1-count" "$T/w/root" "$2" "$3" \
        LD_PRELOAD="$FAULTFS" FAULTFS_ROOT="$T/w/root:$T/w/local" FAULTFS_COUNT="$T/count" &&
        committed "$T/$1-count" "$3"
}

# the verdict of a kill sweep NAME: BAD_AT empty, or the first failure
sweep_verdict() {
    if [ -z "$BAD_AT" ]; then
        ok "$1: $KILLED kill points (rank 0: $(cat "$T/count.0"), rank 1: $(cat "$T/count.1") calls): $2"
    else
        bad "$1: every kill point $3" "failed at:$BAD_AT
--- the first failure's runs:
$(cat "$T/fail-kill" "$T/fail-after" 2>/dev/null | tail -n 20)"
    fi
    KILLS=$((KILLS + KILLED))
}

# sweep NAME LOCAL: the save of step 3 killed at each call; the resume
# finds step 2 (only when no step-3 manifest was left) or step 3
judge_save() { [ "$1" = 3 ] || { [ "$1" = 2 ] && [ "$2" = 2 ]; }; }
sweep() {
    local name=$1 lw
    lw=$([ "$2" = - ] && echo - || echo "$T/w/local")
    rm -rf "$T/w"
    if ! base "$T/w" "$lw" || ! snapshot "$name" "$lw" 3; then
        bad "$name: steps 1, 2 and 3 committed" "$(cat "$T/w/s1" "$T/w/s2" "$T/$name-count" 2>/dev/null)"
        return
    fi
    kill_each "$T/$name-snap" "$lw" 3 judge_save
    sweep_verdict "$name" "the resume found step 2 after ${TALLY[2]:-0}, step 3 after ${TALLY[3]:-0} (committed before the kill, or from the local copies), each verified bit for bit (through the saver, and the root's own copy), and step 4 committed every time" \
        "leaves step 2 or a committed step 3"
}

# sweep_resume: step 3 in the local tiers only (saved, then removed from
# the root: a run that died before its copies reached it); the next run
# (resume, copy up and commit of step 3, then the save of step 4) killed at
# each call; the run after it resumes step 3 or newer (never step 2: the
# local copies outlive every crash until committed) and commits step 5
judge_resume() { [ "$1" -ge "$2" ] && [ "$1" -ge 3 ]; }
sweep_resume() {
    local w=$T/w
    rm -rf "$w"
    if ! base "$w" "$w/local" || ! job "$w/dead" "$w/root" "$w/local" 3 || ! committed "$w/dead" 3; then
        bad "resume: steps 1, 2 and 3 committed" "$(cat "$w/s1" "$w/s2" "$w/dead" 2>/dev/null)"
        return
    fi
    rm -rf "$w/root/step-00000003"
    set -- "$w"/local/*/step-00000003/rank-0000[01]-of-00002.safetensors
    if [ $# != 2 ] || [ ! -e "$1" ] || ! snapshot resume "$w/local" 4 ||
        [ "$(resumed "$T/resume-count")" != 3 ]; then
        bad "resume: step 3, in the local tiers only, committed from them" "$(ls -R "$w" | head -30; cat "$T/resume-count" 2>/dev/null)"
        return
    fi
    kill_each "$T/resume-snap" "$w/local" 4 judge_resume
    sweep_verdict resume "in the run that commits step 3 from the local copies and saves step 4: the next run resumed step 3 after ${TALLY[3]:-0}, step 4 after ${TALLY[4]:-0} (never step 2), verified, and committed step 5" \
        "leaves step 3 (or 4) to resume"
}

KILLS=0
sweep "two tiers" local
sweep "one tier" -
sweep_resume
if [ "$KILLS" -ge 50 ]; then ok "kill points in all: $KILLS (>= 50; $SHORT more points past a run's calls, its ranks sharing one local tier)"
else bad "kill points in all: $KILLS, fewer than 50"; fi

# ---------------------------------------------------------------- failing calls
# failing NAME LOCAL OPS ACTION AT RANK WANT: the call fails; the save fails
# on both ranks, WANT in the failing rank's message; nothing of step 3 is
# committed; a resume finds step 2 and saves step 4
failing() {
    local name=$1 lmode=$2 ops=$3 action=$4 at=$5 r=$6 want=$7 w=$T/$1 lw
    lw=$([ "$lmode" = - ] && echo - || echo "$w/local")
    if ! base "$w" "$lw"; then bad "$name: steps 1 and 2 committed"; return; fi
    if job "$w/fail" "$w/root" "$lw" 3 LD_PRELOAD="$FAULTFS" FAULTFS_ROOT="$w/root:$w/local" \
        FAULTFS_RANK="$r" FAULTFS_OPS="$ops" FAULTFS_AT="$at" FAULTFS_ACTION="$action"; then
        bad "$name: the save fails" "$(cat "$w/fail")"
        return
    fi
    # rank r's reason: on stderr before the ranks agree (ckpt__tell), then
    # in its error, unless the launcher stopped it first (the other rank
    # exits as soon as they agree)
    if grep -q "^\[$r\] .*rank $r: .*$want" "$w/fail" && [ ! -e "$w/root/step-00000003/manifest.json" ]; then
        ok "$name: the save fails, rank $r saying \"$(grep -o "rank $r: .*$want.*" "$w/fail" | head -n 1 | cut -c1-300)\"; no step-3 manifest"
    else
        bad "$name: the save fails with \"$want\", nothing committed" "$(cat "$w/fail"; ls -R "$w/root" | head -20)"
    fi
    job "$w/after" "$w/root" "$lw" 4
    if [ "$(resumed "$w/after")" = 2 ] && committed "$w/after" 4; then
        ok "$name: the next run resumes step 2 (verified) and commits step 4"
    else
        bad "$name: the next run resumes step 2 and commits step 4" "$(cat "$w/after")"
    fi
}
failing "enospc on a write (two tiers)" local write enospc 2 1 "the file system is full"
failing "enospc on a write (one tier)" - write enospc 3 0 "the file system is full"
failing "eio on an fsync (two tiers)" local fsync eio 1 0 "couldn't fsync"
failing "eio on an fsync (one tier)" - fsync eio 1 1 "couldn't fsync"

# a real full file system: a tmpfs of 52 MiB holds two checkpoints (24 MB
# each, keep 2), not the third before the oldest goes; then it is grown
if [ "$(id -u)" = 0 ] && mkdir -p "$T/tmpfs" && mount -t tmpfs -o size=52m tmpfs "$T/tmpfs" 2>"$T/mount.err"; then
    MNT=$T/tmpfs
    w=$T/full
    mkdir -p "$w"
    if job "$w/s1" "$MNT/root" - 1 && committed "$w/s1" 1 && job "$w/s2" "$MNT/root" - 2 &&
        committed "$w/s2" 2; then
        job "$w/s3" "$MNT/root" - 3
        if grep -q "error: save: .*the file system is full (the file is [0-9]* bytes, [0-9]* of them not written yet; [0-9]* bytes free in $MNT/root/step-00000003)" "$w/s3" &&
            [ ! -e "$MNT/root/step-00000003/manifest.json" ]; then
            ok "a full tmpfs: the save of step 3 fails: \"$(grep -o 'error: save: .*' "$w/s3" | head -n 1 | cut -c1-300)\"; no step-3 manifest"
        else
            bad "a full tmpfs: the save of step 3 fails naming the file and the space" "$(cat "$w/s3"; df -k "$MNT")"
        fi
        mount -o remount,size=100m "$MNT" # room made
        job "$w/s4" "$MNT/root" - 4
        if [ "$(resumed "$w/s4")" = 2 ] && committed "$w/s4" 4; then
            ok "a full tmpfs: steps 1 and 2 intact (step 2 verified), step 4 committed once there was room"
        else
            bad "a full tmpfs: step 2 intact, step 4 committed once there was room" "$(cat "$w/s4")"
        fi
    else
        bad "a full tmpfs: steps 1 and 2 committed" "$(cat "$w/s1" "$w/s2")"
    fi
else
    skipped "a full tmpfs" "$([ "$(id -u)" = 0 ] && echo "mount -t tmpfs failed: $(cat "$T/mount.err")" || echo "not root (mount)")"
fi

# ---------------------------------------------------------------- two jobs
w=$T/two
mkdir -p "$w"
env timeout 60 "$CLI" launch -n 2 -- "$RANK_BIN" "$w/root" - 1 --hold 4 >"$w/a" 2>&1 &
apid=$!
for _ in $(seq 100); do grep -q "holding the root" "$w/a" && break; sleep 0.05; done
job "$w/b" "$w/root" - 1
b=$?
wait "$apid"
if [ $b != 0 ] && grep -q "error: saver: checkpoint root $w/root: in use by another job (ckpt_crash, pid [0-9]* on " "$w/b" &&
    [ ! -e "$w/root/step-00000001" ]; then
    ok "two jobs on one root: the second is refused before it writes (\"$(grep -o 'in use by another job ([^)]*)' "$w/b" | head -n 1)\")"
else
    bad "two jobs on one root: the second is refused, naming the first" "$(cat "$w/a" "$w/b")"
fi
if job "$w/c" "$w/root" - 1 && committed "$w/c" 1; then
    ok "two jobs on one root: once the first is gone, the next takes the lock over and saves"
else
    bad "two jobs on one root: once the first is gone, the next saves" "$(cat "$w/c")"
fi

# ---------------------------------------------------------------- node lost
# rank 1 killed at its first write into the root (its local file is
# complete: the copy up has begun); its node's tier is gone with it
w=$T/lost
if base "$w" "$w/local%r"; then
    job "$w/kill" "$w/root" "$w/local%r" 3 LD_PRELOAD="$FAULTFS" FAULTFS_ROOT="$w/root" \
        FAULTFS_RANK=1 FAULTFS_OPS=write FAULTFS_AT=1 FAULTFS_ACTION=kill
    set -- "$w"/local1/*/step-00000003/rank-00001-of-00002.safetensors
    [ -e "$1" ] && had=yes || had=no
    rm -rf "$w/local1"
    job "$w/after" "$w/root" "$w/local%r" 4
    set -- "$w"/local0/*/step-00000003
    if [ "$had" = yes ] && [ "$(resumed "$w/after")" = 2 ] && committed "$w/after" 4 &&
        [ ! -e "$1" ]; then
        ok "a node lost with its local file of step 3 before the copy reached the root: resumed from the root's step 2 (verified), rank 0's local step 3 removed, step 4 committed"
    else
        bad "a node lost before its copy reached the root: resumed from the root's step 2" \
            "local file of rank 1 was there: $had; $(cat "$w/kill" "$w/after")"
    fi
else
    bad "node lost: steps 1 and 2 committed" "$(cat "$w/s1" "$w/s2")"
fi

echo "# $((SECONDS - t_start)) s"
finish
