#!/bin/sh
# scripts/kselftest-headers.sh — extract kselftest_harness.h and kselftest.h
# from Debian's linux-source-6.1 tarball into DIR (default build/kselftest).
# They are GPL test headers used by tests/vm/*.c; never committed.
# Exit 0 when the headers are there, 77 when the tarball is missing.
set -eu
dir=${1:-build/kselftest}
src=${KSRC_TAR:-$(ls -1 /usr/src/linux-source-*.tar.xz 2>/dev/null | sort -V | tail -1)}
[ -f "$dir/kselftest_harness.h" ] && [ -f "$dir/kselftest.h" ] && exit 0
if [ -z "$src" ] || [ ! -r "$src" ]; then
	echo "kselftest-headers: no /usr/src/linux-source-*.tar.xz (apt-get install linux-source-6.1)" >&2
	exit 77
fi
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xJf "$src" -C "$tmp" --wildcards \
	'*/tools/testing/selftests/kselftest_harness.h' \
	'*/tools/testing/selftests/kselftest.h'
find "$tmp" -name 'kselftest*.h' -exec cp {} "$dir/" \;
[ -f "$dir/kselftest_harness.h" ] && [ -f "$dir/kselftest.h" ]
