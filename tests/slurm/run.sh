#!/bin/bash
# tests/slurm/run.sh [PLUGIN [CLI]]: the SPANK plugin in a real two-node Slurm
# lab (tests/slurm/lab.sh), as `make test-slurm` runs it.
#
#   PLUGIN  the plugin to test (default build/spank/accelrun.so)
#   CLI     the accelrun command, the oracle for the environment (default build/bin/accelrun)
#
# Prints TAP-like lines and the closing "slurm: N passed, N failed, N skipped";
# exits 1 when a case failed.  Skips the whole tier (exit 0, "slurm: SKIP:
# reason") only when it cannot run here: not root, no network namespaces, or
# the Slurm packages cannot be installed.
#
#   ACCELRUN_PLUGSTACK_ARGS  extra plugstack.conf arguments for every case
#   ACCELRUN_LAB_KEEP=1      leave the lab up afterwards (for debugging; then
#                            `tests/slurm/lab.sh down`)
#   ACCELRUN_LAB_ORDER=0     do not run tests/slurm/order.sh (the 4-node
#                            topology order case) at the end
#   ACCELRUN_LAB_VENV        the accelerate venv of case p (default: the one
#                            scripts/lab-venv.sh makes and caches)
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BASE_ARGS=${ACCELRUN_PLUGSTACK_ARGS:-}
VENV=
SITE_PORT_BASE=31000
SITE_PORT_RANGE=200

TIER=slurm
# shellcheck source=tests/slurm/common.sh
. "$HERE/common.sh"
lab_lock "$0" "$@"
export ACCELRUN_SPANK=$PLUGIN ACCELRUN_PLUGSTACK_ARGS=$BASE_ARGS
# the lab of these cases: two nodes, the default topology
export ACCELRUN_LAB_NODES=2
unset ACCELRUN_LAB_TOPOLOGY

# ------------------------------------------------------------------ can we run here?
preflight

torch_reason=""
apt_install python3-torch || torch_reason="cannot install python3-torch: $(tail -n 1 "$apt_log")"
venv_reason=""
/usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || apt_install python3-venv ||
    venv_reason="cannot install python3-venv: $(tail -n 1 "$apt_log")"
rm -f "$apt_log"

require_binaries

# ------------------------------------------------------------------ the lab
W="" E_CFG="" E_CFG_NEW=0
cleanup() {
    if [ "${ACCELRUN_LAB_KEEP:-0}" = 1 ]; then
        echo "# lab left up (ACCELRUN_LAB_KEEP=1); tear down with: $LAB down"
        return
    fi
    # alice's files go first: she may have existed before the lab
    [ -n "$W" ] && rm -rf "$W"
    if [ "$E_CFG_NEW" = 1 ]; then
        rm -f "$E_CFG"
        [ -e "$E_CFG.acclab-saved" ] && mv -f "$E_CFG.acclab-saved" "$E_CFG"
    fi
    "$LAB" down >/dev/null 2>&1 || echo "# warning: lab down failed"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t_start=$SECONDS
lab_up "lab up" "lab up: munged, slurmctld, slurmd n1 and n2 in network namespaces"
lab_workdir acclab
cp "$ROOT/tests/interop/torch_allreduce.py" "$ROOT/tests/interop/accelerate_state.py" "$W/"

# failed NAME: the command must have exited non-zero
failed() {
    if [ "$rc" -ne 0 ]; then
        ok "$1 (exit $rc)"
        return 0
    fi
    bad "$1 (exit 0, want non-zero)" "$out"
    return 1
}

has() { # NAME FIXED-STRING (case-insensitive)
    if printf '%s' "$out" | grep -qiF -- "$2"; then ok "$1"; else bad "$1: no '$2' in the output" "$out"; fi
}

nodes_idle() { # NAME: both nodes back to idle (none drained), within 20 s
    local s="" _
    for _ in $(seq 100); do
        s=$(sinfo -h -N -o '%N %T' | sort -u | tr '\n' ' ')
        [ "$s" = "n1 idle n2 idle " ] && break
        sleep 0.2
    done
    if [ "$s" = "n1 idle n2 idle " ]; then ok "$1"; else bad "$1: sinfo says '$s'" "$(sinfo -R 2>&1)"; fi
}

mkout() { # DIR...: empty output directories owned by alice
    local d
    for d in "$@"; do
        rm -rf "${W:?}/$d"
        mkdir -p "$W/$d"
        chown "$LAB_USER:" "$W/$d"
    done
}

cfg() { # NAME: write $W/NAME from stdin
    cat >"$W/$1"
}

cfg cfg.yaml <<'Y'
# FSDP2 on 2 nodes x 2 GPUs, bf16
compute_environment: LOCAL_MACHINE
distributed_type: FSDP
num_machines: 2
num_processes: 4
mixed_precision: bf16
fsdp_config:
  fsdp_version: 2
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_offload_params: false
  fsdp_reshard_after_forward: true
  fsdp_cpu_ram_efficient_loading: true
Y
cfg cfg-gpu.yaml <<'Y'
compute_environment: LOCAL_MACHINE
distributed_type: MULTI_GPU
num_machines: 2
num_processes: 4
mixed_precision: fp16
Y
cfg cfg-k1.yaml <<'Y'
compute_environment: LOCAL_MACHINE
distributed_type: MULTI_CPU
use_cpu: true
mixed_precision: 'no'
num_machines: 2
num_processes: 3
Y
cfg cfg-k2.yaml <<'Y'
compute_environment: LOCAL_MACHINE
distributed_type: MULTI_CPU
use_cpu: true
mixed_precision: 'no'
num_machines: 2
Y
# f: no mixed_precision (the site default supplies bf16)
cfg cfg-f.yaml <<'Y'
compute_environment: LOCAL_MACHINE
distributed_type: FSDP
num_machines: 2
num_processes: 4
fsdp_config:
  fsdp_version: 2
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer
Y
# g: contradicts the site's enforced fsdp_offload_params: false
cfg cfg-g.yaml <<'Y'
compute_environment: LOCAL_MACHINE
distributed_type: FSDP
num_machines: 2
num_processes: 4
mixed_precision: bf16
fsdp_config:
  fsdp_version: 2
  fsdp_offload_params: true
Y
cfg cfg-j.yaml <<'Y'
compute_environment: LOCAL_MACHINE
distributed_type: MULTI_CPU
use_cpu: true
mixed_precision: 'no'
num_machines: 2
num_processes: 2
Y
cfg bad-syntax.yaml <<'Y'
distributed_type: MULTI_GPU
num_processes: [4, 8
mixed_precision: bf16
Y
cfg bad-key.yaml <<'Y'
distributed_type: MULTI_GPU
mixed_precison: bf16
num_machines: 2
num_processes: 4
Y
cfg cfg-q.yaml <<'Y'
compute_environment: LOCAL_MACHINE
distributed_type: MULTI_CPU
use_cpu: true
mixed_precision: bf16
num_machines: 1
num_processes: 2
Y
cfg cpu.yaml <<'Y'
# CPU job for the PyTorch interop case: gloo over the namespaces' eth0
compute_environment: LOCAL_MACHINE
distributed_type: MULTI_CPU
use_cpu: true
mixed_precision: 'no'
num_machines: 2
num_processes: 4
Y
cfg cfg-t.yaml <<'Y'
# t: MULTI_GPU with the processes from Slurm, for the GPU-order case
compute_environment: LOCAL_MACHINE
distributed_type: MULTI_GPU
mixed_precision: bf16
num_machines: 2
Y
cfg cfg-s.yaml <<'Y'
# s: says 8 processes on 2 machines; the steps of case s have 4
compute_environment: LOCAL_MACHINE
distributed_type: MULTI_GPU
mixed_precision: bf16
num_machines: 2
num_processes: 8
Y
cat >"$W/site-wins.yaml" <<Y
# site policy of case s2: the Slurm step's counts win over the config's
accelrun:
  port_base: $SITE_PORT_BASE
  port_range: $SITE_PORT_RANGE
  slurm_wins: true
Y
cat >"$W/site.yaml" <<Y
# site policy of cases f, g, j
defaults:
  mixed_precision: bf16
enforce:
  fsdp_config:
    fsdp_offload_params: false
accelrun:
  port_base: $SITE_PORT_BASE
  port_range: $SITE_PORT_RANGE
  env:
    NCCL_DEBUG: WARN
Y
# e: a config of the same name in alice's home, told apart by fp16
E_CFG=$HOME_A/cfg.yaml
[ -e "$E_CFG" ] && mv -f "$E_CFG" "$E_CFG.acclab-saved" # alice's own, put back by cleanup
E_CFG_NEW=1
sed 's/^mixed_precision: bf16/mixed_precision: fp16/' "$W/cfg.yaml" >"$E_CFG"
chown "$LAB_USER:" "$E_CFG"
# i: unreadable by alice (root, 600) in a directory she can traverse
mkdir -p "$W/secret"
chmod 755 "$W/secret"
chown -R "$LAB_USER:" "$W"
install -m 600 -o root -g root "$W/cfg.yaml" "$W/secret/cfg.yaml"

PY=/usr/bin/python3
DUMP="$PY $W/dumpenv.py"

# ------------------------------------------------------------------ cases without a site file
# a. srun: every variable `accelrun env` prints, per task
mkout a
A "$W" 60 srun -N2 -n4 --gpus-per-task=1 --accel-config=cfg.yaml $DUMP "$W/a"
ran "a: srun -N2 -n4 --accel-config=cfg.yaml" &&
    check "a: srun -N2 -n4: each task's environment equals accelrun env for its node/local rank" \
        contract "$W/a" "$CLI" "$W/cfg.yaml" --tasks 4 --nproc-per-node 2

# b. sbatch with #SBATCH --accel-config; the batch script itself gets no RANK
mkout b
cat >"$W/b.sh" <<S
#!/bin/bash
#SBATCH -N2 -n4 --gpus-per-task=1
#SBATCH --accel-config=cfg.yaml
#SBATCH -o b/batch.out
echo "BATCH RANK=\${RANK-unset} LOCAL_RANK=\${LOCAL_RANK-unset} WORLD_SIZE=\${WORLD_SIZE-unset} host=\$(hostname)"
srun $DUMP $W/b
S
A "$W" 90 sbatch --wait b.sh
if ran "b: sbatch --wait with #SBATCH --accel-config"; then
    check "b: sbatch: inner srun tasks get the environment" \
        contract "$W/b" "$CLI" "$W/cfg.yaml" --tasks 4 --nproc-per-node 2
    check "b: sbatch: the batch script has no RANK/LOCAL_RANK/WORLD_SIZE" batch "$W/b/batch.out"
else
    printf '%s\n' "$(cat "$W/b/batch.out" 2>/dev/null)" | sed 's/^/#   /'
fi

# c. salloc -N2 ... srun
mkout c
A "$W" 60 salloc -N2 -n4 --gpus-per-task=1 --accel-config=cfg.yaml srun $DUMP "$W/c"
ran "c: salloc -N2 --accel-config=cfg.yaml srun" &&
    check "c: salloc: srun tasks inside the allocation get the environment" \
        contract "$W/c" "$CLI" "$W/cfg.yaml" --tasks 4 --nproc-per-node 2

# d. sbatch --export=NONE
mkout d
cat >"$W/d.sh" <<S
#!/bin/bash
#SBATCH -N2 -n4 --gpus-per-task=1
#SBATCH -o d/batch.out
echo "BATCH RANK=\${RANK-unset} LOCAL_RANK=\${LOCAL_RANK-unset} WORLD_SIZE=\${WORLD_SIZE-unset} host=\$(hostname)"
/usr/bin/srun -N2 -n4 --gpus-per-task=1 $DUMP $W/d
S
A "$W" 90 sbatch --wait --export=NONE --accel-config=cfg.yaml d.sh
if ran "d: sbatch --wait --export=NONE --accel-config=cfg.yaml"; then
    check "d: sbatch --export=NONE: inner srun tasks still get the environment" \
        contract "$W/d" "$CLI" "$W/cfg.yaml" --tasks 4 --nproc-per-node 2
    check "d: sbatch --export=NONE: the batch script has no RANK/LOCAL_RANK/WORLD_SIZE" batch "$W/d/batch.out"
else
    printf '%s\n' "$(cat "$W/d/batch.out" 2>/dev/null)" | sed 's/^/#   /'
fi

# e. a relative path, from alice's home
mkout e
A "$HOME_A" 60 srun -N2 -n4 --gpus-per-task=1 --accel-config=cfg.yaml $DUMP "$W/e"
if ran "e: srun from ~$LAB_USER with --accel-config=cfg.yaml"; then
    check "e: relative path: the tasks got ~$LAB_USER/cfg.yaml's environment" \
        contract "$W/e" "$CLI" "$E_CFG" --tasks 4 --nproc-per-node 2
    check "e: relative path: ACCELERATE_MIXED_PRECISION=fp16 from ~/cfg.yaml, not acclab/cfg.yaml" \
        vars "$W/e" --tasks 4 --eq ACCELERATE_MIXED_PRECISION=fp16
fi

# h. invalid YAML: located errors, non-zero exit, no drained node
A "$W" 60 srun -N2 -n4 --accel-config=bad-syntax.yaml true
if failed "h: syntax error: srun exits non-zero"; then
    if printf '%s' "$out" | grep -qE 'bad-syntax\.yaml:[0-9]+:[0-9]+'; then
        ok "h: syntax error: the message has file:line:column"
    else
        bad "h: syntax error: no bad-syntax.yaml:LINE:COLUMN in the output" "$out"
    fi
fi
A "$W" 60 srun -N2 -n4 --accel-config=bad-key.yaml true
failed "h: unknown key: srun exits non-zero" &&
    has "h: unknown key: the message is bad-key.yaml:2:1 and names the key" "bad-key.yaml:2:1: error: mixed_precison"
cat >"$W/h.sh" <<S
#!/bin/bash
#SBATCH -N2 -n4
#SBATCH -o h.out
srun true
S
A "$W" 90 sbatch --wait --accel-config=bad-syntax.yaml h.sh
failed "h: sbatch --wait of a job with a broken config exits non-zero"
nodes_idle "h: afterwards both nodes are idle, none drained"

# i. a file alice cannot read
A "$W" 60 srun -N2 -n2 --accel-config=secret/cfg.yaml true
failed "i: unreadable config: srun exits non-zero" &&
    has "i: unreadable config: the message says permission denied" "permission denied"

# k. uneven layout: 2 tasks on n1, 1 on n2.  Either the tasks get a consistent
# uneven layout, or the plugin refuses with a located accelrun error.
# k1 says num_processes: 3 (which accelerate itself would spread 1 per machine),
# k2 leaves num_processes to Slurm.
uneven() { # NAME CFG
    mkout "$1"
    A "$W" 60 srun -N2 -n3 --accel-config="$2" $DUMP "$W/$1"
    if [ "$rc" -eq 0 ]; then
        check "$1: srun -N2 -n3 --accel-config=$2: ranks 0..2, WORLD_SIZE=3, LOCAL_WORLD_SIZE 2 and 1" \
            layout "$W/$1" --world 3
    elif printf '%s\n' "$out" | grep -qE "accelrun: .*$2:[0-9]+:[0-9]+: error: .*(num_processes|num_machines|node)"; then
        ok "$1: srun -N2 -n3 --accel-config=$2: refused with a located error"
        printf '%s\n' "$out" | grep -F 'accelrun: ' | grep -F "$2:" | head -n 2 | sed 's/^/#   /'
    else
        bad "$1: srun -N2 -n3 --accel-config=$2: failed without a located accelrun error (exit $rc)" "$out"
    fi
}
uneven k1 cfg-k1.yaml
uneven k2 cfg-k2.yaml

# r. cyclic distribution: Slurm interleaves SLURM_PROCID over the nodes; the
# plugin still numbers ranks contiguously per node, as torchrun does
mkout r
A "$W" 60 srun -N2 -n4 -m cyclic --accel-config=cfg.yaml $DUMP "$W/r"
ran "r: srun -N2 -n4 -m cyclic --accel-config=cfg.yaml" &&
    check "r: -m cyclic: RANK = tasks on earlier nodes + LOCAL_RANK, GROUP_RANK = node" \
        layout "$W/r" --world 4 --contiguous

# s. num_processes in the config against the step: an error naming both numbers
A "$W" 60 srun -N2 -n4 --accel-config=cfg-s.yaml true
failed "s: num_processes 8 in the config, 4 tasks in the step: srun exits non-zero" &&
    has "s: the message names both numbers" "num_processes: 8, the job has 4 processes"

# l. fake GPUs
mkout l
A "$W" 60 srun -N2 -n4 --gpus-per-task=1 --accel-config=cfg-gpu.yaml $DUMP "$W/l"
ran "l: srun --gpus-per-task=1 --accel-config=cfg-gpu.yaml" &&
    check "l: --gpus-per-task=1: CUDA_DEVICE_ORDER=PCI_BUS_ID, CUDA_VISIBLE_DEVICES one of Slurm's GPUs" \
        gpus "$W/l" --tasks 4

# m. without --accel-config the plugin leaves the job alone
mkout m
A "$W" 60 srun -N2 -n4 --gpus-per-task=1 $DUMP "$W/m"
ran "m: srun without --accel-config" &&
    check "m: without --accel-config: no RANK, WORLD_SIZE, MASTER_*, ACCELERATE_*, FSDP_*, CUDA_DEVICE_ORDER" \
        untouched "$W/m" --tasks 4

# q. a step on part of the allocation: MASTER_ADDR is the step's first node (from
# SLURM_STEP_NODELIST, not the job's), and the step's own --accel-config wins over
# the one salloc passed down through the environment
mkout q
A "$W" 60 salloc -N2 -n4 --accel-config=cpu.yaml srun -N1 -n2 -w n2 --accel-config=cfg-q.yaml $DUMP "$W/q"
if ran "q: salloc -N2 --accel-config=cpu.yaml srun -N1 -n2 -w n2 --accel-config=cfg-q.yaml"; then
    check "q: step on n2 only: MASTER_ADDR=n2, WORLD_SIZE=2, the step's config (bf16) wins" \
        vars "$W/q" --tasks 2 --eq SLURMD_NODENAME=n2 --eq MASTER_ADDR=n2 --eq WORLD_SIZE=2 \
        --eq ACCELERATE_MIXED_PRECISION=bf16
    check "q: step on n2 only: each task's environment equals accelrun env --master-addr n2" \
        contract "$W/q" "$CLI" "$W/cfg-q.yaml" --tasks 2 --nproc-per-node 2 --master-addr n2
fi

# o. PyTorch gloo all_reduce across the two nodes with nothing but the plugin's env.
# GLOO_SOCKET_IFNAME: gloo picks its interface from the host name's address; the
# site file's env: may only hold NCCL_*, so the job exports it itself.
if [ -n "$torch_reason" ]; then
    skipped "o: PyTorch gloo all_reduce over 4 tasks" "$torch_reason"
elif ! /usr/bin/python3 -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null; then
    skipped "o: PyTorch gloo all_reduce over 4 tasks" "Debian's python3-torch has no gloo"
else
    A "$W" 150 srun -N2 -n4 --export=ALL,GLOO_SOCKET_IFNAME=eth0 --accel-config=cpu.yaml \
        $PY "$W/torch_allreduce.py"
    if ran "o: srun -N2 -n4 --accel-config=cpu.yaml python3 torch_allreduce.py"; then
        sums=$(printf '%s\n' "$out" | grep -cE '^allreduce rank=([0-3]) env_rank=\1 world=4 sum=10 ')
        ranks=$(printf '%s\n' "$out" | sed -n 's/^allreduce rank=\([0-9]*\) .*sum=10 .*/\1/p' | sort -u | tr '\n' ' ')
        if [ "$sums" -eq 4 ] && [ "$ranks" = "0 1 2 3 " ]; then
            ok "o: torch.distributed gloo env:// all_reduce: ranks 0-3 each printed sum 10"
            printf '%s\n' "$out" | grep '^allreduce' | sort | sed 's/^/#   /'
        else
            bad "o: all_reduce: want 4 lines 'rank=R env_rank=R world=4 sum=10', ranks 0-3" "$out"
        fi
    fi
fi

# p. a real accelerate release's Accelerator() in every task
p_name="p: accelerate Accelerator() in 4 tasks: num_processes, process_index, MULTI_CPU, mixed precision"
p_reason=$torch_reason
[ -n "$p_reason" ] || p_reason=$venv_reason

if [ -z "$p_reason" ]; then
    if PYV=$(sh "$ROOT/scripts/lab-venv.sh" 2>"$W/lab-venv.err"); then
        VENV=$(dirname "$(dirname "$PYV")")
    else
        p_reason="scripts/lab-venv.sh: $(tail -n 1 "$W/lab-venv.err")"
    fi
fi
if [ -n "$p_reason" ]; then
    skipped "$p_name" "$p_reason"
else
    av=$("$VENV/bin/python" -c 'import accelerate, torch; print(accelerate.__version__, "torch", torch.__version__)')
    if /usr/bin/python3 -c 'import torch; x = torch.ones(4, 4, dtype=torch.bfloat16); assert (x @ x).sum().item() == 64' 2>/dev/null; then
        mp=bf16
    else
        mp=no
    fi
    sed -e "s/^mixed_precision: 'no'/mixed_precision: $mp/" "$W/cpu.yaml" >"$W/cfg-p.yaml"
    chown "$LAB_USER:" "$W/cfg-p.yaml"
    A "$W" 150 srun -N2 -n4 --export=ALL,GLOO_SOCKET_IFNAME=eth0 --accel-config=cfg-p.yaml \
        "$VENV/bin/python" "$W/accelerate_state.py"
    if ran "p: srun -N2 -n4 --accel-config=cfg-p.yaml python accelerate_state.py (accelerate $av)"; then
        n=$(printf '%s\n' "$out" | grep -cE "^accelerator num_processes=4 process_index=[0-3] distributed_type=MULTI_CPU mixed_precision=$mp ")
        idx=$(printf '%s\n' "$out" | sed -n 's/^accelerator .*process_index=\([0-9]*\) .*/\1/p' | sort -u | tr '\n' ' ')
        if [ "$n" -eq 4 ] && [ "$idx" = "0 1 2 3 " ]; then
            ok "$p_name=$mp (accelerate $av)"
            printf '%s\n' "$out" | grep '^accelerator' | sort | sed 's/^/#   /'
        else
            bad "$p_name: want 4 lines 'num_processes=4 process_index=0..3 distributed_type=MULTI_CPU mixed_precision=$mp'" "$out"
        fi
    fi
fi

# ------------------------------------------------------------------ cases with the site file
out=$("$LAB" site "$W/site.yaml" 2>&1 && "$LAB" plugstack site=/etc/accelrun/site.yaml $BASE_ARGS 2>&1)
if [ $? -ne 0 ]; then
    bad "site file and plugstack site= argument installed" "$out"
else
    # f. site defaults
    mkout f
    A "$W" 60 srun -N2 -n4 --gpus-per-task=1 --accel-config=cfg-f.yaml $DUMP "$W/f"
    if ran "f: srun with site=/etc/accelrun/site.yaml"; then
        check "f: site defaults: ACCELERATE_MIXED_PRECISION=bf16 (user config omits it), NCCL_DEBUG=WARN" \
            vars "$W/f" --tasks 4 --eq ACCELERATE_MIXED_PRECISION=bf16 --eq NCCL_DEBUG=WARN
        check "f: site: each task's environment equals accelrun env --site" \
            contract "$W/f" "$CLI" "$W/cfg-f.yaml" --tasks 4 --nproc-per-node 2 --site /etc/accelrun/site.yaml
    fi

    # g. enforced key contradicted by the user
    A "$W" 60 srun -N2 -n4 --accel-config=cfg-g.yaml true
    if failed "g: enforced key conflict: srun exits non-zero"; then
        has "g: enforced key conflict: the message names fsdp_config.fsdp_offload_params" "fsdp_offload_params"
        cnt=$(printf '%s\n' "$out" | grep -c 'fsdp_offload_params')
        if [ "$cnt" -eq 1 ]; then
            ok "g: enforced key conflict: the message appears once, not once per task"
        else
            bad "g: enforced key conflict: $cnt lines name fsdp_offload_params, want 1" "$out"
        fi
    fi

    # j. two concurrent steps of one allocation: different ports, both in the site range
    mkout j1 j2
    A "$W" 90 salloc -N2 -n4 --accel-config=cfg-j.yaml bash -c \
        "srun --overlap -N2 -n2 $DUMP $W/j1 & p1=\$!; srun --overlap -N2 -n2 $DUMP $W/j2 & p2=\$!; wait \$p1; r1=\$?; wait \$p2; exit \$((r1 | \$?))"
    ran "j: salloc -N2 with two concurrent sruns" &&
        check "j: concurrent steps: different MASTER_PORT, both in [$SITE_PORT_BASE, $((SITE_PORT_BASE + SITE_PORT_RANGE)))" \
            ports "$W/j1" "$W/j2" --base $SITE_PORT_BASE --range $SITE_PORT_RANGE

    # s2. the same mismatch when the site lets Slurm win: a warning, and the
    # step's own counts (4 tasks on 2 nodes) in every task
    out=$("$LAB" site "$W/site-wins.yaml" 2>&1)
    if [ $? -ne 0 ]; then
        bad "s2: site file with slurm_wins installed" "$out"
    else
        mkout s2
        A "$W" 60 srun -N2 -n4 --accel-config=cfg-s.yaml $DUMP "$W/s2"
        if ran "s2: slurm_wins: srun -N2 -n4 --accel-config=cfg-s.yaml runs"; then
            has "s2: slurm_wins: a warning names both numbers" \
                "says num_processes: 8, the step has 4 tasks; the site lets Slurm win"
            check "s2: slurm_wins: ranks 0..3, WORLD_SIZE=4" layout "$W/s2" --world 4 --contiguous
        fi
    fi
fi

# t. GPU order from a topology (plugstack topology_xml=, tests/topo/nvlink-pairs.xml:
# 4 PCIe GPUs, 0+1 and 2+3 behind one PCIe switch each, NVLink bridges 0-2 and
# 1-3 only; the lab's GPUs are fake device files, so live discovery finds none):
# every task of a node shares Slurm's list (--gres=gpu:4), permuted, never
# changed.  The node's 2 ranks take the NVLink pair 0,2 (`accelrun topo --xml
# tests/topo/nvlink-pairs.xml --gpus 0,1,2,3 --nproc-per-node 2`), then come the
# other granted GPUs in Slurm's order: 0,2,1,3, not Slurm's 0,1,2,3.
install -m 644 "$ROOT/tests/topo/nvlink-pairs.xml" "$W/nvlink-pairs.xml"
out=$("$LAB" plugstack topology_xml="$W/nvlink-pairs.xml" $BASE_ARGS 2>&1)
if [ $? -ne 0 ]; then
    bad "t: plugstack topology_xml= installed" "$out"
else
    mkout t
    A "$W" 60 srun -N2 -n4 --gres=gpu:4 --accel-config=cfg-t.yaml $DUMP "$W/t"
    ran "t: srun -N2 -n4 --gres=gpu:4 with topology_xml=nvlink-pairs.xml" &&
        check "t: CUDA_VISIBLE_DEVICES: one list per node, a permutation of SLURM_STEP_GPUS, exactly 0,2,1,3 (NVLink pair first)" \
            perm "$W/t" --tasks 4 --want 0,2,1,3
fi

# u. NIC and CPUs from a topology (tests/topo/two-socket.xml: CPU 0 and CPU 1
# on two sockets, GPUs 0,1 and HCA mlx5_0 behind socket 0's PCI switch, GPUs
# 2,3 and mlx5_1 behind socket 1's).  Each task's NCCL_IB_HCA is the HCA of
# the GPU it uses; a task Slurm left on both CPUs (one task per node of an
# exclusive allocation) is bound to its GPU's CPU; Slurm's own binding, a
# user's NCCL_IB_HCA and the site's nic_binding/cpu_binding: none win.
U_MAP=0=mlx5_0,1=mlx5_0,2=mlx5_1,3=mlx5_1
install -m 644 "$ROOT/tests/topo/two-socket.xml" "$W/two-socket.xml"
out=$("$LAB" plugstack topology_xml="$W/two-socket.xml" $BASE_ARGS 2>&1)
if [ $? -ne 0 ]; then
    bad "u: plugstack topology_xml=two-socket.xml installed" "$out"
else
    mkout u1 u2 u3 u4 u5 u6
    A "$W" 60 srun -N2 -n4 --gres=gpu:4 --accel-config=cfg-t.yaml $DUMP "$W/u1"
    ran "u1: srun -N2 -n4 --gres=gpu:4 with topology_xml=two-socket.xml" &&
        check "u1: shared GPU list: every task's NCCL_IB_HCA is its GPU's HCA (ranks 0,1 of a node on socket 0: =mlx5_0)" \
            nic "$W/u1" --tasks 4 --map $U_MAP
    A "$W" 60 srun -N2 -n4 --gpus-per-task=1 --accel-config=cfg-t.yaml $DUMP "$W/u2"
    ran "u2: srun -N2 -n4 --gpus-per-task=1" &&
        check "u2: per-task GPUs: NCCL_IB_HCA follows each task's own GPU" \
            nic "$W/u2" --tasks 4 --map $U_MAP
    A "$W" 60 salloc -Q -N2 --exclusive srun --ntasks-per-node=1 --gres=gpu:4 \
        --accel-config=cfg-t.yaml $DUMP "$W/u3"
    ran "u3: one task per node of an exclusive allocation (Slurm leaves it on CPUs 0-1)" &&
        check "u3: the task is bound to its GPU's CPU 0 and uses mlx5_0" \
            vars "$W/u3" --tasks 2 --cpus 0 --eq NCCL_IB_HCA==mlx5_0
    A "$W" 60 salloc -Q -N2 --exclusive srun --ntasks-per-node=1 --gres=gpu:4 $DUMP "$W/u4"
    ran "u4: the same without --accel-config" &&
        check "u4: without the plugin the task runs on CPUs 0-1 (u3's binding is the plugin's)" \
            vars "$W/u4" --tasks 2 --cpus 0-1 --unset NCCL_IB_HCA
    A "$W" 60 srun -N2 -n4 --gres=gpu:4 --export=ALL,NCCL_IB_HCA=mlx5_7 --accel-config=cfg-t.yaml \
        $DUMP "$W/u5"
    ran "u5: srun with the user's own NCCL_IB_HCA" &&
        check "u5: the user's NCCL_IB_HCA=mlx5_7 is kept" vars "$W/u5" --tasks 4 --eq NCCL_IB_HCA=mlx5_7
    printf 'accelrun:\n  nic_binding: none\n  cpu_binding: none\n' >"$W/site-nobind.yaml"
    out=$("$LAB" site "$W/site-nobind.yaml" 2>&1 &&
        "$LAB" plugstack site=/etc/accelrun/site.yaml topology_xml="$W/two-socket.xml" $BASE_ARGS 2>&1)
    if [ $? -ne 0 ]; then
        bad "u6: site file with nic_binding/cpu_binding: none installed" "$out"
    else
        A "$W" 60 salloc -Q -N2 --exclusive srun --ntasks-per-node=1 --gres=gpu:4 \
            --accel-config=cfg-t.yaml $DUMP "$W/u6"
        ran "u6: site nic_binding: none, cpu_binding: none" &&
            check "u6: no NCCL_IB_HCA, CPUs 0-1 left as Slurm set them" \
                vars "$W/u6" --tasks 2 --cpus 0-1 --unset NCCL_IB_HCA
    fi
fi

# v. core/bootstrap + core/comm across the two hosts: build/tests/comm_check
# in 4 tasks reads only the plugin's environment, meets at MASTER_ADDR:
# MASTER_PORT, and checks every collective, type and size against its own
# answer; then rank 2 kills itself inside the largest all_reduce and the
# other ranks, on both hosts, fail naming it instead of hanging.  --split:
# the node and rail communicators of accel_comm_split_nodes.
"$LAB" plugstack $BASE_ARGS >/dev/null 2>&1 || bad "v: plugstack restored"
if [ -x "$COMM_CHECK" ]; then
    install -m 755 "$COMM_CHECK" "$W/comm_check"
    A "$W" 120 srun -N2 -n4 --accel-config=cfg-t.yaml "$W/comm_check" --split
    if ran "v1: srun -N2 -n4 comm_check --split (socket backend, 2 hosts)"; then
        if [ "$(printf '%s\n' "$out" | grep -c 'checks passed')" -eq 4 ] &&
            printf '%s\n' "$out" | grep -q '(host n1, socket)' &&
            printf '%s\n' "$out" | grep -q '(host n2, socket)'; then
            ok "v1: all 4 ranks on n1 and n2 passed every check ($(printf '%s\n' "$out" | grep -m1 -o '[0-9]* checks passed'))"
            if [ "$(printf '%s\n' "$out" | grep -c 'node communicator [01] of 2, rail communicator [01] of 2')" -eq 4 ]; then
                ok "v1: split_nodes: a node communicator of 2 on each host, a rail communicator of 2 across them"
            else
                bad "v1: split_nodes: a node communicator of 2 on each host, a rail communicator of 2 across them" "$out"
            fi
        else
            bad "v1: all 4 ranks on n1 and n2 passed every check" "$out"
        fi
    fi
    A "$W" 120 srun -N2 -n4 --kill-on-bad-exit=0 --accel-config=cfg-t.yaml \
        --export=ALL,ACCELRUN_TIMEOUT=30 "$W/comm_check" --die 2
    if [ "$rc" -ne 0 ] && [ "$(printf '%s\n' "$out" | grep -c 'ACCEL_EPEER: .*rank 2 (')" -eq 3 ]; then
        ok "v2: rank 2 killed mid-all_reduce: ranks 0, 1, 3 fail with ACCEL_EPEER naming rank 2"
    else
        bad "v2: rank 2 killed mid-all_reduce: ranks 0, 1, 3 fail with ACCEL_EPEER naming rank 2 (exit $rc)" "$out"
    fi
else
    bad "v: $COMM_CHECK is missing (make builds it)"
fi

# w. the example trainer (examples/gpt, core/shard over the socket
# collectives) in 4 tasks on the two hosts with --accel-config=gpt-cpu.yaml
# (FSDP, FULL_SHARD, CPU): its loss curve must equal, bit for bit, the one
# `accelrun launch -n 4` gives with the same config on one machine (the same
# world size, so the same reduction order).
TRAINER=$(dirname "$CLI")/train_gpt
if [ -x "$TRAINER" ]; then
    install -m 755 "$TRAINER" "$W/train_gpt"
    install -m 644 "$ROOT/examples/gpt-cpu.yaml" "$W/gpt-cpu.yaml"
    install -m 755 "$CLI" "$W/accelrun"
    W_ARGS="--steps 40 --print-every 10"
    A "$W" 300 srun -N2 -n4 --accel-config=gpt-cpu.yaml "$W/train_gpt" $W_ARGS --loss-log "$W/w-slurm.log"
    if ran "w: srun -N2 -n4 --accel-config=gpt-cpu.yaml train_gpt (2 hosts)"; then
        slurm_out=$out
        A "$W" 300 "$W/accelrun" launch -n 4 --config gpt-cpu.yaml -- "$W/train_gpt" $W_ARGS --loss-log "$W/w-launch.log"
        if ran "w: accelrun launch -n 4 --config gpt-cpu.yaml train_gpt (one host)"; then
            if [ -s "$W/w-slurm.log" ] && cmp -s "$W/w-slurm.log" "$W/w-launch.log"; then
                ok "w: the two runs' loss curves are identical ($(grep -v '^#' "$W/w-slurm.log" | head -1 | cut -d' ' -f2) -> $(grep -v '^#' "$W/w-slurm.log" | tail -1 | cut -d' ' -f2) over $(grep -cv '^#' "$W/w-slurm.log") steps, $(grep '^# val' "$W/w-slurm.log"))"
            else
                bad "w: the two runs' loss curves are identical" "$(diff "$W/w-slurm.log" "$W/w-launch.log" | head; printf '%s\n' "$slurm_out" | tail -5)"
            fi
        fi
        # w2. checkpoints across the hosts (ckpt/, docs/ckpt.md): the same job
        # saving every 20 steps (rank 0 on n1 commits files that ranks on n2
        # wrote) trains exactly as without; a second job resumed from step 20
        # continues bit for bit.
        A "$W" 300 srun -N2 -n4 --accel-config=gpt-cpu.yaml "$W/train_gpt" $W_ARGS --ckpt-dir "$W/w-ckpt" --save-every 20 --loss-log "$W/w2-first.log"
        if ran "w2: srun -N2 -n4 train_gpt --ckpt-dir --save-every 20 (2 hosts)"; then
            if cmp -s "$W/w-slurm.log" "$W/w2-first.log" && grep -q '"world_size":4' "$W/w-ckpt/step-00000020/manifest.json" 2>/dev/null; then
                ok "w2: saving checkpoints leaves the loss curve as it was; step 20 committed by 4 ranks on 2 hosts"
            else
                bad "w2: saving checkpoints leaves the loss curve as it was; step 20 committed by 4 ranks on 2 hosts" "$(diff "$W/w-slurm.log" "$W/w2-first.log" | head; ls -l "$W/w-ckpt" "$W/w-ckpt"/* 2>&1)"
            fi
            rm -rf "$W/w-ckpt/step-00000040"
            A "$W" 300 srun -N2 -n4 --accel-config=gpt-cpu.yaml "$W/train_gpt" $W_ARGS --ckpt-dir "$W/w-ckpt" --loss-log "$W/w2-resumed.log"
            if ran "w2: a second job resumes from step 20 (2 hosts)"; then
                has "w2: the second job says it resumed from step 20" "resumed from $W/w-ckpt/step-00000020 (saved by 4 ranks)"
                if tail -n +21 "$W/w-slurm.log" | cmp -s - "$W/w2-resumed.log"; then
                    ok "w2: the resumed job's steps 21..40 and validation loss equal the uninterrupted job's, bit for bit"
                else
                    bad "w2: the resumed job's steps 21..40 and validation loss equal the uninterrupted job's, bit for bit" "$(tail -n +21 "$W/w-slurm.log" | diff - "$W/w2-resumed.log" | head)"
                fi
            fi
        fi
        # w3. asynchronous saves through each node's own local tier
        # ($W/local-<node>), copied up to the root both hosts share, where
        # rank 0 commits; then a second job resumes bit for bit.  The root is
        # on the host's file system (shared by the two namespaces), not NFS:
        # said below, with the reason, when this kernel cannot serve NFS.
        if grep -qw nfsd /proc/filesystems && grep -qw nfs /proc/filesystems; then
            echo "# w3: this kernel has NFS (nfsd and nfs in /proc/filesystems); the lab still saves through the host's file system"
        else
            echo "# w3: saves through the host's file system that n1 and n2 share, not NFS: kernel $(uname -r) has no NFS server or client (no nfsd or nfs in /proc/filesystems; mount -t nfsd: unknown filesystem type)"
        fi
        W3="--ckpt-dir $W/w3-ckpt --async-save --save-every 20"
        # shellcheck disable=SC2016  # expanded by the task's sh
        A "$W" 300 srun -N2 -n4 --accel-config=gpt-cpu.yaml sh -c 'exec "$0" "$@" --ckpt-local "'"$W"'/local-$SLURMD_NODENAME"' \
            "$W/train_gpt" $W_ARGS $W3 --loss-log "$W/w3-first.log"
        if ran "w3: srun -N2 -n4 train_gpt --async-save --ckpt-local (a tier per host)"; then
            if cmp -s "$W/w-slurm.log" "$W/w3-first.log" && grep -q '"world_size":4' "$W/w3-ckpt/step-00000040/manifest.json" 2>/dev/null &&
                ls "$W"/local-n1/w3-ckpt-*/step-00000040/rank-00000-of-00004.safetensors >/dev/null 2>&1 &&
                ls "$W"/local-n2/w3-ckpt-*/step-00000040/rank-00003-of-00004.safetensors >/dev/null 2>&1 &&
                [ "$(printf '%s\n' "$out" | grep -c 'checkpoint .*committed')" -ge 2 ]; then
                ok "w3: asynchronous saves through each host's local tier leave the loss curve as it was; steps 20 and 40 committed in the shared root from n1's and n2's copies"
            else
                bad "w3: asynchronous saves through each host's local tier leave the loss curve as it was" "$(diff "$W/w-slurm.log" "$W/w3-first.log" | head; ls -l "$W/w3-ckpt" "$W"/local-n* 2>&1 | head -20; printf '%s\n' "$out" | tail -5)"
            fi
            rm -rf "$W/w3-ckpt/step-00000040" "$W"/local-n*/w3-ckpt-*/step-00000040
            # shellcheck disable=SC2016
            A "$W" 300 srun -N2 -n4 --accel-config=gpt-cpu.yaml sh -c 'exec "$0" "$@" --ckpt-local "'"$W"'/local-$SLURMD_NODENAME"' \
                "$W/train_gpt" $W_ARGS $W3 --loss-log "$W/w3-resumed.log"
            if ran "w3: a second job resumes from step 20 (2 hosts, local tiers)" &&
                tail -n +21 "$W/w-slurm.log" | cmp -s - "$W/w3-resumed.log"; then
                ok "w3: the second job resumed from step 20 bit for bit (steps 21..40 and validation)"
            else
                bad "w3: the second job resumed from step 20 bit for bit" "$(tail -n +21 "$W/w-slurm.log" | diff - "$W/w3-resumed.log" | head)"
            fi
        fi
    fi
else
    bad "w: $TRAINER is missing (make builds it)"
fi

# n. a bad plugstack argument breaks only the jobs that use --accel-config
out=$("$LAB" plugstack port_base=abc $BASE_ARGS 2>&1)
if [ $? -ne 0 ]; then
    bad "n: plugstack port_base=abc installed" "$out"
else
    A "$W" 60 srun -N2 -n2 hostname
    if ran "n: bad plugstack argument: srun without --accel-config still runs"; then
        if [ "$(printf '%s\n' "$out" | grep -xE 'n[12]' | sort -u | tr '\n' ' ')" = "n1 n2 " ]; then
            ok "n: bad plugstack argument: the job without --accel-config ran on n1 and n2"
        else
            bad "n: bad plugstack argument: no output from n1 and n2" "$out"
        fi
    fi
    cat >"$W/n.sh" <<S
#!/bin/bash
#SBATCH -N2 -n2
#SBATCH -o n.out
srun hostname
S
    A "$W" 90 sbatch --wait n.sh
    ran "n: bad plugstack argument: sbatch --wait without --accel-config still runs"
    A "$W" 60 srun -N2 -n2 --accel-config=cfg.yaml true
    failed "n: bad plugstack argument: srun with --accel-config fails" &&
        has "n: bad plugstack argument: the message names port_base" "port_base"
fi
"$LAB" plugstack $BASE_ARGS >/dev/null 2>&1 || bad "plugstack restored"

echo "# cases took $((SECONDS - t_start)) s"

# ------------------------------------------------------------------ node order (order.sh)
# a 4-node lab with a topology.conf whose leaf switches interleave the node
# names, after this lab is down; its counts are added to the closing line
if [ "${ACCELRUN_LAB_ORDER:-1}" != 0 ]; then
    cleanup
    trap - EXIT
    W="" E_CFG_NEW=0
    olog=$(mktemp)
    bash "$HERE/order.sh" "$PLUGIN" "$CLI" | tee "$olog"
    oline=$(grep -E '^order: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$olog" | tail -n 1)
    if [ -n "$oline" ]; then
        set -- $oline
        pass=$((pass + $2)) fail=$((fail + $4)) skip=$((skip + $6))
    elif grep -q '^order: SKIP: ' "$olog"; then
        skip=$((skip + 1))
    else
        bad "order.sh printed its closing line 'order: N passed, N failed, N skipped'"
    fi
    rm -f "$olog"
fi
finish
