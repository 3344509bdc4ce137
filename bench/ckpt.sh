#!/bin/bash
# bench/ckpt.sh: checkpoint throughput (ckpt/, docs/ckpt.md) against its
# peers, side by side, as ratios (ours / peer; > 1 is faster):
#   save         build/bench/ckpt at WORLD 1 and 4 (threads): the whole
#                protocol, XXH3 of every byte, O_DIRECT and fsync of every
#                file, the commit, the clean-up of the step before
#                peers: dd bs=8M conv=fsync of the same bytes, through the page
#                cache and with oflag=direct (durable, no format); Python
#                safetensors save_file + os.fsync (the real package)
#   load         every tensor whole, checksums checked, right after the saves
#                (written around the page cache, so read from the disk's cache)
#                peer: Python safetensors.numpy.load_file of a file it just
#                wrote (from the page cache)
#   consolidate  rank files to model.safetensors, every piece checked
# Each figure is the median of 3; the machine is noisy (2 cores, one virtual
# disk), so ratios, not absolute figures, are what to compare.
#
#   bash bench/ckpt.sh [BUILD]      MIB=512 sets the size
set -u
build=${1:-build}
mib=${MIB:-512}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$build/bench/ckpt
tmp=$(mktemp -d "${TMPDIR:-/tmp}/accel-ckpt-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
cd "$root" || exit 1
if [ ! -x "$bin" ]; then
    echo "ckpt.sh: SKIP: $bin not built (make bench-bins)"
    exit 0
fi
echo "bench: checkpoints of $mib MiB of random fp32 in 64 tensors ($(nproc) cores; $tmp)"

# figure NAME LINES: the GB/s of "ckpt: NAME SECONDS GB/s"
figure() { printf '%s\n' "$2" | awk -v n="$1" '$2 == n { print $4 }'; }
median3() { sort -n | sed -n 2p; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2fx", a / b; else print "-" }'; }

out1=$("$bin" "$tmp/w1" "$mib" 1) || { echo "ckpt.sh: build/bench/ckpt failed"; exit 1; }
out4=$("$bin" "$tmp/w4" "$mib" 4) || { echo "ckpt.sh: build/bench/ckpt failed"; exit 1; }
rm -rf "$tmp/w1" "$tmp/w4"

head -c $((mib << 20)) /dev/urandom >"$tmp/rand"
# dd_rate FLAGS...: the median GB/s of 3 copies of the random file
dd_rate() {
    for i in 1 2 3; do
        t0=$(date +%s%N)
        dd if="$tmp/rand" of="$tmp/dd.out" bs=8M conv=fsync "$@" 2>/dev/null
        s=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { print (b - a) / 1e9 }')
        rm -f "$tmp/dd.out"
        awk -v s="$s" -v b=$((mib << 20)) 'BEGIN { printf "%.3f\n", b / s / 1e9 }'
    done | median3
}
dd_gbs=$(dd_rate)
ddd_gbs=$(dd_rate oflag=direct)

py=$(sh scripts/py-venv.sh 2>"$tmp/venv.err")
if [ -n "$py" ]; then
    read -r py_save py_load <<<"$("$py" - "$tmp" "$mib" <<'PY'
import os, sys, time
import numpy as np
from safetensors.numpy import save_file, load_file
d, mib = sys.argv[1], int(sys.argv[2])
per = mib * (1 << 20) // 4 // 64 // 256 * 256
rng = np.random.default_rng(7)
ts = {"layer.%02d.weight" % i: rng.random(per, dtype=np.float32).reshape(-1, 256) for i in range(64)}
nbytes = per * 64 * 4
saves, loads = [], []
for i in range(3):
    path = os.path.join(d, "py.safetensors")
    t0 = time.perf_counter()
    save_file(ts, path, metadata={"format": "pt"})
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    saves.append(time.perf_counter() - t0)
for i in range(3):
    t0 = time.perf_counter()
    got = load_file(path)
    loads.append(time.perf_counter() - t0)
    del got
print("%.3f %.3f" % (nbytes / sorted(saves)[1] / 1e9, nbytes / sorted(loads)[1] / 1e9))
PY
)"
else
    py_reason=$(cat "$tmp/venv.err")
fi

s1=$(figure save "$out1") s4=$(figure save "$out4") l1=$(figure load "$out1")
c1=$(figure consolidate "$out1")
printf '%-30s %8s %10s %10s %12s\n' "" "GB/s" "dd fsync" "dd direct" "safetensors"
row() { printf '%-30s %8s %10s %10s %12s\n' "$1" "$2" "$(ratio "$2" "$dd_gbs")" \
    "$(ratio "$2" "$ddd_gbs")" "$(ratio "$2" "${py_save:-0}")"; }
row "save, world 1" "$s1"
row "save, world 4 (threads)" "$s4"
printf '%-30s %8s %10s %10s %12s\n' "load after the saves, checked" "$l1" "" "" \
    "$(ratio "$l1" "${py_load:-0}")"
printf '%-30s %8s\n' "consolidate" "$c1"
echo "peers: dd bs=8M conv=fsync $dd_gbs GB/s, with oflag=direct $ddd_gbs GB/s;" \
    "safetensors save_file+fsync ${py_save:-SKIP} GB/s, load_file (hot) ${py_load:-SKIP} GB/s${py_reason:+ (SKIP: $py_reason)}"
