#!/bin/bash
# tests/slurm/deb.sh [DEB_DIR]: the packaged plugin in the Slurm lab, loaded
# from where the package puts it.  dpkg -i's DEB_DIR's (default
# build-deb/deb, from `make BUILD=build-deb deb`) four packages on this host
# (slurm-accelrun-plugin, which links its library objects in, and accelrun,
# libaccelrun0 and libaccelrun-dev, checked with `accelrun --version` and a
# program built with `pkg-config --cflags --libs accelrun`), enables the
# plugin the way an administrator would, by uncommenting a line
# of the package's conffile /etc/slurm/plugstack.conf.d/accelrun.conf (now
# "required /usr/lib/<multiarch>/slurm-wlm/accelrun.so"), brings up the
# two-node lab (tests/slurm/lab.sh), and runs one srun --accel-config case
# whose environment must say the config's mixed precision and world size.
# Then lab.sh down and dpkg -P (purge: the edited conffile goes too), also
# when a case fails or the script is interrupted, so the host is as before.
#
# The lab runs with ACCELRUN_SPANK=none: it then installs no plugin and
# writes no snippet of its own, so what srun and slurmstepd load is exactly
# the package's file, through the package's conffile (the lab's
# plugstack.conf includes plugstack.conf.d/*.conf), as on a site.  (lab.sh
# also loads an installed plugin in place when ACCELRUN_SPANK names it.)
#
# The lab uses fixed names on this host (bridge, namespaces, user alice), so
# the script runs under flock /tmp/accelrun-lab.lock (re-executing itself;
# ACCELRUN_LAB_LOCKED=1: the caller already holds it).  Skips (exit 0,
# "deb-lab: SKIP: reason") where run.sh would, or when the package is already
# installed (this script must not remove what it did not install).
# Prints TAP-like lines and "deb-lab: N passed, N failed, N skipped".
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ARGS=("$@")
# shellcheck disable=SC2034  # common.sh reads it
TIER="deb-lab"
DEB_DIR=${1:-$HERE/../../build-deb/deb}
MULTIARCH=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || cc -print-multiarch)
INSTALLED=/usr/lib/$MULTIARCH/slurm-wlm/accelrun.so
CONFFILE=/etc/slurm/plugstack.conf.d/accelrun.conf
PKG=slurm-accelrun-plugin
# common.sh's arguments: the plugin under test is the installed one
set -- "$INSTALLED"
# shellcheck source=tests/slurm/common.sh
. "$HERE/common.sh"
lab_lock "$0" "${ARGS[@]}"
export ACCELRUN_SPANK=none ACCELRUN_PLUGSTACK_ARGS="" ACCELRUN_LAB_NODES=2
unset ACCELRUN_LAB_TOPOLOGY

preflight
# shellcheck disable=SC2154  # preflight sets it
rm -f "$apt_log"

# the plugin, and beside it the CLI and the library a site installs with it
PKGS="$PKG accelrun libaccelrun0 libaccelrun-dev"
debs=()
for p in $PKGS; do
    deb=""
    for f in "$DEB_DIR/${p}"_*.deb; do [ -f "$f" ] && deb=$f; done
    if [ -z "$deb" ]; then
        bad "${p}_*.deb in $DEB_DIR (build it with: make BUILD=build-deb deb)"
        finish
    fi
    debs+=("$deb")
    installed "$p" && skip_all "$p is installed already (this script removes only what it installed)"
done
echo "# packages ${debs[*]}"

W="" we_installed=0
teardown() {
    [ -n "$W" ] && rm -rf "$W"
    W=""
    "$LAB" down >/dev/null 2>&1 || echo "# warning: lab down failed"
    if [ "$we_installed" = 1 ]; then
        # shellcheck disable=SC2086  # the package names are words
        dpkg -P $PKGS >/dev/null 2>&1 || echo "# warning: dpkg -P $PKGS failed"
        we_installed=0
    fi
}
trap teardown EXIT
trap 'exit 130' INT TERM

# a lab left up (ACCELRUN_LAB_KEEP=1) may have its own plugin in PluginDir
"$LAB" down >/dev/null 2>&1
for f in "$INSTALLED" /usr/bin/accelrun; do
    [ -e "$f" ] && skip_all "$f exists and belongs to no package (not touching it)"
done

echo "# run: dpkg -i ${debs[*]}"
out=$(dpkg -i "${debs[@]}" 2>&1)
rc=$?
we_installed=1
if ! ran "dpkg -i of the four packages"; then
    finish
fi
out=$(accelrun --version 2>&1)
if [ "$(command -v accelrun)" = /usr/bin/accelrun ] && printf '%s' "$out" | grep -q "^accelrun $(dpkg-query -W -f='${Version}' accelrun) "; then
    ok "the installed /usr/bin/accelrun --version: $out"
else
    bad "the installed accelrun --version names the package's version" "$(command -v accelrun): $out"
fi
tmp_use=$(mktemp -d)
# shellcheck disable=SC2046  # pkg-config prints several words on purpose
if out=$(pkg-config --cflags --libs accelrun 2>&1) &&
    cc -o "$tmp_use/use" "$ROOT/tests/install/use.c" $(pkg-config --cflags --libs accelrun) 2>&1 &&
    [ "$("$tmp_use/use" "${ACCEL_SHARED:-$ROOT/../shared}/corpus/accelerate-configs/templates__multi_gpu.yaml" 2>&1)" = 1 ]; then
    ok "pkg-config --cflags --libs accelrun ('$out'): tests/install/use.c builds against the installed packages and prints RANK 1"
else
    bad "a program built with the installed accelrun.pc" "$out"
fi
rm -rf "$tmp_use"
if [ -f "$INSTALLED" ] && dpkg -S "$INSTALLED" 2>/dev/null | grep -q "^$PKG:"; then
    ok "$INSTALLED is installed, owned by $PKG"
else
    bad "$INSTALLED owned by $PKG" "$(dpkg -L "$PKG" 2>&1)"
    finish
fi
if grep -q "^#required accelrun.so$" "$CONFFILE" &&
    sed -i "s|^#required accelrun.so\$|required $INSTALLED|" "$CONFFILE"; then
    ok "enabled in the conffile: $(grep -E '^[^#]' "$CONFFILE")"
else
    bad "$CONFFILE has the line '#required accelrun.so' to uncomment" "$(cat "$CONFFILE" 2>&1)"
    finish
fi

lab_up "lab up (ACCELRUN_SPANK=none: the package's plugin only)" \
    "lab up: slurmd n1 and n2; plugstack: the package's conffile only"
lab_workdir acclab-deb
mkdir -p "$W/o"
cat >"$W/cfg.yaml" <<'Y'
# 2 nodes x 2 processes, fp16
compute_environment: LOCAL_MACHINE
distributed_type: MULTI_GPU
mixed_precision: fp16
num_machines: 2
num_processes: 4
Y
chown -R "$LAB_USER:" "$W"

A "$W" 30 srun --help
if printf '%s\n' "$out" | grep -q -- '--accel-config'; then
    ok "srun --help lists --accel-config (srun loaded $INSTALLED)"
else
    bad "srun --help should list --accel-config" "$out"
fi

echo "# run: srun -N2 -n4 --accel-config=cfg.yaml /usr/bin/python3 dumpenv.py (as $LAB_USER)"
A "$W" 90 srun -N2 -n4 --accel-config=cfg.yaml /usr/bin/python3 "$W/dumpenv.py" "$W/o"
if ran "srun -N2 -n4 --accel-config=cfg.yaml with the packaged plugin"; then
    check "every task: ACCELERATE_MIXED_PRECISION=fp16, WORLD_SIZE=4, MASTER_ADDR=n1" \
        vars "$W/o" --tasks 4 --eq ACCELERATE_MIXED_PRECISION=fp16 --eq WORLD_SIZE=4 \
        --eq MASTER_ADDR=n1
fi

teardown
if installed "$PKG" || [ -e "$INSTALLED" ] || [ -e "$CONFFILE" ]; then
    bad "after dpkg -P: $PKG gone, no $INSTALLED, no $CONFFILE"
else
    ok "lab down, dpkg -P $PKG: no $INSTALLED, no $CONFFILE left"
fi
finish
