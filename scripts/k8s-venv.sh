#!/bin/sh
# scripts/k8s-venv.sh: the virtual environment of the Kubernetes tiers
# (tests/k8s/), with the pins of scripts/k8s-requirements.txt, made and
# cached by scripts/venv.sh.
#
#   sh scripts/k8s-venv.sh     prints the venv's python on success; exit 1
#                              with the reason on stderr otherwise
cd "$(dirname "$0")/.." || exit 1
exec sh scripts/venv.sh k8s-venv --import 'kubernetes, jsonpatch, kubernetes_validate, helm_python' \
    -- -r scripts/k8s-requirements.txt
