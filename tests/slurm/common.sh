# tests/slurm/common.sh: sourced by run.sh and order.sh with their own
# arguments ([PLUGIN [CLI]]) after setting HERE (their folder) and TIER (the
# closing line's prefix); before A, set HOME_A.

ROOT=$(cd "$HERE/../.." && pwd)
abspath() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac }
PLUGIN=$(abspath "${1:-$ROOT/build/spank/accelrun.so}")
CLI=$(abspath "${2:-$ROOT/build/bin/accelrun}")
COMM_CHECK=$(abspath "${3:-$(dirname "$CLI")/../tests/comm_check}")
LAB=$HERE/lab.sh
CHECK="/usr/bin/python3 $HERE/check.py"
LAB_USER=alice

# shellcheck disable=SC2034  # tap.sh reads them
TAP_NAME=$TIER TAP_TAIL=40
# shellcheck source=tests/lib/tap.sh
. "$ROOT/tests/lib/tap.sh"
skip_all() {
    echo "$TIER: SKIP: $1"
    exit 0
}

# shellcheck source=tests/slurm/lock.sh
. "$HERE/lock.sh" # lab_lock

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed'; }
apt_updated=0
apt_install() { # PKG... ; 0 when installed, else the reason in $apt_log
    local need="" p
    for p in "$@"; do installed "$p" || need="$need $p"; done
    [ -z "$need" ] && return 0
    command -v apt-get >/dev/null 2>&1 || {
        echo "missing$need and no apt-get" >"$apt_log"
        return 1
    }
    if [ $apt_updated = 0 ]; then
        apt-get -o DPkg::Lock::Timeout=600 update -q >"$apt_log" 2>&1 || return 1
        apt_updated=1
    fi
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q \
        --no-install-recommends $need >"$apt_log" 2>&1
}

# preflight: skip the whole tier (skip_all) when it cannot run here: not root,
# no network namespaces, or the Slurm packages cannot be installed.  Leaves
# $apt_log (a temporary file) for further apt_install calls; the caller removes it.
preflight() {
    local c
    [ "$(id -u)" = 0 ] || skip_all "not root (the lab creates namespaces, users and daemons)"
    apt_log=$(mktemp)
    command -v dpkg-query >/dev/null 2>&1 || {
        rm -f "$apt_log"
        skip_all "not a Debian system (no dpkg-query)"
    }
    # First what the lab runs (a minimal Debian root has no `ip`: iproute2),
    # then the checks of what those packages cannot give.
    apt_install slurmd slurmctld slurm-client munge iproute2 util-linux python3 || {
        c=$(tail -n 1 "$apt_log")
        rm -f "$apt_log"
        skip_all "cannot install the Slurm packages: $c"
    }
    for c in ip unshare nsenter setsid setpriv runuser; do
        command -v "$c" >/dev/null 2>&1 || skip_all "$c not available"
    done
    ip netns list >/dev/null 2>&1 || skip_all "ip netns unavailable"
    unshare --net --uts true 2>/dev/null || skip_all "unshare cannot create network/UTS namespaces here"
}

# lab_up FAILED-NAME OK-NAME: brings the lab up; a failure ends the tier with
# the lab's output, success is an ok line with the time it took
lab_up() {
    local t0=$SECONDS
    if ! out=$("$LAB" up 2>&1); then
        bad "$1" "$out"
        finish
    fi
    ok "$2 ($((SECONDS - t0)) s)"
}

# lab_workdir DIR [PREFIX]: $W, an empty folder DIR in the lab user's home
# ($HOME_A) with dumpenv.py in it; PREFIX starts the failure's name
lab_workdir() {
    HOME_A=$(getent passwd "$LAB_USER" | cut -d: -f6)
    if [ ! -d "$HOME_A" ] || [ "$HOME_A" = / ]; then
        bad "${2:-}$LAB_USER has a home directory (got '$HOME_A')"
        finish
    fi
    W=$HOME_A/$1
    rm -rf "$W"
    mkdir -p "$W"
    cp "$HERE/dumpenv.py" "$W/"
}

# A: run CMD as alice in DIR with a clean environment and a time limit;
# output (stdout + stderr) in $out, exit status in $rc
A() {
    local dir=$1 t=$2
    shift 2
    out=$(cd "$dir" && runuser -u "$LAB_USER" -- env -i PATH=/usr/bin:/bin HOME="$HOME_A" \
        USER="$LAB_USER" LOGNAME="$LAB_USER" LANG=C.UTF-8 timeout -k 5 "$t" "$@" 2>&1)
    rc=$?
}

# check NAME CHECK-ARGS...: check.py's verdict as one TAP line
check() {
    local name=$1 res
    shift
    res=$($CHECK "$@" 2>&1)
    if [ $? -eq 0 ]; then
        ok "$name"
        [ -n "$res" ] && printf '%s\n' "$res"
    else
        bad "$name" "$res"
    fi
    return 0
}

# ran NAME: srun/sbatch/salloc exited 0 (else a failure with its output)
ran() {
    if [ "$rc" -eq 0 ]; then
        ok "$1"
        return 0
    fi
    bad "$1 (exit $rc)" "$out"
    return 1
}

# require_binaries: names the plugin and the CLI under test; a missing one is
# a failure of the tier, not a skip (make builds both before the tier runs)
require_binaries() {
    echo "# plugin $PLUGIN"
    echo "# cli    $CLI"
    if [ ! -f "$PLUGIN" ]; then
        bad "plugin $PLUGIN exists (build it with 'make spank')"
        finish
    fi
    if [ ! -x "$CLI" ]; then
        bad "accelrun $CLI exists (build it with 'make')"
        finish
    fi
}
