#!/bin/sh
# scripts/py-venv.sh: the small virtual environment of the checkpoint interop
# test and benchmark (tests/ckpt/, bench/ckpt.sh), made and cached by
# scripts/venv.sh: Debian's python3-numpy and python3-torch seen through
# --system-site-packages, and the real `safetensors` from PyPI at the version
# the oracle pins (scripts/oracle-requirements.txt).
#
#   sh scripts/py-venv.sh       prints the venv's python on success; exit 1
#                               with the reason on stderr otherwise
cd "$(dirname "$0")/.." || exit 1
pin=$(grep -E '^safetensors==' scripts/oracle-requirements.txt)
exec sh scripts/venv.sh py-venv --system-site-packages --keep numpy --import 'safetensors, numpy' \
    -- "${pin:-safetensors}"
