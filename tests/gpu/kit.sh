#!/bin/sh
# tests/gpu/kit.sh: run here, before the device tool's `run`: downloads the
# Debian packages the build needs into .gpu-kit/ (ignored by git through
# .git/info/exclude), which `run` then carries (carry: [".gpu-kit"]) and
# tests/gpu/run.sh unpacks into a prefix of its own on the device machine,
# whose image may lack them and can fetch nothing.  About 2 MB.
set -eu
cd "$(dirname "$0")/../.."
pkgs="libyaml-0-2 libyaml-dev libcjson1 libcjson-dev libhwloc15 libhwloc-dev libxxhash0
      libxxhash-dev libudev1"
git_dir=$(git rev-parse --git-common-dir)
grep -qx '/.gpu-kit/' "$git_dir/info/exclude" 2>/dev/null || echo '/.gpu-kit/' >>"$git_dir/info/exclude"
rm -rf .gpu-kit
mkdir -p .gpu-kit
# shellcheck disable=SC2086 # one package per word
(cd .gpu-kit && apt-get download $pkgs >/dev/null)
ls -l .gpu-kit | tail -n +2 | awk '{ s += $5; print "  " $9 } END { printf "gpu kit: %.1f MB in .gpu-kit\n", s / 1e6 }'
