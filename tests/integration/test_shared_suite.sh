#!/usr/bin/env bash
# test_shared_suite — "the libhmm test suite runs in both modes": runs
# the libhmm unit tests that make sense through hmmd again with
# HMM_TEST_MODE=shared (each starts its own hmmd: tests/unit/hmm_mode.h).
# A test's own SKIP lines say which checks cannot hold in shared mode.
set -u
B=${HMM_BUILD:-build}
tests="test_tensor_basic test_tensor_args test_tensor_persist"
[ -x "$B/bin/hmmd" ] || { echo "1..0 # SKIP $B/bin/hmmd not built"; exit 77; }
n=0 failed=0
for t in $tests; do
	n=$((n + 1))
	prog=$B/tests/unit/$t
	if [ ! -x "$prog" ]; then
		echo "ok $n - $t # SKIP not built"
		continue
	fi
	out=$(HMM_TEST_MODE=shared HMM_BUILD=$B timeout 120 "$prog" 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# /'
	case $rc in
	0) echo "ok $n - $t in shared mode" ;;
	77) echo "ok $n - $t # SKIP $(echo "$out" | grep -m1 -o 'SKIP.*' | cut -c6-)" ;;
	*) echo "not ok $n - $t in shared mode (exit $rc)"; failed=1 ;;
	esac
done
echo "1..$n"
exit $failed
