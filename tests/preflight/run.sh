#!/bin/bash
# tests/preflight/run.sh: `accelrun preflight` and `accelrun launch
# --preflight` against real Pythons: Debian's /usr/bin/python3 (no
# accelerate), the 1.15 stack (accelerate 1.15.0, torch 2.13.0 from PyPI)
# and the 0.32 stack (accelerate 0.32.1 on Debian's torch 1.13), both made
# and cached by scripts/lab-venv.sh.  GPUs come from tests/preflight/
# fakenvml.c (a stand-in libnvidia-ml.so.1: no GPU here); tests/gpu/run.sh
# runs the real one.
#
# usage: tests/preflight/run.sh [BUILD]      (default build)
# TAP-like lines, then "preflight: N passed, N failed, N skipped".
set -u
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck disable=SC2034  # tap.sh reads it
TAP_NAME=preflight
# shellcheck source=tests/lib/tap.sh
. "$here/../lib/tap.sh"
cli=$build/bin/accelrun
nvml=$build/tests/fakenvml/libnvidia-ml.so.1
cfg=$here/configs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
host=$(hostname | cut -d. -f1)

for f in "$cli" "$nvml"; do
    [ -e "$f" ] || { skipped "preflight" "no $f (make test-preflight builds it)"; finish; }
done

# run NAME ARGS...: the CLI's output in $tmp/NAME.out, its status in $rc
run() {
    local name=$1
    shift
    "$cli" preflight "$@" >"$tmp/$name.out" 2>&1
    rc=$?
}
# row NAME CHECK: the table line of CHECK in NAME's output
row() { grep -E "^[^ ]+ +$2 " "$tmp/$1.out" | head -n 1; }
# expect NAME CHECK STATUS PATTERN DESCRIPTION
expect() {
    local line
    line=$(row "$1" "$2")
    if printf '%s\n' "$line" | grep -Eq "^[^ ]+ +$2 +$3 +.*$4"; then
        ok "$5"
    else
        bad "$5" "expected $2 $3 matching '$4'; got:
$(cat "$tmp/$1.out")"
    fi
}
status() { if [ "$rc" -eq "$1" ]; then ok "$2"; else bad "$2 (exit $rc, not $1)" "$(cat "$tmp/$3.out")"; fi; }

# ---------------------------------------------------------------- no accelerate
if /usr/bin/python3 -c 'import accelerate' 2>/dev/null; then
    skipped "a Python without accelerate" "/usr/bin/python3 imports accelerate on this machine"
else
    run noacc "$cfg/cpu2.yaml" --python /usr/bin/python3
    status 1 "--python /usr/bin/python3 without accelerate: exit 1" noacc
    expect noacc versions FAIL "accelerate is not installed for /usr/bin/python3" \
        "the FAIL line names accelerate and the Python"
    grep -q "preflight: .*FAIL on 1 node.*the job does not start" "$tmp/noacc.out" &&
        ok "the summary says the job does not start" || bad "summary" "$(cat "$tmp/noacc.out")"
fi

# ---------------------------------------------------------------- the two stacks
if ! py115=$(sh "$root/scripts/lab-venv.sh" 1.15 2>"$tmp/v115.err"); then
    skipped "the accelerate 1.15 stack" "scripts/lab-venv.sh 1.15: $(tail -n 1 "$tmp/v115.err")"
    py115=
fi
if ! py032=$(sh "$root/scripts/lab-venv.sh" 0.32 2>"$tmp/v032.err"); then
    skipped "the accelerate 0.32 stack" "scripts/lab-venv.sh: $(tail -n 1 "$tmp/v032.err")"
    py032=
fi
if [ -n "$py115" ]; then
    start=$(date +%s%N)
    PATH=$(dirname "$py115"):$PATH run s115 "$cfg/cpu2.yaml"
    took=$((($(date +%s%N) - start) / 1000000))
    status 0 "the 1.15 stack, first python on PATH: a clean pass (exit 0, no FAIL)" s115
    expect s115 python PASS "$(dirname "$py115")/python " "it ran the venv's python, found on PATH"
    expect s115 versions PASS "torch 2\.13\.0.*accelerate 1\.15\.0" \
        "versions: torch 2.13.0, accelerate 1.15.0 (and CUDA, NCCL of PyPI's torch)"
    expect s115 imports PASS "from accelerate import Accelerator; import accelerate.big_modeling" \
        "the import test in a clean process passes"
    expect s115 config PASS "against accelerate 1.15\.0: 0 errors" \
        "the config is checked against 1.15.0, the version installed"
    expect s115 threads "(PASS|WARN)" "modules" "the threaded import ran over accelerate's modules"
    echo "#   1.15 stack, ${took} ms: $(row s115 threads | cut -c1-300)"
fi
if [ -n "$py032" ]; then
    run s032 "$cfg/cpu2.yaml" --python "$py032"
    status 0 "the 0.32 stack (Debian's torch): passes too" s032
    expect s032 versions PASS "torch 1\.13.*accelerate 0\.32\.1" \
        "versions: torch 1.13 (Debian), accelerate 0.32.1: the older stack, reported as such"
    expect s032 config PASS "against accelerate 0\.32\.1" "the config is checked against 0.32.1"
    run r032 "$cfg/cpu2_regional.yaml" --python "$py032"
    status 1 "a 1.15 key under accelerate 0.32.1: exit 1" r032
    expect r032 config FAIL "dynamo_use_regional_compilation.*added in accelerate 1\.7\.0.*0\.32\.1" \
        "config FAIL names the key, the version that added it and the one installed"
fi
if [ -n "$py115" ]; then
    run r115 "$cfg/cpu2_regional.yaml" --python "$py115"
    expect r115 config PASS "against accelerate 1\.15\.0" "the same config passes under 1.15.0"
fi

# ---------------------------------------------------------------- drift
if [ -n "$py115" ] && [ -n "$py032" ]; then
    rec=$tmp/records
    run d1 "$cfg/cpu2.yaml" --python "$py032" --record-dir "$rec" --job j1
    expect d1 drift PASS "the first record of this config" "the first run is the first record"
    ACCELRUN_PREFLIGHT_DIR=$rec run d2 "$cfg/cpu2.yaml" --python "$py115" --job j2
    expect d2 drift WARN "accelerate 0\.32\.1 → 1\.15\.0.* on $host since job j1" \
        "after a version change the next run reports the drift, per node (ACCELRUN_PREFLIGHT_DIR)"
    expect d2 drift WARN "torch 1\.13[^ ]* → 2\.13\.0" "torch's change is reported too"
    run d3 "$cfg/cpu2.yaml" --python "$py115" --record-dir "$rec" --job j3
    expect d3 drift PASS "the same versions as job j2" "no change: no drift"
    lock=$(ls "$rec"/cpu2-*/j3.json 2>/dev/null)
    if [ -n "$lock" ] && "$py115" - "$lock" "$host" <<'EOF'; then
import json, sys
d = json.load(open(sys.argv[1]))
v = d["nodes"][sys.argv[2]]
assert d["job"] == "j3" and d["config"].endswith("cpu2.yaml"), d
assert v["packages"]["accelerate"] == "1.15.0" and v["packages"]["torch"].startswith("2.13.0"), v
EOF
        ok "the job's lock (DIR/cpu2-HASH/j3.json) holds each node's versions"
    else
        bad "the job's lock" "$(ls -R "$rec")"
    fi
    run dbad "$cfg/cpu2.yaml" --python "$py115" --record-dir "$rec" --job '../x'
    grep -q "couldn't name a record" "$tmp/dbad.out" && [ ! -e "$rec/x.json" ] &&
        ok "a job id with a path in it names no record" || bad "job id ../x" "$(cat "$tmp/dbad.out")"
fi

# ---------------------------------------------------------------- a planted cycle
PYTHONPATH=$here/cycle run cyc "$cfg/cpu2.yaml" --python /usr/bin/python3 --import cyclepkg
expect cyc imports PASS "import cyclepkg" "the planted package imports alone, in a clean process"
expect cyc threads WARN "cyclepkg\.[ab].*partially initialized module 'cyclepkg\.[ab]'" \
    "the threaded import catches the planted cycle, naming the module"

# ---------------------------------------------------------------- network
NCCL_SOCKET_IFNAME=nosuch0 run ifbad "$cfg/cpu2.yaml" --python /usr/bin/python3
expect ifbad network FAIL "NCCL_SOCKET_IFNAME=nosuch0: no interface on this node is nosuch0\*" \
    "a broken interface name is a FAIL naming it and what the node has"
NCCL_SOCKET_IFNAME=lo run ifok "$cfg/cpu2.yaml" --python /usr/bin/python3
expect ifok network PASS "NCCL_SOCKET_IFNAME=lo" "an interface the node has passes"
NCCL_SOCKET_IFNAME=^lo,nosuch run ifex "$cfg/cpu2.yaml" --python /usr/bin/python3
if [ "$(ls /sys/class/net | wc -l)" -gt 1 ]; then
    expect ifex network PASS "NCCL_SOCKET_IFNAME=\^lo,nosuch" "an exclusion list that leaves some passes"
fi
NCCL_IB_HCA=mlx5_9:1 run hca "$cfg/cpu2.yaml" --python /usr/bin/python3
expect hca network FAIL "NCCL_IB_HCA=mlx5_9:1: no InfiniBand device on this node is mlx5_9" \
    "an HCA the node lacks is a FAIL"
MASTER_ADDR=no-such-host.invalid run addr "$cfg/cpu2.yaml" --python /usr/bin/python3
expect addr network FAIL "MASTER_ADDR=no-such-host.invalid does not resolve" \
    "a MASTER_ADDR that does not resolve is a FAIL"

# ---------------------------------------------------------------- GPUs (fakenvml)
gpu() { LD_LIBRARY_PATH=$(dirname "$nvml") FAKE_NVML=$1 run "$2" "$cfg/$3" --python /usr/bin/python3; }
v100="Tesla V100-SXM2-16GB,7.0,16,0.3"
a100="NVIDIA A100-SXM4-80GB,8.0,80,0.5"
h100="NVIDIA H100 80GB HBM3,9.0,80,0.5"
gpu "$v100;$v100" v100 gpu2_bf16.yaml
expect v100 precision FAIL "bf16 needs compute capability 8\.0 or newer; GPU 0 \(Tesla V100-SXM2-16GB\) has 7\.0" \
    "bf16 on V100s (7.0) is a FAIL naming the GPU and its capability"
expect v100 versions FAIL "driver 550\.54\.15, 2 GPUs" "the driver and GPUs are read through NVML"
gpu "$a100;$a100" a100 gpu2_bf16.yaml
expect a100 precision PASS "bf16: every GPU" "bf16 on A100s (8.0) passes"
expect a100 gpus PASS "2 processes, 2 GPUs visible" "2 processes on 2 GPUs pass"
expect a100 gpu-memory PASS "2 GPUs, at least 79\.5 GiB free" "free memory is read"
CUDA_VISIBLE_DEVICES=1 gpu "$a100;$a100" cvd gpu2_bf16.yaml
expect cvd gpus FAIL "2 processes on this node and 1 GPU visible \(CUDA_VISIBLE_DEVICES=1\)" \
    "CUDA_VISIBLE_DEVICES is honoured: 2 processes on 1 visible GPU fail"
CUDA_VISIBLE_DEVICES=GPU-fake0000-0001,0 gpu "$v100;$a100" uuid gpu2_bf16.yaml
expect uuid precision FAIL "GPU 1 \(Tesla V100" "UUIDs in CUDA_VISIBLE_DEVICES order the GPUs as CUDA does"
gpu "$a100;NVIDIA A100-SXM4-80GB,8.0,80,79.6" full gpu2_bf16.yaml
expect full gpu-memory FAIL "GPU 1 \(NVIDIA A100-SXM4-80GB\): 0\.4 GiB free of 80\.0 GiB" \
    "a GPU another job fills is a FAIL"
gpu "$a100;NVIDIA A100-SXM4-80GB,8.0,80,30" busy gpu2_bf16.yaml
expect busy gpu-memory WARN "GPU 1 .*30\.0 of 80\.0 GiB in use" "a GPU partly in use is a WARN"
gpu "$a100;$a100" fp8a gpu2_fp8.yaml
expect fp8a precision FAIL "fp8 needs compute capability 8\.9 or newer; GPU 0 \(NVIDIA A100" \
    "fp8 on A100s (8.0) is a FAIL"
gpu "$h100;$h100" fp8h gpu2_fp8.yaml
expect fp8h precision PASS "fp8: every GPU has compute capability 8\.9" "fp8 on H100s passes"
run nodrv "$cfg/gpu2_bf16.yaml" --python /usr/bin/python3
expect nodrv gpus FAIL "MULTI_GPU runs on GPUs and this node has no NVIDIA driver" \
    "a GPU config on a node without a driver is a FAIL"

# ---------------------------------------------------------------- bounds
printf '#!/bin/sh\nexec sleep 37\n' >"$tmp/slowpy"
chmod +x "$tmp/slowpy"
start=$(date +%s)
run slow "$cfg/cpu2.yaml" --python "$tmp/slowpy" --timeout 1
took=$(($(date +%s) - start))
expect slow python FAIL "did not finish within 1 s" "a Python that hangs is a FAIL after --timeout"
if [ "$took" -le 5 ] && ! pgrep -f 'sleep 37' >/dev/null; then
    ok "it is killed, with what it started: nothing left running (${took} s)"
else
    bad "the hung Python is killed" "took ${took} s; $(pgrep -af 'sleep 37')"
    pkill -f 'sleep 37'
fi
printf '#!/bin/sh\necho "Fatal Python error: init_fs_encoding" >&2\nexit 1\n' >"$tmp/brokenpy"
chmod +x "$tmp/brokenpy"
run broken "$cfg/cpu2.yaml" --python "$tmp/brokenpy"
expect broken python FAIL "exited with status 1: Fatal Python error: init_fs_encoding" \
    "a Python that cannot start is a FAIL with its last line"
run noexe "$cfg/cpu2.yaml" --python "$tmp/none"
expect noexe python FAIL "is not an executable file" "a --python that is not there is a FAIL"
PATH=/nonexistent run nopath "$cfg/cpu2.yaml"
expect nopath python FAIL "no python or python3 on PATH" "no Python on PATH is a FAIL saying so"
run badimp "$cfg/cpu2.yaml" --import 'os;rm'
[ "$rc" -eq 2 ] && grep -q "not a Python module name" "$tmp/badimp.out" &&
    ok "--import of something not a module name: exit 2" || bad "--import os;rm" "$(cat "$tmp/badimp.out")"
run nofile "$tmp/missing.yaml"
[ "$rc" -eq 2 ] && grep -q "couldn't read" "$tmp/nofile.out" &&
    ok "an unreadable config: exit 2" || bad "missing config" "$(cat "$tmp/nofile.out")"
run json "$cfg/cpu2.yaml" --python /usr/bin/python3 --json
if /usr/bin/python3 - "$tmp/json.out" <<'EOF'; then
import json, sys
d = json.load(open(sys.argv[1]))
n = d["nodes"][0]
assert d["result"] == "FAIL", d["result"]
assert n["versions"]["python_path"] == "/usr/bin/python3"
assert {c["check"] for c in n["checks"]} >= {"python", "versions", "config", "network"}
EOF
    ok "--json: result, versions and checks"
else
    bad "--json" "$(cat "$tmp/json.out")"
fi

# ---------------------------------------------------------------- launch --preflight
if [ -n "$py115" ]; then
    PATH=$(dirname "$py115"):$PATH "$build/bin/accelrun" launch --config "$cfg/cpu2.yaml" \
        --preflight -- sh -c 'echo started' >"$tmp/l1.out" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] && grep -q "preflight: .*cpu2.yaml: \(PASS\|WARN\)" "$tmp/l1.out" &&
        [ "$(grep -c started "$tmp/l1.out")" -eq 2 ] &&
        ok "launch --preflight: the table, then both ranks start" ||
        bad "launch --preflight on the 1.15 stack (exit $rc)" "$(cat "$tmp/l1.out")"
fi
PATH=/usr/bin:/bin "$build/bin/accelrun" launch --config "$cfg/cpu2.yaml" --preflight \
    -- touch "$tmp/ran" >"$tmp/l2.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] && [ ! -e "$tmp/ran" ] && grep -q "preflight failed: no rank started" "$tmp/l2.out" &&
    ok "launch --preflight with a FAIL: exit 1, no rank started" ||
    bad "launch --preflight FAIL (exit $rc)" "$(cat "$tmp/l2.out")"
finish
