#!/bin/bash
# bench/comm_lab.sh SPANK BUILD: the socket backend's collectives across the
# Slurm lab's two hosts (network namespaces n1 and n2 on a bridge, veth
# links: tests/slurm/lab.sh) against Open MPI across the same two hosts, in
# one run, as bench/comm.sh prints them.
#
#   socket    build/bench/comm --env, started by `srun -N2 -nN
#             --accel-config=cpu.yaml` (the plugin gives every task RANK,
#             MASTER_ADDR, ...): 2 ranks = one per host, TCP between them;
#             4 ranks = two per host, shared memory within, TCP between
#   ompi      Open MPI's mpirun with the two hosts (--host n1:K,n2:K), its
#             daemons started in the hosts' namespaces by a launch agent
#             (nsenter + a UTS namespace named after the host, as slurmd
#             runs), pml ob1, btl tcp over the lab's subnet, and vader
#             (shared memory) within a host
#
# fp32 sum; the slowest rank's mean time per size; best of REPEAT (default 3)
# runs, the two peers interleaved; the ratio is ompi time / socket time
# (above 1: the socket backend is faster), with the spread of the ratios of
# the runs.  Needs root and network namespaces, like the lab; prints SKIP
# and why otherwise.  Environment: OPS, RANKS ("2 4"), MIN (1 MiB), MAX
# (64 MiB), REPEAT; ACCELRUN_SOCKET_* reach the socket ranks.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tests/slurm/lock.sh
. "$ROOT/tests/slurm/lock.sh"
lab_lock "$0" "$@" # the lab's names are fixed: one lab per host
PLUGIN=$(realpath "${1:-$ROOT/build/spank/accelrun.so}")
BUILD=$(realpath "${2:-$ROOT/build}")
ops=${OPS:-all_reduce all_gather reduce_scatter}
ranks=${RANKS:-2 4}
min=${MIN:-1048576}
max=${MAX:-67108864}
repeat=${REPEAT:-3}
LAB=$ROOT/tests/slurm/lab.sh
user=alice
bin=$BUILD/bench/comm

skip() { echo "comm lab bench: SKIP: $*"; exit 0; }
[ "$(id -u)" = 0 ] || skip "needs root (the lab's network namespaces)"
command -v srun >/dev/null 2>&1 || skip "Slurm is not installed (make test-slurm installs it)"
[ -f "$PLUGIN" ] || skip "no plugin at $PLUGIN (make)"
[ -x "$bin" ] || make --no-print-directory "$bin" >/dev/null || skip "couldn't build $bin"
export ACCELRUN_SPANK=$PLUGIN ACCELRUN_PLUGSTACK_ARGS=
# Never take down a lab someone else brought up (a test run, a developer).
"$LAB" status >/dev/null 2>&1 && skip "the Slurm lab is already up (another run uses it); try again after it"
if ! "$LAB" up >/tmp/accelrun-comm-lab.log 2>&1; then
    "$LAB" down >/dev/null 2>&1
    skip "the lab did not come up (see /tmp/accelrun-comm-lab.log)"
fi
tmp=$(mktemp -d)
home=$(getent passwd "$user" | cut -d: -f6)
trap 'rm -rf "$tmp" "$home/comm-lab"; "$LAB" down >/dev/null 2>&1' EXIT INT TERM
mkdir -p "$home/comm-lab"
install -m 755 "$bin" "$home/comm-lab/comm"
printf 'distributed_type: MULTI_CPU\nuse_cpu: true\nmixed_precision: "no"\nnum_machines: 2\n' \
    >"$home/comm-lab/cpu.yaml"
chown -R "$user": "$home/comm-lab"
subnet=$(ip -n acclab-n1 -4 -o addr show dev eth0 | awk '{print $4}' | sed 's#\.[0-9]*/#.0/#')

mpi_skip=
mpibin=$tmp/mpi_allreduce
if ! command -v mpirun >/dev/null 2>&1 || ! command -v mpicc >/dev/null 2>&1; then
    mpi_skip="mpirun/mpicc not installed (sh scripts/deps.sh bench: openmpi-bin libopenmpi-dev)"
elif ! mpicc -O2 -o "$mpibin" "$ROOT/bench/mpi_allreduce.c" 2>"$tmp/mpicc.err"; then
    mpi_skip="mpicc failed: $(head -c 300 "$tmp/mpicc.err")"
fi
# Open MPI's launch agent: "agent HOST CMD...": CMD in HOST's namespaces.
cat >"$tmp/nsagent" <<'EOF'
#!/bin/sh
host=$1
shift
exec nsenter --net="/run/netns/acclab-$host" unshare --uts sh -c 'hostname "$0" && exec sh -c "$*"' "$host" "$@"
EOF
chmod 755 "$tmp/nsagent"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi_args=(--mca plm_rsh_agent "$tmp/nsagent" --mca pml ob1 --mca btl tcp,vader,self
    --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet"
    --bind-to none --oversubscribe)

# The lab's two hosts share this machine's CPUs, and each host's Slurm binds
# its first task to "its" CPU 0: both hosts' ranks would share one CPU,
# while Open MPI's float (--bind-to none).  So the socket ranks float over
# the same CPUs: no binding, and CPUs enough per task that Slurm's
# allocation does not narrow them (each lab host declares 2).
cpus_per_task() { local c=$((4 / $1)); echo $((c < 1 ? 1 : c)); }

best() { awk '{k=$1" "$2" "$3; if (!(k in t) || $4 < t[k]) t[k]=$4} END {for (k in t) print k, t[k]}' | sort -k3,3n; }

echo "bench: collectives across the lab's two hosts (veth, $subnet), socket backend vs Open MPI $(mpirun --version 2>/dev/null | head -1 | awk '{print $NF}')"
echo "       fp32 sum; time = mean over iterations of the slowest rank, best of $repeat runs; GB = 1e9"
for op in $ops; do
    for n in $ranks; do
        : >"$tmp/s"
        : >"$tmp/m"
        for ((i = 0; i < repeat; i++)); do
            # shellcheck disable=SC2046 # the caller's ACCELRUN_SOCKET_* tuning, word by word
            (cd "$home/comm-lab" && runuser -u "$user" -- env -i PATH=/usr/bin:/bin HOME="$home" \
                $(env | grep '^ACCELRUN_SOCKET_[A-Z_]*=[0-9a-z]*$') \
                srun -N2 -n"$n" -c "$(cpus_per_task "$n")" --cpu-bind=none --accel-config=cpu.yaml ./comm --env --op "$op" --min "$min" --max "$max") \
                >"$tmp/s.$i" 2>>"$tmp/srun.err" || echo "comm_lab.sh: socket run failed (see below)" >&2
            cat "$tmp/s.$i" >>"$tmp/s"
            if [ -z "$mpi_skip" ]; then
                mpirun "${mpi_args[@]}" -np "$n" --host "n1:$((n / 2)),n2:$((n / 2))" \
                    "$mpibin" "$op" "$min" "$max" >"$tmp/m.$i" 2>>"$tmp/mpi.err" ||
                    echo "comm_lab.sh: Open MPI run failed (see below)" >&2
                cat "$tmp/m.$i" >>"$tmp/m"
            fi
        done
        best <"$tmp/s" >"$tmp/s.b"
        best <"$tmp/m" >"$tmp/m.b"
        # the ratio of each run, for the spread
        for ((i = 0; i < repeat; i++)); do
            join -j 3 <(sort -k3,3 "$tmp/s.$i") <(sort -k3,3 "$tmp/m.$i" 2>/dev/null) 2>/dev/null |
                awk '{print $1, $7 / $4}'
        done >"$tmp/r"
        echo
        echo "$op, $n ranks on 2 hosts ($((n / 2)) per host)"
        awk -v n="$n" -v op="$op" -v skip="$mpi_skip" '
            FILENAME ~ /s\.b$/ {s[$3]=$4; order[++k]=$3}
            FILENAME ~ /m\.b$/ {m[$3]=$4}
            FILENAME ~ /\/r$/ {if (!($1 in lo) || $2 < lo[$1]) lo[$1]=$2; if ($2 > hi[$1]) hi[$1]=$2}
            function cols(us, b) {
                if (us == "") return sprintf("%10s %7s %7s", "-", "-", "-")
                return sprintf("%10.1f %7.2f %7.2f", us, b / us / 1e3, b / us / 1e3 * f)
            }
            END {
                f = op == "all_reduce" ? 2 * (n - 1) / n : (n - 1) / n
                printf "%10s | %-26s | %-26s | %s\n", "", "socket", "ompi (tcp between, vader within)", "ompi/socket"
                printf "%10s | %10s %7s %7s | %10s %7s %7s | %s\n", "size(B)", "time(us)", "algbw", "busbw", \
                    "time(us)", "algbw", "busbw", "best   (runs)"
                for (i = 1; i <= k; i++) {
                    b = order[i]
                    r = (m[b] != "" && s[b] > 0) ? sprintf("%5.2fx (%.2f-%.2f)", m[b] / s[b], lo[b], hi[b]) : "   -"
                    printf "%10d | %s | %s | %s\n", b, cols(s[b], b), cols(m[b], b), r
                }
                if (skip != "") print "ompi: SKIP: " skip
            }' "$tmp/s.b" "$tmp/m.b" "$tmp/r"
    done
done
for f in srun mpi; do
    if [ -s "$tmp/$f.err" ]; then
        echo
        echo "$f said (first lines):"
        head -5 "$tmp/$f.err"
    fi
done
