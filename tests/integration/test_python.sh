#!/usr/bin/env bash
# test_python — the Python package (python/hmm) against Debian's
# /usr/bin/python3 with python3-torch: each tests/python/test_*.py runs
# embedded, then again in shared mode through a real hmmd started here
# (HMM_TEST_DAEMON, tests/python/tap.py).  A program's own TAP lines are
# shown as comments.  Skips (77) when that python has no torch or the
# shared libraries (libhmm.so.0, libhk.so.0) are not built.
set -u
. "$(dirname "$0")/../t.sh"
py=${HMM_PYTHON:-/usr/bin/python3}
pid=
[ -x "$py" ] && "$py" -c 'import torch' 2>/dev/null ||
	skip_all "$py has no torch (scripts/deps.sh: python3-torch)"
[ -f "$B/lib/libhmm.so.0" ] && [ -f "$B/lib/libhk.so.0" ] ||
	skip_all "$B/lib/libhmm.so.0 or libhk.so.0 not built"
scratch python
trap '[ -n "$pid" ] && kill $pid 2>/dev/null && wait $pid; rm -rf "$dir"' EXIT
export HMM_LIB_DIR=$B/lib PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH}
export HMM_TEST_DIR=$dir

run() {	# run MODE PROGRAM
	local out rc
	out=$(timeout 300 "$py" "$2" 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# /'
	case $rc in
	77) skip "${2##*/} ($1): $(echo "$out" | grep -m1 -o 'SKIP.*' | cut -c6-)" ;;
	0) ok 0 "${2##*/} ($1)" ;;
	*) ok 1 "${2##*/} ($1, exit $rc)" ;;
	esac
}

for t in tests/python/test_*.py; do run embedded "$t"; done

# shared mode: 64 KiB chunks so that the tests' small quotas hold some
"$B/bin/hmmd" --socket "$dir/s.sock" --store "$dir/hmmd.store" \
	--store-size 1G --host-budget 256M --chunk 64K --module none \
	>"$dir/hmmd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$dir/s.sock" ] && break; sleep 0.1; done
if [ -S "$dir/s.sock" ]; then
	for t in tests/python/test_*.py; do
		HMM_TEST_DAEMON=unix:$dir/s.sock HMM_TEST_DAEMON_CHUNK=65536 \
			run shared "$t"
	done
else
	ok 1 "hmmd started: $(tail -c 300 "$dir/hmmd.log")"
fi
t_done
