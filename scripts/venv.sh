#!/bin/sh
# scripts/venv.sh: the one maker of the test tiers' Python virtual
# environments, cached outside the clone so a new clone reuses them:
#
#   sh scripts/venv.sh NAME [--system-site-packages] [--keep PKG]...
#                      --import MODULES -- PIP-INSTALL-ARGS...
#
# makes (or reuses) $ACCELRUN_CACHE/NAME-<key> (default /var/cache/accelrun,
# or ~/.cache/accelrun where that is not writable), runs `pip install
# PIP-INSTALL-ARGS` in it, checks that `import MODULES` works, and prints its
# python.  The key is a hash of everything that decides the contents: this
# Python's version, the options, the arguments and the text of every file
# they name after -r or -c; a changed pin builds a new venv.
# --system-site-packages lets the venv see Debian's packages (python3-torch,
# python3-numpy); --keep PKG pins PKG to the version Debian installed, so pip
# never replaces it.  One builder at a time (flock); a second waits, then
# reuses.  Exit 1 with the reason on stderr when it cannot be made.
#
# Callers: scripts/k8s-venv.sh, scripts/py-venv.sh, scripts/lab-venv.sh.
set -u
cd "$(dirname "$0")/.." || exit 1
die() {
    echo "$*" >&2
    exit 1
}
[ $# -ge 1 ] || die "usage: venv.sh NAME [--system-site-packages] [--keep PKG]... --import MODULES -- PIP-ARGS..."
name=$1
shift
site='' keep='' mods=''
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    case $1 in
    --system-site-packages) site=$1 ;;
    --keep) keep="$keep $2"; shift ;;
    --import) mods=$2; shift ;;
    *) die "venv.sh: unknown option $1" ;;
    esac
    shift
done
[ "${1:-}" = -- ] && shift
if [ -z "$mods" ] || [ $# -eq 0 ]; then
    die "venv.sh $name: --import MODULES and -- PIP-ARGS are required"
fi

cache=${ACCELRUN_CACHE:-/var/cache/accelrun}
if ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then
    cache=${HOME:-/tmp}/.cache/accelrun
    mkdir -p "$cache" || die "venv.sh: cannot make $cache"
fi
# the constraints of --keep: the versions Debian installed
cons=
for p in $keep; do
    v=$(/usr/bin/python3 -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$p" 2>/dev/null) ||
        die "venv.sh $name: --keep $p: /usr/bin/python3 has no $p (sh scripts/deps.sh test)"
    cons="$cons$p==$v
"
done
key=$({
    /usr/bin/python3 -c 'import sys; print(sys.version)'
    echo "$site|$mods|$cons|$*"
    prev=
    for a in "$@"; do
        case $prev in -r | -c) cat "$a" || exit 1 ;; esac
        prev=$a
    done
} | sha256sum | cut -c1-12) || die "venv.sh $name: a file named after -r or -c is missing"
venv=$cache/$name-$key
ready() { [ -f "$venv/.complete" ] && "$venv/bin/python" -c "import $mods" 2>/dev/null; }
if ready; then
    echo "$venv/bin/python"
    exit 0
fi
exec 9>"$venv.lock"
flock 9
if ready; then
    echo "$venv/bin/python"
    exit 0
fi
rm -rf "$venv"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# shellcheck disable=SC2086  # $site is empty or one option
/usr/bin/python3 -m venv $site "$venv" >"$log" 2>&1 ||
    { rm -rf "$venv"; die "python3 -m venv failed: $(tail -n 1 "$log") (apt-get install python3-venv)"; }
printf '%s' "$cons" >"$venv/constraints.txt"
if ! timeout 900 "$venv/bin/pip" install -q --disable-pip-version-check --no-input \
    -c "$venv/constraints.txt" "$@" >"$log" 2>&1; then
    rm -rf "$venv"
    die "pip install $* failed: $(grep -v '^ *$' "$log" | tail -n 1)"
fi
"$venv/bin/python" -c "import $mods" >"$log" 2>&1 ||
    die "the venv in $venv does not import $mods: $(tail -n 1 "$log")"
touch "$venv/.complete"
echo "$venv/bin/python"
