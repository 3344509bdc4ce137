#!/bin/sh
# tests/k8s/api.sh: the webhook's API server client against a local HTTPS
# server answering as the Kubernetes API does (tests/k8s/api.py), run with
# the Kubernetes tiers' venv (scripts/k8s-venv.sh: the official client's
# models make every object served and every Pod reviewed).
#
# usage: sh tests/k8s/api.sh [BUILD]   (default build; needs BUILD/bin/accelrun-webhook)
set -u
here=$(dirname "$0")
BUILD=${1:-build}
BIN=$BUILD/bin/accelrun-webhook
skip_all() {
    echo "ok - the webhook's API client # SKIP $1"
    echo "k8s-api: 0 passed, 0 failed, 1 skipped"
    exit 0
}
[ -x "$BIN" ] || skip_all "no $BIN (make webhook; sh scripts/deps.sh build)"
command -v openssl >/dev/null || skip_all "no openssl (sh scripts/deps.sh build)"
err=$(mktemp)
if ! py=$(sh "$here/../../scripts/k8s-venv.sh" 2>"$err"); then
    why=$(cat "$err")
    rm -f "$err"
    skip_all "no Kubernetes venv: ${why:-scripts/k8s-venv.sh failed}"
fi
rm -f "$err"
exec timeout 300 "$py" "$here/api.py" "$BIN"
