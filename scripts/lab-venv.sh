#!/bin/sh
# scripts/lab-venv.sh: the virtual environment in which the labs run a real
# accelerate release (tests/slurm/run.sh case p, tests/k8s/podlab.sh): Debian's
# PyTorch (python3-torch, seen through --system-site-packages and kept) and
# the pins of scripts/lab-requirements.txt, made and cached by scripts/venv.sh.
# ACCELRUN_LAB_VENV=DIR uses that venv instead.
#
#   sh scripts/lab-venv.sh      prints the venv's python on success; exit 1
#                               with the reason on stderr otherwise
cd "$(dirname "$0")/.." || exit 1
if [ -n "${ACCELRUN_LAB_VENV:-}" ]; then
    "$ACCELRUN_LAB_VENV/bin/python" -c 'import accelerate, torch' 2>/dev/null ||
        { echo "ACCELRUN_LAB_VENV=$ACCELRUN_LAB_VENV does not import accelerate and torch" >&2; exit 1; }
    echo "$ACCELRUN_LAB_VENV/bin/python"
    exit 0
fi
exec sh scripts/venv.sh accelrun-lab --system-site-packages --keep torch --keep numpy \
    --import 'accelerate, torch' -- -r scripts/lab-requirements.txt
