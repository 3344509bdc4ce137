#!/bin/sh
# tests/k8s/api.sh: the webhook's Python tiers, with the Kubernetes tiers'
# venv (scripts/k8s-venv.sh: the official client's models make every object
# served and every Pod reviewed):
#   api.py      its API server client against a local HTTPS server answering
#               as the Kubernetes API does;
#   patches.py  its patches applied by the real jsonpatch and the patched
#               Pods validated by kubernetes-validate --strict, at the
#               version of this machine's kubectl (1.32 without one).
#
# usage: sh tests/k8s/api.sh [BUILD]   (default build; needs BUILD/bin/accelrun-webhook)
set -u
here=$(dirname "$0")
BUILD=${1:-build}
BIN=$BUILD/bin/accelrun-webhook
skip_all() {
    echo "ok - the webhook's API client # SKIP $1"
    echo "k8s-api: 0 passed, 0 failed, 1 skipped"
    echo "k8s-patches: 0 passed, 0 failed, 1 skipped"
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
# kubernetes-validate holds the schemas of 1.25 to 1.37
v=$(kubectl version --client -o json 2>/dev/null | "$py" -c '
import json, sys
v = json.load(sys.stdin)["clientVersion"]
print("1.%d.0" % min(37, max(25, int(v["minor"].rstrip("+")))))' 2>/dev/null) || v=1.32.0
rc=0
timeout 300 "$py" "$here/api.py" "$BIN" || rc=1
timeout 300 "$py" "$here/patches.py" "$BIN" "${v:-1.32.0}" || rc=1
exit $rc
