#!/bin/sh
# CLI tests: run the real `accelrun` binary on the corpus and on crafted
# configs, and check exit codes and output.  TAP-like lines, then the
# closing "cli: N passed, N failed, N skipped".
set -u
bin=${1:-build/bin/accelrun}
corpus=${ACCEL_SHARED:-../shared}/corpus/accelerate-configs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
pass=0 fail=0 skip=0

ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "${2:-}" ] && echo "$2" | sed 's/^/#   /'; }

# expect NAME EXIT_CODE CMD... ; output in $out
expect() {
    name=$1 want=$2
    shift 2
    out=$("$@" 2>&1)
    got=$?
    if [ "$got" -eq "$want" ]; then ok "$name"; else bad "$name (exit $got, want $want)" "$out"; fi
}

contains() {
    if printf '%s' "$out" | grep -qF -- "$2"; then ok "$1"; else bad "$1: no '$2'" "$out"; fi
}

if [ ! -d "$corpus" ]; then
    echo "cli: SKIP corpus tests: $corpus not found (set ACCEL_SHARED)"; skip=$((skip + 1))
else
    for f in "$corpus"/*.yaml; do
        case $(basename "$f") in
        test_configs__invalid_keys.yaml | test_configs__0_34_0_fp8.yaml) want=1 ;;
        *) want=0 ;;
        esac
        expect "check $(basename "$f") exits $want" $want "$bin" check "$f"
    done
    expect "invalid_keys --json exits 1" 1 "$bin" check --json "$corpus/test_configs__invalid_keys.yaml"
    contains "invalid_keys --json names invalid_key" '"key":	"invalid_key"'
    contains "invalid_keys --json names another_invalid_key" '"key":	"another_invalid_key"'
    contains "invalid_keys --json has a line" '"line":	14'
    expect "check with --nodes mismatch exits 1" 1 "$bin" check --nodes 3 "$corpus/templates__multi_node.yaml"
    contains "--nodes mismatch names num_machines" "num_machines: 2, but the job has 3 nodes"
    expect "check --gpus-per-node too small" 1 "$bin" check --nodes 2 --gpus-per-node 2 "$corpus/templates__multi_node.yaml"
fi

cat >"$tmp/typo.yaml" <<'Y'
distributed_type: FSDP
mixed_precison: bf16
num_processes: 4
fsdp_config:
  fsdp_sharding_stratgy: FULL_SHARD
  offload_params: false
Y
expect "typos exit 1" 1 "$bin" check "$tmp/typo.yaml"
contains "top-level did-you-mean" "typo.yaml:2:1: error: mixed_precison: unknown key; did you mean 'mixed_precision'?"
contains "nested did-you-mean" "typo.yaml:5:3: error: fsdp_config.fsdp_sharding_stratgy: unknown key; did you mean 'fsdp_sharding_strategy'?"

cat >"$tmp/yaml11.yaml" <<'Y'
distributed_type: MULTI_GPU
mixed_precision: no
num_processes: 2
gpu_ids: 0
Y
expect "YAML 1.1 traps exit 1" 1 "$bin" check "$tmp/yaml11.yaml"
contains "unquoted no" "write mixed_precision: 'no'"
contains "gpu_ids int" "write gpu_ids: '0'"

cat >"$tmp/versioned.yaml" <<'Y'
distributed_type: FSDP
num_processes: 2
parallelism_config:
  parallelism_config_tp_size: 2
fsdp_config:
  fsdp_version: 2
ipex_config:
  ipex: true
Y
expect "versions: 1.9 rejects parallelism_config" 1 "$bin" check --accelerate-version 1.9 "$tmp/versioned.yaml"
contains "names the version that added it" "added in accelerate 1.10.0"
expect "versions: latest rejects ipex_config" 1 "$bin" check "$tmp/versioned.yaml"
contains "names the removal and replacement" "removed in accelerate 1.13.0"
expect "bad --accelerate-version exits 2" 2 "$bin" check --accelerate-version 0.9 "$tmp/versioned.yaml"

cat >"$tmp/user.yaml" <<'Y'
distributed_type: FSDP
num_processes: 2
fsdp_config:
  fsdp_offload_params: true
Y
expect "enforced conflict exits 1" 1 "$bin" check --site examples/site.yaml "$tmp/user.yaml"
contains "conflict names both" "the site policy enforces fsdp_config.fsdp_offload_params: False (examples/site.yaml:8:26)"

expect "missing file exits 2" 2 "$bin" check "$tmp/nope.yaml"
contains "missing file is named" "nope.yaml"
expect "no arguments exits 2" 2 "$bin" check
for c in check env; do
    expect "$c --help exits 0" 0 "$bin" $c --help
    contains "$c --help shows usage" "usage: accelrun $c"
done
expect "--help exits 0" 0 "$bin" --help

# env: the 2-node x 4-process CPU example, rank 6 = node 1, local 2
expect "env rank 6 json" 0 "$bin" env examples/cpu-2x4.yaml --nnodes 2 --node-rank 1 --nproc-per-node 4 \
    --local-rank 2 --master-addr n0 --master-port 29511 --format json
contains "RANK 6" '"RANK":	"6"'
contains "ACCELERATE_USE_CPU True" '"ACCELERATE_USE_CPU":	"True"'
contains "MASTER_ADDR n0" '"MASTER_ADDR":	"n0"'
expect "node-level set" 0 "$bin" env examples/cpu-2x4.yaml --nnodes 2 --node-rank 1 --nproc-per-node 4 --format sh
contains "PET_NNODES" "export PET_NNODES='2'"
if printf '%s' "$out" | grep -q "^export RANK="; then bad "node-level set has no RANK"; else ok "node-level set has no RANK"; fi
expect "layout mismatch exits 1" 1 "$bin" env examples/cpu-2x4.yaml --nnodes 2 --node-rank 0 --nproc-per-node 2 --local-rank 0
contains "mismatch names both numbers" "num_processes: 8, the job has 4 processes"
expect "site env reaches the task" 0 "$bin" env "$corpus/templates__multi_gpu.yaml" --site examples/site.yaml --nnodes 1 --node-rank 0 --nproc-per-node 2 --local-rank 1
contains "NCCL_IB_TIMEOUT from the site" "NCCL_IB_TIMEOUT=22"
expect "env of an invalid config exits 1" 1 "$bin" env "$tmp/typo.yaml" --nnodes 1 --node-rank 0 --nproc-per-node 4 --local-rank 0
a=$("$bin" env "$corpus/templates__fsdp.yaml" --nnodes 1 --node-rank 0 --nproc-per-node 2 --local-rank 1 --format dotenv)
b=$("$bin" env "$corpus/templates__fsdp.yaml" --nnodes 1 --node-rank 0 --nproc-per-node 2 --local-rank 1 --format dotenv)
if [ "$a" = "$b" ] && [ -n "$a" ]; then ok "env is deterministic"; else bad "env is deterministic"; fi
if [ "$(printf '%s\n' "$a" | cut -d= -f1)" = "$(printf '%s\n' "$a" | cut -d= -f1 | LC_ALL=C sort)" ]; then
    ok "env is sorted"
else
    bad "env is sorted"
fi

# topo: the DGX-H100-like XML, a granted subset, the switch order of 4 nodes
h100=tests/topo/dgx-h100.xml
expect "topo --xml h100" 0 "$bin" topo --xml "$h100" --nproc-per-node 8
contains "topo: 8 GPUs, 4 NVSwitches" "8 GPUs, 9 NICs, 4 NVSwitches"
contains "topo: rank 7 on GPU 7 with mlx5_7" "7     7      0000:df:00.0  1"
expect "topo granted 4,0" 0 "$bin" topo --xml "$h100" --gpus 4,0 --nproc-per-node 2 --json
if printf '%s' "$out" | python3 -c 'import json,sys; r=json.load(sys.stdin)["ranks"]; sys.exit(0 if [x["gpu"] for x in r]==["0","4"] and r[0]["nic"]=="mlx5_0" else 1)'; then
    ok "topo: only granted GPUs, in topology order, with their NICs"
else
    bad "topo: only granted GPUs, in topology order, with their NICs" "$out"
fi
expect "topo: more ranks than GPUs is an error" 1 "$bin" topo --xml "$h100" --gpus 1,2 --nproc-per-node 3
printf 'SwitchName=leaf1 Nodes=n[1,3]\nSwitchName=leaf2 Nodes=n[2,4]\nSwitchName=spine Switches=leaf[1-2]\n' >"$tmp/topology.conf"
expect "topo: node order" 0 "$bin" topo --xml "$h100" --topology-conf "$tmp/topology.conf" --nodes 'n[1-4]'
contains "topo: leaf-mates adjacent, n1 first" "1          n3               leaf1"
contains "topo: ring crossings against Slurm's order" "ring: 2 leaf-switch crossings (Slurm's order: 4, lower bound: 2)"
printf 'SwitchName=leaf1 Nodes=n1\nSwitchName=leaf1 Nodes=n2\n' >"$tmp/bad-topology.conf"
expect "topo: a bad topology.conf is a located error" 1 "$bin" topo --xml "$h100" --topology-conf "$tmp/bad-topology.conf" --nodes 'n[1-2]'
contains "topo: the error names the file and line" "bad-topology.conf:2"
if command -v dot >/dev/null 2>&1; then
    if "$bin" topo --xml "$h100" --dot | dot -Tpng -o "$tmp/ring.png" && [ -s "$tmp/ring.png" ]; then
        ok "topo --dot renders with Graphviz"
    else
        bad "topo --dot renders with Graphviz"
    fi
else
    skip=$((skip + 1)); echo "ok - topo --dot renders # SKIP Graphviz's dot is not installed"
fi
expect "topo: CPU-only machine" 0 "$bin" topo --xml "${ACCEL_SHARED:-../shared}/corpus/hwloc-xml/32em64t-2n8c2t-pci-normalio.xml"
expect "topo --help" 0 "$bin" topo --help
# an XML with a comment line before <topology> (hwloc itself refuses the blank
# line a dropped comment leaves); NVLink pairs 0-2 and 1-3 put rank 1 on GPU 2
sed 's/^<topology /\n<!-- exported by hand -->\n\n<topology /' tests/topo/nvlink-pairs.xml >"$tmp/commented.xml"
expect "topo: an XML with a comment line loads" 0 "$bin" topo --xml "$tmp/commented.xml" --gpus 0,1,2,3 --nproc-per-node 2
contains "topo: the NVLink pair is planned together" "1     2      0000:1c:00.0"

. "$(dirname "$0")/launch.sh"

echo "cli: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
