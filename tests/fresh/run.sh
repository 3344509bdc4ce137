#!/bin/bash
# tests/fresh/run.sh: proves the README's set-up in a clean Debian 12 root.
#
# Builds (once, then from a cached tarball) a minimal Debian 12 root with
# `debootstrap --variant=minbase bookworm ROOT MIRROR`, MIRROR being the Debian
# archive this machine's apt uses; puts a clean `git clone` of this checkout's
# committed HEAD in ROOT/src/accelrun and a copy of the `../shared` beside the
# checkout in ROOT/src/shared; mounts /proc, /sys, a private /dev, /run; and
# runs in it, as root, exactly the README's commands:
#
#   apt-get update && apt-get install -y make
#   make demo        (--demo-runs N times in a row)
#   make test
#   make bench       (with --bench; then checks bench/topo_sim.sh's picture)
#
# each with its wall time, its exit code and its output in a log under the
# results directory.  The whole chroot run holds `flock /tmp/accelrun-lab.lock`
# on the host: the Slurm lab of `make test` (and `make bench`) makes a bridge
# and veth pairs in the host's network namespace, which the chroot shares.
#
# usage: tests/fresh/run.sh [--demo-runs N] [--bench] [--keep] [--out DIR]
#                           [--cache DIR] [--refresh] [--mirror URL]
#                           [--step-timeout SECONDS] [--preinstall "PKG..."]
#                           [--retry-slurm-with "PKG..."] [--slurm-anyway] [--summary-only]
#   --demo-runs N     run `make demo` N times in a row (default 1; the issue wants 10)
#   --bench           also run `make bench` and check its topology picture
#   --keep            leave the root (unmounted) for inspection instead of removing it
#   --out DIR         results: logs, summary.txt, pictures (default build-fresh/ in the checkout)
#   --cache DIR       where the debootstrap tarball is kept (default /var/cache/accelrun-fresh)
#   --refresh         rebuild the cached tarball
#   --mirror URL      the Debian archive (default: the one /etc/apt sources name)
#   --step-timeout S  limit of each command (default 5400)
#   --preinstall PKGS a WORKAROUND, not the README: apt-get install these Debian
#                     packages in the root after make (to see what fails after
#                     a known missing package); the summary says so
#   --retry-slurm-with PKGS  a WORKAROUND too: when make test's Slurm tier said
#                     "slurm: SKIP:", install these packages in the root and run
#                     `make test-slurm` again (the README's run still counts as failed)
#   --slurm-anyway    when make test stopped (a failure) before its Slurm tier,
#                     run `make test-slurm` on its own after it (step test-slurm;
#                     make test still counts as failed)
#   --summary-only    print the summary and verdict of the last run in --out DIR again
#
# Exit status: 0 when every command exited 0, no tier reported a failure and
# no SKIP other than a GPU/device one appeared; 1 otherwise; 2 usage.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(git -C "$HERE" rev-parse --show-toplevel)
SHARED_SRC=$(realpath -m "$REPO/../shared")
# shellcheck source=tests/slurm/lock.sh
. "$REPO/tests/slurm/lock.sh"
LOCK=$LAB_LOCK
SUITE=bookworm
BR=acclab0 # tests/slurm/lab.sh's bridge

demo_runs=1 bench=0 keep=0 refresh=0 mirror="" step_timeout=5400 preinstall="" retry_slurm="" summary_only=0 slurm_anyway=0
out=$REPO/build-fresh
cache=/var/cache/accelrun-fresh

say() { echo "fresh: $*"; }
die() {
    echo "fresh: error: $*" >&2
    exit 1
}
usage() {
    sed -n '/^# usage:/,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case $1 in
    --demo-runs)
        [ $# -ge 2 ] || usage
        demo_runs=$2
        shift 2
        ;;
    --bench) bench=1 && shift ;;
    --keep) keep=1 && shift ;;
    --refresh) refresh=1 && shift ;;
    --summary-only) summary_only=1 && shift ;;
    --slurm-anyway) slurm_anyway=1 && shift ;;
    --out)
        [ $# -ge 2 ] || usage
        out=$2
        shift 2
        ;;
    --cache)
        [ $# -ge 2 ] || usage
        cache=$2
        shift 2
        ;;
    --mirror)
        [ $# -ge 2 ] || usage
        mirror=$2
        shift 2
        ;;
    --preinstall)
        [ $# -ge 2 ] || usage
        preinstall=$2
        shift 2
        ;;
    --retry-slurm-with)
        [ $# -ge 2 ] || usage
        retry_slurm=$2
        shift 2
        ;;
    --step-timeout)
        [ $# -ge 2 ] || usage
        step_timeout=$2
        shift 2
        ;;
    -h | --help) usage ;;
    *)
        echo "fresh: unknown argument '$1'" >&2
        usage
        ;;
    esac
done
case $demo_runs in '' | *[!0-9]*) die "--demo-runs wants a number, got '$demo_runs'" ;; esac
case $step_timeout in '' | *[!0-9]*) die "--step-timeout wants seconds, got '$step_timeout'" ;; esac

# ------------------------------------------------------------------ summary
# summarize: the summary and the verdict from $out (steps.tsv: name, exit
# code, seconds; meta: what ran; the logs; bench/), also for --summary-only
SKIP_RE='(^|[^A-Za-z_])SKIP([^A-Za-z_]|$)'
DEVICE_RE='gpu|cuda|nvidia|nvml|nccl|device'
summarize() {
    local name rc secs log lines demo_ok=0 demo_total=0 verdict=0 bad_skips png
    local m_mirror="" m_head="" m_preinstall="" m_retry="" m_bench=0
    [ -f "$out/steps.tsv" ] || die "no $out/steps.tsv: nothing ran with --out $out"
    # shellcheck disable=SC1091
    [ -f "$out/meta" ] && . "$out/meta"
    png=$out/bench/topo-crossings.png
    {
        echo "== fresh Debian 12 root: $SUITE minbase from ${m_mirror:-?}; accelrun ${m_head:-?}"
        if [ -n "$m_preinstall" ]; then
            echo "== WORKAROUND: '$m_preinstall' was installed in the root beyond the README's commands"
        fi
        if [ -n "$m_retry" ] && [ -f "$out/workaround-test-slurm.log" ]; then
            echo "== WORKAROUND: make test's Slurm tier skipped; '$m_retry' was installed in the root and make test-slurm run again (workaround-test-slurm)"
        fi
        echo "== commands (wall time, exit code)"
        while IFS=$'\t' read -r name rc secs; do
            printf '  %-22s %8s s  exit %s\n' "$name" "$secs" "$rc"
            case $name in demo-*)
                demo_total=$((demo_total + 1))
                [ "$rc" = 0 ] && demo_ok=$((demo_ok + 1))
                ;;
            esac
        done <"$out/steps.tsv"
        echo "  make demo: $demo_ok of $demo_total runs in a row passed (demo-1 also installed the build packages)"
        for log in "$out/test.log" "$out/test-slurm.log" "$out/workaround-test-slurm.log" "$out/bench.log"; do
            [ -f "$log" ] || continue
            echo "== tiers of $(basename "$log" .log) (passed / failed / skipped)"
            lines=$(grep -aE '^[a-z0-9_-]+: [0-9]+ passed, [0-9]+ failed|^[a-z0-9_.-]+: (picture: )?SKIP' "$log" || true)
            printf '%s\n' "${lines:-(no tier totals found)}" | sed 's/^/  /'
            if [ "$log" = "$out/test.log" ]; then
                lines=""
                for name in unit cli ckpt-interop examples cuda-emu install slurm; do
                    grep -aqE "^$name: ([0-9]+ passed|SKIP)" "$log" || lines="$lines $name"
                done
                [ -z "$lines" ] || echo "  NOT RUN (make test stopped before them):$lines"
            fi
            echo "== SKIP lines of $(basename "$log" .log), verbatim"
            lines=$(grep -aE "$SKIP_RE" "$log" || true)
            printf '%s\n' "${lines:-(none)}" | sed 's/^/  /'
        done
        if [ "$m_bench" = 1 ]; then
            if [ -s "$png" ] && head -c 8 "$png" | od -An -c | grep -q 'P   N   G'; then
                echo "== bench picture: $png ($(du -h "$png" | cut -f1))"
            else
                echo "== bench picture: MISSING: bench/topo_sim.sh did not draw build/bench/topo-crossings.png (see $out/bench.log)"
            fi
        fi

        # the verdict
        while IFS=$'\t' read -r name rc secs; do
            if [ "$rc" != 0 ]; then
                echo "FAIL: $name exited $rc (log: $out/$name.log)"
                verdict=1
            fi
        done <"$out/steps.tsv"
        for log in "$out/test.log" "$out/bench.log"; do
            [ -f "$log" ] || continue
            bad_skips=$(grep -aE "$SKIP_RE" "$log" | grep -viE "$DEVICE_RE" || true)
            if [ -n "$bad_skips" ]; then
                echo "FAIL: SKIPs in $(basename "$log") that are not GPU/device ones:"
                printf '%s\n' "$bad_skips" | sed 's/^/  /'
                verdict=1
            fi
            if grep -aE '^[a-z0-9_-]+: [0-9]+ passed, [1-9][0-9]* failed' "$log" >/dev/null; then
                echo "FAIL: a tier of $(basename "$log") reported failures (its 'not ok' lines in $log)"
                verdict=1
            fi
        done
        if [ "$m_bench" = 1 ] && ! { [ -s "$png" ] && head -c 8 "$png" | od -An -c | grep -q 'P   N   G'; }; then
            echo "FAIL: bench/topo_sim.sh's picture build/bench/topo-crossings.png is missing or not a PNG"
            verdict=1
        fi
        if [ -f "$out/test-slurm.log" ]; then
            echo "NOTE: make test stopped before its Slurm tier; the tier ran on its own as make test-slurm (test-slurm.log)"
        fi
        if [ -f "$out/test.log" ] && ! grep -aq '^slurm: [0-9]* passed' "$out/test.log"; then
            echo "FAIL: make test's Slurm tier did not run in the fresh root (no 'slurm: N passed' line)"
            verdict=1
        fi
        if [ "$verdict" = 0 ]; then
            echo "PASS: the README's commands work in a fresh Debian 12 root"
        fi
        echo "$verdict" >"$out/verdict"
    } | tee "$out/summary.txt"
    return "$(cat "$out/verdict")"
}
if [ "$summary_only" = 1 ]; then
    out=$(realpath "$out")
    summarize
    exit
fi

# ------------------------------------------------------------------ preconditions
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mounts); run: sudo bash $0 $*"
for tool in debootstrap git chroot mount umount flock tar sha256sum timeout; do
    command -v "$tool" >/dev/null 2>&1 ||
        die "'$tool' is missing; install it with: sh scripts/deps.sh fresh (debootstrap git), or apt-get install -y debootstrap git util-linux coreutils tar"
done
[ -d "$SHARED_SRC" ] || die "the shared docs and corpus '$SHARED_SRC' (../shared beside $REPO) are missing"
mkdir -p "$out"
out=$(realpath "$out")

# ------------------------------------------------------------------ the mirror
# The Debian archive of this machine's apt: the first enabled "deb" source of
# suite $SUITE in sources.list (one-line form) or sources.list.d/*.list and
# *.sources (deb822).
find_mirror() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk -v s="$SUITE" '
            /^[ \t]*deb[ \t]/ {
                i = 2
                if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                if ($(i + 1) == s) { print $i; exit }
            }' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk -v s="$SUITE" '
            function flush() {
                if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " s " ") && enabled != "no" && uris != "") {
                    split(uris, u, " "); print u[1]; found = 1; exit
                }
                types = ""; suites = ""; uris = ""; enabled = ""
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            tolower($1) == "types:" { $1 = ""; types = substr($0, 2) }
            tolower($1) == "suites:" { $1 = ""; suites = substr($0, 2) }
            tolower($1) == "uris:" { $1 = ""; uris = substr($0, 2) }
            tolower($1) == "enabled:" { enabled = tolower($2) }
            END { if (!found) flush() }' "$f"
    done
}
if [ -z "$mirror" ]; then
    mirror=$(find_mirror | head -n 1)
    [ -n "$mirror" ] || die "no enabled 'deb' source of suite $SUITE in /etc/apt/sources.list or /etc/apt/sources.list.d/ (*.list, *.sources); give one with --mirror URL"
fi
say "mirror: $mirror (from this machine's apt sources)"

# ------------------------------------------------------------------ the cached root
key=$(printf '%s %s minbase %s\n' "$SUITE" "$mirror" "$(dpkg --print-architecture)" | sha256sum | cut -c1-12)
tarball=$cache/$SUITE-minbase-$key.tar
mkdir -p "$cache"
if [ "$refresh" = 1 ] || [ ! -s "$tarball" ]; then
    say "debootstrap --variant=minbase $SUITE into a new root (once; cached as $tarball)"
    tmp=$(mktemp -d "$cache/debootstrap.XXXXXX")
    t0=$SECONDS
    if ! debootstrap --variant=minbase "$SUITE" "$tmp/root" "$mirror" >"$out/debootstrap.log" 2>&1; then
        tail -n 20 "$out/debootstrap.log" >&2
        rm -rf --one-file-system "$tmp"
        die "debootstrap --variant=minbase $SUITE from $mirror failed (log: $out/debootstrap.log; tail above)"
    fi
    tar --numeric-owner -C "$tmp/root" -cf "$tmp/root.tar" .
    mv -f "$tmp/root.tar" "$tarball"
    rm -rf --one-file-system "$tmp"
    say "debootstrap took $((SECONDS - t0)) s; cached $tarball ($(du -h "$tarball" | cut -f1))"
else
    say "using the cached root $tarball (made $(date -u -r "$tarball" '+%F %T UTC'); --refresh rebuilds it)"
fi

# ------------------------------------------------------------------ state, cleanup
ROOT="" mounts=() lock_held=0
declare -a step_rcs=() step_secs=()

# shellcheck disable=SC2317  # called from the EXIT trap
procs_in_root() { # PIDs whose root directory is $ROOT
    local p r
    for p in /proc/[0-9]*; do
        r=$(readlink "$p/root" 2>/dev/null) || continue
        case $r in "$ROOT" | "$ROOT"/*) echo "${p#/proc/}" ;; esac
    done
}

# shellcheck disable=SC2317  # the EXIT trap
cleanup() {
    local rc=$? pids i m left
    set +e
    if [ -n "$ROOT" ] && [ -d "$ROOT" ]; then
        pids=$(procs_in_root)
        if [ -n "$pids" ]; then
            say "stopping processes left in the root: $(echo "$pids" | tr '\n' ' ')"
            # shellcheck disable=SC2086
            kill -TERM $pids 2>/dev/null
            sleep 2
            pids=$(procs_in_root)
            # shellcheck disable=SC2086
            [ -n "$pids" ] && kill -KILL $pids 2>/dev/null && sleep 1
        fi
        for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
            m=${mounts[i]}
            mountpoint -q "$m" || continue
            umount -R "$m" 2>/dev/null || umount -R -l "$m" ||
                echo "fresh: warning: cannot unmount $m; unmount it by hand: umount -R -l $m" >&2
        done
        # whatever the tests mounted themselves (netns files under /run, ...)
        left=$(awk -v r="$ROOT" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r)
        for m in $left; do umount -l "$m" 2>/dev/null; done
        left=$(awk -v r="$ROOT" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo)
        if [ -n "$left" ]; then
            echo "fresh: warning: still mounted, so $ROOT is kept: $left" >&2
        elif [ "$keep" = 1 ]; then
            say "root kept (--keep): $ROOT; remove it with: rm -rf --one-file-system $ROOT"
        else
            rm -rf --one-file-system "$ROOT"
        fi
    fi
    if [ "$lock_held" = 1 ] && ip link show "$BR" >/dev/null 2>&1; then
        echo "fresh: warning: the lab's bridge $BR is still in the host's network namespace after the run; removing it" >&2
        ip link del "$BR"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# ------------------------------------------------------------------ the lock
exec 9>"$LOCK"
if ! flock -n 9; then
    say "waiting for $LOCK (another Slurm lab run holds it)"
    flock 9
fi
lock_held=1
if ip link show "$BR" >/dev/null 2>&1; then
    die "the host already has the lab's bridge $BR although nobody holds $LOCK: a lab was left up; take it down with: bash tests/slurm/lab.sh down (or ip link del $BR)"
fi

# ------------------------------------------------------------------ a fresh root
ROOT=$(mktemp -d /var/tmp/accelrun-fresh.XXXXXX)
say "root: $ROOT"
tar --numeric-owner -C "$ROOT" -xpf "$tarball"

# the clean clone of the committed HEAD, and the shared docs beside it
head=$(git -C "$REPO" rev-parse HEAD)
git clone -q --no-hardlinks "$REPO" "$ROOT/src/accelrun"
git -C "$ROOT/src/accelrun" checkout -q "$head"
cp -a "$SHARED_SRC" "$ROOT/src/shared"
chmod -R u+w "$ROOT/src/shared"
dirty=$(git -C "$REPO" status --porcelain --untracked-files=no | wc -l)
say "source: clean clone of $head ($(git -C "$REPO" log -1 --format=%s "$head" | cut -c1-72)); the checkout has $dirty uncommitted changes, not used"
say "shared: $SHARED_SRC -> /src/shared"

# apt: the host's Debian sources (not others: only Debian and PyPI are
# reachable) and the apt.conf.d settings needed to reach them
rm -f "$ROOT/etc/apt/sources.list"
n=0
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # the archives it names: one-line "deb [opts] URI suite..." or deb822 "URIs:"
    uris=$(awk '
        /^[ \t]*deb(-src)?[ \t]/ { i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } print $i }
        tolower($1) == "uris:" { for (i = 2; i <= NF; i++) print $i }' "$f")
    [ -n "$uris" ] || continue
    if printf '%s\n' "$uris" | grep -qvE '/debian(-security)?/?$'; then
        say "apt: not copied: $f (names an archive other than Debian's)"
        continue
    fi
    mkdir -p "$ROOT$(dirname "$f")"
    cp "$f" "$ROOT$f"
    n=$((n + 1))
done
if [ "$n" = 0 ]; then
    echo "deb $mirror $SUITE main" >"$ROOT/etc/apt/sources.list"
fi
for f in /etc/apt/apt.conf /etc/apt/apt.conf.d/*; do
    [ -f "$f" ] || continue
    if grep -qiE 'proxy|Check-Valid-Until|Check-Date|Acquire::https?::|CaInfo|Verify-Peer' "$f"; then
        mkdir -p "$ROOT$(dirname "$f")"
        cp "$f" "$ROOT$f"
        say "apt: copied $f (settings to reach the mirror)"
    fi
done

# TLS: the host's own CAs (an egress proxy's), so pip reaches PyPI; a
# ca-certificates installed later regenerates the bundle with them
if [ -d /usr/local/share/ca-certificates ] && [ -n "$(ls -A /usr/local/share/ca-certificates)" ]; then
    mkdir -p "$ROOT/usr/local/share/ca-certificates"
    cp -a /usr/local/share/ca-certificates/. "$ROOT/usr/local/share/ca-certificates/"
    if [ -f /etc/ssl/certs/ca-certificates.crt ] && [ ! -e "$ROOT/etc/ssl/certs/ca-certificates.crt" ]; then
        mkdir -p "$ROOT/etc/ssl/certs"
        cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
    fi
    say "tls: copied the host's CAs of /usr/local/share/ca-certificates ($(cd /usr/local/share/ca-certificates && echo *))"
fi

# pip: its configuration files and environment
for f in /etc/pip.conf /etc/xdg/pip/pip.conf /root/.config/pip/pip.conf /root/.pip/pip.conf; do
    if [ -f "$f" ]; then
        mkdir -p "$ROOT$(dirname "$f")"
        cp "$f" "$ROOT$f"
        say "pip: copied $f"
    fi
done
envs=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root USER=root LOGNAME=root
    SHELL=/bin/bash TERM=dumb)
for v in PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_TRUSTED_HOST PIP_DEFAULT_TIMEOUT PIP_CERT PIP_FIND_LINKS \
    PIP_DISABLE_PIP_VERSION_CHECK SSL_CERT_FILE REQUESTS_CA_BUNDLE CURL_CA_BUNDLE \
    http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
    [ -n "${!v:-}" ] || continue
    case $v in
    PIP_CERT | PIP_FIND_LINKS | SSL_CERT_FILE | REQUESTS_CA_BUNDLE | CURL_CA_BUNDLE)
        # a path: only when the root has it
        if [ ! -e "$ROOT${!v}" ]; then
            say "env: $v=${!v} not passed (no such path in the root)"
            continue
        fi
        ;;
    esac
    envs+=("$v=${!v}")
done
say "env of the commands: ${envs[*]}"

cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
cp /etc/hosts "$ROOT/etc/hosts"
chmod 1777 "$ROOT/tmp"

# ------------------------------------------------------------------ mounts
mnt() { # mnt TARGET MOUNT-ARGS...
    local target=$1
    shift
    mkdir -p "$target"
    mount "$@" "$target" || die "mount $* $target failed"
    mounts+=("$target")
}
# the root a mount point of its own: `ip netns exec` and `unshare --mount` make
# "/" a slave or private mount, which fails (EINVAL) when "/" is not a mount
mnt "$ROOT" --bind "$ROOT"
mount --make-private "$ROOT"
mnt "$ROOT/proc" -t proc proc
mnt "$ROOT/sys" --rbind /sys # with /sys/fs/cgroup
mount --make-rslave "$ROOT/sys"
# a /dev of its own: the lab's fake GPUs (mknod /dev/nvidiaN) stay in the root
mnt "$ROOT/dev" -t tmpfs -o mode=755,nosuid,size=64m dev
for d in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
    IFS=: read -r name major minor <<<"$d"
    mknod -m 666 "$ROOT/dev/$name" c "$major" "$minor"
done
ln -s /proc/self/fd "$ROOT/dev/fd"
ln -s /proc/self/fd/0 "$ROOT/dev/stdin"
ln -s /proc/self/fd/1 "$ROOT/dev/stdout"
ln -s /proc/self/fd/2 "$ROOT/dev/stderr"
ln -s pts/ptmx "$ROOT/dev/ptmx"
mnt "$ROOT/dev/pts" -t devpts -o newinstance,ptmxmode=0666,mode=620,gid=5 devpts
mnt "$ROOT/dev/shm" -t tmpfs -o mode=1777,nosuid,nodev shm
mnt "$ROOT/run" -t tmpfs -o mode=755,nosuid,size=512m run
mkdir -p "$ROOT/run/lock" "$ROOT/run/netns"
chmod 1777 "$ROOT/run/lock"

# ------------------------------------------------------------------ the commands
# step NAME COMMAND: runs COMMAND in /src/accelrun in the root, tees its
# output to $out/NAME.log, records its wall time and exit code
step() {
    local name=$1 cmd=$2 t0 t1 rc
    say "---- $name: $cmd"
    t0=$(date +%s.%N)
    set +e
    timeout -k 30 "$step_timeout" chroot "$ROOT" /usr/bin/env -i "${envs[@]}" \
        /bin/bash -c "cd /src/accelrun && $cmd" </dev/null 9>&- 2>&1 | tee "$out/$name.log"
    rc=${PIPESTATUS[0]}
    set -e
    t1=$(date +%s.%N)
    step_rcs+=("$rc")
    step_secs+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')")
    printf '%s\t%s\t%s\n' "$name" "$rc" "${step_secs[-1]}" >>"$out/steps.tsv"
    [ "$rc" = 124 ] && echo "fresh: $name: timed out after $step_timeout s (--step-timeout)" | tee -a "$out/$name.log"
    say "---- $name: exit $rc, ${step_secs[-1]} s (log: $out/$name.log)"
    return 0
}

rm -f "$out"/*.log "$out/summary.txt" "$out/steps.tsv" "$out/verdict"
rm -rf "$out/bench"
{
    printf 'm_mirror=%q\nm_head=%q\nm_preinstall=%q\n' "$mirror" "$head" "$preinstall"
    printf 'm_retry=%q\nm_bench=%q\n' "$retry_slurm" "$bench"
} >"$out/meta"
step install-make "apt-get update && apt-get install -y make"
if [ "${step_rcs[0]}" = 0 ]; then
    if [ -n "$preinstall" ]; then
        say "WORKAROUND (not in the README): installing $preinstall in the root before make demo"
        step workaround "apt-get install -y --no-install-recommends $preinstall"
    fi
    for ((i = 1; i <= demo_runs; i++)); do
        step "demo-$i" "make demo"
    done
    step test "make test"
    if [ "$slurm_anyway" = 1 ] && ! grep -aqE '^slurm: ([0-9]+ passed|SKIP)' "$out/test.log"; then
        say "make test stopped before its Slurm tier; running make test-slurm on its own (--slurm-anyway)"
        step test-slurm "make test-slurm"
    fi
    if [ -n "$retry_slurm" ] && grep -aq '^slurm: SKIP:' "$out/test.log"; then
        say "WORKAROUND (not in the README): the Slurm tier skipped; installing $retry_slurm in the root and running make test-slurm again"
        step workaround-slurm-deps "apt-get install -y --no-install-recommends $retry_slurm"
        step workaround-test-slurm "make test-slurm"
    fi
    if [ "$bench" = 1 ]; then step bench "make bench"; fi
fi

# the bench's pictures (bench/topo_sim.sh draws build/bench/topo-crossings.png)
if [ "$bench" = 1 ]; then
    mkdir -p "$out/bench"
    find "$ROOT/src/accelrun/build/bench" -maxdepth 1 \( -name '*.png' -o -name '*.svg' -o -name '*.dat' \) \
        -exec cp {} "$out/bench/" \; 2>/dev/null || true
fi

summarize
