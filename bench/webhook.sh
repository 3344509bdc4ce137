#!/bin/bash
# bench/webhook.sh: accelrun-webhook under load, with wrk (Debian) over TLS
# on loopback.  The peer is the same server's bare TLS 200 (GET /healthz) in
# the same run, so the ratio is what deciding a review costs on top of TLS,
# HTTP and libmicrohttpd:
#
#   1. WEBHOOK_BENCH_ROUNDS (default 3) rounds of wrk against GET /healthz,
#      then POST /mutate with a realistic review (pod 1 of a 2-pod Indexed
#      Job, an inline FSDP config, a container with env of its own), then
#      the same against a second server started with --config-cache 0 (each
#      review loads its config, as a Job's first pod does), at
#      WEBHOOK_BENCH_CONNS connections and at 2: requests/s, p50, p99 and
#      the server's CPU time per request (/proc/PID/stat) of each; the
#      medians, their spread, and the median of each round's ratio;
#   2. a bounded loop of WEBHOOK_BENCH_REQUESTS (default 1,000,000) /mutate
#      requests (10 s wrk runs until the count is passed): the server's
#      resident memory (VmRSS) before and after.
#
# Goals (issue 15): p99 of /mutate <= 1.3x the bare response's, >= 5,000
# requests/s on 2 cores (wrk runs on the same cores: the figure is a floor).
#
#   bash bench/webhook.sh [BUILD]     (make bench-run calls it with build)
#
# WEBHOOK_BENCH_SECONDS (default 10) per wrk phase; WEBHOOK_BENCH_CONNS
# (default 32) connections; WEBHOOK_BENCH_THREADS (default 2) server threads.
set -u
# shellcheck source=tests/k8s/lib.sh
. "$(dirname "$0")/../tests/k8s/lib.sh" # wh_ca, wh_cert, wh_start
build=${1:-build}
bin=$build/bin/accelrun-webhook
secs=${WEBHOOK_BENCH_SECONDS:-10}
conns=${WEBHOOK_BENCH_CONNS:-32}
threads=${WEBHOOK_BENCH_THREADS:-2}
total=${WEBHOOK_BENCH_REQUESTS:-1000000}
say() { echo "webhook bench: $*"; }

if [ ! -x "$bin" ]; then
    say "SKIP: no $bin (make webhook; sh scripts/deps.sh build)"
    exit 0
fi
if ! command -v wrk >/dev/null; then
    say "SKIP: no wrk (sh scripts/deps.sh bench installs it)"
    exit 0
fi
T=$(mktemp -d /tmp/webhook-bench.XXXXXX)
PID='' PID0=''
cleanup() {
    local p
    for p in $PID $PID0; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT

# ---------------------------------------------------------------- the server
wh_ca "$T" accelrun-bench-ca
wh_cert "$T" tls 1001
wh_start "$bin" "$T/server.log" --tls-cert "$T/tls.crt" --tls-key "$T/tls.key" \
    --threads "$threads" --max-connections 1024
PID=$WH_PID port=$WH_PORT
if [ -z "$port" ]; then
    say "FAIL: the server did not start: $(cat "$T/server.log" "$T/openssl.log" 2>/dev/null)"
    exit 1
fi
url=https://127.0.0.1:$port
# the same with --config-cache 0: every review loads its config, as the
# first pod of each Job does
wh_start "$bin" "$T/server0.log" --tls-cert "$T/tls.crt" --tls-key "$T/tls.key" \
    --threads "$threads" --max-connections 1024 --config-cache 0
PID0=$WH_PID
if [ -z "$WH_PORT" ]; then
    say "FAIL: the server with --config-cache 0 did not start: $(cat "$T/server0.log")"
    exit 1
fi
url0=https://127.0.0.1:$WH_PORT
SRV=$PID # the server whose CPU time run_wrk reads

# A review as the API server sends it for pod 1 of an Indexed Job.
cat >"$T/review.json" <<'EOF'
{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002",
"kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},
"requestKind":{"group":"","version":"v1","kind":"Pod"},"requestResource":{"group":"","version":"v1","resource":"pods"},
"namespace":"ml","operation":"CREATE","userInfo":{"username":"system:serviceaccount:kube-system:job-controller",
"uid":"0c8ff1a6-4a1b-4b31-9d1e-3b0d2f2a4a11","groups":["system:serviceaccounts","system:serviceaccounts:kube-system","system:authenticated"]},
"object":{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"llama-ft-1-","namespace":"ml",
"labels":{"batch.kubernetes.io/controller-uid":"4d5e7f00-0000-4000-8000-000000000001","batch.kubernetes.io/job-name":"llama-ft",
"controller-uid":"4d5e7f00-0000-4000-8000-000000000001","job-name":"llama-ft","batch.kubernetes.io/job-completion-index":"1"},
"annotations":{"batch.kubernetes.io/job-completion-index":"1","accelrun.io/config":"compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\ndowncast_bf16: 'no'\nfsdp_config:\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n  fsdp_backward_prefetch: BACKWARD_PRE\n  fsdp_cpu_ram_efficient_loading: true\n  fsdp_forward_prefetch: false\n  fsdp_offload_params: false\n  fsdp_sharding_strategy: FULL_SHARD\n  fsdp_state_dict_type: SHARDED_STATE_DICT\n  fsdp_sync_module_states: true\n  fsdp_use_orig_params: true\nmachine_rank: 0\nmain_training_function: main\nmixed_precision: bf16\nnum_machines: 2\nnum_processes: 16\nrdzv_backend: static\nsame_network: true\nuse_cpu: false\n"},
"ownerReferences":[{"apiVersion":"batch/v1","kind":"Job","name":"llama-ft","uid":"4d5e7f00-0000-4000-8000-000000000001","controller":true,"blockOwnerDeletion":true}]},
"spec":{"hostname":"llama-ft-1","subdomain":"llama-ft","restartPolicy":"Never","serviceAccountName":"default",
"containers":[{"name":"trainer","image":"ghcr.io/example/llama-ft:2024.05","command":["accelrun","launch","--","python","train.py","--model","meta-llama/Llama-3-8B"],
"env":[{"name":"HF_HOME","value":"/cache/hf"},{"name":"WANDB_PROJECT","value":"llama-ft"}],
"resources":{"limits":{"nvidia.com/gpu":"8","cpu":"96","memory":"1Ti"},"requests":{"nvidia.com/gpu":"8","cpu":"96","memory":"1Ti"}},
"volumeMounts":[{"name":"cache","mountPath":"/cache"},{"name":"dshm","mountPath":"/dev/shm"}]}],
"volumes":[{"name":"cache","persistentVolumeClaim":{"claimName":"hf-cache"}},{"name":"dshm","emptyDir":{"medium":"Memory"}}]}},
"oldObject":null,"dryRun":false,"options":{"apiVersion":"meta.k8s.io/v1","kind":"CreateOptions"}}}
EOF
if ! curl -sk --max-time 10 -o "$T/resp.json" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary @"$T/review.json" "$url/mutate" | grep -q 200 || ! grep -q '"patch"' "$T/resp.json"; then
    say "FAIL: the review was not answered with a patch: $(head -c 400 "$T/resp.json")"
    exit 1
fi
cat >"$T/post.lua" <<EOF
local f = io.open("$T/review.json", "rb")
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
EOF
# ---------------------------------------------------------------- measure
to_ms() { # wrk's "1.23ms" / "850.00us" / "1.02s" as milliseconds
    awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) ; else if (v ~ /s$/) n *= 1000; printf "%.3f", n }'
}
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$PID/status"; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$SRV/stat"; } # the server's utime + stime
# run_wrk CONNS ARGS...: prints "rps p50 p99 cpu_us" (cpu_us: the server's
# CPU time per request, from /proc/PID/stat, wrk's own excluded)
run_wrk() {
    local c=$1 out t0 t1 n
    shift
    t0=$(cpu_ticks)
    out=$(wrk -t2 -c"$c" -d"${secs}s" --latency "$@" 2>&1)
    t1=$(cpu_ticks)
    n=$(echo "$out" | awk '/requests in/ { print $1 }')
    errs=$(echo "$out" | awk '/Non-2xx|Socket errors/ { print }' | tr '\n' ' ')
    [ -n "$errs" ] && say "wrk: $errs" >&2
    printf '%s %s %s %s\n' "$(echo "$out" | awk '/^Requests\/sec:/ { print $2 }')" \
        "$(to_ms "$(echo "$out" | awk '$1 == "50%" { print $2 }')")" \
        "$(to_ms "$(echo "$out" | awk '$1 == "99%" { print $2 }')")" \
        "$(awk -v d=$((t1 - t0)) -v n="${n:-0}" -v hz="$(getconf CLK_TCK)" 'BEGIN { if (n > 0) printf "%.1f", d / hz * 1e6 / n; else print 0 }')"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 > 0) printf "%.2f", a / b; else print "n/a" }'; }
med() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }         # median of a column
spread() { sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s-%s", lo, hi }'; }

rounds=${WEBHOOK_BENCH_ROUNDS:-3}
say "wrk 2 threads, ${secs} s a run, TLS on loopback; server --threads $threads; $(nproc) cores shared with wrk"
say "$rounds rounds of: bare TLS 200 (GET /healthz), then POST /mutate (a realistic review, patched;"
say "mutate: the config cache's default, as for every pod of a Job after its first; mutate-load:"
say "a second server with --config-cache 0, every review loading its config, as a Job's first pod),"
say "at $conns connections (saturation) and at 2 (one request in flight per wrk thread, no queueing)"
: >"$T/runs"
for r in $(seq "$rounds"); do
    for c in "$conns" 2; do
        read -r a b cc d <<<"$(run_wrk "$c" "$url/healthz")"
        echo "$c bare $a $b $cc $d" >>"$T/runs"
        read -r a b cc d <<<"$(run_wrk "$c" -s "$T/post.lua" "$url/mutate")"
        echo "$c mutate $a $b $cc $d" >>"$T/runs"
        read -r a b cc d <<<"$(SRV=$PID0 run_wrk "$c" -s "$T/post.lua" "$url0/mutate")"
        echo "$c mutate-load $a $b $cc $d" >>"$T/runs"
        say "round $r, $c connections (requests/s, p50 ms, p99 ms, server CPU µs/request): bare $(grep "^$c bare" "$T/runs" | tail -n 1 | cut -d' ' -f3-), mutate $(grep "^$c mutate " "$T/runs" | tail -n 1 | cut -d' ' -f3-), mutate with --config-cache 0 $a $b $cc $d"
    done
done
# col C KIND FIELD: that field of every round (3 rps, 4 p50, 5 p99, 6 cpu)
col() { awk -v c="$1" -v k="$2" -v f="$3" '$1 == c && $2 == k { print $f }' "$T/runs"; }
for c in "$conns" 2; do
    for k in bare mutate mutate-load; do
        say "$(printf '%-11s' $k) at $c connections, median (spread) of $rounds: $(col "$c" $k 3 | med) ($(col "$c" $k 3 | spread)) requests/s, p50 $(col "$c" $k 4 | med) ms, p99 $(col "$c" $k 5 | med) ($(col "$c" $k 5 | spread)) ms, server CPU $(col "$c" $k 6 | med) µs/request"
    done
    # the ratio of each round, then their median
    r99=$(paste <(col "$c" mutate 5) <(col "$c" bare 5) | awk '{ printf "%.2f\n", ($2 > 0 ? $1 / $2 : 0) }' | med)
    r50=$(paste <(col "$c" mutate 4) <(col "$c" bare 4) | awk '{ printf "%.2f\n", ($2 > 0 ? $1 / $2 : 0) }' | med)
    rcpu=$(paste <(col "$c" mutate 6) <(col "$c" bare 6) | awk '{ printf "%.2f\n", ($2 > 0 ? $1 / $2 : 0) }' | med)
    say "ratio /mutate / bare at $c connections (median of the rounds'): p50 $r50, p99 $r99, server CPU per request $rcpu"
    r99l=$(paste <(col "$c" mutate-load 5) <(col "$c" bare 5) | awk '{ printf "%.2f\n", ($2 > 0 ? $1 / $2 : 0) }' | med)
    say "ratio /mutate with --config-cache 0 / bare at $c connections: p99 $r99l"
    [ "$c" = "$conns" ] && R99=$r99 RPS=$(col "$c" mutate 3 | med)
done
awk -v r="$R99" -v t="$RPS" -v c="$conns" 'BEGIN {
    printf "webhook bench: goal p99 <= 1.3x bare at %d connections: %s (%s); goal >= 5000 requests/s: %s (%.0f)\n",
        c, (r + 0 <= 1.3 ? "met" : "missed"), r, (t + 0 >= 5000 ? "met" : "missed"), t }'

before=$(rss)
start=$(date +%s)
done_n=0
# the bounded loop: 10 s runs of wrk until the count is reached (or 15 min)
while [ "$done_n" -lt "$total" ] && [ $(($(date +%s) - start)) -lt 900 ]; do
    n=$(wrk -t2 -c"$conns" -d10s -s "$T/post.lua" "$url/mutate" 2>&1 | awk '/requests in/ { print $1 }')
    [ -n "$n" ] || break
    done_n=$((done_n + n))
done
after=$(rss)
say "bounded loop: $done_n /mutate requests in $(($(date +%s) - start)) s; VmRSS $before kB before, $after kB after ($(ratio "$after" "$before")x)"
if ! kill -0 "$PID" 2>/dev/null; then
    say "FAIL: the server died: $(tail -n 3 "$T/server.log")"
    exit 1
fi
