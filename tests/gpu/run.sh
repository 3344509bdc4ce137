#!/bin/sh
# tests/gpu/run.sh: the one script for a machine with an NVIDIA GPU (the
# device machine some sessions are lent).  It builds everything (make, with
# the CUDA toolkit and NCCL where found) and checks, on real hardware:
#   - topology discovery with NVML loaded at run time (topology/nvml.c),
#     through `accelrun topo`;
#   - the preflight's NVML (core/preflight/nvml.c) against nvidia-smi;
#   - the nccl backend of core/comm (tests/gpu/nccl_gpu.c): every operation
#     and type of a world-1 communicator against a host reference, split, a
#     world-2 init whose rank 1 never comes (ACCEL_ETIMEDOUT at the deadline,
#     no hang), a rank that fails and tells the others through the store; with
#     two GPUs or more, the same over N ranks and a rank that dies;
#   - the unit tests of the nccl backend (build/tests/test_nccl) and its
#     control flow against a scripted NCCL (tests/gpu/fake.sh, which also
#     runs without a GPU);
#   - core/shard's device path against its host path (tests/gpu/shard_gpu.c);
#   - the example GPT trained on the GPU against the CPU (tests/gpu/train.sh);
#   - bench/nccl_bench: all_reduce, all_gather, reduce_scatter from 4 KiB to
#     1 GiB, nccl-tests columns (busbw is 0 by definition on one GPU: algbw is
#     then the GPU's local copy rate).
# Every program runs under `timeout`; the whole script fits in about 8
# minutes.  With $OUT set, the log goes to $OUT/gpu.log and the benchmark's
# table to $OUT/nccl_bench.txt as well.
# Prints "gpu: N passed, N failed, N skipped"; SKIP with the reason without a GPU.
# On the device machine (which can fetch nothing), first here:
#   sh tests/gpu/kit.sh          the build's Debian libraries into .gpu-kit/
# then run `sh tests/gpu/run.sh` there with carry [".gpu-kit"]; NCCL comes
# from the toolkit or, failing that, from the image's nvidia-nccl wheel.
set -u
cd "$(dirname "$0")/../.." || exit 1

if [ -n "${OUT:-}" ] && [ -z "${ACCEL_GPU_LOGGING:-}" ]; then
    mkdir -p "$OUT"
    { ACCEL_GPU_LOGGING=1 sh "$0" "$@"; echo $? >"$OUT/gpu.rc"; } 2>&1 | tee "$OUT/gpu.log"
    exit "$(cat "$OUT/gpu.rc")"
fi

pass=0 fail=0 skip=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/#   /'; }
skipped() { skip=$((skip + 1)); echo "ok - $1 # SKIP $2"; }
t_start=$(date +%s)
elapsed() { echo $(($(date +%s) - t_start)); }

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu: SKIP: no NVIDIA GPU here (nvidia-smi -L fails)"
    echo "gpu: 0 passed, 0 failed, 1 skipped"
    exit 0
fi
ngpu=$(nvidia-smi -L | grep -c '^GPU ')
nvidia-smi -L | sed 's/^/# /'
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/# /'

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export CUDA_HOME
# The build's Debian libraries where the image lacks them: tests/gpu/kit.sh
# downloads them beside the tree into .gpu-kit/ (carry it); they are
# unpacked into a prefix of their own, never into /.
if ls .gpu-kit/*.deb >/dev/null 2>&1; then
    kit=/tmp/accelrun-gpu-kit
    for d in .gpu-kit/*.deb; do
        case $d in # a system's own libudev wins
        *libudev1_*) ldconfig -p 2>/dev/null | grep -q 'libudev\.so\.1 ' && continue ;;
        esac
        dpkg -x "$d" "$kit" 2>/dev/null ||
            { mkdir -p "$kit" && (cd "$kit" && ar p "$OLDPWD/$d" data.tar.xz | tar -xJ); } ||
            echo "# could not unpack $d"
    done
    ma=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
    export CPATH="$kit/usr/include${CPATH:+:$CPATH}"
    export LIBRARY_PATH="$kit/usr/lib/$ma${LIBRARY_PATH:+:$LIBRARY_PATH}"
    export LD_LIBRARY_PATH="$kit/usr/lib/$ma${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "# unpacked $(ls .gpu-kit/*.deb | wc -l) packages of .gpu-kit into $kit"
fi
# NCCL from the toolkit, else from the nvidia-nccl wheel of the image's PyTorch
if [ -z "${NCCL_HOME:-}" ] && [ ! -f "$CUDA_HOME/include/nccl.h" ]; then
    NCCL_HOME=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null)
    [ -n "$NCCL_HOME" ] && [ -f "$NCCL_HOME/include/nccl.h" ] && export NCCL_HOME &&
        echo "# NCCL from $NCCL_HOME"
fi
NCCL_HOME=${NCCL_HOME:-$CUDA_HOME}
jobs=$(nproc 2>/dev/null || echo 4)
mkdir -p build
if ! timeout -k 10 300 make -s -j"$jobs" all build/tests/test_nccl build/bench/nccl_bench \
    >build/gpu-build.log 2>&1; then
    tail -n 40 build/gpu-build.log
    echo "gpu: build failed"
    exit 1
fi
grep -E "SKIP|warning" build/gpu-build.log | sed 's/^/# /'
echo "# built in $(elapsed) s"
have_nccl=yes
[ -f "$NCCL_HOME/include/nccl.h" ] && [ -f "$CUDA_HOME/include/cuda_runtime.h" ] || have_nccl=no
cuda_cflags=$(make -s print-cuda-cflags)
cuda_libs=$(make -s print-cuda-libs)

# ---------------------------------------------------------------- topology
out=$(timeout 60 build/bin/accelrun topo --json 2>&1)
if printf '%s' "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
n = int(sys.argv[1])
r = d["ranks"]
sys.exit(0 if len(r) == n and all(x["gpu"] != "" and x["pci"] != "" for x in r) else 1)' "$ngpu"; then
    ok "topo: one rank per GPU nvidia-smi lists ($ngpu), each with a PCI bus id"
else
    bad "topo: one rank per GPU nvidia-smi lists ($ngpu)" "$out"
fi
out=$(timeout 60 build/bin/accelrun topo 2>&1)
printf '%s\n' "$out" | sed 's/^/# /'
# the bus ids hwloc found must be the ones NVML reports
want=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | tr 'A-F' 'a-f' | sed 's/^0000//; s/^00000000/0000/' | sort)
got=$(timeout 60 build/bin/accelrun topo --json | python3 -c 'import json,sys; print("\n".join(sorted(x["pci"] for x in json.load(sys.stdin)["ranks"])))')
if [ "$(printf '%s\n' "$want" | sed 's/^.*:\(..:..\..\)$/\1/' | sort)" = "$(printf '%s\n' "$got" | sed 's/^.*:\(..:..\..\)$/\1/' | sort)" ]; then
    ok "topo: the GPUs' PCI bus ids equal nvidia-smi's"
else
    bad "topo: PCI bus ids differ" "nvidia-smi: $want
accelrun:   $got"
fi
if [ "$ngpu" -gt 1 ]; then
    if printf '%s' "$out" | grep -q "NVLink from NVML"; then
        ok "topo: NVLink facts from NVML (dlopen of libnvidia-ml.so.1)"
    else
        bad "topo: NVLink not read from NVML" "$out"
    fi
else
    skipped "NVLink from NVML" "one GPU: no NVLink peers to read"
fi

# ---------------------------------------------------------------- preflight
# the real NVML (core/preflight/nvml.c by dlopen) against nvidia-smi: the
# driver, the GPU's name and compute capability; bf16 passes on 8.0 and newer
cfg=$(mktemp)
printf 'distributed_type: MULTI_GPU\nmixed_precision: bf16\nnum_machines: 1\nnum_processes: %s\n' \
    "$ngpu" >"$cfg"
out=$(timeout 120 build/bin/accelrun preflight "$cfg" --python "$(command -v python3)" --json 2>&1)
printf '%s\n' "$out" | python3 -c '
import json, subprocess, sys
d = json.load(sys.stdin)["nodes"][0]
v, rows = d["versions"], {c["check"]: c for c in d["checks"]}
smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,name,compute_cap,memory.total",
                      "--format=csv,noheader"], capture_output=True, text=True).stdout.splitlines()
drv, name, cc, mem = [x.strip() for x in smi[0].split(",")]
print("# preflight: driver %s, %d GPUs, %s, sm %s" % (v["driver"], len(v["gpus"]), v["gpus"][0]["name"],
      v["gpus"][0]["compute_capability"]))
for k in ("gpus", "precision", "gpu-memory"):
    print("# preflight %s: %s %s" % (k, rows[k]["status"], rows[k]["reason"]))
ok = v["driver"] == drv and len(v["gpus"]) == len(smi) and v["gpus"][0]["name"] == name \
    and v["gpus"][0]["compute_capability"] == cc and rows["gpus"]["status"] == "PASS" \
    and rows["precision"]["status"] == ("PASS" if float(cc) >= 8.0 else "FAIL")
sys.exit(0 if ok else 1)' && ok "preflight: NVML's driver, GPUs, names and compute capability equal nvidia-smi's; gpus and bf16 rows" ||
    bad "preflight against nvidia-smi" "$out"
rm -f "$cfg"

# ---------------------------------------------------------------- nccl backend
# Runs a TAP program under a timeout and adds its results to the totals.
tap() {
    name=$1 limit=$2
    shift 2
    res=$(timeout -k 10 "$limit" "$@" 2>&1)
    rc=$?
    printf '%s\n' "$res" | sed 's/^/# /'
    p=$(printf '%s\n' "$res" | grep '^ok ' | grep -vc '# SKIP')
    s=$(printf '%s\n' "$res" | grep '^ok ' | grep -c '# SKIP')
    f=$(printf '%s\n' "$res" | grep -c '^not ok ')
    pass=$((pass + p)); skip=$((skip + s)); fail=$((fail + f))
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        bad "$name: still running after $limit s (killed)"
    elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        bad "$name: exited $rc"
    else
        echo "# $name: $p passed, $f failed, $s skipped ($(elapsed) s so far)"
    fi
}

if [ "$have_nccl" = no ]; then
    skipped "nccl backend" "no nccl.h under $NCCL_HOME, or no cuda_runtime.h under $CUDA_HOME"
else
    mkdir -p build/gpu
    libs="$(pkg-config --libs yaml-0.1 libcjson hwloc libxxhash 2>/dev/null || echo -lyaml -lcjson -lhwloc -lxxhash)"
    # shellcheck disable=SC2086 # $libs: one flag per word
    if cc -std=gnu11 -O2 -g -Wall -Wextra -Wshadow -Werror \
        -Icore/include -Itopology/include -Ickpt/include -Itests/harness -DACCEL_HAVE_NCCL=1 \
        $cuda_cflags tests/gpu/nccl_gpu.c tests/harness/test.c \
        build/lib/libaccelrun.a $libs -ldl -lm $cuda_libs -pthread -o build/gpu/nccl_gpu \
        2>build/gpu/cc.log; then
        tap "nccl_gpu" 300 build/gpu/nccl_gpu
    else
        bad "nccl_gpu: compile" "$(cat build/gpu/cc.log)"
    fi
    # core/shard's device path against its host path (world 1)
    # shellcheck disable=SC2086 # $libs: one flag per word
    if cc -std=gnu11 -O2 -g -Wall -Wextra -Wshadow -Werror \
        -Icore/include -Itopology/include -Ickpt/include -Itests/harness -DACCEL_HAVE_NCCL=1 \
        $cuda_cflags tests/gpu/shard_gpu.c tests/harness/test.c \
        build/lib/libaccelrun.a $libs -ldl -lm $cuda_libs -lstdc++ -pthread \
        -o build/gpu/shard_gpu 2>build/gpu/cc-shard.log; then
        tap "shard_gpu" 120 build/gpu/shard_gpu
    else
        bad "shard_gpu: compile" "$(cat build/gpu/cc-shard.log)"
    fi
    tap "test_nccl" 120 build/tests/test_nccl
    tap "nccl_fake" 180 sh tests/gpu/fake.sh

    # the benchmark: its table as is, then one line of verdict
    bench_out=$(timeout -k 10 200 build/bench/nccl_bench -b 4K -e 1G -T 180 2>&1)
    rc=$?
    printf '%s\n' "$bench_out"
    [ -n "${OUT:-}" ] && printf '%s\n' "$bench_out" >"$OUT/nccl_bench.txt"
    if [ "$rc" -eq 0 ] && printf '%s\n' "$bench_out" | grep -q ' 1073741824 .* all_reduce '; then
        ok "nccl_bench: all_reduce, all_gather, reduce_scatter from 4 KiB to 1 GiB"
    else
        bad "nccl_bench: exited $rc, or printed no 1 GiB all_reduce line"
    fi
fi

# ---------------------------------------------------------------- training
# the example GPT on the GPU (CUDA kernels, cuBLAS, nccl, device shard)
# against the same training on the CPU
if [ "$have_nccl" = no ]; then
    skipped "GPU training" "no nccl.h under $NCCL_HOME, or no cuda_runtime.h under $CUDA_HOME"
else
    tap "train" 300 bash tests/gpu/train.sh build
fi

echo "# total $(elapsed) s"
echo "gpu: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
