# tests/integration/fakecuda.sh — sourced (after ../t.sh) by the scripts
# that run a test on the fake CUDA driver (test_cuda_fake.sh,
# test_uvm_fake.sh): fake=$B/tests/fakecuda, a scratch folder $tmp
# (removed at exit), and two helpers.  Not a test itself (no +x).
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
