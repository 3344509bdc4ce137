#!/usr/bin/env bash
# tests/k8s/podlab.sh: the pod lab.  The two Pods of an Indexed Job, made
# with the official `kubernetes` client's models and mutated by a real
# accelrun-webhook (TLS on loopback, a throwaway CA; the patch applied with
# `jsonpatch`), are run as two network namespaces on this machine
# (accelpod-0/1, a veth pair on 10.251.73.0/24, nothing in the root
# namespace), each with its own UTS namespace (hostname <job>-<i>) and an
# /etc/hosts (/etc/netns/<ns>/hosts, bind-mounted by `ip netns exec`) like
# the kubelet's plus what cluster DNS would answer for
# <job>-<i>.<subdomain>.<ns>.svc.  Each container's command runs with exactly
# its patched spec's env (env -i; plus PATH and HOME of the "image" and the
# kubelet's HOSTNAME; the Job controller's JOB_COMPLETION_INDEX is in the
# spec, a fieldRef resolved here), in its workingDir.  Cases:
#   train   examples/gpt-cpu.yaml on 2 pods x 2 processes (`accelrun launch`
#           in each pod, PET_* from the webhook): the loss log equals
#           `accelrun launch -n 4` on one machine (bit-identical, else the
#           tolerances of tests/examples/run.sh: every step 1e-4, final and
#           validation 1e-5)
#   gloo    1 process per pod, torch_allreduce.py run directly: sum 3, world 2
#   accel   1 process per pod, accelerate's Accelerator() (accelerate_state.py)
#   launch  2 processes per pod, `accelrun launch -- python accelerate_state.py`
# and for every pod: the container process's environment (/proc/PID/environ,
# read once its command is exec'd) equals the patched spec's env plus the
# kubelet's variables, nothing else.  PODLAB_SPECS=DIR adds the patched Pods
# of DIR (*.json, *.get: `kubectl get pod -o json`; make test-webhook passes
# those tests/k8s/live.sh stored through the real API server), grouped by
# Job: they run as they are and get the checks of the case their command is
# (train_gpt, torch_allreduce.py, accelerate_state.py; a command not on this
# machine: SKIP, and /bin/sleep exec'd in its place for the env check).
#
# The namespaces are used under the Slurm lab's host lock (tests/slurm/lock.sh,
# waited for at most PODLAB_LOCK_WAIT seconds, default 300, else SKIP).  Root
# only.  Everything is removed on exit, failure or signal.
#
# usage: bash tests/k8s/podlab.sh [BUILD]   (default build: bin/accelrun,
#        bin/accelrun-webhook, bin/train_gpt)      STEPS (default 200)
#        PODLAB_KEEP=1 keeps the temporary folder (patched Pods, outputs, environs)
set -u
# shellcheck disable=SC2034  # tap.sh reads them
TAP_NAME=k8s-podlab TAP_TAIL=25
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=tests/lib/tap.sh
. "$ROOT/tests/lib/tap.sh"
# shellcheck source=tests/k8s/lib.sh
. "$ROOT/tests/k8s/lib.sh" # wh_ca, wh_cert, wh_start
# shellcheck source=tests/slurm/lock.sh
. "$ROOT/tests/slurm/lock.sh"

BUILD=${1:-build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
WH=$BUILD/bin/accelrun-webhook
CLI=$BUILD/bin/accelrun
TRAIN=$BUILD/bin/train_gpt
STEPS=${STEPS:-200}
LOCK_WAIT=${PODLAB_LOCK_WAIT:-300}
FP32_STEP_TOL=1e-4
FP32_FINAL_TOL=1e-5
NSP=accelpod    # namespaces accelpod-0 and accelpod-1 (the Slurm lab's are acclab-*)
NET=10.251.73   # pod i is $NET.1$i; the lab picks from 10.9/10.19/10.29/10.39/172.31.239
IMAGE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
IMAGE_HOME=/root
t_start=$SECONDS

skip_all() {
    skipped "$1" "$2"
    finish
}
[ "$(id -u)" = 0 ] || skip_all "pod lab" "not root (network namespaces and /etc/netns)"
for f in "$WH" "$CLI" "$TRAIN"; do
    [ -x "$f" ] || skip_all "pod lab" "no $f (make all)"
done
for tool in ip unshare flock timeout openssl pgrep; do
    command -v $tool >/dev/null || skip_all "pod lab" "no $tool (sh scripts/deps.sh test)"
done
if ! PY=$(sh "$ROOT/scripts/k8s-venv.sh" 2>/tmp/k8s-podlab-venv.$$); then
    why=$(cat /tmp/k8s-podlab-venv.$$)
    rm -f /tmp/k8s-podlab-venv.$$
    skip_all "pod lab" "no Kubernetes venv: ${why:-scripts/k8s-venv.sh failed}"
fi
rm -f /tmp/k8s-podlab-venv.$$
SPECS() { "$PY" "$HERE/podlab/specs.py" "$@"; }

T=$(mktemp -d /tmp/k8s-podlab.XXXXXX)
WPID=
NETNS_MADE=0
ETC_NETNS_MADE=0 # /etc/netns did not exist: removed again when empty
[ -d /etc/netns ] || ETC_NETNS_MADE=1
POD_PIDS=()

# the namespaces' processes, SIGKILLed; then the namespaces and their files
netns_down() {
    local i p
    for i in 0 1; do
        [ -e "/run/netns/$NSP-$i" ] || { rm -rf "/etc/netns/$NSP-$i"; continue; }
        for _ in 1 2 3; do
            p=$(ip netns pids "$NSP-$i" 2>/dev/null)
            [ -z "$p" ] && break
            # shellcheck disable=SC2086  # a list of PIDs
            kill -9 $p 2>/dev/null
            sleep 0.2
        done
        ip netns del "$NSP-$i" 2>/dev/null
        rm -rf "/etc/netns/$NSP-$i"
    done
}
# shellcheck disable=SC2317  # called by the traps
cleanup() {
    local p
    for p in "${POD_PIDS[@]}" $WPID; do kill "$p" 2>/dev/null; done
    for p in "${POD_PIDS[@]}" $WPID; do
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    if [ "$NETNS_MADE" = 1 ]; then
        netns_down
        [ "$ETC_NETNS_MADE" = 1 ] && rmdir /etc/netns 2>/dev/null
    fi
    if [ "${PODLAB_KEEP:-0}" = 1 ]; then echo "# kept $T (patched Pods: $T/<case>/pod-<i>.json)"
    else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# ---------------------------------------------------------------- 1. the webhook
wh_ca "$T" accelrun-podlab-ca
wh_cert "$T" tls 5151 || { bad "throwaway CA and server certificate" "$(cat "$T/openssl.log")"; finish; }

wh_start "$WH" "$T/webhook.log" --tls-cert "$T/tls.crt" --tls-key "$T/tls.key" -v
WPID=$WH_PID PORT=$WH_PORT
[ -n "$PORT" ] || { bad "accelrun-webhook starts on 127.0.0.1:0" "$(cat "$T/webhook.log")"; finish; }
URL=https://127.0.0.1:$PORT/mutate

# configs: the example trainer's (2 machines x 2), MULTI_CPU 2 x 1 and 2 x 2
{ cat "$ROOT/examples/gpt-cpu.yaml"; printf 'num_machines: 2\nnum_processes: 4\n'; } >"$T/train.yaml"
cpu_cfg() {
    printf "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\n"
    printf "mixed_precision: 'no'\nuse_cpu: true\nnum_machines: 2\nnum_processes: %s\n" "$1"
}
cpu_cfg 2 >"$T/cpu1.yaml"
cpu_cfg 4 >"$T/cpu2.yaml"

CASES=()
# make CASE CONFIG CMD...: the Job "CASE" and its two patched Pods in $T/CASE/
make_case() {
    local c=$1 cfg=$2 out
    shift 2
    if out=$(SPECS make "$T/$c" "$URL" "$T/ca.crt" "$c" "$cfg" "$ROOT" -- "$@" 2>&1); then
        ok "$c: 2 Pods of Indexed Job $c built, reviewed by the webhook, patched ($(echo "$out" | paste -sd ';' | sed 's/;/; /'))"
        CASES+=("$c")
    else
        bad "$c: 2 Pods of Indexed Job $c built, reviewed by the webhook, patched" "$out"
    fi
}
make_case train "$T/train.yaml" "$CLI" launch -- "$TRAIN" --steps "$STEPS" --loss-log "$T/train/loss.log"
have_torch=0 have_accel=0
/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null && have_torch=1
APY=$(sh "$ROOT/scripts/lab-venv.sh" 2>"$T/lab-venv.err") && have_accel=1
if [ $have_torch = 1 ]; then
    make_case gloo "$T/cpu1.yaml" /usr/bin/python3 "$ROOT/tests/interop/torch_allreduce.py"
else
    skipped "gloo: torch all_reduce in 2 pods" "no torch for /usr/bin/python3 (python3-torch)"
fi
if [ $have_accel = 1 ]; then
    make_case accel "$T/cpu1.yaml" "$APY" "$ROOT/tests/interop/accelerate_state.py"
    make_case launch "$T/cpu2.yaml" "$CLI" launch -- "$APY" "$ROOT/tests/interop/accelerate_state.py"
else
    skipped "accel, launch: accelerate's Accelerator() in 2 pods" \
        "no accelerate venv: $(tail -n 1 "$T/lab-venv.err")"
fi

# the patched env, as the webhook documents it
check_env() { # CASE PYTHON-ASSERTS (env0, env1: name -> value)
    local out
    if out=$("$PY" - "$T/$1" "$2" <<'PYEOF' 2>&1
import json, sys
d = sys.argv[1]
env0, env1 = [{e["name"]: e.get("value") for e in json.load(open("%s/pod-%d.json" % (d, i)))
               ["spec"]["containers"][0]["env"]} for i in (0, 1)]
exec(sys.argv[2])
PYEOF
    ); then ok "$1: the patched env: $3"; else bad "$1: the patched env: $3" "$out"; fi
}
for c in "${CASES[@]}"; do
    case $c in
    train | launch)
        check_env "$c" "
for i, e in enumerate((env0, env1)):
    assert e['PET_NNODES'] == '2' and e['PET_NODE_RANK'] == str(i) and e['PET_NPROC_PER_NODE'] == '2', e
    assert e['PET_MASTER_ADDR'] == '$c-0.$c.ml.svc' == e['MASTER_ADDR'], e
    assert 'RANK' not in e and 'LOCAL_RANK' not in e, e
    assert e['LANG'] == 'C.UTF-8' and 'valueFrom' not in e, e
" "node-level PET_NNODES=2 PET_NODE_RANK=0/1 PET_NPROC_PER_NODE=2, MASTER_ADDR $c-0.$c.ml.svc, no RANK" ;;
    gloo | accel)
        check_env "$c" "
for i, e in enumerate((env0, env1)):
    assert e['RANK'] == str(i) and e['WORLD_SIZE'] == '2' and e['LOCAL_RANK'] == '0', e
    assert e['MASTER_ADDR'] == '$c-0.$c.ml.svc', e
    assert 'PET_NNODES' not in e, e
" "per-process RANK=0/1 WORLD_SIZE=2 LOCAL_RANK=0, MASTER_ADDR $c-0.$c.ml.svc" ;;
    esac
done

# PODLAB_SPECS=DIR: Pods read back from an API server, grouped by Job
if [ -n "${PODLAB_SPECS:-}" ]; then
    if out=$("$PY" - "$PODLAB_SPECS" "$T" <<'PYEOF' 2>&1
import glob, json, os, shutil, sys
src, t = sys.argv[1:]
jobs = {}
for f in sorted(glob.glob(os.path.join(src, "*.json")) + glob.glob(os.path.join(src, "*.get"))):
    p = json.load(open(f))
    if p.get("kind") != "Pod":
        continue
    m = p["metadata"]
    job = m.get("labels", {}).get("batch.kubernetes.io/job-name") or m.get("labels", {}).get("job-name")
    idx = m.get("annotations", {}).get("batch.kubernetes.io/job-completion-index")
    if job and idx in ("0", "1"):
        jobs.setdefault(job, {})[idx] = p
for job, pods in sorted(jobs.items()):
    if len(pods) != 2:
        print("# %s: %d of 2 pods; left out" % (job, len(pods)))
        continue
    d = os.path.join(t, "live-" + job)
    os.makedirs(d)
    for i, p in pods.items():
        p["spec"].setdefault("hostname", "%s-%s" % (job, i))
        json.dump(p, open(os.path.join(d, "pod-%s.json" % i), "w"))
    print("live-" + job)
PYEOF
    ); then
        for c in $(echo "$out" | grep -v '^#'); do CASES+=("$c"); done
        echo "$out" | grep '^#' 
        ok "PODLAB_SPECS=$PODLAB_SPECS: $(echo "$out" | grep -vc '^#') Job(s) of 2 Pods read"
    else
        bad "PODLAB_SPECS=$PODLAB_SPECS: Pod JSON files read" "$out"
    fi
fi

# ---------------------------------------------------------------- the reference
REF=$T/ref.log
# in the background, so that a signal's trap runs at once (not after it)
timeout 300 "$CLI" launch -n 4 --config "$ROOT/examples/gpt-cpu.yaml" -- "$TRAIN" \
    --steps "$STEPS" --loss-log "$REF" >"$T/ref.out" 2>&1 &
POD_PIDS=($!)
wait "${POD_PIDS[0]}"
rc=$?
POD_PIDS=()
if [ $rc = 0 ]; then
    ok "reference: accelrun launch -n 4 on one machine, $STEPS steps ($(grep -o 'train loss .*' "$T/ref.out" | head -n 1))"
else
    bad "reference: accelrun launch -n 4 on one machine" "$(cat "$T/ref.out")"
    REF=
fi

# ---------------------------------------------------------------- 2. the lab lock, the namespaces
if [ "${ACCELRUN_LAB_LOCKED:-0}" != 1 ]; then
    exec 9>>"$LAB_LOCK"
    if ! flock -w "$LOCK_WAIT" 9; then
        skip_all "pods run in network namespaces" \
            "the lab lock $LAB_LOCK was held for more than ${LOCK_WAIT}s (a Slurm lab or fresh-machine test)"
    fi
    export ACCELRUN_LAB_LOCKED=1
fi
# under the lock, leftovers of an earlier run of this script are ours
netns_down
if ip -4 -o addr show | grep -q " inet $NET\." || ip -4 route show | grep -q "^$NET\."; then
    skip_all "pods run in network namespaces" "$NET.0/24 is in use on this machine"
fi
NETNS_MADE=1
if ! out=$({
    ip netns add "$NSP-0" && ip netns add "$NSP-1" &&
        ip link add "$NSP-a" type veth peer name "$NSP-b" &&
        ip link set "$NSP-a" netns "$NSP-0" && ip link set "$NSP-b" netns "$NSP-1" &&
        for i in 0 1; do
            v=$([ $i = 0 ] && echo a || echo b)
            ip -n "$NSP-$i" link set "$NSP-$v" name eth0 &&
                ip -n "$NSP-$i" addr add "$NET.1$i/24" dev eth0 &&
                ip -n "$NSP-$i" link set eth0 up && ip -n "$NSP-$i" link set lo up || exit 1
        done
} 2>&1); then
    bad "network namespaces $NSP-0 and $NSP-1 on a veth pair" "$out"
    finish
fi
if ip netns exec "$NSP-1" ping -c 1 -W 2 "$NET.10" >/dev/null 2>&1 ||
    ip netns exec "$NSP-1" bash -c "exec 3<>/dev/tcp/$NET.10/1" 2>&1 | grep -q refused; then
    ok "network namespaces $NSP-0 ($NET.10) and $NSP-1 ($NET.11), pod 1 reaches pod 0"
else
    bad "network namespaces: pod 1 reaches pod 0" "$(ip -n "$NSP-1" addr 2>&1)"
fi

# hosts CASE: /etc/netns/<ns>/hosts as the kubelet writes it, plus the
# headless Service's names (cluster DNS)
hosts() {
    local c=$1 i j h sub
    for i in 0 1; do
        mkdir -p "/etc/netns/$NSP-$i"
        h=$(cat "$T/$c/x$i.host")
        sub=$("$PY" -c 'import json,sys; p=json.load(open(sys.argv[1])); print(p["spec"].get("subdomain", ""), p["metadata"].get("namespace", "default"))' "$T/$c/pod-$i.json")
        {
            printf '# Kubernetes-managed hosts file (accelrun pod lab).\n'
            printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n'
            printf '%s.1%s\t%s.%s.%s.svc.cluster.local\t%s\n' "$NET" "$i" "$h" \
                "${sub% *}" "${sub#* }" "$h"
            for j in 0 1; do
                printf '%s.1%s\t%s.%s.%s.svc\n' "$NET" "$j" "$(cat "$T/$c/x$j.host")" \
                    "${sub% *}" "${sub#* }"
            done
        } >"/etc/netns/$NSP-$i/hosts"
    done
}

# run_case CASE SECONDS: both pods at once; $T/CASE/out-i, rc-i, environ-i
run_case() {
    local c=$1 to=$2 i cpid cmd0 pids=() envs cmd dir host
    for i in 0 1; do
        SPECS exec "$T/$c/pod-$i.json" "$T/$c/x$i" || return 1
        # a Pod read back whose command is not on this machine: its env is
        # still checked, with /bin/sleep exec'd in the command's place
        cmd0=$(tr '\0' '\n' <"$T/$c/x$i.cmd" | head -n 1)
        if ! PATH=$IMAGE_PATH command -v "$cmd0" >/dev/null 2>&1; then
            echo "$cmd0" >"$T/$c/missing"
            printf '/bin/sleep\0002\000' >"$T/$c/x$i.cmd"
        fi
    done
    hosts "$c"
    for i in 0 1; do
        mapfile -d '' envs <"$T/$c/x$i.env"
        mapfile -d '' cmd <"$T/$c/x$i.cmd"
        host=$(cat "$T/$c/x$i.host")
        dir=$(cat "$T/$c/x$i.dir")
        # exec all the way: ip, unshare, sh and env keep one PID, the container's
        # shellcheck disable=SC2016  # expanded by that sh
        timeout -k 5 "$to" ip netns exec "$NSP-$i" unshare --uts sh -c \
            'echo "$1" >/proc/sys/kernel/hostname && cd "$2" && shift 2 && exec "$@"' sh \
            "$host" "$dir" env -i PATH="$IMAGE_PATH" HOME="$IMAGE_HOME" "${envs[@]}" "${cmd[@]}" \
            >"$T/$c/out-$i" 2>&1 &
        pids[i]=$!
        POD_PIDS+=($!)
    done
    for i in 0 1; do
        cmd0=$(tr '\0' '\n' <"$T/$c/x$i.cmd" | head -n 1)
        for _ in $(seq 200); do
            cpid=$(pgrep -P "${pids[i]}" | head -n 1)
            if [ -n "$cpid" ] && [ "$(tr '\0' '\n' <"/proc/$cpid/cmdline" 2>/dev/null | head -n 1)" = "$cmd0" ]; then
                cp "/proc/$cpid/environ" "$T/$c/environ-$i" 2>/dev/null && break
            fi
            kill -0 "${pids[i]}" 2>/dev/null || break
            sleep 0.05
        done
    done
    # the ranks `accelrun launch` starts: each one's environ, by its RANK
    if [ "$cmd0" = "$CLI" ]; then
        for i in 0 1; do
            cpid=$(pgrep -P "${pids[i]}" | head -n 1)
            [ -n "$cpid" ] || continue
            for _ in $(seq 200); do
                for r in $(pgrep -P "$cpid"); do
                    e=$(tr '\0' '\n' <"/proc/$r/environ" 2>/dev/null | sed -n 's/^RANK=//p')
                    [ -n "$e" ] && [ ! -s "$T/$c/environ-$i-r$e" ] &&
                        cp "/proc/$r/environ" "$T/$c/environ-$i-r$e" 2>/dev/null
                done
                [ "$(find "$T/$c" -name "environ-$i-r*" | wc -l)" -ge 2 ] && break
                kill -0 "$cpid" 2>/dev/null || break
                sleep 0.05
            done
        done
    fi
    for i in 0 1; do
        wait "${pids[i]}"
        echo $? >"$T/$c/rc-$i"
    done
    POD_PIDS=()
}

# ---------------------------------------------------------------- 3. the cases
compare() { # A B: "max_rel max_step final_rel val_rel" (tests/examples/run.sh)
    paste "$1" "$2" | awk '
        function rel(a, b) { d = (a - b) / a; return d < 0 ? -d : d }
        $1 == "#" && $2 == "val" { val = rel($3, $6); next }
        { r = rel($2, $4); if (r > max) { max = r; at = $1 }; final = r }
        END { printf "%.3g %d %.3g %.3g\n", max + 0, at + 0, final + 0, val + 0 }'
}
both_ok() { # CASE NAME: both pods exited 0
    if [ "$(cat "$T/$1/rc-0" "$T/$1/rc-1" | tr '\n' ' ')" = "0 0 " ]; then ok "$1: $2: both pods exit 0"; return 0; fi
    bad "$1: $2: both pods exit 0" "rc $(cat "$T/$1/rc-0") / $(cat "$T/$1/rc-1")
--- pod 0
$(tail -n 12 "$T/$1/out-0")
--- pod 1
$(tail -n 12 "$T/$1/out-1")"
    return 1
}
# kind_of CASE: what the pods of CASE run, from pod 0's command (the cases
# built here and the Pods read back alike): "train STEPS LOG" (train_gpt, its
# --steps and --loss-log against the workingDir), "gloo", "accel" (Accelerator()
# directly), "launch" (Accelerator() under accelrun launch) or "other"
kind_of() {
    "$PY" - "$T/$1/pod-0.json" "$CLI" <<'PYEOF'
import json, os, sys
c = json.load(open(sys.argv[1]))["spec"]["containers"][0]
cmd = c.get("command", []) + c.get("args", [])
def opt(name, default):
    return cmd[cmd.index(name) + 1] if name in cmd[:-1] else default
base = [os.path.basename(a) for a in cmd]
if "train_gpt" in base:
    print("train", opt("--steps", "200"), os.path.join(c.get("workingDir", "/"), opt("--loss-log", "-")))
elif "torch_allreduce.py" in base:
    print("gloo")
elif "accelerate_state.py" in base:
    print("launch" if cmd[:1] == [sys.argv[2]] else "accel")
else:
    print("other")
PYEOF
}
for c in "${CASES[@]}"; do
    read -r kind ksteps klog <<<"$(kind_of "$c")"
    case $kind in
    train) what="train_gpt $ksteps steps, 2 pods x 2 ranks"; to=240 ;;
    gloo) what="torch gloo all_reduce, 2 pods x 1"; to=90 ;;
    accel) what="Accelerator(), 2 pods x 1"; to=90 ;;
    launch) what="accelrun launch -- Accelerator(), 2 pods x 2"; to=90 ;;
    *) what="the Pods read back"; to=90 ;;
    esac
    [ "$kind" = train ] && rm -f "$klog" # a loss log of an earlier run of the Pods read back
    if ! run_case "$c" $to; then
        bad "$c: $what: the pods' command and env" "see above"
        continue
    fi
    if [ -s "$T/$c/missing" ]; then
        skipped "$c: the pods run" "their command $(cat "$T/$c/missing") is not on this machine (/bin/sleep ran in its place, for the env check)"
    else both_ok "$c" "$what"; fi
    # (c) the container process's env is the spec's
    for i in 0 1; do
        if [ ! -s "$T/$c/environ-$i" ]; then
            bad "$c: pod $i: the container's environment was read" "its process was not seen running $(head -c 200 "$T/$c/x$i.cmd" | tr '\0' ' ')"
        elif out=$(SPECS envcheck "$T/$c/pod-$i.json" "$T/$c/environ-$i" PATH="$IMAGE_PATH" HOME="$IMAGE_HOME" 2>&1); then
            ok "$c: pod $i: the container's env is the patched spec's + PATH, HOME, HOSTNAME ($out)"
        else
            bad "$c: pod $i: the container's env is the patched spec's + PATH, HOME, HOSTNAME" "$out"
        fi
    done
    # and every rank accelrun launch started: the container's env + its --dry-run rank variables
    if [ "$(tr '\0' '\n' <"$T/$c/x0.cmd" | head -n 1)" = "$CLI" ]; then
        for i in 0 1; do
            mapfile -d '' envs <"$T/$c/x$i.env"
            mapfile -d '' cmd <"$T/$c/x$i.cmd"
            timeout 20 env -i PATH="$IMAGE_PATH" HOME="$IMAGE_HOME" "${envs[@]}" "${cmd[0]}" \
                "${cmd[1]}" --dry-run "${cmd[@]:2}" >"$T/$c/dry-$i" 2>&1
            for f in "$T/$c/environ-$i-r"*; do
                [ -s "$f" ] || continue
                if out=$(SPECS rankcheck "$T/$c/pod-$i.json" "$f" "$T/$c/dry-$i" PATH="$IMAGE_PATH" HOME="$IMAGE_HOME" 2>"$T/$c/note"); then
                    cat "$T/$c/note"
                    ok "$c: pod $i: $out: the container's env + accelrun launch --dry-run's, nothing else"
                else
                    bad "$c: pod $i: a rank's env is the container's + accelrun launch --dry-run's" "$out
$(cat "$T/$c/note")"
                fi
            done
            n=$(find "$T/$c" -name "environ-$i-r*" | wc -l)
            [ "$n" = 2 ] || bad "$c: pod $i: the env of its 2 ranks was read" "$n read"
        done
    fi
    cat "$T/$c/out-0" "$T/$c/out-1" >"$T/$c/out"
    h0=$(cat "$T/$c/x0.host") h1=$(cat "$T/$c/x1.host")
    case $kind in
    train)
        log=$klog
        if [ "$ksteps" != "$STEPS" ]; then
            skipped "$c: loss curve against accelrun launch -n 4" "its pods train $ksteps steps, the reference $STEPS (STEPS)"
        elif [ -z "$REF" ] || [ ! -s "$log" ]; then
            bad "$c: loss curve against accelrun launch -n 4" "reference ${REF:-failed}; pod log $log: $(wc -l <"$log" 2>/dev/null) lines"
        elif [ "$(wc -l <"$log")" != "$(wc -l <"$REF")" ]; then
            bad "$c: the pods' loss log has the reference's $(wc -l <"$REF") lines" "$(wc -l <"$log") lines"
        else
            read -r max at final val <<<"$(compare "$REF" "$log")"
            echo "# $c: step 1 $(awk 'NR==1 {print $2}' "$log") vs $(awk 'NR==1 {print $2}' "$REF")," \
                "step $STEPS $(awk -v s="$STEPS" '$1==s {print $2}' "$log") vs $(awk -v s="$STEPS" '$1==s {print $2}' "$REF")," \
                "val $(awk '$2=="val" {print $3}' "$log") vs $(awk '$2=="val" {print $3}' "$REF") (pods vs one machine)"
            if cmp -s "$REF" "$log"; then
                ok "$c: 2 pods x 2 = accelrun launch -n 4: bit-identical loss logs ($STEPS steps + validation)"
            else
                echo "# $c: max relative difference $max (step $at), final $final, validation $val"
                within "$c: every step within $FP32_STEP_TOL of accelrun launch -n 4 (max $max at step $at)" "$max" $FP32_STEP_TOL
                within "$c: final step and validation within $FP32_FINAL_TOL ($final, $val)" \
                    "$(awk -v a="$final" -v b="$val" 'BEGIN { print (a > b ? a : b) }')" $FP32_FINAL_TOL
            fi
        fi
        r0=$(sed -n 's/^\[[0-9]\] train_gpt: memory rank=\([0-9]\) world=4 .*/\1/p' "$T/$c/out-0" | sort | tr '\n' ' ')
        r1=$(sed -n 's/^\[[0-9]\] train_gpt: memory rank=\([0-9]\) world=4 .*/\1/p' "$T/$c/out-1" | sort | tr '\n' ' ')
        if [ "$r0$r1" = "0 1 2 3 " ]; then ok "$c: world 4, ranks 0 1 in pod 0 and 2 3 in pod 1"
        else bad "$c: world 4, ranks 0 1 in pod 0 and 2 3 in pod 1" "pod 0: $r0; pod 1: $r1"; fi ;;
    gloo)
        got=$(grep -o '^allreduce rank=[0-9] env_rank=[0-9] world=[0-9] sum=[0-9]* host=[^ ]*' "$T/$c/out" | sort | tr '\n' ';')
        want="allreduce rank=0 env_rank=0 world=2 sum=3 host=$h0;allreduce rank=1 env_rank=1 world=2 sum=3 host=$h1;"
        if [ "$got" = "$want" ]; then ok "$c: all_reduce in both pods: world 2, sum 3, ranks 0/1 on $h0/$h1"
        else bad "$c: all_reduce: want '$want'" "$got
$(cat "$T/$c/out")"; fi ;;
    accel | launch)
        n=$([ "$kind" = accel ] && echo 2 || echo 4)
        got=$(grep -o "^\(\[[0-9]\] \)\?accelerator num_processes=$n process_index=[0-9] distributed_type=MULTI_CPU mixed_precision=no host=[^ ]*" "$T/$c/out" |
            sed 's/^\[[0-9]\] //' | sed 's/.*process_index=\([0-9]\).*host=\(.*\)/\1@\2/' | sort | tr '\n' ' ')
        want=$([ "$n" = 2 ] && echo "0@$h0 1@$h1 " || echo "0@$h0 1@$h0 2@$h1 3@$h1 ")
        if [ "$got" = "$want" ]; then ok "$c: Accelerator() in every process: num_processes=$n, process_index@host ${want% }"
        else bad "$c: Accelerator(): want num_processes=$n, process_index@host '$want'" "got '$got'
$(cat "$T/$c/out")"; fi ;;
    esac
done

echo "# $((SECONDS - t_start)) s"
finish
