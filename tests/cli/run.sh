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

# ckpt: checkpoints saved by tests/ckpt/ckpt_tool (built beside the tests)
tool=${CKPT_TOOL:-$(dirname "$bin")/../tests/ckpt_tool}
expect "ckpt --help" 0 "$bin" ckpt --help
contains "ckpt --help shows usage" "usage: accelrun ckpt ls ROOT"
expect "ckpt ls: a missing root exits 2" 2 "$bin" ckpt ls "$tmp/no-such-root"
contains "ckpt ls: the missing root is named" "checkpoint root $tmp/no-such-root: couldn't open: No such file or directory"
expect "ckpt: an unknown subcommand exits 2" 2 "$bin" ckpt frobnicate
expect "ckpt verify: no checkpoint exits 2" 2 "$bin" ckpt verify "$tmp"
contains "ckpt verify: says what is missing" "holds no checkpoint"
if [ ! -x "$tool" ]; then
    skip=$((skip + 1)); echo "ok - ckpt on saved checkpoints # SKIP no $tool (make $tool)"
else
    ck=$tmp/ck
    mkdir -p "$ck"
    if ! "$tool" save "$ck" --world 2 --step 100 --meta seed=7 >/dev/null ||
        ! "$tool" save "$ck" --world 3 --step 200 >/dev/null; then
        bad "ckpt_tool saves two checkpoints"
    fi
    mkdir "$ck/step-00000300" && cp "$ck/step-00000200/rank-00000-of-00003.safetensors" "$ck/step-00000300/"
    expect "ckpt ls" 0 "$bin" ckpt ls "$ck"
    contains "ckpt ls: the newest committed is loaded and latest" "step-00000200        200  committed                           3"
    contains "ckpt ls: marks" "<- load, latest"
    contains "ckpt ls: an attempt without a manifest" "step-00000300        300  incomplete (no manifest.json)"
    contains "ckpt ls: summary" "$ck: 2 committed, 1 not; a load takes step-00000200"
    expect "ckpt verify ROOT (the newest committed)" 0 "$bin" ckpt verify "$ck"
    contains "ckpt verify: OK line" "$ck/step-00000200: step 200, world 3, 10 tensors, 11876 bytes: OK"
    expect "ckpt show" 0 "$bin" ckpt show "$ck/step-00000100"
    contains "ckpt show: world size" "world size  2"
    contains "ckpt show: metadata" "metadata    seed=7"
    contains "ckpt show: a 3-D F16 tensor" "h.0.attn.rotary           F16    [2, 3, 5]"
    cp -r "$ck/step-00000100" "$tmp/flipped"
    f=$tmp/flipped/rank-00001-of-00002.safetensors
    size=$(wc -c <"$f")
    last=$(od -An -tu1 -j $((size - 1)) -N1 "$f" | tr -d ' ')
    # shellcheck disable=SC2059 # the octal escape of the flipped byte is the format
    printf "\\$(printf %o $((255 - last)))" | dd of="$f" bs=1 seek=$((size - 1)) conv=notrunc 2>/dev/null
    expect "ckpt verify: a flipped byte exits 1" 1 "$bin" ckpt verify "$tmp/flipped"
    contains "ckpt verify: names the damage" "checksum mismatch"
    cp -r "$ck/step-00000100" "$tmp/short"
    f=$tmp/short/rank-00000-of-00002.safetensors
    head -c 1000 "$f" >"$f.cut" && mv "$f.cut" "$f"
    expect "ckpt verify: a truncated rank file exits 1" 1 "$bin" ckpt verify "$tmp/short"
    contains "ckpt verify: names the short file" "the manifest says"
    mkdir -p "$tmp/only-incomplete/step-00000001"
    expect "ckpt verify: only an incomplete attempt exits 2" 2 "$bin" ckpt verify "$tmp/only-incomplete"
    contains "ckpt verify: says no committed checkpoint" "holds no committed checkpoint"
    expect "ckpt consolidate" 0 "$bin" ckpt consolidate "$ck" "$tmp/hf"
    if [ -s "$tmp/hf/model.safetensors" ] && [ ! -e "$tmp/hf/model.safetensors.index.json" ]; then
        ok "ckpt consolidate: model.safetensors, no index"
    else
        bad "ckpt consolidate: model.safetensors, no index" "$(ls -l "$tmp/hf")"
    fi
    contains "ckpt consolidate: optimizer state left out" "(2 optimizer tensors left out)"
    expect "ckpt consolidate --max-shard-size 2KB" 0 "$bin" ckpt consolidate "$ck" "$tmp/hf2" --max-shard-size 2KB
    if [ -s "$tmp/hf2/model.safetensors.index.json" ] && [ -s "$tmp/hf2/model-00001-of-00004.safetensors" ] &&
        [ ! -e "$tmp/hf2/model.safetensors" ]; then
        ok "ckpt consolidate: 4 shards (huggingface_hub's split of these tensors at 2 KB) and an index"
    else
        bad "ckpt consolidate: shards and an index" "$(ls -l "$tmp/hf2")"
    fi
    contains "ckpt consolidate: prints the index" "model.safetensors.index.json: 8 tensors in shards, total_size 8672"
    expect "ckpt consolidate: a bad --max-shard-size exits 2" 2 "$bin" ckpt consolidate "$ck" "$tmp/hf3" --max-shard-size 5XB
    expect "ckpt verify: --max-shard-size is consolidate's" 2 "$bin" ckpt verify "$ck" --max-shard-size 5GB
    # a copied checkpoint under a newer name: its manifest does not load, and a load
    # of the root fails on it rather than falling back to an older step
    cp -r "$ck/step-00000100" "$ck/step-00000400"
    expect "ckpt ls: a damaged newest manifest" 0 "$bin" ckpt ls "$ck"
    contains "ckpt ls: says why" "'step' is 100 but the directory is step-00000400"
    contains "ckpt ls: says a load fails" "$ck: 2 committed, 2 not; a load fails: $ck/step-00000400/manifest.json"
    expect "ckpt verify: a damaged newest manifest exits 1" 1 "$bin" ckpt verify "$ck"
    # a newest checkpoint with a truncated rank file: ls says the load fails
    # (the resume would, with EIO), not "<- load"
    mkdir -p "$tmp/cut" && cp -r "$ck/step-00000100" "$tmp/cut/"
    f=$tmp/cut/step-00000100/rank-00001-of-00002.safetensors
    head -c 1000 "$f" >"$f.cut" && mv "$f.cut" "$f"
    expect "ckpt ls: a truncated rank file" 0 "$bin" ckpt ls "$tmp/cut"
    contains "ckpt ls: a truncated rank file fails the load" "a load fails: $tmp/cut/step-00000100/rank-00001-of-00002.safetensors: 1000 bytes, the manifest says"
    if printf '%s' "$out" | grep -qF -- "<- load"; then
        bad "ckpt ls: a truncated rank file is not marked '<- load'" "$out"
    else
        ok "ckpt ls: a truncated rank file is not marked '<- load'"
    fi
fi

# a number past int64 is not printed as 9223372036854775807, and no
# divisibility error follows it
printf 'distributed_type: MULTI_GPU\nnum_machines: 2\nnum_processes: 99999999999999999999999999\n' >"$tmp/huge.yaml"
expect "check: num_processes past int64 exits 1" 1 "$bin" check "$tmp/huge.yaml"
contains "check: past int64 says so" "num_processes: the number is past the 64-bit integer range; use a value from 1 to 16777216"
if printf '%s' "$out" | grep -qF -- "9223372036854775807"; then bad "check: past int64: no clamped value, no divisibility error" "$out"; else ok "check: past int64: no clamped value, no divisibility error"; fi
# a /proc file reports size 0 but is not empty
expect "check /proc/self/status exits 2" 2 "$bin" check /proc/self/status
contains "check /proc/self/status: not 'the file is empty'" "reports a size of 0 but has data"

. "$(dirname "$0")/launch.sh"
. "$(dirname "$0")/readme.sh"

echo "cli: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
