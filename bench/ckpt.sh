#!/bin/bash
# bench/ckpt.sh: checkpoints (ckpt/, docs/ckpt.md) against their peers, side
# by side in one run, as ratios (ours / peer; > 1 is faster), for each size
# of CKPT_SIZES (MiB of random fp32 in 64 tensors; default "1024 4096 8192"):
#
#   save    build/bench/ckpt save at world 1 and 4 (threads): the whole
#           protocol, the XXH3 of every byte, O_DIRECT, every fsync, the
#           commit, the clean-up; peers: dd bs=8M conv=fsync and oflag=direct
#           of the same bytes (durable, no format), Python safetensors
#           save_file + fsync and torch.save + fsync (the real packages)
#   load    cold (the page cache dropped first; root only, else warm and
#           said so): every tensor whole, every checksum checked; peers: dd
#           to /dev/null of the same bytes, safetensors load_file, torch.load
#   async   a saver's asynchronous save: the training stall per GiB when
#           start copies (and when the copy is deferred past CKPT_GAP_MS,
#           default 200, of work standing for forward and backward), and
#           the time until the commit
#   tiers   with a local tier: the time until training goes on, the time
#           until committed in the root (written locally, copied up, read
#           back), against a synchronous save straight into the root
#   train   train_gpt at world 2 (4 layers x 256 channels, batch 2: 37 MB
#           of state for little compute, so the saves show) with no saves,
#           with a synchronous save every 2 steps, and an asynchronous one:
#           wall ms/step, saves included
#
# Each figure is the median of 3.  The machine is noisy (2 cores, one
# virtual disk): compare ratios.  Sizes that need more memory than is free
# (about 2x the size for the async and the Python peers) are left out,
# saying so.
#
#   bash bench/ckpt.sh [BUILD]
set -u
build=${1:-build}
sizes=${CKPT_SIZES:-1024 4096 8192}
gap=${CKPT_GAP_MS:-200}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$build/bench/ckpt
tmp=$(mktemp -d "${TMPDIR:-/tmp}/accel-ckpt-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
cd "$root" || exit 1
if [ ! -x "$bin" ]; then
    echo "ckpt.sh: SKIP: $bin not built (make bench-bins)"
    exit 0
fi

# figure NAME LINES [FIELD]: FIELD (3: GB/s or s/GiB; 2: seconds) of "ckpt: NAME S V"
figure() { printf '%s\n' "$2" | awk -v n="$1" -v f="${3:-3}" '$2 == n { print $(f + 1) }'; }
median3() { sort -g | sed -n 2p; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2fx", a / b; else print "-" }'; }
gbs() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.3f", b / s / 1e9 }'; }
secs() { awk -v a="$1" -v b="$(date +%s%N)" 'BEGIN { printf "%.4f", (b - a) / 1e9 }'; }
avail_mib() { awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo; }

if [ "$(id -u)" = 0 ] && sync && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; then
    cold() { sync; echo 3 >/proc/sys/vm/drop_caches; }
    temp=cold
else
    cold() { :; }
    temp="warm (not root: the page cache cannot be dropped)"
fi
py=$(sh scripts/py-venv.sh 2>"$tmp/venv.err") || py=
torch_ok=0
[ -n "$py" ] && "$py" -c 'import torch' 2>/dev/null && torch_ok=1
echo "bench: checkpoints of $sizes MiB of random fp32 in 64 tensors ($(nproc) cores, $(avail_mib) MiB free; reads $temp; $tmp)"

for mib in $sizes; do
    bytes=$((mib << 20))
    echo
    echo "== $mib MiB"
    if [ "$(avail_mib)" -lt $((mib * 5 / 2)) ]; then
        echo "ckpt.sh: SKIP $mib MiB: $(avail_mib) MiB free, about $((mib * 5 / 2)) needed"
        continue
    fi
    # the peers' bytes, and the saves: dd and ours in turn, round by round
    # (so that a slow spell of the disk hits every one of them), medians
    head -c "$bytes" /dev/urandom >"$tmp/rand"
    cat "$tmp/rand" >/dev/null # dd's source in the page cache, as ours is in memory
    dd_once() { # FLAGS...: GB/s of one durable copy of the random bytes
        t0=$(date +%s%N)
        dd if="$tmp/rand" of="$tmp/dd.out" bs=8M conv=fsync "$@" 2>/dev/null
        gbs "$bytes" "$(secs "$t0")"
        echo
        rm -f "$tmp/dd.out"
    }
    : >"$tmp/rounds"
    for _ in 1 2 3; do
        echo "w $(dd_once)" >>"$tmp/rounds"
        echo "d $(dd_once oflag=direct)" >>"$tmp/rounds"
        echo "s1 $(figure save "$("$bin" save "$tmp/w1" "$mib" 1 1)")" >>"$tmp/rounds"
        rm -rf "$tmp/w1"
        echo "s4 $(figure save "$("$bin" save "$tmp/w4" "$mib" 4 1)")" >>"$tmp/rounds"
        rm -rf "$tmp/w4"
    done
    med_of() { awk -v k="$1" '$1 == k { print $2 }' "$tmp/rounds" | median3; }
    dd_w=$(med_of w) dd_d=$(med_of d) s1=$(med_of s1) s4=$(med_of s4)
    dd_r=$(for _ in 1 2 3; do
        cold
        t0=$(date +%s%N)
        dd if="$tmp/rand" of=/dev/null bs=8M 2>/dev/null
        gbs "$bytes" "$(secs "$t0")"
        echo
    done | median3)
    rm -f "$tmp/rand"
    "$bin" save "$tmp/w1" "$mib" 1 1 >/dev/null # the checkpoint the loads read
    l1=$(for _ in 1 2 3; do
        cold
        figure load "$("$bin" load "$tmp/w1")"
    done | median3)
    c1=$(figure consolidate "$("$bin" consolidate "$tmp/w1")")
    rm -rf "$tmp/w1"
    out=$("$bin" async "$tmp/a" "$mib" "$gap")
    stall=$(figure stall "$out") stalld=$(figure stall_deferred "$out") commit=$(figure commit "$out" 2)
    rm -rf "$tmp/a"
    out=$("$bin" tiers "$tmp/t" "$tmp/local" "$mib" 0)
    resume=$(figure resume "$out" 2) durable=$(figure durable "$out" 2) direct=$(figure direct "$out" 2)
    rm -rf "$tmp/t" "$tmp/local"

    # Python: safetensors and torch, saved durably and loaded cold
    st_s=- st_l=- pt_s=- pt_l=-
    if [ -n "$py" ]; then
        read -r st_s st_l pt_s pt_l <<<"$("$py" - "$tmp" "$mib" "$torch_ok" "$temp" <<'PY'
import os, sys, time
import numpy as np
from safetensors.numpy import save_file, load_file
d, mib, torch_ok, temp = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
per = mib * (1 << 20) // 4 // 64 // 256 * 256
rng = np.random.default_rng(7)
ts = {"layer.%02d.weight" % i: rng.random(per, dtype=np.float32).reshape(-1, 256) for i in range(64)}
nbytes = per * 64 * 4

def cold():
    if temp == "cold":
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")

def durable(path):
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)

def med(xs):
    return sorted(xs)[1]

path = os.path.join(d, "py.safetensors")
saves, loads = [], []
for i in range(3):
    t0 = time.perf_counter()
    save_file(ts, path, metadata={"format": "pt"})
    durable(path)
    saves.append(time.perf_counter() - t0)
for i in range(3):
    cold()
    t0 = time.perf_counter()
    got = load_file(path)
    loads.append(time.perf_counter() - t0)
    del got
os.unlink(path)
out = [nbytes / med(saves) / 1e9, nbytes / med(loads) / 1e9]
if torch_ok:
    import torch
    tt = {k: torch.from_numpy(v) for k, v in ts.items()}
    del ts
    path = os.path.join(d, "py.pt")
    saves, loads = [], []
    for i in range(3):
        t0 = time.perf_counter()
        torch.save(tt, path)
        durable(path)
        saves.append(time.perf_counter() - t0)
    for i in range(3):
        cold()
        t0 = time.perf_counter()
        got = torch.load(path)
        loads.append(time.perf_counter() - t0)
        del got
    os.unlink(path)
    out += [nbytes / med(saves) / 1e9, nbytes / med(loads) / 1e9]
else:
    out += [0, 0]
print(" ".join("%.3f" % x for x in out))
PY
)"
    fi

    printf '%-34s %8s %9s %10s %12s %9s\n' "GB/s (ratio: ours / peer)" "GB/s" "dd fsync" "dd direct" "safetensors" "torch"
    row() { printf '%-34s %8s %9s %10s %12s %9s\n' "$1" "$2" "$(ratio "$2" "$dd_w")" \
        "$(ratio "$2" "$dd_d")" "$(ratio "$2" "$st_s")" "$(ratio "$2" "$pt_s")"; }
    row "save, world 1" "$s1"
    row "save, world 4 (threads)" "$s4"
    printf '%-34s %8s %9s %10s %12s %9s\n' "load, $temp, checked" "$l1" "$(ratio "$l1" "$dd_r")" "" \
        "$(ratio "$l1" "$st_l")" "$(ratio "$l1" "$pt_l")"
    printf '%-34s %8s\n' "consolidate" "$c1"
    echo "peers: dd conv=fsync $dd_w, oflag=direct $dd_d, read $dd_r GB/s; safetensors save+fsync $st_s, load $st_l; torch.save+fsync $pt_s, torch.load $pt_l GB/s$([ -z "$py" ] && echo " (no Python venv: $(cat "$tmp/venv.err"))")"
    awk -v s="$s1" -v dd="$dd_d" -v l="$l1" -v dr="$dd_r" -v ss="$st_s" -v sl="$st_l" -v ps="$pt_s" -v pl="$pt_l" 'BEGIN {
        m = (ss + 0 > ps + 0 ? ss : ps); n = (sl + 0 > pl + 0 ? sl : pl)
        printf "goals: save >= 0.9x dd direct: %s (%.2fx); load >= 1.0x dd read: %s (%.2fx); save and load >= 1.5x the faster of safetensors and torch: %s (%.2fx, %.2fx)\n",
            (s / dd >= 0.9 ? "met" : "missed"), s / dd, (l / dr >= 1.0 ? "met" : "missed"), l / dr,
            (m > 0 && s / m >= 1.5 && l / n >= 1.5 ? "met" : "missed"), (m > 0 ? s / m : 0), (n > 0 ? l / n : 0) }'
    echo "async: training stall $stall s/GiB when start copies; $stalld s/GiB with the copy deferred past ${gap} ms of work (goal <= 0.05 s/GiB); committed $commit s after start"
    echo "tiers: training goes on after $resume s, committed in the root after $durable s (local write, copy up, read back); a synchronous save straight into the root: $direct s"
done

# train_gpt's step time with checkpoints (world 2, a wider model)
train=$build/bin/train_gpt
if [ -x "$train" ]; then
    echo
    echo "== train_gpt, world 2, --layers 4 --channels 256 --batch 2 (37 MB of state), 40 steps, a save every 2"
    targs=(--steps 40 --layers 4 --channels 256 --heads 8 --batch 2 --print-every 40)
    # wall time per step, saves included ("train_gpt: 60 steps in 4.1 s: ...")
    step_ms() { sed -n 's/.*train_gpt: \([0-9]*\) steps in \([0-9.]*\) s:.*/\1 \2/p' "$1" |
        awk '{ printf "%.1f\n", $2 / $1 * 1e3 }'; }
    for mode in none sync async; do
        for i in 1 2 3; do
            extra=()
            [ "$mode" != none ] && extra=(--ckpt-dir "$tmp/g$mode$i" --save-every 2)
            [ "$mode" = async ] && extra+=(--async-save)
            "$build/bin/accelrun" launch -n 2 --config examples/gpt-cpu.yaml -- "$train" "${targs[@]}" \
                "${extra[@]}" >"$tmp/g.out" 2>&1
            step_ms "$tmp/g.out"
            rm -rf "$tmp/g$mode$i"
        done | median3 >"$tmp/g.$mode"
    done
    echo "ms/step: no saves $(cat "$tmp/g.none"), synchronous saves $(cat "$tmp/g.sync") ($(ratio "$(cat "$tmp/g.none")" "$(cat "$tmp/g.sync")") of no saves' speed), asynchronous $(cat "$tmp/g.async") ($(ratio "$(cat "$tmp/g.none")" "$(cat "$tmp/g.async")"))"
fi
