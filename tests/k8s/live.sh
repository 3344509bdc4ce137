#!/usr/bin/env bash
# tests/k8s/live.sh: accelrun-webhook behind a real kube-apiserver (v1.20.2,
# built from Debian's source by scripts/kube-apiserver.sh and cached), all on
# loopback: a throwaway CA, etcd on a free port with a temporary data dir, the
# API server with token auth (an admin in system:masters), RBAC,
# service-account keys and MutatingAdmissionWebhook, kubectl v1.20.2 with a
# kubeconfig written here, and the webhook registered by
# `clientConfig.url: https://127.0.0.1:PORT/mutate` (failurePolicy Fail,
# sideEffects None, the test namespace's label, CREATE pods v1).  Checked
# through the API server: the two pods of an Indexed Job (created by the test:
# no controller-manager runs, and v1.20's Job controller has no Indexed mode)
# are stored with `accelrun env`'s variables for their rank and a user's own
# variable kept; an invalid config is refused with the located message; with
# the webhook stopped creation is refused ("failed calling webhook"); a pod
# without the annotation is stored unchanged; and, where the webhook has
# --api-server, a ConfigMap config, a 403 once its RBAC binding is gone, and
# the Job's completions checked; the Helm chart installed by the Helm
# engine (helm-python-sdk), where charts/accelrun-webhook exists; and two
# Jobs' pods, stored patched, read back for the pod lab (LIVE_PODS, default
# BUILD/k8s-live/pods: tests/k8s/podlab.sh runs them with PODLAB_SPECS).
# No scheduler or kubelet runs: pods stay Pending; nothing here runs them.
#
# usage: bash tests/k8s/live.sh [BUILD]   (default build; needs BUILD/bin/accelrun-webhook
#                                          and BUILD/bin/accelrun)
#        LIVE_KEEP=1 keeps the temporary folder (logs, manifests, kubeconfig)
#        LIVE_PODS=DIR where the pod lab's Pods go; STEPS (default 200) of Job ltrain
set -u
# shellcheck disable=SC2034  # tap.sh reads them
TAP_NAME=k8s-live TAP_TAIL=25
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=tests/lib/tap.sh
. "$ROOT/tests/lib/tap.sh"
# shellcheck source=tests/k8s/lib.sh
. "$ROOT/tests/k8s/lib.sh" # wh_ca, wh_cert, wh_start

BUILD=${1:-build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
WH=$BUILD/bin/accelrun-webhook
CLI=$BUILD/bin/accelrun
NS=accelrun-live
t_start=$SECONDS

skip_all() {
    skipped "$1" "$2"
    finish
}
[ -x "$WH" ] || skip_all "live API server" "no $WH (make webhook; sh scripts/deps.sh build)"
[ -x "$CLI" ] || skip_all "live API server" "no $CLI (make; the pods' env is compared with accelrun env's)"
for tool in openssl curl python3 flock timeout; do
    command -v $tool >/dev/null || skip_all "live API server" "no $tool (sh scripts/deps.sh build)"
done

T=$(mktemp -d /tmp/k8s-live.XXXXXX)
PIDS=()
WPID=
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
    local p
    [ -n "$WPID" ] && PIDS+=("$WPID")
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do
        # bounded: SIGKILL after 10 s
        for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    if [ -n "${LIVE_KEEP:-}" ]; then echo "# kept $T (LIVE_KEEP)"; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- binaries
t0=$SECONDS
echo "# scripts/kube-apiserver.sh (cached; a first build takes about 5 min)"
if ! KDIR=$(sh "$ROOT/scripts/kube-apiserver.sh" 2>"$T/kube-apiserver.sh.err"); then
    why=$(tail -n 1 "$T/kube-apiserver.sh.err")
    case $why in
    *"build failed"* | *"do not run"* | *"made no"*) bad "scripts/kube-apiserver.sh builds kube-apiserver" "$why"; finish ;;
    *) skip_all "live API server" "scripts/kube-apiserver.sh: $why" ;;
    esac
fi
command -v etcd >/dev/null || skip_all "live API server" "no etcd (apt-get install etcd-server)"
ok "kube-apiserver and kubectl v1.20.2 in $KDIR ($((SECONDS - t0)) s)"

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ---------------------------------------------------------------- certificates
ossl() { openssl "$@" >>"$T/openssl.log" 2>&1; }
wh_ca "$T" accelrun-live-ca
# the API server's (also a client of the webhook) and the webhook's
wh_cert "$T" apiserver 1001 "IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes.default.svc" \
    serverAuth,clientAuth
wh_cert "$T" webhook 1002 "IP:127.0.0.1"
ossl genrsa -out "$T/sa.key" 2048
ossl rsa -in "$T/sa.key" -pubout -out "$T/sa.pub"
if [ ! -s "$T/webhook.crt" ] || [ ! -s "$T/apiserver.crt" ] || [ ! -s "$T/sa.pub" ]; then
    bad "throwaway CA, server certificates, service-account keys" "$(cat "$T/openssl.log")"
    finish
fi

ADMIN_TOKEN=$(openssl rand -hex 16)
SA_STATIC_TOKEN=$(openssl rand -hex 16)
# token,user,uid,"groups": the admin, and the webhook's service account as a
# static token too (the fallback when the TokenRequest below fails)
cat >"$T/tokens.csv" <<EOF
$ADMIN_TOKEN,admin,admin-uid,"system:masters"
$SA_STATIC_TOKEN,system:serviceaccount:$NS:accelrun-webhook,accelrun-webhook-uid,"system:serviceaccounts,system:serviceaccounts:$NS"
EOF

# ---------------------------------------------------------------- etcd, kube-apiserver
EP=$(free_port) PP=$(free_port) AP=$(free_port)
etcd --name live --data-dir "$T/etcd" --listen-client-urls "http://127.0.0.1:$EP" \
    --advertise-client-urls "http://127.0.0.1:$EP" --listen-peer-urls "http://127.0.0.1:$PP" \
    --initial-advertise-peer-urls "http://127.0.0.1:$PP" --initial-cluster "live=http://127.0.0.1:$PP" \
    >"$T/etcd.log" 2>&1 &
PIDS+=($!)
"$KDIR/kube-apiserver" --etcd-servers="http://127.0.0.1:$EP" --bind-address=127.0.0.1 \
    --advertise-address=127.0.0.1 --secure-port="$AP" --insecure-port=0 \
    --tls-cert-file="$T/apiserver.crt" --tls-private-key-file="$T/apiserver.key" \
    --client-ca-file="$T/ca.crt" --token-auth-file="$T/tokens.csv" --authorization-mode=RBAC \
    --service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$T/sa.pub" \
    --service-account-signing-key-file="$T/sa.key" --service-cluster-ip-range=10.96.0.0/24 \
    --disable-admission-plugins=ServiceAccount \
    --enable-admission-plugins=MutatingAdmissionWebhook,ValidatingAdmissionWebhook \
    --cert-dir="$T/apiserver-certs" >"$T/apiserver.log" 2>&1 &
APID=$!
PIDS+=("$APID")
t0=$SECONDS
ready=
for _ in $(seq 120); do # 60 s
    if [ "$(curl -sS --max-time 2 --cacert "$T/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" \
        "https://127.0.0.1:$AP/readyz" 2>/dev/null)" = ok ]; then
        ready=1
        break
    fi
    kill -0 "$APID" 2>/dev/null || break
    sleep 0.5
done
if [ -z "$ready" ]; then
    bad "etcd on :$EP and kube-apiserver on :$AP, /readyz ok within 60 s" \
        "$(tail -n 8 "$T/etcd.log")
$(grep -v '^I' "$T/apiserver.log" | tail -n 15)"
    finish
fi
ok "etcd on :$EP and kube-apiserver on :$AP: /readyz ok in $((SECONDS - t0)) s"

cat >"$T/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: live
  cluster: {server: "https://127.0.0.1:$AP", certificate-authority: "$T/ca.crt"}
users:
- name: admin
  user: {token: "$ADMIN_TOKEN"}
contexts:
- name: live
  context: {cluster: live, user: admin, namespace: $NS}
current-context: live
EOF
kc() { timeout 40 "$KDIR/kubectl" --kubeconfig "$T/kubeconfig" --request-timeout=30s "$@"; }

v=$(kc version -o json 2>&1)
if printf '%s' "$v" | python3 -c '
import json, sys
v = json.load(sys.stdin)
assert v["serverVersion"]["gitVersion"] == "v1.20.2", v
assert v["clientVersion"]["gitVersion"] == "v1.20.2", v'; then
    ok "kubectl v1.20.2 talks to the API server v1.20.2"
else
    bad "kubectl v1.20.2 talks to the API server v1.20.2" "$v"
    finish
fi

if out=$(kc create namespace $NS 2>&1 && kc label namespace $NS accelrun-live=on 2>&1); then
    ok "namespace $NS labelled accelrun-live=on"
else
    bad "namespace $NS labelled accelrun-live=on" "$out"
    finish
fi

# ---------------------------------------------------------------- helpers
# start_webhook [ARGS...]: accelrun-webhook on 127.0.0.1:<free port>; sets WPID and WPORT
WSTARTS=0
start_webhook() {
    WSTARTS=$((WSTARTS + 1))
    WLOG=$T/webhook.$WSTARTS.log
    wh_start "$WH" "$WLOG" --tls-cert "$T/webhook.crt" --tls-key "$T/webhook.key" -v "$@"
    WPID=$WH_PID WPORT=$WH_PORT
    [ -n "$WPORT" ]
}
stop_webhook() {
    [ -n "$WPID" ] || return 0
    kill "$WPID" 2>/dev/null
    for _ in $(seq 150); do kill -0 "$WPID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$WPID" 2>/dev/null
    wait "$WPID" 2>/dev/null
    WPID=
}

# register PORT: the MutatingWebhookConfiguration, by URL, with the CA bundle
register() {
    cat >"$T/mwc.yaml" <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: accelrun-live
webhooks:
- name: accelrun.accelrun.io
  admissionReviewVersions: ["v1"]
  clientConfig:
    url: https://127.0.0.1:$1/mutate
    caBundle: $(base64 -w0 "$T/ca.crt")
  failurePolicy: Fail
  sideEffects: None
  timeoutSeconds: 10
  reinvocationPolicy: IfNeeded
  namespaceSelector:
    matchLabels: {accelrun-live: "on"}
  rules:
  - operations: ["CREATE"]
    apiGroups: [""]
    apiVersions: ["v1"]
    resources: ["pods"]
EOF
    kc apply -f "$T/mwc.yaml" >"$T/apply.log" 2>&1
}

CFG='distributed_type: MULTI_GPU
num_machines: 2
num_processes: 2
mixed_precision: bf16'
BADCFG='distributed_type: MULTI_GPU
num_machines: 2
mixed_precison: bf16
num_processes: 2'

# pod JOB INDEX UID ANNOTATIONS [ENV]: the pod an Indexed Job's controller
# would create for INDEX (v1.21+ labels and annotation), as JSON;
# ANNOTATIONS and ENV are JSON object members / array items (may be empty)
pod() {
    local env=
    [ -n "${5:-}" ] && env=",\"env\":[$5]"
    cat <<EOF
{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"$1-$2-","namespace":"$NS",
"labels":{"batch.kubernetes.io/job-name":"$1","job-name":"$1","controller-uid":"$3",
"batch.kubernetes.io/controller-uid":"$3","batch.kubernetes.io/job-completion-index":"$2"},
"annotations":{"batch.kubernetes.io/job-completion-index":"$2"${4:+,$4}},
"ownerReferences":[{"apiVersion":"batch/v1","kind":"Job","name":"$1","uid":"$3",
"controller":true,"blockOwnerDeletion":true}]},
"spec":{"hostname":"$1-$2","subdomain":"$1","restartPolicy":"Never",
"containers":[{"name":"trainer","image":"ghcr.io/example/train:1",
"command":["accelrun","launch","--","python","train.py"]$env}]}}
EOF
}
# JSON string of $1
jstr() { python3 -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$1"; }

# job NAME COMPLETIONS: an Indexed Job (completionMode kept where the API knows it)
job() {
    cat <<EOF
{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"$1","namespace":"$NS"},
"spec":{"completions":$2,"parallelism":$2,"completionMode":"Indexed",
"template":{"metadata":{"annotations":{"accelrun.io/config":$(jstr "$CFG")}},
"spec":{"subdomain":"$1","restartPolicy":"Never",
"containers":[{"name":"trainer","image":"ghcr.io/example/train:1"}]}}}}
EOF
}

# check NAME FILE PYTHON: FILE's JSON as `r`
check() {
    local name=$1 file=$2 code=$3 out
    if out=$(python3 -c "
import json, subprocess, sys
r = json.load(open('$file'))
$code
" 2>&1); then ok "$name"; else bad "$name" "$out
$(head -c 1500 "$file")"; fi
}

# wait_effective: bounded wait until the API server calls the webhook (its
# configuration reaches the admission plugin through an informer)
wait_effective() {
    for _ in $(seq 40); do # 20 s
        # pod 0 of Job train (once it exists: the webhook with --api-server reads the Job)
        if pod train 0 "${JOB_UID:-00000000-0000-4000-8000-000000000000}" \
            "\"accelrun.io/config\":$(jstr "$CFG")" >"$T/probe.json" &&
            kc create --dry-run=server -f "$T/probe.json" -o json 2>"$T/probe.err" | grep -q MASTER_ADDR; then
            return 0
        fi
        sleep 0.5
    done
    return 1
}

# ---------------------------------------------------------------- the webhook, registered
if ! start_webhook; then
    bad "accelrun-webhook starts on 127.0.0.1 with its certificate (SAN IP:127.0.0.1)" "$(cat "$WLOG")"
    finish
fi
if register "$WPORT" && wait_effective; then
    ok "MutatingWebhookConfiguration by url https://127.0.0.1:$WPORT/mutate with the caBundle: the API server calls it"
else
    bad "MutatingWebhookConfiguration by url https://127.0.0.1:$WPORT/mutate: the API server calls it" \
        "$(cat "$T/apply.log" "$T/probe.err")
$(tail -n 5 "$WLOG")
$(grep -i webhook "$T/apiserver.log" | tail -n 5)"
    finish
fi

# ---------------------------------------------------------------- (a) an Indexed Job's pods
job train 2 >"$T/job.json"
if kc create --validate=false -f "$T/job.json" -o json >"$T/job.out" 2>"$T/job.err"; then
    if python3 -c "import json; assert json.load(open('$T/job.out'))['spec'].get('completionMode') == 'Indexed'" 2>/dev/null; then
        ok "Job train (completions 2, completionMode Indexed) created"
    else
        ok "Job train (completions 2) created; v1.20 drops spec.completionMode (no Indexed mode before 1.21), so the test creates the 2 pods its controller would"
    fi
else
    bad "Job train (completions 2) created" "$(cat "$T/job.err")"
    finish
fi
JOB_UID=$(python3 -c "import json; print(json.load(open('$T/job.out'))['metadata']['uid'])")

ann="\"accelrun.io/config\":$(jstr "$CFG")"
pod train 0 "$JOB_UID" "$ann" >"$T/pod0.json"
pod train 1 "$JOB_UID" "$ann" '{"name":"MY_SETTING","value":"kept"}' >"$T/pod1.json"
created=1
for i in 0 1; do
    if ! kc create -f "$T/pod$i.json" -o json >"$T/pod$i.out" 2>"$T/pod$i.err"; then
        created=
        bad "pod train-$i-xxxxx admitted" "$(cat "$T/pod$i.err")"
    fi
done
if [ -n "$created" ]; then
    ok "pods train-0-xxxxx and train-1-xxxxx (Indexed Job labels, completion index, ownerReference, subdomain) admitted"
    if grep -q '^Warning: Job .*/train not checked (no API server configured)' "$T/pod0.err"; then
        ok "kubectl shows the webhook's admission warning (Job not checked: no --api-server)"
    else
        bad "kubectl shows the webhook's admission warning (Job not checked: no --api-server)" "$(cat "$T/pod0.err")"
    fi
    for i in 0 1; do
        name=$(python3 -c "import json; print(json.load(open('$T/pod$i.out'))['metadata']['name'])")
        kc get pod "$name" -o json >"$T/pod$i.get" 2>&1
        printf '%s\n' "$CFG" >"$T/cfg.yaml"
        addr=train-0.train.$NS.svc
        "$CLI" env "$T/cfg.yaml" --nnodes 2 --node-rank $i --nproc-per-node 1 --local-rank 0 \
            --master-addr "$addr" --format json >"$T/env$i.json" 2>"$T/env$i.err"
        user=""
        [ $i = 1 ] && user=", MY_SETTING kept"
        check "pod $name as stored (kubectl get): MASTER_ADDR $addr, RANK $i, WORLD_SIZE 2, exactly accelrun env's set$user" \
            "$T/pod$i.get" "
want = json.load(open('$T/env$i.json'))
c = r['spec']['containers'][0]
env = {e['name']: e.get('value') for e in c.get('env', [])}
assert r['metadata']['name'].startswith('train-$i-') and len(r['metadata']['name']) == len('train-$i-') + 5, r['metadata']['name']
assert env.get('MASTER_ADDR') == '$addr', env
assert env.get('RANK') == '$i' and env.get('GROUP_RANK') == '$i' and env.get('WORLD_SIZE') == '2', env
assert env.get('MASTER_PORT') == want['MASTER_PORT'], (env.get('MASTER_PORT'), want['MASTER_PORT'])
if $i == 1:
    assert env.pop('MY_SETTING', None) == 'kept', 'the user variable is gone: %s' % env
    assert [e['name'] for e in c['env']][0] == 'MY_SETTING', 'the user variable is no longer first'
missing = sorted(set(want) - set(env)); extra = sorted(set(env) - set(want))
differ = sorted(k for k in set(want) & set(env) if want[k] != env[k])
assert not (missing or extra or differ), 'missing %s, extra %s, differ %s' % (missing, extra, differ)
"
    done
fi

# ---------------------------------------------------------------- (f) Pods for the pod lab
# Two Indexed Jobs whose pods the pod lab (tests/k8s/podlab.sh, PODLAB_SPECS)
# runs as they are stored here: their `kubectl get pod -o json` go to
# $PODS (LIVE_PODS; make test-webhook: BUILD/k8s-live/pods).
#   lgloo   MULTI_CPU 2 x 1, torch's gloo all_reduce (/usr/bin/python3)
#   ltrain  examples/gpt-cpu.yaml 2 x 2, accelrun launch -- train_gpt --steps STEPS
#           (the loss log in the workingDir, a folder beside the Pods)
PODS=${LIVE_PODS:-$BUILD/k8s-live/pods}
STEPS=${STEPS:-200}
rm -rf "$PODS"
mkdir -p "$PODS"
# labpod JOB INDEX UID CONFIG WORKDIR CMD...: the pod the Job's controller
# would create, with the command of this machine ("the image") and the
# controller's JOB_COMPLETION_INDEX
labpod() {
    python3 - "$NS" "$@" <<'PYEOF'
import json, sys
ns, job, i, uid, cfg, wd = sys.argv[1:7]
cmd = sys.argv[7:]
idx = "batch.kubernetes.io/job-completion-index"
print(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {
    "generateName": "%s-%s-" % (job, i), "namespace": ns,
    "labels": {"batch.kubernetes.io/job-name": job, "job-name": job, "controller-uid": uid,
               "batch.kubernetes.io/controller-uid": uid, idx: i},
    "annotations": {idx: i, "accelrun.io/config": open(cfg).read()},
    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": uid,
                         "controller": True, "blockOwnerDeletion": True}]},
    "spec": {"hostname": "%s-%s" % (job, i), "subdomain": job, "restartPolicy": "Never",
             "enableServiceLinks": False,
             "containers": [{"name": "trainer", "image": "accelrun-podlab:1", "command": cmd,
                             "workingDir": wd,
                             "env": [{"name": "LANG", "value": "C.UTF-8"},
                                     {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                                         "fieldPath": "metadata.annotations['%s']" % idx}}}]}]}}))
PYEOF
}
printf 'distributed_type: MULTI_CPU\nmixed_precision: "no"\nuse_cpu: true\nnum_machines: 2\nnum_processes: 2\n' >"$T/lgloo.yaml"
{ cat "$ROOT/examples/gpt-cpu.yaml"; printf 'num_machines: 2\nnum_processes: 4\n'; } >"$T/ltrain.yaml"
# labjob JOB CONFIG WORKDIR CMD...: the Job, then its 2 pods created and read back
labjob() {
    local j=$1 cfg=$2 wd=$3 uid name i
    shift 3
    CFG=$(cat "$cfg") job "$j" 2 >"$T/$j.job.json"
    kc create --validate=false -f "$T/$j.job.json" -o json >"$T/$j.job.out" 2>"$T/$j.job.err" ||
        { echo "Job $j: $(cat "$T/$j.job.err")"; return 1; }
    uid=$(python3 -c "import json; print(json.load(open('$T/$j.job.out'))['metadata']['uid'])")
    for i in 0 1; do
        labpod "$j" $i "$uid" "$cfg" "$wd" "$@" >"$T/$j-$i.json" &&
            kc create -f "$T/$j-$i.json" -o json >"$T/$j-$i.out" 2>"$T/$j-$i.err" ||
            { echo "pod $j-$i: $(cat "$T/$j-$i.err")"; return 1; }
        name=$(python3 -c "import json; print(json.load(open('$T/$j-$i.out'))['metadata']['name'])")
        kc get pod "$name" -o json >"$PODS/$name.get" 2>"$T/$j-$i.err" ||
            { echo "kubectl get pod $name: $(cat "$T/$j-$i.err")"; return 1; }
        python3 -c "
import json, sys
c = json.load(open(sys.argv[1]))['spec']['containers'][0]
env = {e['name'] for e in c['env']}
assert {'MASTER_ADDR', 'WORLD_SIZE', 'LANG', 'JOB_COMPLETION_INDEX'} <= env, sorted(env)
" "$PODS/$name.get" 2>&1 || return 1
    done
    echo "Job $j: pods $(cd "$PODS" && ls -- "$j"-*.get | sed 's/\.get$//' | paste -sd ' ')"
}
if out=$(labjob lgloo "$T/lgloo.yaml" / /usr/bin/python3 "$ROOT/tests/interop/torch_allreduce.py" 2>&1); then
    ok "pod lab input: $out, stored patched, read back into $PODS"
else
    bad "pod lab input: Job lgloo's 2 pods created, stored patched, read back" "$out"
fi
if [ ! -x "$BUILD/bin/train_gpt" ]; then
    skipped "pod lab input: Job ltrain" "no $BUILD/bin/train_gpt (make)"
elif mkdir -p "$PODS/ltrain-run" &&
    out=$(labjob ltrain "$T/ltrain.yaml" "$PODS/ltrain-run" "$CLI" launch -- "$BUILD/bin/train_gpt" \
        --steps "$STEPS" --loss-log loss.log 2>&1); then
    ok "pod lab input: $out (accelrun launch -- train_gpt --steps $STEPS), stored patched, read back into $PODS"
else
    bad "pod lab input: Job ltrain's 2 pods created, stored patched, read back" "$out"
fi

# ---------------------------------------------------------------- (b) an invalid config
pod train 1 "$JOB_UID" "\"accelrun.io/config\":$(jstr "$BADCFG")" >"$T/bad.json"
if kc create -f "$T/bad.json" -o name >"$T/bad.out" 2>"$T/bad.err"; then
    bad "an invalid config (mixed_precison) is refused" "created: $(cat "$T/bad.out")"
elif grep -q 'denied the request' "$T/bad.err" && grep -q 'annotation accelrun.io/config:3:1' "$T/bad.err" &&
    grep -q mixed_precison "$T/bad.err"; then
    ok "an invalid config is refused: kubectl shows the webhook's message (annotation accelrun.io/config:3:1, mixed_precison)"
else
    bad "an invalid config is refused with the located message" "$(cat "$T/bad.err")"
fi

# ---------------------------------------------------------------- (d) no annotation
pod plain 0 "$JOB_UID" "" >"$T/plain.json"
if kc create -f "$T/plain.json" -o json >"$T/plain.out" 2>"$T/plain.err"; then
    name=$(python3 -c "import json; print(json.load(open('$T/plain.out'))['metadata']['name'])")
    kc get pod "$name" -o json >"$T/plain.get" 2>&1
    check "a pod without accelrun.io/config is admitted unchanged (no env added)" "$T/plain.get" "
c = r['spec']['containers'][0]
assert 'env' not in c, c.get('env')
assert not any(k.startswith('accelrun.io/') for k in r['metadata'].get('annotations', {})), r['metadata']
"
else
    bad "a pod without accelrun.io/config is admitted" "$(cat "$T/plain.err")"
fi

# ---------------------------------------------------------------- (c) webhook down
stop_webhook
if kc create -f "$T/pod0.json" -o name >"$T/down.out" 2>"$T/down.err"; then
    bad "failurePolicy Fail, webhook stopped: pod creation refused" "created: $(cat "$T/down.out")"
elif grep -q 'failed calling webhook' "$T/down.err"; then
    ok "failurePolicy Fail, webhook stopped: refused ($(grep -o 'failed calling webhook[^:]*' "$T/down.err" | head -n 1), $(grep -o 'connection refused' "$T/down.err" | head -n 1))"
else
    bad "failurePolicy Fail, webhook stopped: refused with \"failed calling webhook\"" "$(cat "$T/down.err")"
fi

# ---------------------------------------------------------------- (e) ConfigMap, RBAC, Job check
E_CASES=("a pod with accelrun.io/config-map NAME/KEY is stored patched"
    "the webhook's RBAC binding removed: denied with 403 and the rule"
    "Job completions 3 != num_machines 2: denied")
if ! "$WH" --help 2>&1 | grep -q -- --api-server; then
    for c in "${E_CASES[@]}"; do skipped "$c" "accelrun-webhook has no --api-server yet"; done
else
    cat >"$T/rbac.yaml" <<EOF
apiVersion: v1
kind: ServiceAccount
metadata: {name: accelrun-webhook, namespace: $NS}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: accelrun-live-webhook}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: accelrun-live-webhook}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: accelrun-live-webhook}
subjects:
- {kind: ServiceAccount, name: accelrun-webhook, namespace: $NS}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: train-config, namespace: $NS}
data:
  config.yaml: |
$(printf '%s\n' "$CFG" | sed 's/^/    /')
EOF
    if ! out=$(kc apply -f "$T/rbac.yaml" 2>&1); then
        bad "ServiceAccount, ClusterRole (get configmaps, jobs), binding, ConfigMap" "$out"
    fi
    # a real service-account token (TokenRequest: kubectl 1.20 has no `create token`);
    # the static token of tokens.csv where that fails
    how="TokenRequest"
    curl -sS --max-time 10 --cacert "$T/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" \
        -H 'Content-Type: application/json' -o "$T/tr.json" \
        -d '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":3600}}' \
        "https://127.0.0.1:$AP/api/v1/namespaces/$NS/serviceaccounts/accelrun-webhook/token" 2>"$T/tr.err"
    python3 -c "import json; print(json.load(open('$T/tr.json'))['status']['token'])" >"$T/sa.token" 2>/dev/null ||
        { echo "$SA_STATIC_TOKEN" >"$T/sa.token"; how="static token (TokenRequest: $(head -c 200 "$T/tr.json" "$T/tr.err"))"; }
    code=$(curl -sS --max-time 10 --cacert "$T/ca.crt" -H "Authorization: Bearer $(cat "$T/sa.token")" \
        -o /dev/null -w '%{http_code}' "https://127.0.0.1:$AP/api/v1/namespaces/$NS/configmaps/train-config")
    if [ "$code" = 200 ]; then ok "the webhook's service-account token ($how) reads the ConfigMap: 200"
    else bad "the webhook's service-account token ($how) reads the ConfigMap" "status $code"; fi

    if start_webhook --api-server "https://127.0.0.1:$AP" --api-token-file "$T/sa.token" \
        --api-ca "$T/ca.crt" --api-cache 0 && register "$WPORT" && wait_effective; then
        ok "accelrun-webhook --api-server https://127.0.0.1:$AP --api-token-file --api-ca, registered on :$WPORT"
        cmann='"accelrun.io/config-map":"train-config/config.yaml"'
        pod train 1 "$JOB_UID" "$cmann" >"$T/cm.json"
        if kc create -f "$T/cm.json" -o json >"$T/cm.out" 2>"$T/cm.err"; then
            if grep -q '^Warning: Job .*/train has no spec.completionMode (an API server before v1.21)' "$T/cm.err"; then
                ok "the Job read through the API: kubectl shows the warning that v1.20 has no spec.completionMode"
            else
                bad "the Job read through the API: a warning that v1.20 has no spec.completionMode" "$(cat "$T/cm.err")"
            fi
            name=$(python3 -c "import json; print(json.load(open('$T/cm.out'))['metadata']['name'])")
            kc get pod "$name" -o json >"$T/cm.get" 2>&1
            check "${E_CASES[0]}: exactly accelrun env's set for rank 1 (the Job train's completions 2 checked)" "$T/cm.get" "
want = json.load(open('$T/env1.json'))
env = {e['name']: e.get('value') for e in r['spec']['containers'][0].get('env', [])}
assert env.get('RANK') == '1' and env.get('WORLD_SIZE') == '2', env
assert env == want, 'missing %s, extra %s, differ %s' % (sorted(set(want) - set(env)),
    sorted(set(env) - set(want)), sorted(k for k in set(want) & set(env) if want[k] != env[k]))
"
        else
            bad "${E_CASES[0]}" "$(cat "$T/cm.err")
$(tail -n 5 "$WLOG")"
        fi

        # the Job check: a Job of 3 completions, a config of 2 machines
        job wrong 3 >"$T/wrong.json"
        kc create --validate=false -f "$T/wrong.json" -o json >"$T/wrong.out" 2>"$T/wrong.err"
        WRONG_UID=$(python3 -c "import json; print(json.load(open('$T/wrong.out'))['metadata']['uid'])" 2>/dev/null)
        pod wrong 0 "${WRONG_UID:-none}" "$ann" >"$T/wrongpod.json"
        if kc create -f "$T/wrongpod.json" -o name >"$T/wp.out" 2>"$T/wp.err"; then
            bad "${E_CASES[2]}" "created: $(cat "$T/wp.out")"
        elif grep -q 'denied the request' "$T/wp.err" && grep -Eq 'completions|num_machines' "$T/wp.err"; then
            ok "${E_CASES[2]} ($(grep -o 'denied the request.*' "$T/wp.err" | head -c 160))"
        else
            bad "${E_CASES[2]}" "$(cat "$T/wrong.err" "$T/wp.err")"
        fi

        # RBAC: the binding removed; the authorizer's cache follows within a second or two
        kc delete clusterrolebinding accelrun-live-webhook >/dev/null 2>&1
        denied=
        for _ in $(seq 20); do # 10 s
            if ! kc create -f "$T/cm.json" -o name >"$T/rb.out" 2>"$T/rb.err" &&
                grep -q 403 "$T/rb.err"; then
                denied=1
                break
            fi
            sleep 0.5
        done
        if [ -n "$denied" ] && grep -q 'denied the request' "$T/rb.err" &&
            grep -Fq 'resources: [configmaps], verbs: [get]' "$T/rb.err"; then
            ok "${E_CASES[1]} ($(grep -o 'denied the request.*' "$T/rb.err" | head -c 400))"
        else
            bad "${E_CASES[1]}" "$(cat "$T/rb.out" "$T/rb.err")"
        fi
    else
        bad "accelrun-webhook --api-server ... starts and is called" "$(tail -n 8 "$WLOG")
$(cat "$T/apply.log" "$T/probe.err" 2>/dev/null)"
        for c in "${E_CASES[@]}"; do skipped "$c" "the webhook with --api-server did not start (above)"; done
    fi
    stop_webhook
fi

# ---------------------------------------------------------------- Helm chart
CHART=$ROOT/charts/accelrun-webhook
if [ ! -f "$CHART/Chart.yaml" ]; then
    skipped "charts/accelrun-webhook installed by the Helm engine" "no charts/accelrun-webhook yet"
elif ! PY=$(sh "$ROOT/scripts/k8s-venv.sh" 2>"$T/venv.err"); then
    skipped "charts/accelrun-webhook installed by the Helm engine" "scripts/k8s-venv.sh: $(tail -n 1 "$T/venv.err")"
else
    t0=$SECONDS
    if out=$(KUBECONFIG="$T/kubeconfig" timeout 150 "$PY" "$HERE/live/helm_install.py" "$CHART" \
        accelrun-system "https://127.0.0.1:${WPORT:-8443}/mutate" "$KDIR/kubectl" 2>&1); then
        ok "charts/accelrun-webhook installed by the Helm engine (tls.mode=selfSigned, url registration): $out ($((SECONDS - t0)) s)"
    else
        case $out in
        SKIP:*) skipped "charts/accelrun-webhook installed by the Helm engine" "${out#SKIP: }" ;;
        *) bad "charts/accelrun-webhook installed by the Helm engine, deployed, uninstalled" "$out" ;;
        esac
    fi
fi

echo "# $((SECONDS - t_start)) s in all"
finish
