# tests/t.sh — the shell tests' half of tests/t.h: TAP lines, skips and a
# scratch folder, in one place.  Every tests/integration/*.sh starts with
#
#	set -u
#	. "$(dirname "$0")/../t.sh"
#
# and ends with t_done.  Sourcing sets B (the build folder: $HMM_BUILD,
# else build), n (tests so far) and failed (1 once one has failed).

B=${HMM_BUILD:-build}
n=0 failed=0

# ok STATUS WHAT: "ok N - WHAT" when STATUS is 0, else "not ok N - WHAT"
# (and the script will exit 1).
ok() {
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		failed=1
	fi
}

# skip WHY: one test that cannot run here.
skip() { n=$((n + 1)); echo "ok $n # SKIP $*"; }

# skip_all WHY: the whole script cannot run here (exit 77).
skip_all() { echo "1..0 # SKIP $*"; exit 77; }

# need PROG...: skip_all unless every PROG is built (executable).
need() {
	local p
	for p; do [ -x "$p" ] || skip_all "$p not built"; done
}

# scratch NAME: dir = a new folder $HMM_TEST_DIR/NAME.PID (build/tmp when
# unset), removed on every exit.  A script that must undo more at exit
# sets its own EXIT trap afterwards and removes "$dir" there too.
scratch() {
	dir=${HMM_TEST_DIR:-build/tmp}/$1.$$
	mkdir -p "$dir" || exit 1
	dir=$(cd "$dir" && pwd)	# absolute: a test may cd
	trap 'rm -rf "$dir"' EXIT
}

# t_done: the plan line "1..N"; exit 0, or 1 when a test failed.
t_done() {
	echo "1..$n"
	exit "$failed"
}
