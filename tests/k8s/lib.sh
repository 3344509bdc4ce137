# shellcheck shell=bash
# tests/k8s/lib.sh: what the webhook's shell tiers and bench/webhook.sh
# share: a throwaway CA with server certificates (for localhost/127.0.0.1
# unless told otherwise), and accelrun-webhook started on a free loopback port.

# wh_ca DIR CN: DIR/ca.crt and DIR/ca.key (openssl's output in DIR/openssl.log)
wh_ca() {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1/ca.key" \
        -out "$1/ca.crt" -days 2 -subj "/CN=$2" >>"$1/openssl.log" 2>&1
}

# wh_cert DIR NAME SERIAL [SANS [EKU]]: DIR/NAME.crt and DIR/NAME.key, signed
# by DIR's CA, for SANS (default DNS:localhost,IP:127.0.0.1) and EKU (default
# serverAuth); 0 when the certificate is there
wh_cert() {
    printf 'subjectAltName=%s\nextendedKeyUsage=%s\n' "${4:-DNS:localhost,IP:127.0.0.1}" \
        "${5:-serverAuth}" >"$1/$2.ext"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1/$2.key" \
        -out "$1/$2.csr" -subj "/CN=${2}" >>"$1/openssl.log" 2>&1
    openssl x509 -req -in "$1/$2.csr" -CA "$1/ca.crt" -CAkey "$1/ca.key" -set_serial "0x$3" \
        -days 2 -sha256 -extfile "$1/$2.ext" -out "$1/$2.crt" >>"$1/openssl.log" 2>&1
    [ -s "$1/$2.crt" ]
}

# wh_start BIN LOG ARGS...: BIN --listen 127.0.0.1:0 ARGS in the background,
# its stderr in LOG; sets WH_PID, and WH_PORT once it listens ("" if it
# exited or did not listen within 5 s)
wh_start() {
    local bin=$1 log=$2
    shift 2
    : >"$log" # there before the first look below, however late the child opens it
    "$bin" --listen 127.0.0.1:0 "$@" 2>>"$log" &
    WH_PID=$!
    WH_PORT=
    for _ in $(seq 100); do
        WH_PORT=$(sed -n 's/.*listening on .*, port \([0-9]*\) .*/\1/p' "$log")
        [ -n "$WH_PORT" ] && break
        kill -0 "$WH_PID" 2>/dev/null || break
        sleep 0.05
    done
}
