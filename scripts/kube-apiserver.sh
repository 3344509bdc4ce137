#!/bin/sh
# scripts/kube-apiserver.sh: a real kube-apiserver and kubectl (v1.20.2) for
# tests/k8s/live.sh, built from Debian bookworm's `kubernetes` source package
# with Debian's golang-1.19-go, and cached outside the clone in
# $ACCELRUN_CACHE/kube-<source version>/ (default /var/cache/accelrun, or
# ~/.cache/accelrun where that is not writable), reused while its stamp is there
# (a root-built /var/cache one is reused read-only by other users too).
# No prebuilt kube-apiserver installs on Debian (docs: reference/kubernetes-live.md).
#
# The one change to the source: the vendored modern-go/reflect2 1.0.1 and
# json-iterator/go 1.1.10 crash under Go 1.19 at the first webhook call
# (fatal error: fault ... reflect2 ... UnsafeIterate), so both are replaced by
# Debian's golang-github-modern-go-reflect2-dev and
# golang-github-json-iterator-go-dev sources before the build.
#
# It installs with apt what it needs (a deb-src line for bookworm where there
# is none, golang-1.19-go, rsync, etcd-server for the tier, the two -dev
# packages, dpkg-dev for dpkg-source); not root, it names the command instead.
# A cold build takes about 6 min on 2 cores (GOFLAGS=-p=2, under nice); the
# build tree (~2 GB with its Go cache) is deleted after success and kept
# after a failure (its build.log named in the message).  It does not start
# anything.
#
#   sh scripts/kube-apiserver.sh   prints the folder holding kube-apiserver and
#                                  kubectl; exit 1 with the reason on stderr
set -u
me=kube-apiserver.sh
die() {
    echo "$me: $*" >&2
    exit 1
}

# where to look (ACCELRUN_CACHE alone when set), and where to build: the first writable one
if [ -n "${ACCELRUN_CACHE:-}" ]; then
    roots=$ACCELRUN_CACHE
else
    roots="/var/cache/accelrun ${HOME:-/tmp}/.cache/accelrun"
fi
cache=
for r in $roots; do
    if mkdir -p "$r" 2>/dev/null && [ -w "$r" ]; then
        cache=$r
        break
    fi
done

pkgs="golang-1.19-go rsync etcd-server golang-github-modern-go-reflect2-dev golang-github-json-iterator-go-dev dpkg-dev make"
GO=/usr/lib/go-1.19/bin
REFLECT2=/usr/share/gocode/src/github.com/modern-go/reflect2
JSONITER=/usr/share/gocode/src/github.com/json-iterator/go
srclist=/etc/apt/sources.list.d/accelrun-kubernetes-src.sources
apt_log=$(mktemp) || die "mktemp failed"
trap 'rm -f "$apt_log"' EXIT

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed'; }
apt() { apt-get -o DPkg::Lock::Timeout=600 "$@"; }
apt_updated=0
apt_update() {
    [ $apt_updated = 1 ] && return 0
    apt update -q >"$apt_log" 2>&1 || die "apt-get update failed: $(tail -n 1 "$apt_log")"
    apt_updated=1
}

# the newest kubernetes source version apt knows; empty when it knows none
src_version() {
    apt-cache showsrc --only-source kubernetes 2>/dev/null |
        awk '/^Version:/ { print $2 }' | sort -V | tail -n 1
}

# usable DIR: the stamp is there and the binaries run
usable() {
    [ -f "$1/.complete" ] && "$1/kube-apiserver" --version 2>/dev/null | grep -q 'v1\.20\.' &&
        "$1/kubectl" version --client --short 2>/dev/null | grep -q 'v1\.20\.'
}

command -v apt-cache >/dev/null 2>&1 || die "not a Debian system (no apt-cache)"
ver=$(src_version)
if [ -z "$ver" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        # no deb-src line and not root: a cache built before may still do
        for r in $roots; do
            for d in "$r"/kube-*/; do
                if usable "${d%/}"; then
                    echo "${d%/}"
                    exit 0
                fi
            done
        done
        die "apt has no kubernetes source package (no deb-src line for bookworm); as root: add one and apt-get update"
    fi
    # a deb-src line for bookworm (and its security suite, which carries +deb12u1)
    cat >"$srclist" <<'EOF'
# added by accelrun scripts/kube-apiserver.sh: the kubernetes source package
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    apt_update
    ver=$(src_version)
    [ -n "$ver" ] || die "apt still has no kubernetes source package after adding $srclist"
fi

for r in $roots; do
    if usable "$r/kube-$ver"; then
        echo "$r/kube-$ver"
        exit 0
    fi
done
[ -n "$cache" ] || die "none of $roots is writable, and none holds kube-$ver"
out=$cache/kube-$ver

# one builder at a time; a second waits (bounded) and then reuses
exec 9>"$out.lock"
flock -w 1800 9 || die "another build of $out held $out.lock for 30 min"
if usable "$out"; then
    echo "$out"
    exit 0
fi

need=""
for p in $pkgs; do installed "$p" || need="$need $p"; done
if [ -n "$need" ]; then
    [ "$(id -u)" -eq 0 ] ||
        die "missing Debian packages:$need; run: sudo apt-get update && sudo apt-get install -y --no-install-recommends$need"
    echo "$me: installing Debian packages:$need" >&2
    apt_update
    # shellcheck disable=SC2086  # word splitting of the package list is wanted
    DEBIAN_FRONTEND=noninteractive apt install -y -q --no-install-recommends $need >"$apt_log" 2>&1 ||
        die "apt-get install$need failed: $(tail -n 1 "$apt_log")"
fi
[ -x "$GO/go" ] || die "no $GO/go after installing golang-1.19-go"
[ -f "$REFLECT2/reflect2.go" ] || die "no $REFLECT2 (golang-github-modern-go-reflect2-dev)"
[ -f "$JSONITER/iter.go" ] || die "no $JSONITER (golang-github-json-iterator-go-dev)"

build=$out.build
rm -rf "$build" "$out"
mkdir -p "$build" || die "cannot create $build"
log=$build/build.log
t0=$(date +%s)
echo "$me: building kube-apiserver and kubectl $ver in $build (about 6 min on 2 cores)" >&2
(cd "$build" && apt source --download-only kubernetes) >"$log" 2>&1 ||
    die "apt-get source --download-only kubernetes failed: $(tail -n 1 "$log")"
dsc=
for f in "$build"/kubernetes_*.dsc; do [ -f "$f" ] && dsc=$f; done
[ -n "$dsc" ] || die "apt-get source gave no .dsc in $build"
src=$build/src
(cd "$build" && dpkg-source -x "$dsc" src) >>"$log" 2>&1 ||
    die "dpkg-source -x $dsc failed: $(tail -n 1 "$log")"

# the vendoring fix
v=$src/vendor/github.com
{ [ -d "$v/modern-go/reflect2" ] && [ -d "$v/json-iterator/go" ]; } ||
    die "$v has no modern-go/reflect2 or json-iterator/go: not the source this script knows"
rm -rf "$v/modern-go/reflect2" "$v/json-iterator/go"
{ cp -rL "$REFLECT2" "$v/modern-go/reflect2" && cp -rL "$JSONITER" "$v/json-iterator/go"; } ||
    die "cannot copy Debian's reflect2/json-iterator sources into $v"

# as debian/rules builds kubectl: GOPATH mode, the source linked into .go
{ mkdir -p "$src/.go/src/k8s.io" "$build/home" &&
    ln -s ../../.. "$src/.go/src/k8s.io/kubernetes"; } || die "cannot make the GOPATH tree in $src/.go"
if ! (cd "$src" && env PATH="$GO:$PATH" HOME="$build/home" GOPATH="$src/.go" GOPROXY=off \
    GOFLAGS= GO111MODULE=off CGO_ENABLED=0 KUBE_GIT_VERSION=v1.20.2 KUBE_GIT_TREE_STATE=clean \
    KUBE_GIT_MAJOR=1 KUBE_GIT_MINOR=20 timeout 3600 nice make WHAT="cmd/kube-apiserver cmd/kubectl" \
    GOFLAGS=-p=2) >>"$log" 2>&1; then
    die "the build failed (log: $log): $(grep -v '^ *$' "$log" | tail -n 1)"
fi
bin=$src/_output/bin
for b in kube-apiserver kubectl; do
    [ -x "$bin/$b" ] || die "the build made no $bin/$b (log: $log)"
done
{ rm -rf "$out.tmp" && mkdir -p "$out.tmp" && cp "$bin/kube-apiserver" "$bin/kubectl" "$out.tmp/"; } ||
    die "cannot copy the binaries to $out.tmp"
printf 'kubernetes %s, built %s in %s s\nreflect2 and json-iterator from %s and %s\n' \
    "$ver" "$(date -u +%FT%TZ)" "$(($(date +%s) - t0))" "$REFLECT2" "$JSONITER" >"$out.tmp/.complete"
{ rm -rf "$out" && mv "$out.tmp" "$out"; } || die "cannot move $out.tmp to $out"
usable "$out" || die "the binaries in $out do not run (or are not v1.20)"
rm -rf "$build"
echo "$me: built in $(($(date +%s) - t0)) s" >&2
echo "$out"
