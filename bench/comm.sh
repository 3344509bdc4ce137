#!/bin/bash
# bench/comm.sh: the socket backend's collectives against Open MPI on this
# machine, in one run, as nccl-tests prints them (size, time, algbw, busbw;
# GB = 1e9), with the ratios ompi-sm/socket (shm) and ompi-tcp/socket (tcp)
# per size (the peer's time over ours: above 1, the socket backend is faster),
# each with its spread over the runs (the ratio of each run, lowest-highest).
#
#   bash bench/comm.sh [BUILD]      (make bench-run calls it with the build folder)
#
# Peers, all fp32 sum, same sizes, same warm-up, same iteration counts, the
# slowest rank's mean time (bench/comm.c and bench/mpi_allreduce.c):
#   socket (shm)  accelrun's socket backend as a job on one host runs it:
#                 shared memory between the ranks (one process per rank)
#   ompi-sm       its peer, Open MPI over shared memory (--mca btl vader,self)
#   socket (tcp)  the same with ACCELRUN_SOCKET_SHM_BYTES=0: TCP on the loopback
#   ompi-tcp      its peer, Open MPI over the same transport: --mca pml ob1
#                 --mca btl tcp,self --mca btl_tcp_if_include lo
# (bench/comm_lab.sh measures TCP between two hosts of the Slurm lab.)
# busbw (GB/s) = algbw x 2(n-1)/n for all_reduce and x (n-1)/n for all_gather and
# reduce_scatter.  Each configuration runs REPEAT times (default 3), best
# time kept per size, peers interleaved, so that a noisy neighbour hurts both
# sides alike.  Environment: RANKS="2 4", OPS="all_reduce all_gather
# reduce_scatter", MIN=4096, MAX=268435456, REPEAT=3.
set -u
build=${1:-build}
ranks=${RANKS:-2 4}
ops=${OPS:-all_reduce all_gather reduce_scatter}
min=${MIN:-4096}
max=${MAX:-268435456}
repeat=${REPEAT:-3}
bin=$build/bench/comm
mpibin=$build/bench/mpi_allreduce
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ ! -x "$bin" ]; then
    make --no-print-directory "$bin" >/dev/null || { echo "comm.sh: couldn't build $bin"; exit 1; }
fi
mpi_skip=
if ! command -v mpirun >/dev/null 2>&1 || ! command -v mpicc >/dev/null 2>&1; then
    mpi_skip="mpirun/mpicc not installed (sh scripts/deps.sh bench: openmpi-bin libopenmpi-dev)"
elif ! mpicc -O2 -o "$mpibin" bench/mpi_allreduce.c 2>"$tmp/mpicc.err"; then
    mpi_skip="mpicc failed: $(head -c 300 "$tmp/mpicc.err")"
fi
mpirun_args=(--oversubscribe --bind-to none)
[ "$(id -u)" = 0 ] && mpirun_args+=(--allow-run-as-root)
tcp_args=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
sm_args=(--mca pml ob1 --mca btl vader,self)

# keep the best (lowest) time per "op ranks bytes" across runs of one peer
best() { awk '{k=$1" "$2" "$3; if (!(k in t) || $4 < t[k]) t[k]=$4} END {for (k in t) print k, t[k]}' | sort -k3,3n; }

echo "bench: collectives, socket backend vs Open MPI $(mpirun --version 2>/dev/null | head -1 | awk '{print $NF}') on $(nproc) CPUs, loopback"
echo "       fp32 sum; time = mean over iterations of the slowest rank, best of $repeat runs; GB = 1e9"
for op in $ops; do
    for n in $ranks; do
        : >"$tmp/s" ; : >"$tmp/u" ; : >"$tmp/t" ; : >"$tmp/m"
        for ((i = 0; i < repeat; i++)); do
            : >"$tmp/s.$i" ; : >"$tmp/u.$i" ; : >"$tmp/t.$i" ; : >"$tmp/m.$i"
            "$bin" --op "$op" --ranks "$n" --min "$min" --max "$max" >"$tmp/s.$i" || echo "comm.sh: socket run failed" >&2
            ACCELRUN_SOCKET_SHM_BYTES=0 "$bin" --op "$op" --ranks "$n" --min "$min" --max "$max" >"$tmp/u.$i" ||
                echo "comm.sh: socket (TCP) run failed" >&2
            if [ -z "$mpi_skip" ]; then
                mpirun "${mpirun_args[@]}" -np "$n" "${tcp_args[@]}" "$mpibin" "$op" "$min" "$max" \
                    >"$tmp/t.$i" 2>>"$tmp/mpi.err" || echo "comm.sh: ompi-tcp run failed" >&2
                mpirun "${mpirun_args[@]}" -np "$n" "${sm_args[@]}" "$mpibin" "$op" "$min" "$max" \
                    >"$tmp/m.$i" 2>>"$tmp/mpi.err" || echo "comm.sh: ompi-sm run failed" >&2
            fi
            for p in s u t m; do cat "$tmp/$p.$i" >>"$tmp/$p"; done
        done
        # each run's two ratios per size, for their spread: "bytes sm/shm tcp/tcp"
        for ((i = 0; i < repeat; i++)); do
            awk 'FILENAME ~ /\/s\./ {s[$3]=$4} FILENAME ~ /\/u\./ {u[$3]=$4}
                 FILENAME ~ /\/t\./ {t[$3]=$4} FILENAME ~ /\/m\./ {m[$3]=$4}
                 END {for (b in s) if (s[b] > 0 && u[b] > 0 && m[b] != "" && t[b] != "") print b, m[b] / s[b], t[b] / u[b]}' \
                "$tmp/s.$i" "$tmp/u.$i" "$tmp/t.$i" "$tmp/m.$i"
        done >"$tmp/r"
        for p in s u t m; do best <"$tmp/$p" >"$tmp/$p.b"; done
        echo
        echo "$op, $n ranks"
        awk -v n="$n" -v op="$op" -v skip="$mpi_skip" '
            FILENAME ~ /s\.b$/ {s[$3]=$4; order[++k]=$3}
            FILENAME ~ /u\.b$/ {u[$3]=$4}
            FILENAME ~ /t\.b$/ {t[$3]=$4}
            FILENAME ~ /m\.b$/ {m[$3]=$4}
            FILENAME ~ /\/r$/ {
                if (!($1 in alo) || $2 < alo[$1]) alo[$1]=$2; if ($2 > ahi[$1]) ahi[$1]=$2
                if (!($1 in blo) || $3 < blo[$1]) blo[$1]=$3; if ($3 > bhi[$1]) bhi[$1]=$3
            }
            function spread(lo, hi, b) { return (b in lo) ? sprintf("(%.2f-%.2f)", lo[b], hi[b]) : "" }
            function cols(us, b) {
                if (us == "") return sprintf("%10s %6s", "-", "-")
                return sprintf("%10.1f %6.2f", us, b / us / 1e3 * f)
            }
            function ratio(peer, ours) { return (peer != "" && ours > 0) ? sprintf("%6.2fx", peer / ours) : "     -" }
            END {
                f = op == "all_reduce" ? 2 * (n - 1) / n : (n - 1) / n
                printf "%10s | %-17s | %-17s | %-17s | %-17s | %s\n", "", "socket (shm)", "ompi-sm", "socket (tcp)", "ompi-tcp", "sm/shm (runs)        tcp/tcp (runs)"
                printf "%10s |", "size(B)"
                for (j = 0; j < 4; j++) printf " %10s %6s |", "time(us)", "busbw"
                printf "\n"
                for (i = 1; i <= k; i++) {
                    b = order[i]
                    printf "%10d | %s | %s | %s | %s | %s %-13s %s %s\n", b, cols(s[b], b), cols(m[b], b), cols(u[b], b), cols(t[b], b), \
                        ratio(m[b], s[b]), spread(alo, ahi, b), ratio(t[b], u[b]), spread(blo, bhi, b)
                }
                if (skip != "") print "ompi-tcp, ompi-sm: SKIP: " skip
            }' "$tmp/s.b" "$tmp/u.b" "$tmp/t.b" "$tmp/m.b" "$tmp/r"
    done
done
if [ -s "$tmp/mpi.err" ]; then
    echo
    echo "Open MPI said (first lines):"
    head -5 "$tmp/mpi.err"
fi
