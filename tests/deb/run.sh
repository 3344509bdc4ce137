#!/bin/bash
# tests/deb/run.sh [BUILD]: the Debian packages as a site would get them.
# Runs `make BUILD=BUILD deb` (default build-deb), then, without touching the
# host's package database:
#   - prints each package's file list (dpkg-deb -c) and checks the paths a
#     Slurm site expects (plugin in Slurm's PluginDir, the plugstack snippet
#     a conffile, the library in /usr/lib/<multiarch>, accelrun.pc);
#   - runs lintian on the .changes: its output is printed, an error fails;
#   - unpacks the four packages into one scratch root (dpkg -x) and checks
#     that its libaccelrun.so exports exactly its headers' functions
#     (tests/deb/exports.sh), that the plugin exports only Slurm's symbols,
#     and that the plugin's Slurm dependency is the release it was built for;
#   - compiles a small program with pkg-config against the scratch root's
#     headers, accelrun.pc and libaccelrun.so, and runs it on a corpus config.
# Prints each command it runs ("# run: ..."), TAP-like lines and
# "deb: N passed, N failed, N skipped"; exits 1 when a check failed.
#   ACCEL_SHARED   the shared folder with corpus/ (default ../shared)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${1:-build-deb}
cd "$ROOT" || exit 2
SHARED=${ACCEL_SHARED:-$ROOT/../shared}
CONFIG=$SHARED/corpus/accelerate-configs/templates__multi_gpu.yaml

TAP_NAME=deb
TAP_TAIL=30
# shellcheck source=tests/lib/tap.sh
. "$ROOT/tests/lib/tap.sh"
run() { # CMD...: print it, run it; output in $out, status in $rc
    echo "# run: $*"
    out=$("$@" 2>&1)
    rc=$?
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

version=$(sed -n 's/^VERSION := *//p' Makefile)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || cc -print-multiarch)
arch=$(dpkg --print-architecture)
D=$BUILD/deb

run make --no-print-directory BUILD="$BUILD" deb
if [ "$rc" -ne 0 ]; then
    bad "make BUILD=$BUILD deb (exit $rc)" "$out"
    finish
fi
ok "make BUILD=$BUILD deb"

# -------------------------------------------------------------- file lists
declare -A want=(
    [accelrun]="./usr/bin/accelrun ./usr/share/man/man1/accelrun.1.gz"
    [libaccelrun0]="./usr/lib/$multiarch/libaccelrun.so.$version ./usr/lib/$multiarch/libaccelrun.so.0"
    [libaccelrun-dev]="./usr/include/accel/env.h ./usr/include/accel/ckpt.h ./usr/include/accel/topo.h
        ./usr/lib/$multiarch/libaccelrun.so ./usr/lib/$multiarch/libaccelrun.a
        ./usr/lib/$multiarch/pkgconfig/accelrun.pc"
    [slurm-accelrun-plugin]="./usr/lib/$multiarch/slurm-wlm/accelrun.so
        ./etc/slurm/plugstack.conf.d/accelrun.conf"
)
for p in accelrun libaccelrun0 libaccelrun-dev slurm-accelrun-plugin; do
    deb=$D/${p}_${version}_$arch.deb
    if [ ! -f "$deb" ]; then
        bad "$deb was built"
        continue
    fi
    run dpkg-deb -c "$deb"
    printf '%s\n' "$out" | awk '{ print "#   " $1 " " $6 ($7 ? " " $7 " " $8 : "") }'
    missing=""
    for f in ${want[$p]}; do
        printf '%s\n' "$out" | awk '{print $6}' | grep -qxF -- "$f" || missing="$missing $f"
    done
    if [ -z "$missing" ]; then
        # shellcheck disable=SC2086  # the list splits into paths on purpose
        ok "$p: $(printf '%s\n' "$out" | grep -vc '^d') files and links, with$(printf ' %s' ${want[$p]} | sed 's|\./|/|g')"
    else
        bad "$p lacks:$missing"
    fi
    dpkg-deb -x "$deb" "$tmp/root"
done

run dpkg-deb -I "$D/slurm-accelrun-plugin_${version}_$arch.deb" conffiles
if [ "$out" = /etc/slurm/plugstack.conf.d/accelrun.conf ]; then
    ok "slurm-accelrun-plugin: /etc/slurm/plugstack.conf.d/accelrun.conf is its one conffile"
else
    bad "slurm-accelrun-plugin: conffiles should be the plugstack snippet" "$out"
fi
if grep -qE '^[^#]' "$tmp/root/etc/slurm/plugstack.conf.d/accelrun.conf"; then
    bad "the plugstack snippet enables nothing until an admin uncomments a line" \
        "$(grep -E '^[^#]' "$tmp/root/etc/slurm/plugstack.conf.d/accelrun.conf")"
else
    ok "the plugstack snippet is all comments (the plugin stays off until enabled)"
fi

# the Slurm release the plugin was built against, as debian/rules computes it
slurm=$(dpkg-query -W -f='${Version}' libslurm-dev 2>/dev/null | sed -E 's/^([0-9]+:)?([0-9]+\.[0-9]+).*/\2/')
run dpkg-deb -f "$D/slurm-accelrun-plugin_${version}_$arch.deb" Depends
echo "#   Depends: $out"
if printf '%s\n' "$out" | grep -qF "slurm-wlm-basic-plugins (>= $slurm)" &&
    printf '%s\n' "$out" | grep -qE "slurm-wlm-basic-plugins \(<< "; then
    ok "slurm-accelrun-plugin depends on Slurm $slurm.x (libslurm-dev $slurm)"
else
    bad "slurm-accelrun-plugin's Depends should name slurm-wlm-basic-plugins (>= $slurm) and (<< next)" "$out"
fi
run dpkg-deb -f "$D/accelrun_${version}_$arch.deb" Version
if [ "$out" = "$version" ]; then
    ok "package version $out is the Makefile's VERSION"
else
    bad "package version '$out', Makefile VERSION $version"
fi

# -------------------------------------------------------------- lintian
changes=$D/accelrun_${version}_$arch.changes
run lintian --fail-on error "$changes"
printf '%s\n' "$out" | grep -v 'running with root privileges' | sed 's/^/#   /'
if [ "$rc" -eq 0 ]; then
    ok "lintian $changes: no errors ($(printf '%s\n' "$out" | grep -c '^W: ') warnings)"
else
    bad "lintian $changes reports errors (exit $rc)"
fi

# -------------------------------------------------------------- exports
run sh "$HERE/exports.sh" "$tmp/root/usr/lib/$multiarch/libaccelrun.so.0" "$tmp/root/usr/include"
if [ "$rc" -eq 0 ]; then
    ok "libaccelrun0's library exports exactly libaccelrun-dev's headers' functions: $out"
else
    bad "libaccelrun0's exports and libaccelrun-dev's headers disagree" "$out"
fi
plugin=$tmp/root/usr/lib/$multiarch/slurm-wlm/accelrun.so
other=$(nm -D --defined-only "$plugin" | awk '{print $NF}' |
    grep -vE '^(plugin_name|plugin_type|plugin_version|spank_plugin_name|slurm_spank_.*)$')
if [ -z "$other" ]; then
    ok "the plugin exports only plugin_*, spank_plugin_name and slurm_spank_*"
else
    bad "the plugin exports more than Slurm's symbols" "$other"
fi
if readelf -d "$plugin" | grep -q 'NEEDED.*libaccelrun'; then
    bad "the plugin needs no libaccelrun0 (the library is linked in)" "$(readelf -d "$plugin" | grep NEEDED)"
else
    ok "the plugin does not need libaccelrun.so (library objects linked in)"
fi

# -------------------------------------------------------------- a user program
export PKG_CONFIG_SYSROOT_DIR=$tmp/root PKG_CONFIG_PATH=$tmp/root/usr/lib/$multiarch/pkgconfig
run pkg-config --cflags --libs accelrun
flags=$out
echo "#   $flags"
# shellcheck disable=SC2086  # pkg-config prints several words on purpose
run cc -Wall -Werror -o "$tmp/use" "$ROOT/tests/install/use.c" $flags
if [ "$rc" -ne 0 ]; then
    bad "cc use.c \$(pkg-config --cflags --libs accelrun) against the unpacked packages" "$out"
    finish
fi
ok "cc use.c with the unpacked libaccelrun-dev's accelrun.pc ($flags)"
run env LD_LIBRARY_PATH="$tmp/root/usr/lib/$multiarch" ldd "$tmp/use"
lib=$(printf '%s\n' "$out" | grep 'libaccelrun.so.0')
echo "#   $lib"
case $lib in
*"$tmp/root/usr/lib/$multiarch/libaccelrun.so.0"*) ok "the program loads the unpacked libaccelrun.so.0" ;;
*) bad "the program should load $tmp/root/usr/lib/$multiarch/libaccelrun.so.0" "$out" ;;
esac
run env LD_LIBRARY_PATH="$tmp/root/usr/lib/$multiarch" "$tmp/use" "$CONFIG"
if [ "$rc" -eq 0 ] && [ "$out" = 1 ]; then
    ok "the program prints RANK 1 for node 0, local rank 1 of $(basename "$CONFIG")"
else
    bad "the program should print RANK 1 (exit $rc)" "$out"
fi
run "$tmp/root/usr/bin/accelrun" version
if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -qF "accelrun $version"; then
    ok "the packaged accelrun says: $out"
else
    bad "the packaged accelrun version (exit $rc)" "$out"
fi
finish
