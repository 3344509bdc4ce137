#!/bin/sh
# Installs into a scratch DESTDIR and builds a small program against the
# installed headers, accelrun.pc and libaccelrun.so, as a library user would;
# checks that the installed libaccelrun.so exports exactly the functions the
# installed headers declare (tests/deb/exports.sh).  BUILD: make's build
# folder (default build).  Prints "install: N passed, N failed".
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
make --no-print-directory -s install PREFIX=/usr DESTDIR="$tmp/root" >/dev/null
export PKG_CONFIG_SYSROOT_DIR="$tmp/root" PKG_CONFIG_PATH="$tmp/root/usr/lib/pkgconfig"
# shellcheck disable=SC2046  # pkg-config prints several words on purpose
cc -o "$tmp/use" "$HERE/use.c" $(pkg-config --cflags --libs accelrun)
got=$(LD_LIBRARY_PATH="$tmp/root/usr/lib" "$tmp/use" "${ACCEL_SHARED:-../shared}/corpus/accelerate-configs/templates__multi_gpu.yaml")
pass=0 failed=0
if [ "$got" = "1" ]; then
    pass=$((pass + 1))
    echo "ok - a program built with pkg-config against the installed library prints RANK 1"
else
    failed=$((failed + 1))
    echo "not ok - the program printed '$got', expected RANK 1"
fi
if out=$(sh "$HERE/../deb/exports.sh" "$tmp/root/usr/lib/libaccelrun.so" "$tmp/root/usr/include" 2>&1); then
    pass=$((pass + 1))
    echo "ok - the installed libaccelrun.so exports the installed headers' functions: $out"
else
    failed=$((failed + 1))
    echo "not ok - the installed libaccelrun.so and headers disagree"
    printf '%s\n' "$out" | tail -n 20 | sed 's/^/#   /'
fi
echo "install: $pass passed, $failed failed"
[ "$failed" -eq 0 ]
