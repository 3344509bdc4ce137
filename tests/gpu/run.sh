#!/bin/sh
# tests/gpu/run.sh: the one script for a machine with an NVIDIA GPU (the
# device machine some sessions are lent).  Today it checks the GPU-facing
# paths that exist: topology discovery with NVML loaded at run time
# (topology/nvml.c) on real hardware, through `accelrun topo`.  The NCCL
# bootstrap, collectives and the sharded runtime add their tests and
# benchmarks here as they land (issues 5 and 6).
# Prints "gpu: N passed, N failed, N skipped"; SKIP with the reason without a GPU.
set -u
cd "$(dirname "$0")/../.."
pass=0 fail=0 skip=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/#   /'; }

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu: SKIP: no NVIDIA GPU here (nvidia-smi -L fails)"
    echo "gpu: 0 passed, 0 failed, 1 skipped"
    exit 0
fi
make -s all NO_CUDA=1 >/dev/null || { echo "gpu: build failed"; exit 1; }
ngpu=$(nvidia-smi -L | grep -c '^GPU ')
nvidia-smi -L | sed 's/^/# /'

out=$(build/bin/accelrun topo --json 2>&1)
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
out=$(build/bin/accelrun topo 2>&1)
printf '%s\n' "$out" | sed 's/^/# /'
# the bus ids hwloc found must be the ones NVML reports
want=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | tr 'A-F' 'a-f' | sed 's/^0000//; s/^00000000/0000/' | sort)
got=$(build/bin/accelrun topo --json | python3 -c 'import json,sys; print("\n".join(sorted(x["pci"] for x in json.load(sys.stdin)["ranks"])))')
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
    skip=$((skip + 1)); echo "ok - NVLink from NVML # SKIP one GPU: no NVLink peers to read"
fi
echo "gpu: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
