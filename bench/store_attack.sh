#!/bin/bash
# bench/store_attack.sh: what hostile connections make rank 0's rendezvous
# store do, while a correct client sets and gets a key every 100 ms (issue
# 12).  Three attacks, each against a fresh server process (bench/store_attack
# serve) on 127.0.0.1:
#
#   a  70 connections send a set's header claiming a 16 MiB value and dribble
#      the body: with a wrong nonce, then with the job's nonce;
#   b  2000 connections that send nothing, the server under `ulimit -n 1024`;
#   c  two senders of one byte a second: a hello, and a set after a hello.
#
# For each: the server's peak resident memory (VmHWM) against its max_bytes
# (the ratio is the figure), whether the correct client was served within
# its deadline throughout, what the attackers saw, and how many lines the
# server wrote to stderr.
#
#   bash bench/store_attack.sh [BUILD]     (make bench-run calls it with build)
#
# STORE_ATTACK_MAX_BYTES (default 268435456): the server's max_bytes.
# STORE_ATTACK_SLOW_S (default 75): how long attack c lasts; it must pass the
# server's deadline of a request (60 s) to show it.  STORE_ATTACK_ONLY
# (default "a b c"): the attacks to run.  Needs BUILD/bench/store_attack
# (make bench-bins).
set -u
build=${1:-build}
bin=$build/bench/store_attack
max_bytes=${STORE_ATTACK_MAX_BYTES:-268435456}
slow_s=${STORE_ATTACK_SLOW_S:-75}
only=${STORE_ATTACK_ONLY:-"a b c"}
deadline=5
tmp=$(mktemp -d /tmp/store_attack.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

if [ ! -x "$bin" ]; then
    echo "store_attack.sh: $bin is missing; build it with 'make bench-bins'" >&2
    exit 1
fi
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true # the attackers hold thousands

# start_server [NOFILE]: the server in the background (its stdin a fifo that
# stop_server closes), port in $port, pid in $spid.
start_server() {
    rm -f "$tmp/in" "$tmp/port" "$tmp/err"
    mkfifo "$tmp/in"
    if [ -n "${1:-}" ]; then
        (ulimit -Sn "$1" && ulimit -Hn "$1" && exec "$bin" serve "$max_bytes") \
            <"$tmp/in" >"$tmp/port" 2>"$tmp/err" &
    else
        "$bin" serve "$max_bytes" <"$tmp/in" >"$tmp/port" 2>"$tmp/err" &
    fi
    spid=$!
    exec 9>"$tmp/in"
    for _ in $(seq 50); do
        port=$(head -n 1 "$tmp/port" 2>/dev/null)
        [ -n "$port" ] && return 0
        sleep 0.1
    done
    echo "store_attack.sh: the server did not start: $(cat "$tmp/err")" >&2
    exit 1
}

# stop_server NAME CLIENT_RC: reads the server's peak memory, stops it and
# prints the scenario's summary line.
stop_server() {
    local hwm lines served
    hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$spid/status")
    exec 9>&-
    wait "$spid"
    lines=$(wc -l <"$tmp/err")
    served=yes
    [ "$2" -eq 0 ] || served=NO
    awk -v n="$1" -v h="$hwm" -v m="$max_bytes" -v s="$served" -v l="$lines" 'BEGIN {
        printf "%s: server VmHWM %.1f MiB, max_bytes %.0f MiB, VmHWM/max_bytes %.3f; " \
               "client served within %d s throughout: %s; server stderr: %d lines\n",
               n, h / 1024, m / 1048576, h * 1024 / m, '"$deadline"', s, l }'
    if [ "$lines" -gt 0 ]; then
        head -n 3 "$tmp/err" | sed 's/^/    stderr: /'
        if [ "$lines" -gt 3 ]; then echo "    stderr: ... ($((lines - 3)) more)"; fi
    fi
    return 0
}

# scenario NAME SECONDS ATTACK...: one attack against a fresh server (already
# started), with the correct client running beside it.
scenario() {
    local name=$1 secs=$2 crc
    shift 2
    "$bin" "$@" &
    local apid=$!
    sleep 0.5 # the attack is on before the client starts
    "$bin" client "$port" "$secs" "$deadline"
    crc=$?
    wait "$apid"
    stop_server "$name" "$crc"
}

want() { case " $only " in *" $1 "*) return 0 ;; esac; return 1; }

if want a; then
echo "== a: 70 connections, each a set claiming 16 MiB, its body dribbled"
start_server
scenario "a (wrong nonce)" 8 bigset "$port" 70 8 wrong
start_server
scenario "a (the job's nonce)" 8 bigset "$port" 70 8 right
fi

if want b; then
echo "== b: 2000 idle connections, the server under ulimit -n 1024"
start_server 1024
scenario "b" 12 idle "$port" 2000 12
fi

if want c; then
echo "== c: one byte a second, a hello and a set ($slow_s s)"
start_server
"$bin" slow "$port" "$slow_s" hello &
hpid=$!
"$bin" slow "$port" "$slow_s" set &
spid2=$!
sleep 0.5
"$bin" client "$port" "$slow_s" "$deadline"
crc=$?
wait "$hpid" "$spid2"
stop_server "c" "$crc"
fi
