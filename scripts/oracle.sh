#!/bin/sh
# Makes the golden files in tests/golden/env from the real, pinned accelerate
# release: creates (or reuses) the virtual environment build/oracle-venv with
# the pins of scripts/oracle-requirements.txt, then runs scripts/oracle.py in
# it.  `make oracle` calls it with no arguments; arguments are passed on to
# oracle.py (e.g. --only CASE).
#
# Reuse: the venv is kept when its stamp file records the same requirements
# file and interpreter and the four key packages import at their pinned
# versions; otherwise it is rebuilt from scratch.  Needs PyPI (a few GB the
# first time, for torch's CUDA wheels) but nothing else from the network.
#
# Environment: ORACLE_PYTHON  interpreter that creates the venv (default python3)
set -eu

cd "$(dirname "$0")/.."
req=scripts/oracle-requirements.txt
venv=build/oracle-venv
stamp=$venv/.accelrun-oracle-stamp
log=build/oracle-pip.log
py=${ORACLE_PYTHON:-python3}

say() { echo "oracle: $*"; }
die() { echo "oracle: error: $*" >&2; exit 1; }

command -v "$py" >/dev/null 2>&1 || die "no $py on PATH (set ORACLE_PYTHON)"
pyver=$("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
pyexe=$("$py" -c 'import sys; print(sys.executable)')
want="req=$(sha256sum "$req" | cut -d' ' -f1) python=$pyexe $pyver"

# Pinned versions of the packages whose presence oracle.py checks at import.
pin() { sed -n "s/^$1==\([^ ;]*\).*/\1/p" "$req"; }
check_imports() {
    "$venv/bin/python" - "$(pin accelerate)" "$(pin torch)" "$(pin deepspeed)" "$(pin torchao)" <<'EOF' >/dev/null 2>&1
import importlib.metadata as md, sys
want = dict(zip(("accelerate", "torch", "deepspeed", "torchao"), sys.argv[1:]))
for name, version in want.items():
    if md.version(name) != version:
        sys.exit(1)
import accelerate.commands.launch, torch.distributed.run, deepspeed.launcher.runner, psutil, yaml
EOF
}

# --venv-only: make (or reuse) the venv and stop: `make bench` needs the real
# accelerate launch as its peer, not new goldens
venv_only=0
if [ "${1:-}" = --venv-only ]; then
    venv_only=1
    shift
fi

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && check_imports; then
    say "reusing $venv (pins unchanged; $pyexe $pyver)"
else
    say "creating $venv with $pyexe (Python $pyver)"
    rm -rf "$venv"
    mkdir -p build
    "$py" -m venv "$venv" || die "'$py -m venv' failed (Debian: apt-get install python3-venv)"
    pip="$venv/bin/pip"
    pipopts="--disable-pip-version-check --no-input --progress-bar off --root-user-action=ignore"
    : >"$log"
    # Everything but deepspeed first: its source build imports torch.
    nods=build/oracle-requirements-nodeepspeed.txt
    grep -v '^deepspeed==' "$req" >"$nods"
    say "installing the pinned packages from PyPI (torch is a few GB; log: $log)"
    # shellcheck disable=SC2086  # pipopts is a list of options
    if ! "$pip" install $pipopts -r "$nods" >>"$log" 2>&1; then
        tail -n 20 "$log" >&2
        die "pip install failed (full log: $log)"
    fi
    say "building deepspeed $(pin deepspeed) without build isolation, DS_BUILD_OPS=0"
    # shellcheck disable=SC2086
    if ! DS_BUILD_OPS=0 "$pip" install $pipopts --no-build-isolation -r "$req" >>"$log" 2>&1; then
        tail -n 20 "$log" >&2
        die "deepspeed install failed (full log: $log)"
    fi
    rm -f "$nods"
    check_imports || die "the venv does not import the pinned accelerate/torch/deepspeed/torchao"
    echo "$want" >"$stamp"
    say "venv ready"
fi

[ "$venv_only" = 1 ] && exit 0
say "running scripts/oracle.py"
exec "$venv/bin/python" scripts/oracle.py "$@"
