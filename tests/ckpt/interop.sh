#!/bin/bash
# tests/ckpt/interop.sh: accelrun's checkpoints against the real `safetensors`
# PyPI package (tests/ckpt/interop.py says what is checked).
#
# usage: tests/ckpt/interop.sh [BUILD]       (default build)
#
# Needs BUILD/tests/ckpt_tool (`make BUILD/tests/ckpt_tool`) and the virtual
# environment of scripts/py-venv.sh (build/py-venv: --system-site-packages,
# so that Debian's python3-numpy and python3-torch are seen, and the pinned
# safetensors from PyPI).  Without the tool, the venv or numpy it says SKIP
# and why, and exits 0.  TAP-like lines, then "ckpt-interop: N passed, N
# failed, N skipped".
set -u
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
TAP_NAME=ckpt-interop
# shellcheck source=tests/lib/tap.sh
. "$here/../lib/tap.sh"
tool=$build/tests/ckpt_tool

if [ ! -x "$tool" ]; then
    skipped "checkpoint interop with safetensors" "no $tool (make $tool)"
    finish
fi
if ! py=$(sh "$here/../../scripts/py-venv.sh" 2>"${TMPDIR:-/tmp}/ckpt-interop.$$"); then
    why=$(tail -n 1 "${TMPDIR:-/tmp}/ckpt-interop.$$")
    rm -f "${TMPDIR:-/tmp}/ckpt-interop.$$"
    skipped "checkpoint interop with safetensors" \
        "no Python venv with safetensors: ${why:-scripts/py-venv.sh failed}"
    finish
fi
rm -f "${TMPDIR:-/tmp}/ckpt-interop.$$"
case $py in /*) ;; *) py=$here/../../$py ;; esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
# interop.py prints its own lines and totals; its status is the script's
"$py" "$here/interop.py" --tool "$tool" --tmp "$tmp"
