#!/usr/bin/env bash
# test_shared_suite — "the libhmm test suite runs in both modes": runs
# the libhmm unit tests that make sense through hmmd again with
# HMM_TEST_MODE=shared (each starts its own hmmd: tests/unit/hmm_mode.h).
# A test's own SKIP lines say which checks cannot hold in shared mode,
# and why; they are repeated at the end.  A test that passes without
# having started an hmmd (no "shared mode: hmmd pid" line: it does not
# call hmm_test_mode) ran embedded only, and is reported as a skip that
# says so, never as a pass.
set -u
. "$(dirname "$0")/../t.sh"
tests="test_tensor_basic test_tensor_args test_tensor_persist
       test_tensor_backpressure test_tensor_fault test_tensor_hostfd
       test_tensor_pressure test_tensor_sched test_dlpack test_region
       test_tensor_discard test_tensor_mapptr test_tensor_writeback
       test_tensor_threads"
need "$B/bin/hmmd"
skips=
for t in $tests; do
	prog=$B/tests/unit/$t
	if [ ! -x "$prog" ]; then
		skip "$t not built"
		continue
	fi
	out=$(HMM_TEST_MODE=shared HMM_BUILD=$B timeout 300 "$prog" 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# /'
	skips="$skips$(echo "$out" | grep '# SKIP' |
		sed -e "s/^ok [0-9]* - /# $t: /" -e "s/^1\.\.0 /# $t: all /")
"
	case $rc in
	0)
		if echo "$out" | grep -q 'shared mode: hmmd pid'; then
			ok 0 "$t in shared mode"
		else
			skip "$t ran embedded only: it does not call" \
			     "hmm_test_mode (tests/unit/hmm_mode.h)"
		fi ;;
	77) skip "$t: $(echo "$out" | grep -m1 -o 'SKIP.*' | cut -c6-)" ;;
	*) ok 1 "$t in shared mode (exit $rc)" ;;
	esac
done
echo "# checks skipped in shared mode, with their reasons:"
printf '%s' "$skips" | grep -v '^$'
t_done
