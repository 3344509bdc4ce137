#!/bin/bash
# bench/rendezvous.sh: accelrun's TCP rendezvous store against PyTorch's
# TCPStore on one workload: N clients (spread over BENCH_PROCS processes,
# default 8) connect, set a key, get another client's key and pass a barrier
# of all N.  N = 64, 1024, 4096 for both, 16384 for accelrun alone.  Prints
# one line per run (the phases, seconds from the common start to the last
# client through each) and a table: N, accelrun s, TCPStore s, ratio.
#
#   bash bench/rendezvous.sh [BUILD]     (make bench-run calls it with build)
#
# BENCH_TCPSTORE_MAX (default 4096): the largest N run on TCPStore, whose
# server slows down quadratically (about 160 s at 4096 on a 2-core machine).
# BENCH_SIZES overrides the list of N.  Needs build/bench/rendezvous (make
# bench-bins) and, for the peer, python3 with torch (Debian python3-torch).
set -u
build=${1:-build}
bin=$build/bench/rendezvous
peer=$(dirname "$0")/tcpstore_peer.py
procs=${BENCH_PROCS:-8}
tcpmax=${BENCH_TCPSTORE_MAX:-4096}
sizes=${BENCH_SIZES:-"64 1024 4096 16384"}

if [ ! -x "$bin" ]; then
    echo "rendezvous.sh: $bin is missing; build it with 'make bench-bins'" >&2
    exit 1
fi

# Both ends of every connection live on this machine: the server process
# holds N descriptors, each client process N/PROCS.
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ]; then
    ulimit -n "$hard"
else
    ulimit -n 1048576 2>/dev/null || true
fi
soft=$(ulimit -n)
echo "rendezvous.sh: open files: soft limit $soft (hard $hard); $procs client processes"

# Debian's torch is in the system python; a pyenv or venv python3 may lack it.
py=""
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch.distributed' 2>/dev/null; then
        py=$p
        break
    fi
done
peer_why=""
[ -n "$py" ] || peer_why="no python3 with torch (apt-get install python3-torch)"

phase() { # "connect=0.1 set=..." -> the barrier figure
    sed -n 's/.* barrier=\([0-9.]*\) s$/\1/p'
}

rows=""
rc=0
for n in $sizes; do
    if [ "$soft" != unlimited ] && [ "$soft" -lt $((n + 64)) ]; then
        a="SKIP"
        echo "accelrun N=$n: SKIP: 'ulimit -n' is $soft, below $((n + 64)) (raise the hard limit)"
    else
        line=$("$bin" run "$n" "$procs") || rc=1
        echo "$line"
        a=$(echo "$line" | phase)
        [ -n "$a" ] || a="FAIL"
    fi
    if [ -n "$peer_why" ]; then
        t="SKIP"
        why="$peer_why"
    elif [ "$n" -gt "$tcpmax" ]; then
        t="-" # a cap, not a missing peer: said below, without SKIP
        why="N > BENCH_TCPSTORE_MAX=$tcpmax"
        echo "tcpstore N=$n: not measured: the peer runs up to BENCH_TCPSTORE_MAX=$tcpmax clients (raise it to measure $n)"
    else
        line=$("$py" "$peer" run "$n" "$procs") || rc=1
        echo "$line"
        t=$(echo "$line" | phase)
        [ -n "$t" ] || t="FAIL"
        why=""
    fi
    [ "$t" = SKIP ] && echo "tcpstore N=$n: SKIP: $why"
    rows="$rows$n $a $t\n"
done

echo
echo "rendezvous: N clients connect, set, get, barrier (seconds to the last client through the barrier)"
printf "%8s %12s %12s %10s\n" N accelrun TCPStore ratio
printf "$rows" | while read -r n a t; do
    ratio="-"
    case "$a$t" in
    *SKIP* | *FAIL*) ;;
    *) ratio=$(awk -v a="$a" -v t="$t" 'BEGIN { printf (a > 0 ? "%.1fx" : "-"), t / a }') ;;
    esac
    printf "%8s %12s %12s %10s\n" "$n" "$a" "$t" "$ratio"
done
exit $rc
