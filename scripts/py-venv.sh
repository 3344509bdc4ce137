#!/bin/sh
# scripts/py-venv.sh: the small virtual environment of the checkpoint interop
# test and benchmark (tests/ckpt/, bench/ckpt.sh): build/py-venv, made with
# --system-site-packages (so Debian's python3-numpy and python3-torch are
# seen) and the real `safetensors` from PyPI at the version the oracle pins
# (scripts/oracle-requirements.txt).  Reused while that pin is unchanged.
#
#   sh scripts/py-venv.sh       prints the venv's python on success; exit 1
#                               with the reason on stderr otherwise
set -u
cd "$(dirname "$0")/.." || exit 1
venv=build/py-venv
pin=$(grep -E '^safetensors==' scripts/oracle-requirements.txt)
[ -n "$pin" ] || pin=safetensors
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.pin" 2>/dev/null)" = "$pin" ] &&
    "$venv/bin/python" -c 'import safetensors, numpy' 2>/dev/null; then
    echo "$venv/bin/python"
    exit 0
fi
rm -rf "$venv"
mkdir -p build
log=$(mktemp)
if ! /usr/bin/python3 -m venv --system-site-packages "$venv" >"$log" 2>&1; then
    echo "python3 -m venv failed: $(tail -n 1 "$log")" >&2
    rm -f "$log"
    exit 1
fi
if ! timeout 300 "$venv/bin/pip" install -q --disable-pip-version-check "$pin" >"$log" 2>&1; then
    echo "pip install $pin failed: $(grep -v '^ *$' "$log" | tail -n 1)" >&2
    rm -rf "$venv" "$log"
    exit 1
fi
rm -f "$log"
if ! "$venv/bin/python" -c 'import safetensors, numpy' 2>/dev/null; then
    echo "the venv does not import safetensors and numpy" >&2
    exit 1
fi
echo "$pin" >"$venv/.pin"
echo "$venv/bin/python"
