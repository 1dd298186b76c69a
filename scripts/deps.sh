#!/usr/bin/env bash
# Install, from Debian's archive, everything hmm's build, tests and benchmarks
# need.  Idempotent: when every package is present it only checks and exits.
# Usage: scripts/deps.sh [--check]   (--check: list what is missing, exit 1 if any)
set -eu

PKGS=(
	build-essential pkg-config
	liburing-dev libnuma-dev libinih-dev libopenblas-dev
	fio clang libclang-rt-14-dev
	linux-headers-amd64 linux-image-amd64 linux-source-6.1
	qemu-system-x86 busybox-static cpio kmod xz-utils
	python3-torch
	debhelper dh-dkms dkms dh-python python3-all lintian
	chromium
)

if [ ! -r /etc/debian_version ]; then
	echo "deps.sh: this is not Debian (no /etc/debian_version); install by hand: ${PKGS[*]}" >&2
	exit 2
fi

missing=()
for p in "${PKGS[@]}"; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[ "$st" = "install ok installed" ] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
	echo "deps.sh: all ${#PKGS[@]} packages present"
	exit 0
fi
if [ "${1:-}" = "--check" ]; then
	echo "deps.sh: missing: ${missing[*]}"
	exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "deps.sh: missing ${missing[*]}; run as root (or: sudo $0)" >&2
	exit 2
fi

echo "deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "deps.sh: done"
