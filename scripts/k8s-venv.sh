#!/bin/sh
# scripts/k8s-venv.sh: the virtual environment of the Kubernetes tiers
# (tests/k8s/), with the pins of scripts/k8s-requirements.txt, cached outside
# the clone in $ACCELRUN_CACHE/k8s-venv-<hash of that file> (default
# /var/cache/accelrun, or ~/.cache/accelrun where that is not writable), so a
# new clone reuses it and a changed pin builds a new one.
#
#   sh scripts/k8s-venv.sh     prints the venv's python on success; exit 1
#                              with the reason on stderr otherwise
set -u
cd "$(dirname "$0")/.." || exit 1
req=scripts/k8s-requirements.txt
cache=${ACCELRUN_CACHE:-/var/cache/accelrun}
if ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then
    cache=${HOME:-/tmp}/.cache/accelrun
    mkdir -p "$cache" || exit 1
fi
venv=$cache/k8s-venv-$(sha256sum "$req" | cut -c1-12)
check='import kubernetes, jsonpatch, kubernetes_validate, helm_python'
if [ -x "$venv/bin/python" ] && [ -f "$venv/.complete" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
    echo "$venv/bin/python"
    exit 0
fi
# one builder at a time; a second waits and then reuses
exec 9>"$venv.lock"
flock 9
if [ -f "$venv/.complete" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
    echo "$venv/bin/python"
    exit 0
fi
rm -rf "$venv"
log=$(mktemp)
if ! /usr/bin/python3 -m venv "$venv" >"$log" 2>&1; then
    echo "python3 -m venv failed: $(tail -n 1 "$log") (apt-get install python3-venv)" >&2
    rm -rf "$log" "$venv"
    exit 1
fi
if ! timeout 600 "$venv/bin/pip" install -q --disable-pip-version-check --no-input -r "$req" >"$log" 2>&1; then
    echo "pip install -r $req failed: $(grep -v '^ *$' "$log" | tail -n 1)" >&2
    rm -rf "$venv" "$log"
    exit 1
fi
rm -f "$log"
if ! "$venv/bin/python" -c "$check" 2>/dev/null; then
    echo "the venv in $venv does not import: $check" >&2
    exit 1
fi
touch "$venv/.complete"
echo "$venv/bin/python"
