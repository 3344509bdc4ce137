#!/bin/sh
# tests/deb/exports.sh SO [INCLUDEDIR]: libaccelrun.so exports exactly the
# functions that the public headers declare, and nothing else but its version
# node.  The declarations come from the compiler, not from a regex: every
# header under INCLUDEDIR/accel/ (default: the source tree's core/, topology/
# and ckpt/include, what `make install` installs) is included in one
# translation unit compiled with gcc's -aux-info, which writes one line per
# function prototype with the file it came from.  Also compares that list
# with core/libaccelrun.map's global: names and debian/libaccelrun0.symbols.
#
# Prints each difference and "exports: N declared, N exported, N differences";
# exits 1 when there is a difference, 2 on a usage or tool error.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if [ $# -lt 1 ] || [ ! -f "$1" ]; then
    echo "usage: $0 LIBACCELRUN.SO [INCLUDEDIR]" >&2
    exit 2
fi
so=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

if [ $# -ge 2 ]; then
    incs="-I$2"
    headers=$(ls "$2"/accel/*.h)
else
    incs="-I$ROOT/core/include -I$ROOT/topology/include -I$ROOT/ckpt/include"
    headers=$(ls "$ROOT"/core/include/accel/*.h "$ROOT"/topology/include/accel/*.h \
        "$ROOT"/ckpt/include/accel/*.h)
fi
for h in $headers; do echo "#include <accel/$(basename "$h")>"; done >"$tmp/all.c"
# shellcheck disable=SC2046,SC2086  # several words on purpose
gcc -std=gnu11 $incs $(pkg-config --cflags yaml-0.1 hwloc libcjson 2>/dev/null) \
    -fsyntax-only -aux-info "$tmp/aux" "$tmp/all.c" || {
    echo "exports: error: the public headers do not compile on their own" >&2
    exit 2
}
# "/* FILE:LINE:NC */ extern TYPE NAME (ARGS);" for prototypes from accel/*.h;
# a static inline function would say "static" and is not exported
grep -E '^/\* [^ ]*/accel/[a-z0-9_]+\.h:[0-9]+:' "$tmp/aux" | grep -E '\*/ extern ' |
    sed -E 's/^.*[ *](accel_[A-Za-z0-9_]+) \(.*$/\1/' | grep -E '^accel_' | sort -u >"$tmp/declared"
nm -D --defined-only "$so" | awk '{print $NF}' | sed 's/@.*//' | sort -u >"$tmp/exported"

diffs=0
report() { # FILE-A FILE-B WHAT-A-ONLY WHAT-B-ONLY
    comm -23 "$1" "$2" | while read -r s; do echo "not ok - $s: $3"; done
    comm -13 "$1" "$2" | while read -r s; do echo "not ok - $s: $4"; done
    n=$(comm -3 "$1" "$2" | wc -l)
    diffs=$((diffs + n))
}
grep -vxF ACCELRUN_0 "$tmp/exported" >"$tmp/exported.fn" || true
report "$tmp/declared" "$tmp/exported.fn" "declared in a public header, not exported by $so" \
    "exported by $so, declared in no public header"
if [ -f "$ROOT/core/libaccelrun.map" ]; then
    sed -n '/global:/,/local:/p' "$ROOT/core/libaccelrun.map" | grep -E '^ *accel_' |
        tr -d ' ;' | sort -u >"$tmp/map"
    report "$tmp/declared" "$tmp/map" "declared in a public header, missing from core/libaccelrun.map" \
        "in core/libaccelrun.map, declared in no public header"
fi
if [ -f "$ROOT/debian/libaccelrun0.symbols" ]; then
    grep -E '^ accel_' "$ROOT/debian/libaccelrun0.symbols" | sed -E 's/^ ([^@ ]+)@.*/\1/' |
        sort -u >"$tmp/symbols"
    report "$tmp/declared" "$tmp/symbols" "declared in a public header, missing from debian/libaccelrun0.symbols" \
        "in debian/libaccelrun0.symbols, declared in no public header"
fi
grep -qxF ACCELRUN_0 "$tmp/exported" || {
    echo "not ok - $so has no version node ACCELRUN_0 (linked without core/libaccelrun.map?)"
    diffs=$((diffs + 1))
}
echo "exports: $(wc -l <"$tmp/declared") declared, $(wc -l <"$tmp/exported.fn") exported, $diffs differences"
[ "$diffs" -eq 0 ]
