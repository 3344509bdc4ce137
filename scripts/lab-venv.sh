#!/bin/sh
# scripts/lab-venv.sh: the virtual environments in which the labs and the
# preflight's tests run a real accelerate release, made and cached by
# scripts/venv.sh:
#
#   sh scripts/lab-venv.sh [0.32]   accelerate 0.32.1 on Debian's PyTorch
#                                   (python3-torch 1.13, seen through
#                                   --system-site-packages and kept), the pins
#                                   of scripts/lab-requirements.txt: the older
#                                   stack (tests/slurm/run.sh case p,
#                                   tests/k8s/podlab.sh)
#   sh scripts/lab-venv.sh 1.15     accelerate 1.15.0 and torch 2.13.0 from
#                                   PyPI, the release the goldens record
#                                   (scripts/lab-requirements-1.15.txt)
#
# Prints the venv's python on success; exit 1 with the reason on stderr
# otherwise.  ACCELRUN_LAB_VENV=DIR (0.32) or ACCELRUN_LAB_VENV_115=DIR
# (1.15) uses that venv instead.
cd "$(dirname "$0")/.." || exit 1
stack=${1:-0.32}
case $stack in
0.32) given=${ACCELRUN_LAB_VENV:-} ;;
1.15) given=${ACCELRUN_LAB_VENV_115:-} ;;
*) echo "usage: lab-venv.sh [0.32|1.15]" >&2; exit 1 ;;
esac
if [ -n "$given" ]; then
    "$given/bin/python" -c 'import accelerate, torch' 2>/dev/null ||
        { echo "$given (the $stack stack) does not import accelerate and torch" >&2; exit 1; }
    echo "$given/bin/python"
    exit 0
fi
if [ "$stack" = 1.15 ]; then
    exec sh scripts/venv.sh accelrun-lab-1.15 --import 'accelerate, torch' \
        -- -r scripts/lab-requirements-1.15.txt
fi
exec sh scripts/venv.sh accelrun-lab --system-site-packages --keep torch --keep numpy \
    --import 'accelerate, torch' -- -r scripts/lab-requirements.txt
