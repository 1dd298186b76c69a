# tests/integration/fakecuda.sh — sourced (after ../t.sh) by the scripts
# that run a test on the fake CUDA driver (test_cuda_fake.sh,
# test_uvm_fake.sh): fake=$B/tests/fakecuda, a scratch folder $tmp
# (removed at exit), and four helpers.  Not a test itself (no +x).
fake=$B/tests/fakecuda
[ -e "$fake/libcuda.so.1" ] || skip_all "$fake/libcuda.so.1 not built"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cuda-fake.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# run NAME [ENV=V...] -- PROG ARGS: output in $tmp/NAME.log, the fake's
# report lines in $tmp/NAME.rep, exit status in $rc
run() {
	local name=$1; shift
	local envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	rm -f "$tmp/$name.rep"
	env LD_LIBRARY_PATH="$fake" FAKECUDA_REPORT="$tmp/$name.rep" \
		"${envs[@]}" timeout 300 "$@" >"$tmp/$name.log" 2>&1
	rc=$?
	sed 's/^/# /' "$tmp/$name.log" | grep -v '^# ok' | head -30
}
# clean NAME: the fake's summary says 0 violations and 0 leaks
clean() {
	grep -q 'summary: .*violations 0 leaks 0 ' "$tmp/$1.rep" 2>/dev/null &&
		! grep -q 'VIOLATION\|LEAK' "$tmp/$1.rep"
}
# contract [ENV=V...]: the python program on stdin, after
# fakecuda_t.py's preamble (from fakecuda_t import *), on the fake;
# output in $tmp/contract.log, the fake's report in $tmp/contract.rep,
# exit status in $rc
contract() {
	env LD_LIBRARY_PATH="$fake" FAKECUDA_REPORT="$tmp/contract.rep" \
		PYTHONPATH="$(dirname "${BASH_SOURCE[0]}")" "$@" \
		python3 - "$fake/libcuda.so.1" >"$tmp/contract.log" 2>&1
	rc=$?
	grep -v '^ok' "$tmp/contract.log" | sed 's/^/# /' | head -20
}
# run_variants NAME: $B/tests/unit/NAME on the fake, and its ASan and
# TSan builds and shared mode (through $B/bin/hmmd) where built: each
# passes, and the fake saw no contract violation and no leak
run_variants() {
	local t=$1 asan=$B/asan/tests/unit/$1 tsan=$B/tsan/tests/unit/$1
	run main -- "$B/tests/unit/$t"
	ok $([ $rc = 0 ] && grep -q 'driver: the fake' "$tmp/main.log"; echo $?) "$t passes on the fake driver"
	ok $(clean main; echo $?) "... with no contract violation and no leak ($(grep -o 'calls [0-9]*' "$tmp/main.rep" 2>/dev/null))"
	if [ -x "$asan" ]; then
		run asan ASAN_OPTIONS=detect_leaks=1 -- "$asan"
		ok $([ $rc = 0 ]; echo $?) "the ASan build of $t passes on the fake"
		ok $(clean asan; echo $?) "... with no contract violation and no leak"
	fi
	if [ -x "$tsan" ]; then
		run tsan TSAN_OPTIONS=halt_on_error=0 -- "$tsan"
		ok $([ $rc = 0 ] && ! grep -q 'WARNING: ThreadSanitizer' "$tmp/tsan.log"; echo $?) "the TSan build of $t passes on the fake, no race reported"
		ok $(clean tsan; echo $?) "... with no contract violation and no leak"
	fi
	# shared mode: device maps staged through an hmmd's host tier
	if [ -x "$B/bin/hmmd" ]; then
		run shared HMM_TEST_MODE=shared HMM_BUILD="$B" -- "$B/tests/unit/$t"
		ok $([ $rc = 0 ] && grep -q 'shared mode: hmmd pid' "$tmp/shared.log"; echo $?) "$t passes in shared mode (through hmmd) on the fake"
		ok $(clean shared; echo $?) "... with no contract violation and no leak"
	fi
}
