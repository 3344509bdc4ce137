#!/bin/sh
# Installs the Debian packages accelrun needs to build and test, or, when not
# run as root, prints the one apt-get command that would.  It never installs
# Python packages system-wide: the oracle and the Python interop tests make
# their own virtual environments (scripts/oracle.sh).
#
# usage: scripts/deps.sh [build|test|fuzz|oracle|bench|fresh|deb|all]   (default: test)
#   build:       compile (libslurm-dev for the plugin)
#   test:        build, and what `make test`'s tiers use (venv, Graphviz, clang-format),
#                and a CUDA toolkit from PyPI where there is none (scripts/cuda-kit.sh)
#   fuzz:        clang and its libFuzzer runtime for `make fuzz`
#   oracle:      python3-venv for `make oracle` (which then uses PyPI)
#   deb:         build, and what `make deb` and tests/deb/run.sh use (debhelper, lintian)
#   fresh:       debootstrap for `make test-fresh` (tests/fresh/run.sh)
#   bench:       the peers of `make bench`: Open MPI, PyTorch (TCPStore); gnuplot for its pictures
set -eu

build_pkgs="make gcc g++ python3 pkg-config libyaml-dev libcjson-dev libhwloc-dev libxxhash-dev libslurm-dev libmicrohttpd-dev libgnutls28-dev libcurl4-gnutls-dev openssl curl"
# what make test's tiers use beyond the build: the interop tier's venv and
# the numpy and torch (bf16 tensors) it takes from Debian
# (--system-site-packages; the Slurm tier's gloo case uses that torch too), Graphviz for
# `accelrun topo --dot`, clang-format for format-check, procps (pgrep, ps)
# for the example trainer's kill test; a minimal Debian root has none of them
test_pkgs="python3-venv python3-pip python3-numpy python3-torch graphviz clang-format procps shellcheck iproute2"
fuzz_pkgs="clang libclang-rt-14-dev"
oracle_pkgs="python3 python3-venv python3-pip"
bench_pkgs="openmpi-bin libopenmpi-dev python3-torch gnuplot-nox wrk"
# tests/fresh/run.sh: a clean Debian root to run the README in
fresh_pkgs="debootstrap git"
# make deb: dpkg-buildpackage with dh (its build-essential check), help2man for the
# man page; lintian for tests/deb
deb_pkgs="build-essential dpkg-dev debhelper fakeroot lintian help2man git"

case "${1:-test}" in
    build) want="$build_pkgs" ;;
    test) want="$build_pkgs $test_pkgs" ;;
    fuzz) want="$build_pkgs $fuzz_pkgs" ;;
    oracle) want="$oracle_pkgs" ;;
    bench) want="$build_pkgs $bench_pkgs" ;;
    fresh) want="$fresh_pkgs" ;;
    deb) want="$build_pkgs $deb_pkgs" ;;
    all) want="$build_pkgs $test_pkgs $fuzz_pkgs $oracle_pkgs $bench_pkgs" ;;
    *) echo "usage: $0 [build|test|fuzz|oracle|bench|fresh|deb|all]" >&2; exit 2 ;;
esac

missing=""
for p in $want; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -n "$missing" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "accelrun: missing Debian packages:$missing" >&2
        echo "accelrun: run: sudo apt-get update && sudo apt-get install -y --no-install-recommends$missing" >&2
        exit 1
    fi
    echo "accelrun: installing Debian packages:$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    # shellcheck disable=SC2086  # word splitting of the package list is wanted
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# make test also compiles the GPU code and runs it against the scripted NCCL
# (no GPU needed): where the machine has no toolkit at /usr/local/cuda (nor
# CUDA_HOME), a kit from NVIDIA's PyPI wheels (scripts/cuda-kit.sh, cached
# outside the clone).  NO_CUDA=1 leaves it out.
if [ "${1:-test}" = test ] && [ "${NO_CUDA:-}" != 1 ] &&
    [ ! -f "${CUDA_HOME:-/usr/local/cuda}/include/cuda_runtime.h" ]; then
    sh "$(dirname "$0")/cuda-kit.sh" >/dev/null ||
        echo "accelrun: SKIP the CUDA build: no toolkit at ${CUDA_HOME:-/usr/local/cuda} and scripts/cuda-kit.sh failed (above)" >&2
fi
