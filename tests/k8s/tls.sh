#!/usr/bin/env bash
# tests/k8s/tls.sh: accelrun-webhook over TLS on loopback, with curl, openssl
# and python3 as the clients.  A throwaway CA signs two server certificates
# for 127.0.0.1/localhost (serials 1001 and 2002); the server starts on a
# free port and is checked for: an AdmissionReview allowed with a base64
# JSON Patch and the uid echoed, a denial with the located message, 400 for
# not JSON, 413 for bodies over 3 MiB (with Content-Length and chunked),
# 405/404, /healthz, /readyz, /metrics counting all of it, plain HTTP and
# TLS 1.1 refused, the site policy applied and reloaded, the certificate
# rotated without a restart while requests keep succeeding, a bad new
# certificate kept out, a slow sender cut off, start-up errors (exit 2), and
# SIGTERM draining a request in flight and exiting 0.
#
# usage: bash tests/k8s/tls.sh [BUILD]   (default build; needs BUILD/bin/accelrun-webhook)
set -u
TAP_NAME=webhook-tls
# shellcheck source=tests/lib/tap.sh
. "$(dirname "$0")/../lib/tap.sh"
# shellcheck source=tests/k8s/lib.sh
. "$(dirname "$0")/lib.sh" # wh_ca, wh_cert, wh_start

BUILD=${1:-build}
BIN=$BUILD/bin/accelrun-webhook
TIMEOUT=3 # the server's --timeout (idle and slow-request seconds)

if [ ! -x "$BIN" ]; then
    skipped "webhook over TLS" "no $BIN (make webhook; sh scripts/deps.sh build)"
    finish
fi
for tool in openssl curl python3; do
    if ! command -v $tool >/dev/null; then
        skipped "webhook over TLS" "no $tool (sh scripts/deps.sh build)"
        finish
    fi
done

T=$(mktemp -d /tmp/webhook-tls.XXXXXX)
PID=
cleanup() {
    if [ -n "$PID" ]; then kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; fi
    rm -rf "$T"
}
trap cleanup EXIT

# docs/webhook.md's `accelrun-webhook --help` block (indented 4) is what the binary prints
DOC=$(dirname "$0")/../../docs/webhook.md
awk '/^`accelrun-webhook --help` prints:$/ { on = 1; next }
     on == 1 && /^    / { on = 2 }
     on == 2 && !/^    / && !/^$/ { exit }
     on == 2 { sub(/^    /, ""); print }' "$DOC" | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' >"$T/help.doc"
"$BIN" --help >"$T/help.bin" 2>&1
if [ -s "$T/help.doc" ] && cmp -s "$T/help.doc" "$T/help.bin"; then
    ok "docs/webhook.md: \`accelrun-webhook --help\` is what the binary prints"
else
    bad "docs/webhook.md: \`accelrun-webhook --help\` is what the binary prints" "$(diff "$T/help.doc" "$T/help.bin")"
fi

# ---------------------------------------------------------------- certificates
wh_ca "$T" accelrun-test-ca
wh_cert "$T" 1001 1001
wh_cert "$T" 2002 2002
if [ ! -s "$T/2002.crt" ]; then
    bad "throwaway CA and server certificates" "$(cat "$T/openssl.log")"
    finish
fi
cp "$T/1001.crt" "$T/tls.crt"
cp "$T/1001.key" "$T/tls.key"
printf 'accelrun:\n  port_base: 31000\n  port_range: 10\n' >"$T/site.yaml"

# ---------------------------------------------------------------- fixtures
# An Indexed Job's pod 1 of 2 as the API server sends it (trimmed), the
# config inline; $1 the uid, $2 the config as a JSON string's content.
review() {
    cat <<EOF
{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"$1",
"kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},
"namespace":"ml","operation":"CREATE","userInfo":{"username":"system:serviceaccount:kube-system:job-controller"},
"object":{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"train-1-","namespace":"ml",
"labels":{"batch.kubernetes.io/job-name":"train","job-name":"train","batch.kubernetes.io/job-completion-index":"1"},
"annotations":{"batch.kubernetes.io/job-completion-index":"1","accelrun.io/config":"$2"},
"ownerReferences":[{"apiVersion":"batch/v1","kind":"Job","name":"train","uid":"4d5e7f00-0000-4000-8000-000000000001","controller":true}]},
"spec":{"hostname":"train-1","subdomain":"train","restartPolicy":"Never","containers":[{"name":"trainer",
"image":"ghcr.io/example/train:1","command":["accelrun","launch","--","python","train.py"],
"resources":{"limits":{"nvidia.com/gpu":"1"},"requests":{"nvidia.com/gpu":"1"}}}]}},
"oldObject":null,"dryRun":false}}
EOF
}
review 11111111-2222-4333-8444-555555555555 \
    'distributed_type: MULTI_GPU\nnum_machines: 2\nnum_processes: 2\nmixed_precision: bf16\n' \
    >"$T/good.json"
review 66666666-2222-4333-8444-555555555555 \
    'distributed_type: MULTI_GPU\nnum_machines: 2\nmixed_precison: bf16\nnum_processes: 2\n' \
    >"$T/invalid.json"
printf 'this is not json' >"$T/notjson.txt"
head -c $((3 * 1024 * 1024 + 1)) /dev/zero | tr '\0' ' ' >"$T/big.txt"

# ---------------------------------------------------------------- helpers
start() {
    wh_start "$BIN" "$T/server.log" --tls-cert "$T/tls.crt" --tls-key "$T/tls.key" \
        --site "$T/site.yaml" --timeout $TIMEOUT --reload-interval 1 -v "$@"
    PID=$WH_PID PORT=$WH_PORT
    URL=https://127.0.0.1:$PORT
}

# req PATH [curl args...]: prints the status; the body lands in $T/body
req() {
    local path=$1
    shift
    curl -sS --cacert "$T/ca.crt" -o "$T/body" -w '%{http_code}' --max-time 10 "$@" "$URL$path" \
        2>"$T/curl.err"
}

# the served certificate's serial (hex), from a TLS handshake
served_serial() {
    openssl s_client -connect "127.0.0.1:$PORT" -servername localhost </dev/null 2>/dev/null |
        openssl x509 -noout -serial 2>/dev/null | sed 's/serial=//'
}

# check NAME PYTHON: the response body in $T/body, as `r` (parsed JSON)
check_json() {
    local name=$1 code=$2 out
    if out=$(python3 -c "
import base64, json, sys
r = json.load(open('$T/body'))
$code
" 2>&1); then ok "$name"; else bad "$name" "$out
$(head -c 600 "$T/body")"; fi
}

# ---------------------------------------------------------------- start
start
if [ -z "$PORT" ]; then
    bad "accelrun-webhook starts on a free port" "$(cat "$T/server.log")"
    finish
fi
ok "accelrun-webhook starts on 127.0.0.1:$PORT"

code=$(req /mutate?timeout=10s -H 'Content-Type: application/json' --data-binary @"$T/good.json")
if [ "$code" = 200 ]; then ok "POST /mutate with an Indexed Job's pod: 200"; else
    bad "POST /mutate with an Indexed Job's pod: 200" "status $code; $(cat "$T/curl.err" "$T/body")"; fi
check_json "the response: v1 review, uid echoed, allowed, base64 JSONPatch with the env" "
assert r['apiVersion'] == 'admission.k8s.io/v1' and r['kind'] == 'AdmissionReview', r
s = r['response']
assert s['uid'] == '11111111-2222-4333-8444-555555555555', s['uid']
assert s['allowed'] is True, s
assert s['patchType'] == 'JSONPatch', s
ops = json.loads(base64.b64decode(s['patch'], validate=True))
assert ops[0]['op'] == 'add' and ops[0]['path'] == '/spec/containers/0/env', ops[0]
env = {e['name']: e.get('value') for e in ops[0]['value']}
assert env['MASTER_ADDR'] == 'train-0.train.ml.svc', env
assert env['RANK'] == '1' and env['WORLD_SIZE'] == '2', env
port = int(env['MASTER_PORT'])
assert 31000 <= port < 31010, 'MASTER_PORT %d is not from the site policy (31000+10)' % port
"

code=$(req /mutate --data-binary @"$T/invalid.json" -H 'Content-Type: application/json')
[ "$code" = 200 ] || bad "an invalid config: 200 with a denial" "status $code"
check_json "an invalid config: allowed false, the located message" "
s = r['response']
assert s['allowed'] is False and s['status']['code'] == 403, s
assert 'annotation accelrun.io/config:3:1' in s['status']['message'], s['status']['message']
assert 'mixed_precison' in s['status']['message'], s['status']['message']
"

code=$(req /mutate --data-binary @"$T/notjson.txt" -H 'Content-Type: application/json')
if [ "$code" = 400 ] && grep -q '"message"' "$T/body"; then ok "not JSON: 400 with a message"
else bad "not JSON: 400 with a message" "status $code; $(cat "$T/body")"; fi

code=$(req /mutate --data-binary @"$T/big.txt" -H 'Content-Type: application/json')
if [ "$code" = 413 ]; then ok "a body over 3 MiB (Content-Length): 413 before it is read"
else bad "a body over 3 MiB (Content-Length): 413" "status $code; $(cat "$T/curl.err" "$T/body")"; fi

code=$(req /mutate --data-binary @"$T/big.txt" -H 'Transfer-Encoding: chunked' \
    -H 'Content-Type: application/json')
if [ "$code" = 413 ]; then ok "a body over 3 MiB (chunked): 413"
else bad "a body over 3 MiB (chunked): 413" "status $code; $(cat "$T/curl.err" "$T/body")"; fi

code=$(req /mutate)
if [ "$code" = 405 ]; then ok "GET /mutate: 405"; else bad "GET /mutate: 405" "status $code"; fi
code=$(req /nowhere)
if [ "$code" = 404 ]; then ok "an unknown path: 404"; else bad "an unknown path: 404" "status $code"; fi
code=$(req /healthz)
if [ "$code" = 200 ] && grep -qx ok "$T/body"; then ok "GET /healthz: 200 ok"
else bad "GET /healthz: 200 ok" "status $code"; fi
# probes and scrapers keep their connection: three GETs on one
conns=$(curl -sS --cacert "$T/ca.crt" --max-time 10 -o /dev/null -o /dev/null -o /dev/null \
    -w '%{num_connects} ' "$URL/healthz" "$URL/readyz" "$URL/metrics" 2>&1)
if [ "$conns" = "1 0 0 " ]; then ok "GET /healthz, /readyz, /metrics: one kept-alive connection"
else bad "GET /healthz, /readyz, /metrics: one kept-alive connection" "connects per request: $conns"; fi
code=$(req /readyz)
if [ "$code" = 200 ]; then ok "GET /readyz: 200"; else bad "GET /readyz: 200" "status $code"; fi

code=$(req /metrics)
metric() { sed -n "s/^$1 \\([0-9.]*\\)\$/\\1/p" "$T/body"; }
m_allowed=$(metric 'accelrun_webhook_requests_total{outcome="allowed"}')
m_denied=$(metric 'accelrun_webhook_requests_total{outcome="denied"}')
m_bad=$(metric 'accelrun_webhook_requests_total{outcome="bad_request"}')
m_patches=$(metric accelrun_webhook_patches_total)
m_count=$(metric accelrun_webhook_request_duration_seconds_count)
m_inf=$(metric 'accelrun_webhook_request_duration_seconds_bucket{le="+Inf"}')
m_miss=$(metric 'accelrun_webhook_config_cache_total{result="miss"}')
if [ "$code" = 200 ] && [ "$m_allowed" = 1 ] && [ "$m_denied" = 1 ] && [ "$m_bad" = 4 ] &&
    [ "$m_patches" = 1 ] && [ "$m_count" = 6 ] && [ "$m_inf" = 6 ] && [ "$m_miss" = 2 ]; then
    ok "GET /metrics: allowed 1, denied 1, bad_request 4, patches 1, histogram count 6, config cache misses 2"
else
    bad "GET /metrics: allowed 1, denied 1, bad_request 4, patches 1, histogram count 6, config cache misses 2" \
        "status $code; allowed=$m_allowed denied=$m_denied bad=$m_bad patches=$m_patches \
count=$m_count inf=$m_inf miss=$m_miss"
fi

if curl -sS --max-time 5 -o /dev/null "http://127.0.0.1:$PORT/healthz" 2>/dev/null; then
    bad "plain HTTP to the TLS port is refused"
else ok "plain HTTP to the TLS port is refused"; fi

# SECLEVEL=0 lets OpenSSL offer TLS 1.1 at all; the same client must get a
# session with TLS 1.2, so that the refusal is the server's.
tls_session() { # VERSION-FLAG: the session's cipher, "(NONE)" when refused
    openssl s_client -connect "127.0.0.1:$PORT" "$1" -cipher 'DEFAULT:@SECLEVEL=0' \
        -CAfile "$T/ca.crt" </dev/null 2>/dev/null | sed -n 's/.*Cipher is \(.*\)/\1/p' | head -n 1
}
c11=$(tls_session -tls1_1)
c12=$(tls_session -tls1_2)
if [ "${c11:-(NONE)}" = "(NONE)" ] && [ -n "$c12" ] && [ "$c12" != "(NONE)" ]; then
    ok "TLS 1.1 is refused (the same client gets TLS 1.2: $c12)"
else bad "TLS 1.1 is refused" "TLS 1.1 cipher '$c11', TLS 1.2 cipher '$c12'"; fi
v12=$(curl -sS --cacert "$T/ca.crt" --tlsv1.2 --tls-max 1.2 -o /dev/null -w '%{http_code}' \
    "$URL/healthz" 2>&1)
v13=$(curl -sS --cacert "$T/ca.crt" --tlsv1.3 -o /dev/null -w '%{http_code}' "$URL/healthz" 2>&1)
if [ "$v12" = 200 ] && [ "$v13" = 200 ]; then ok "TLS 1.2 and TLS 1.3 are served"
else bad "TLS 1.2 and TLS 1.3 are served" "1.2: $v12; 1.3: $v13"; fi

# ---------------------------------------------------------------- reloads
s=$(served_serial)
if [ "$s" = 1001 ]; then ok "the first certificate is served (serial 1001)"
else bad "the first certificate is served (serial 1001)" "serial '$s'"; fi

# Requests in a loop while the certificate is rotated: every one must succeed.
(
    n=0 f=0
    while [ ! -e "$T/stop" ]; do
        c=$(curl -s --cacert "$T/ca.crt" -o /dev/null -w '%{http_code}' --max-time 5 \
            --data-binary @"$T/good.json" "$URL/mutate")
        n=$((n + 1))
        [ "$c" = 200 ] || f=$((f + 1))
    done
    echo "$n $f" >"$T/loop"
) &
LOOP=$!
sleep 0.5
cat "$T/2002.crt" >"$T/tls.crt"
cat "$T/2002.key" >"$T/tls.key"
s=
for _ in $(seq 50); do
    s=$(served_serial)
    [ "$s" = 2002 ] && break
    sleep 0.1
done
sleep 0.5
touch "$T/stop"
wait $LOOP
read -r n f <"$T/loop"
if [ "$s" = 2002 ]; then ok "a rotated certificate is served without a restart (serial 2002)"
else bad "a rotated certificate is served without a restart (serial 2002)" \
    "serial '$s'; $(tail -n 5 "$T/server.log")"; fi
if [ "$n" -gt 5 ] && [ "$f" = 0 ]; then ok "requests during the reload all succeed ($n of $n)"
else bad "requests during the reload all succeed" "$f of $n failed"; fi

printf 'not a certificate\n' >"$T/tls.crt"
for _ in $(seq 40); do
    grep -q 'reload: --tls-cert .*not a PEM certificate' "$T/server.log" && break
    sleep 0.1
done
s=$(served_serial)
code=$(req /mutate --data-binary @"$T/good.json")
if grep -q 'warning: reload: --tls-cert .*not a PEM certificate' "$T/server.log" &&
    [ "$s" = 2002 ] && [ "$code" = 200 ]; then
    ok "a bad new certificate is logged and the old one kept"
else bad "a bad new certificate is logged and the old one kept" \
    "serial '$s', status $code; $(tail -n 3 "$T/server.log")"; fi
cat "$T/2002.crt" >"$T/tls.crt"

printf 'accelrun:\n  port_base: 41000\n  port_range: 10\n' >"$T/site.yaml"
port=
for _ in $(seq 40); do
    req /mutate --data-binary @"$T/good.json" >/dev/null
    port=$(python3 -c "
import base64, json
ops = json.loads(base64.b64decode(json.load(open('$T/body'))['response']['patch']))
print({e['name']: e['value'] for e in ops[0]['value']}['MASTER_PORT'])" 2>/dev/null)
    [ "${port:-0}" -ge 41000 ] && break
    sleep 0.1
done
if [ "${port:-0}" -ge 41000 ] && [ "$port" -lt 41010 ]; then
    ok "a changed site file is applied without a restart (MASTER_PORT $port)"
else bad "a changed site file is applied without a restart" "MASTER_PORT '$port'"; fi
printf 'accelrun:\n  port_bas: 1\n' >"$T/site.yaml"
for _ in $(seq 40); do
    grep -q 'warning: reload: --site' "$T/server.log" && break
    sleep 0.1
done
code=$(req /mutate --data-binary @"$T/good.json")
if grep -q 'warning: reload: --site .*port_bas' "$T/server.log" && [ "$code" = 200 ] &&
    grep -q '"allowed":true' "$T/body"; then
    ok "a bad site file is logged, the old policy kept"
else bad "a bad site file is logged, the old policy kept" "$(grep reload "$T/server.log")"; fi

# ---------------------------------------------------------------- slow sender
slow=$(python3 - "$PORT" "$T/ca.crt" <<'EOF' 2>&1
import socket, ssl, sys, time
ctx = ssl.create_default_context(cafile=sys.argv[2])
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[1]))),
                    server_hostname="localhost")
s.sendall(b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-")  # and nothing more
t0 = time.monotonic()
s.settimeout(30)
try:
    while s.recv(4096):
        pass
except (ConnectionError, ssl.SSLError, OSError):
    pass
print("%.1f" % (time.monotonic() - t0))
EOF
)
within "a slow sender is cut off within the timeout (${slow}s, --timeout $TIMEOUT)" "$slow" \
    $((TIMEOUT + 2))

# ---------------------------------------------------------------- start-up errors
startup() { # NAME PATTERN ARGS...: exit 2 and one line matching PATTERN
    local name=$1 pat=$2 out rc
    shift 2
    out=$(timeout 10 "$BIN" "$@" 2>&1)
    rc=$?
    if [ $rc = 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] &&
        printf '%s' "$out" | grep -q -- "$pat"; then ok "$name: exit 2, one line"
    else bad "$name: exit 2, one line" "rc $rc: $out"; fi
}
startup "an unreadable certificate" "--tls-cert $T/nope: couldn't read" \
    --tls-cert "$T/nope" --tls-key "$T/1001.key" --listen 127.0.0.1:0
startup "a key that is not the certificate's" "--tls-key .* does not go with --tls-cert" \
    --tls-cert "$T/1001.crt" --tls-key "$T/2002.key" --listen 127.0.0.1:0
startup "a file that is no key" "--tls-key .*not an unencrypted PEM private key" \
    --tls-cert "$T/1001.crt" --tls-key "$T/1001.crt" --listen 127.0.0.1:0
startup "the port in use" "--listen 127.0.0.1:$PORT: couldn't bind (another process" \
    --tls-cert "$T/1001.crt" --tls-key "$T/1001.key" --listen "127.0.0.1:$PORT"
startup "a bad site file" "--site $T/site.yaml: invalid: .*port_bas" \
    --tls-cert "$T/1001.crt" --tls-key "$T/1001.key" --listen 127.0.0.1:0 --site "$T/site.yaml"
startup "--api-server in the clear" "--api-server http://10.0.0.1: give an https:// URL" \
    --tls-cert "$T/1001.crt" --tls-key "$T/1001.key" --api-server http://10.0.0.1
startup "an unreadable --api-token-file" "--api-token-file $T/nope: can't be read" \
    --tls-cert "$T/1001.crt" --tls-key "$T/1001.key" --api-server https://10.0.0.1 \
    --api-token-file "$T/nope"

# ---------------------------------------------------------------- SIGTERM
# A request whose body is half sent when SIGTERM comes is still answered
# (with Connection: close), then the server exits 0.
drain=$(python3 - "$PORT" "$T/ca.crt" "$PID" "$T/good.json" <<'EOF' 2>&1
import os, signal, socket, ssl, sys, time
ctx = ssl.create_default_context(cafile=sys.argv[2])
body = open(sys.argv[4], "rb").read()
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[1]))),
                    server_hostname="localhost")
s.sendall(b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
          b"Content-Length: %d\r\n\r\n" % len(body) + body[:100])
time.sleep(0.3)
os.kill(int(sys.argv[3]), signal.SIGTERM)
time.sleep(0.5)
s.sendall(body[100:])
s.settimeout(10)
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
head = data.split(b"\r\n\r\n", 1)[0].decode()
print(head.splitlines()[0], "close" if "connection: close" in head.lower() else "keep-alive")
EOF
)
t0=$(date +%s)
wait "$PID"
rc=$?
PID=
dt=$(($(date +%s) - t0))
case "$drain" in
"HTTP/1.1 200 OK close") ok "SIGTERM: the request in flight is answered (200, Connection: close)" ;;
*) bad "SIGTERM: the request in flight is answered (200, Connection: close)" "$drain" ;;
esac
if [ $rc = 0 ] && [ $dt -le 5 ]; then ok "SIGTERM: exit 0 after the drain (${dt}s)"
else bad "SIGTERM: exit 0 after the drain" "rc $rc after ${dt}s; $(tail -n 3 "$T/server.log")"; fi

finish
