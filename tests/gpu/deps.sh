#!/bin/sh
# SPDX-License-Identifier: MIT
#
# tests/gpu/deps.sh — here, before a GPU machine is lent: download into
# .gpudeps/ (git-ignored) the Debian packages that libhmm, hmmd and
# hmm-train build and run against, so that tests/gpu/run.sh can build
# them on a machine whose image lacks them and reaches no archive.  Carry
# .gpudeps with the run; run.sh unpacks it into its scratch folder (never
# into /) and points the compiler, linker and loader at it.  About 13
# MB.  Needs apt-get (run `apt-get update` once first).
set -eu
cd "$(dirname "$0")/../.."
pkgs="liburing-dev liburing2 libnuma-dev libnuma1 libinih-dev libinih1
libinireader0 libopenblas-dev libopenblas-pthread-dev libopenblas0
libopenblas0-pthread libgfortran5 libquadmath0"
mkdir -p .gpudeps
cd .gpudeps
rm -f ./*.deb
# shellcheck disable=SC2086
apt-get download $pkgs 2>&1 | grep -v '^Get:\|unsandboxed' || true
n=$(ls ./*.deb 2>/dev/null | wc -l)
[ "$n" -eq "$(echo $pkgs | wc -w)" ] || {
	echo "deps.sh: got $n of $(echo $pkgs | wc -w) packages" >&2
	exit 1
}
echo "deps.sh: $n packages, $(du -sh . | cut -f1), in .gpudeps"
