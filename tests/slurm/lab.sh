#!/bin/bash
# tests/slurm/lab.sh: a real two-node (ACCELRUN_LAB_NODES: up to nine) Slurm 22.05
# cluster on one Debian machine,
# for the SPANK plugin's integration tests (reference/slurm.md §3).
#
#   lab.sh up                 munged, slurmctld, slurmd n1 + n2 [+ n3..] (each in its own
#                             network + UTS namespace on a bridge), fake GPUs,
#                             topology/tree with two leaf switches, user alice,
#                             the plugin $ACCELRUN_SPANK loaded by a plugstack
#                             snippet with arguments $ACCELRUN_PLUGSTACK_ARGS
#   lab.sh down               undo everything `up` did, in reverse, by its records
#   lab.sh status             what is running; exit 0 when the lab is usable
#   lab.sh plugstack [ARG..]  reinstall the plugin and rewrite the snippet with
#                             these arguments (srun and slurmstepd re-read it on
#                             every launch; no restart needed)
#   lab.sh site FILE          install FILE as /etc/accelrun/site.yaml
#
# Environment:
#   ACCELRUN_SPANK            plugin to load (default build/spank/accelrun.so);
#                             "none" or a missing file: no plugin (lab only)
#   ACCELRUN_PLUGSTACK_ARGS   plugstack.conf arguments (space separated)
#   ACCELRUN_LAB_STATE        state directory (default /run/accelrun-lab)
#   ACCELRUN_LAB_USER         the job user (default alice)
#   ACCELRUN_LAB_NODES        number of nodes n1..nN, 1-9 (default 2); node nK
#                             has the address <subnet>.1K
#   ACCELRUN_LAB_TOPOLOGY     a file to install as topology.conf (default: two
#                             leaf switches, leaf1 = n1 and leaf2 = n2, under a spine)
#
# `up` on a healthy lab with another node count or topology restarts it.
#
# Everything the lab changes is written to $STATE/undo the moment it is done
# (one line per action), so `down` works after a failed or interrupted `up`:
# it stops exactly the PIDs it recorded (checked against their start time),
# removes the namespaces, the bridge, its /etc/hosts lines, the fake devices
# it created, the files it wrote, and restores the files it replaced (the
# originals are kept under /var/lib/accelrun-lab/backup until then).
#
# Daemons run in the foreground (-D / -F) under setsid, so the PID the lab
# records is the daemon's own.  slurmd is started with `nsenter --net=`, not
# `ip netns exec` (which remounts /sys and hides the cgroup tree from slurmd).
set -euo pipefail

STATE=${ACCELRUN_LAB_STATE:-/run/accelrun-lab}
BACKUP=/var/lib/accelrun-lab/backup
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SPANK=${ACCELRUN_SPANK:-$ROOT/build/spank/accelrun.so}
LAB_USER=${ACCELRUN_LAB_USER:-alice}
ETC=/etc/slurm
SNIPPET=$ETC/plugstack.conf.d/accelrun-lab.conf
SITE_FILE=/etc/accelrun/site.yaml
BR=acclab0
NODE_COUNT=${ACCELRUN_LAB_NODES:-2}
case $NODE_COUNT in
[1-9]) ;;
*)
    echo "lab: error: ACCELRUN_LAB_NODES=$NODE_COUNT: want 1-9" >&2
    exit 1
    ;;
esac
NODES=$(seq -f 'n%g' -s ' ' 1 "$NODE_COUNT")
TOPOLOGY=${ACCELRUN_LAB_TOPOLOGY:-}
MARK='# accelrun-lab'
UNDO=$STATE/undo
IDLE_WAIT=${ACCELRUN_LAB_IDLE_WAIT:-30}

say() { echo "lab: $*"; }
die() {
    echo "lab: error: $*" >&2
    exit 1
}

# ------------------------------------------------------------------ records
record() {
    mkdir -p "$STATE"
    touch "$UNDO"
    grep -qxF -- "$*" "$UNDO" || echo "$*" >>"$UNDO"
}

recorded() { [ -f "$UNDO" ] && grep -qxF -- "$*" "$UNDO"; }

# first time the lab writes PATH: back up an existing file, or note that it is new
claim_file() {
    local p=$1
    if recorded "restore $p" || recorded "rm $p"; then return 0; fi
    if [ -e "$p" ]; then
        mkdir -p "$BACKUP$(dirname "$p")"
        cp -a "$p" "$BACKUP$p"
        record "restore $p"
    else
        record "rm $p"
    fi
}

# write stdin to PATH (claiming it first)
put_file() {
    claim_file "$1"
    mkdir -p "$(dirname "$1")"
    cat >"$1.acclab-tmp"
    chmod "${2:-644}" "$1.acclab-tmp"
    mv -f "$1.acclab-tmp" "$1"
}

claim_dir() { # create DIR if absent and remember to rmdir it
    [ -d "$1" ] && return 0
    mkdir -p "$1"
    record "rmdir $1"
}

starttime() { awk '{print $22}' "/proc/$1/stat" 2>/dev/null || true; }

record_pid() { # NAME PID
    local st
    st=$(starttime "$2")
    [ -n "$st" ] || die "$1 (pid $2) exited right after start; see $STATE/log/"
    record "pid $1 $2 $st"
}

pid_alive() { # PID STARTTIME: the recorded process still runs
    [ -n "$1" ] && [ "$(starttime "$1")" = "$2" ]
}

# ------------------------------------------------------------------ helpers
plugin_dir() {
    local d
    for d in /usr/lib/*/slurm-wlm /usr/lib64/slurm /usr/lib/slurm /usr/local/lib/slurm; do
        [ -e "$d/auth_munge.so" ] && {
            echo "$d"
            return 0
        }
    done
    return 1
}

subnet_in_use() { # PREFIX like 10.9.0
    local p=${1//./\\.}
    ip -4 -o addr show | grep -v " $BR " | grep -qE " inet $p\." && return 0
    ip -4 route show | grep -v " dev $BR " | grep -qE "^$p\." && return 0
    return 1
}

choose_subnet() {
    local p
    if [ -s "$STATE/subnet" ]; then
        cat "$STATE/subnet"
        return 0
    fi
    for p in 10.9.0 10.19.0 10.29.0 10.39.0 172.31.239; do
        subnet_in_use "$p" || {
            echo "$p"
            return 0
        }
    done
    die "no free subnet among 10.9.0.0/24 10.19.0.0/24 10.29.0.0/24 10.39.0.0/24 172.31.239.0/24"
}

plugin_wanted() { [ "$SPANK" != none ] && [ -f "$SPANK" ]; }

install_plugin() { # ARGS...
    local dir
    dir=$(plugin_dir) || die "cannot find Slurm's PluginDir (no auth_munge.so)"
    if ! plugin_wanted; then
        if [ "$SPANK" != none ]; then say "warning: plugin $SPANK not found; the lab runs without it"; fi
        if [ -e "$SNIPPET" ] && recorded "rm $SNIPPET"; then rm -f "$SNIPPET"; fi
        return 0
    fi
    if [ "$SPANK" -ef "$dir/accelrun.so" ]; then
        # the plugin a package installed (slurm-accelrun-plugin): loaded where
        # it is, and left to its package when the lab goes down
        say "plugin $SPANK is the one installed in Slurm's plugin directory; loaded in place"
    else
        claim_file "$dir/accelrun.so"
        install -m 755 "$SPANK" "$dir/accelrun.so" # new inode: running steps keep the old one
    fi
    cp -f "$SPANK" "$STATE/plugin.so"
    printf 'required accelrun.so %s\n' "$*" | put_file "$SNIPPET"
    printf '%s\n' "$*" >"$STATE/plugstack-args"
    say "plugin $SPANK -> $dir/accelrun.so, plugstack: required accelrun.so $*"
}

nodes_state() { sinfo -h -N -o '%N %T' 2>/dev/null | sort -u | tr '\n' ' '; }

all_idle() { # what nodes_state says when every node is idle: "n1 idle n2 idle "
    local n
    for n in $NODES; do printf '%s idle ' "$n"; done
}

# the layout `up` would build now (node count and topology.conf), to compare
# with the one a running lab was built with
wanted_layout() {
    echo "nodes $NODES"
    if [ -n "$TOPOLOGY" ]; then cat "$TOPOLOGY"; else echo "topology default"; fi
}

wait_idle() {
    local deadline=$((SECONDS + IDLE_WAIT)) s="" why="" kind name pid st
    while [ $SECONDS -lt $deadline ]; do
        s=$(nodes_state)
        [ "$s" = "$(all_idle)" ] && return 0
        while read -r kind name pid st; do
            [ "$kind" = pid ] && ! pid_alive "$pid" "$st" && why="$why $name"
        done <"$UNDO"
        [ -n "$why" ] && break
        sleep 0.3
    done
    if [ -n "$why" ]; then
        echo "lab: error: exited during start:$why (sinfo: ${s:-no answer from slurmctld})" >&2
    else
        echo "lab: error: nodes not idle after ${IDLE_WAIT}s (sinfo: ${s:-no answer from slurmctld})" >&2
    fi
    for f in "$STATE"/log/*; do
        [ -f "$f" ] || continue
        echo "--- tail $f" >&2
        tail -n 15 "$f" >&2
    done
    return 1
}

# ------------------------------------------------------------------ status
healthy() {
    [ -f "$STATE/up" ] && [ -f "$UNDO" ] || return 1
    local kind name pid st
    while read -r kind name pid st; do
        [ "$kind" = pid ] || continue
        pid_alive "$pid" "$st" || return 1
    done <"$UNDO"
    local s n
    s=" $(nodes_state)"
    for n in $NODES; do
        case $s in
        *" $n "*) ;;
        *) return 1 ;;
        esac
    done
    return 0
}

cmd_status() {
    if [ ! -f "$UNDO" ]; then
        say "down (no state in $STATE)"
        return 1
    fi
    local kind name pid st
    say "subnet $(cat "$STATE/subnet" 2>/dev/null || echo '?').0/24, state $STATE"
    while read -r kind name pid st; do
        [ "$kind" = pid ] || continue
        if pid_alive "$pid" "$st"; then say "$name pid $pid running"; else say "$name pid $pid NOT running"; fi
    done <"$UNDO"
    say "nodes: $(nodes_state)"
    [ -f "$STATE/plugstack-args" ] && say "plugstack: required accelrun.so $(cat "$STATE/plugstack-args")"
    healthy && say "up" && return 0
    say "not healthy"
    return 1
}

# ------------------------------------------------------------------ down
kill_recorded() {
    local kind name pid st pids="" p
    while read -r kind name pid st; do
        [ "$kind" = pid ] || continue
        if pid_alive "$pid" "$st"; then
            kill -TERM "$pid" 2>/dev/null || true
            pids="$pids $pid:$st"
            say "stopping $name (pid $pid)"
        fi
    done <"$UNDO"
    # slurmd unlinks its pidfile when shutdown starts and exits 1-3 s later
    local deadline=$((SECONDS + 15))
    for p in $pids; do
        while pid_alive "${p%%:*}" "${p#*:}" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
        if pid_alive "${p%%:*}" "${p#*:}"; then
            say "pid ${p%%:*} ignored SIGTERM; SIGKILL"
            kill -KILL "${p%%:*}" 2>/dev/null || true
        fi
    done
}

del_netns() {
    local ns=$1 left p
    [ -e "/run/netns/$ns" ] || return 0
    # Only the lab's own slurmd (and the slurmstepd/tasks they started) can
    # live in this namespace; a step still running after its slurmd stopped
    # would keep the namespace alive, so stop those too.
    left=$(ip netns pids "$ns" 2>/dev/null || true)
    if [ -n "$left" ]; then
        say "stopping leftover processes in $ns: $(echo $left)"
        kill -TERM $left 2>/dev/null || true
        sleep 1
        left=$(ip netns pids "$ns" 2>/dev/null || true)
        [ -z "$left" ] || kill -KILL $left 2>/dev/null || true
    fi
    ip netns del "$ns" 2>/dev/null || true
}

hosts_remove() {
    grep -qF -- "$MARK" /etc/hosts || return 0
    local tmp
    tmp=$(mktemp)
    grep -vF -- "$MARK" /etc/hosts >"$tmp" || true
    cat "$tmp" >/etc/hosts # in place: /etc/hosts may be a bind mount
    rm -f "$tmp"
}

cmd_down() {
    if [ ! -f "$UNDO" ]; then
        say "nothing to take down ($UNDO absent)"
        rm -rf "$STATE"
        return 0
    fi
    rm -f "$STATE/up"
    kill_recorded
    local kind a
    tac "$UNDO" | while read -r kind a; do
        case $kind in
        pid) ;;
        netns) del_netns "$a" ;;
        link) ip link del "$a" 2>/dev/null || true ;;
        hosts) hosts_remove ;;
        dev) rm -f "$a" ;;
        user)
            if id "$a" >/dev/null 2>&1; then
                userdel -r "$a" 2>/dev/null || userdel "$a" || say "warning: could not remove user $a"
            fi
            ;;
        rm) rm -f "$a" ;;
        restore)
            if [ -e "$BACKUP$a" ]; then
                cp -a "$BACKUP$a" "$a" && rm -f "$BACKUP$a"
            else
                say "warning: no backup of $a in $BACKUP"
            fi
            ;;
        rmdir) rmdir "$a" 2>/dev/null || true ;;
        *) say "warning: unknown record '$kind $a'" ;;
        esac
    done
    rm -rf "$STATE"
    rmdir -p "$BACKUP"/etc/slurm/plugstack.conf.d "$BACKUP"/etc/slurm "$BACKUP"/etc/accelrun 2>/dev/null || true
    say "down"
}

# ------------------------------------------------------------------ up
cmd_up() {
    local need c
    for c in ip nsenter unshare setsid setpriv munged munge slurmctld slurmd sinfo srun; do
        command -v "$c" >/dev/null 2>&1 || need="${need:-} $c"
    done
    [ -z "${need:-}" ] || die "missing commands:$need"

    if [ -n "$TOPOLOGY" ] && [ ! -f "$TOPOLOGY" ]; then die "ACCELRUN_LAB_TOPOLOGY=$TOPOLOGY: no such file"; fi
    if healthy && ! wanted_layout | cmp -s - "$STATE/layout"; then
        say "node count or topology changed: restarting the lab"
    elif healthy; then
        if ! plugin_wanted || cmp -s "$SPANK" "$STATE/plugin.so"; then
            install_plugin "${ACCELRUN_PLUGSTACK_ARGS:-}"
            say "already up"
            return 0
        fi
        say "plugin changed: restarting the lab (slurmd reads plugins only at start)"
    fi
    [ -f "$UNDO" ] && cmd_down

    mkdir -p "$STATE/log"
    touch "$UNDO"
    local net
    net=$(choose_subnet)
    echo "$net" >"$STATE/subnet"
    say "subnet $net.0/24"

    # 1. munge: reuse a running munged, else start one and record it
    if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        [ -s /etc/munge/munge.key ] || {
            claim_file /etc/munge/munge.key
            mungekey -c -k /etc/munge/munge.key
            chown munge:munge /etc/munge/munge.key
        }
        claim_dir /run/munge
        chown munge:munge /run/munge
        setsid setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged -F \
            </dev/null >"$STATE/log/munged.out" 2>&1 &
        record_pid munged $!
        local i
        for i in $(seq 50); do
            munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break
            sleep 0.1
        done
        munge -n | unmunge >/dev/null || die "munged does not answer; see $STATE/log/munged.out"
    fi

    # 2. job user, fake GPUs
    if ! id "$LAB_USER" >/dev/null 2>&1; then
        useradd -m -s /bin/bash "$LAB_USER"
        record "user $LAB_USER"
    fi
    for i in 0 1 2 3; do
        if [ ! -e /dev/nvidia$i ]; then
            mknod -m 666 /dev/nvidia$i c 195 $i
            record "dev /dev/nvidia$i"
        fi
    done

    # 3. nodes = network namespaces on a bridge; slurmctld stays in the root namespace
    ip link show "$BR" >/dev/null 2>&1 && die "interface $BR exists but is not recorded in $UNDO"
    ip link add "$BR" type bridge
    record "link $BR"
    ip addr add "$net.1/24" dev "$BR"
    ip link set "$BR" up
    local n k
    for n in $NODES; do
        k=${n#n}
        [ -e "/run/netns/acclab-$n" ] && die "network namespace acclab-$n exists but is not recorded"
        ip netns add "acclab-$n"
        record "netns acclab-$n"
        ip link add "acclab-v$k" type veth peer name eth0 netns "acclab-$n"
        ip link set "acclab-v$k" master "$BR"
        ip link set "acclab-v$k" up
        ip -n "acclab-$n" addr add "$net.1$k/24" dev eth0
        ip -n "acclab-$n" link set eth0 up
        ip -n "acclab-$n" link set lo up
        ip -n "acclab-$n" route add default via "$net.1"
    done

    # 4. names: n1..nN must resolve to the namespaces everywhere (shared /etc/hosts)
    for n in $NODES; do
        local have
        have=$(getent hosts "$n" | awk '{print $1}' | head -n1 || true)
        [ -z "$have" ] || die "host name $n already resolves to $have; the lab needs ${NODES// //}"
    done
    record hosts
    for n in $NODES; do printf '%s.1%s %s %s\n' "$net" "${n#n}" "$n" "$MARK"; done >>/etc/hosts

    # 5. configuration (pre-existing files are backed up and restored by down)
    local ctl
    ctl=$(hostname)
    for d in ctld log spool; do mkdir -p "$STATE/$d"; done
    chown slurm:slurm "$STATE/ctld" "$STATE/log"
    for n in $NODES; do mkdir -p "$STATE/spool/$n"; done
    claim_dir "$ETC"
    claim_dir "$ETC/plugstack.conf.d"
    local nodelines=""
    for n in $NODES; do
        nodelines="${nodelines}NodeName=$n NodeAddr=$net.1${n#n} Sockets=2 CoresPerSocket=1 ThreadsPerCore=1 RealMemory=1000 Gres=gpu:4 State=UNKNOWN
"
    done
    put_file "$ETC/slurm.conf" <<CONF
# written by accelrun tests/slurm/lab.sh; removed by 'lab.sh down'
ClusterName=acclab
SlurmctldHost=${ctl}($net.1)
SlurmUser=slurm
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool/%n
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd-%n.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd-%n.log
SlurmdParameters=config_overrides
GresTypes=gpu
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
TopologyPlugin=topology/tree
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MinJobAge=30
KillWait=5
${nodelines}PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
    put_file "$ETC/gres.conf" <<CONF
# written by accelrun tests/slurm/lab.sh: fake GPUs, 0-1 near core 0, 2-3 near core 1
NodeName=n[1-$NODE_COUNT] Name=gpu File=/dev/nvidia[0-1] Cores=0
NodeName=n[1-$NODE_COUNT] Name=gpu File=/dev/nvidia[2-3] Cores=1
CONF
    if [ -n "$TOPOLOGY" ]; then
        put_file "$ETC/topology.conf" <"$TOPOLOGY"
    else
        put_file "$ETC/topology.conf" <<'CONF'
# written by accelrun tests/slurm/lab.sh: two leaf switches under one spine
SwitchName=leaf1 Nodes=n1
SwitchName=leaf2 Nodes=n2
SwitchName=spine Switches=leaf[1-2]
CONF
    fi
    wanted_layout >"$STATE/layout"
    if [ ! -e "$ETC/plugstack.conf" ]; then
        echo "include $ETC/plugstack.conf.d/*.conf" | put_file "$ETC/plugstack.conf"
    elif ! grep -q "plugstack.conf.d" "$ETC/plugstack.conf"; then
        die "$ETC/plugstack.conf does not include plugstack.conf.d/*.conf"
    fi
    install_plugin "${ACCELRUN_PLUGSTACK_ARGS:-}"

    # 6. daemons
    setsid slurmctld -D -c </dev/null >"$STATE/log/slurmctld.out" 2>&1 &
    record_pid slurmctld $!
    for n in $NODES; do
        setsid nsenter --net="/run/netns/acclab-$n" unshare --uts \
            sh -c "hostname $n && exec slurmd -D -N $n" </dev/null >"$STATE/log/slurmd-$n.out" 2>&1 &
        record_pid "slurmd-$n" $!
    done
    wait_idle || die "the lab did not come up; 'lab.sh down' cleans up"
    touch "$STATE/up"
    say "up: $(nodes_state)"
}

cmd_plugstack() {
    [ -f "$UNDO" ] || die "the lab is not up"
    install_plugin "$*"
}

cmd_site() {
    [ -f "$UNDO" ] || die "the lab is not up"
    [ -f "${1:-}" ] || die "usage: lab.sh site FILE"
    claim_dir "$(dirname "$SITE_FILE")"
    put_file "$SITE_FILE" <"$1"
}

[ "$(id -u)" = 0 ] || die "must run as root"
case ${1:-} in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
plugstack)
    shift
    cmd_plugstack "$@"
    ;;
site) cmd_site "${2:-}" ;;
*)
    echo "usage: lab.sh up|down|status|plugstack [ARG...]|site FILE" >&2
    exit 2
    ;;
esac
