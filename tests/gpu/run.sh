#!/bin/sh
# SPDX-License-Identifier: MIT
#
# tests/gpu/run.sh — on a machine with an NVIDIA GPU: build the CUDA
# kernels and every tests/gpu/*.cu program, run each (tests and the
# bench_* benchmarks), and print one summary line per check:
#
#	PASS test_attn_gpu (3.1 s)
#	FAIL test_adamw_gpu (0.4 s, rc 1): see build/test-logs/gpu/test_adamw_gpu.log
#	BENCH bench_attn_gpu (9.8 s): {"bench":"attn_gpu",...}   (one per line)
#	gpu: 2 passed, 0 failed, 0 skipped
#
# Exit 0 when nothing failed, 1 when something did, 77 when there is no
# GPU (or no nvcc).  Each program gets PER_TEST seconds (default 120); the
# whole run is meant to stay under 5 minutes.  B=DIR picks the build
# folder, as for make.
set -u
cd "$(dirname "$0")/../.." || exit 1
B=${B:-build}
PER_TEST=${PER_TEST:-120}
LOGS=$B/test-logs/gpu

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "gpu: SKIP no NVIDIA GPU (nvidia-smi -L fails)"
	exit 77
fi
if ! command -v "${NVCC:-nvcc}" >/dev/null 2>&1; then
	echo "gpu: SKIP nvcc not found"
	exit 77
fi
mkdir -p "$LOGS"
nvidia-smi -L | sed 's/^/# /'

# Build only what the GPU checks need (the rest of `make` is not theirs
# to fail on): the CPU kernels, the CUDA kernels, each GPU program.
targets="$B/lib/libhk.a $B/lib/libhk_cuda.a"
for src in tests/gpu/*.cu; do
	[ -e "$src" ] || continue
	targets="$targets $B/tests/gpu/$(basename "$src" .cu)"
done
start=$(date +%s)
if ! make -j"$(nproc)" B="$B" $targets >"$LOGS/make.log" 2>&1; then
	echo "FAIL make ($(($(date +%s) - start)) s): see $LOGS/make.log"
	tail -20 "$LOGS/make.log" | sed 's/^/# /'
	echo "gpu: 0 passed, 1 failed, 0 skipped"
	exit 1
fi
echo "PASS make ($(($(date +%s) - start)) s)"

pass=1 fail=0 skip=0
for bin in "$B"/tests/gpu/*; do
	[ -f "$bin" ] && [ -x "$bin" ] || continue
	name=$(basename "$bin")
	log=$LOGS/$name.log
	t0=$(date +%s.%N)
	timeout -k 5 "$PER_TEST" "$bin" >"$log" 2>&1
	rc=$?
	secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	case "$name:$rc" in
	bench_*:0)
		pass=$((pass + 1))
		grep '^{' "$log" | sed "s/^/BENCH $name: /"
		echo "PASS $name ($secs s)" ;;
	*:0)
		pass=$((pass + 1))
		echo "PASS $name ($secs s, $(grep -c '^ok' "$log") ok)" ;;
	*:77)
		skip=$((skip + 1))
		echo "SKIP $name: $(grep -m1 SKIP "$log")" ;;
	*:124|*:137)
		fail=$((fail + 1))
		echo "FAIL $name (timed out after $PER_TEST s): see $log" ;;
	*)
		fail=$((fail + 1))
		echo "FAIL $name ($secs s, rc $rc): see $log"
		grep -A1 '^not ok' "$log" | head -10 | sed 's/^/# /' ;;
	esac
done
# libhmm's "cuda" device tier on the real driver (test_tensor_cuda; on
# machines without a GPU it runs on tests/fakecuda instead), embedded
# and in shared mode through an hmmd (device maps staged through its
# host tier).  It needs liburing and libnuma (hmmd: libinih) to build:
# skipped, with the reason, without them.
name=test_tensor_cuda
for mode in embedded shared; do
	log=$LOGS/$name.$mode.log
	what="$B/tests/unit/$name"
	[ $mode = shared ] && what="$what $B/bin/hmmd"
	# shellcheck disable=SC2086
	if ! make -j"$(nproc)" B="$B" $what >"$LOGS/$name.$mode.make.log" 2>&1; then
		skip=$((skip + 1))
		echo "SKIP $name ($mode): does not build here (liburing-dev, libnuma-dev, libinih-dev?): see $LOGS/$name.$mode.make.log"
		continue
	fi
	t0=$(date +%s.%N)
	env -u LD_LIBRARY_PATH HMM_TEST_DIR="${HMM_TEST_DIR:-$PWD/$B/tmp}" \
		HMM_TEST_MODE=$mode HMM_BUILD="$PWD/$B" \
		timeout -k 5 "$PER_TEST" "$B/tests/unit/$name" >"$log" 2>&1
	rc=$?
	secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	case $rc in
	0) pass=$((pass + 1)); echo "PASS $name ($mode, $secs s, $(grep -c '^ok' "$log") ok, $(grep -m1 -o 'driver: .*' "$log"))" ;;
	77) skip=$((skip + 1)); echo "SKIP $name ($mode): $(grep -m1 SKIP "$log")" ;;
	*) fail=$((fail + 1)); echo "FAIL $name ($mode, $secs s, rc $rc): see $log"
	   grep -A1 '^not ok' "$log" | head -10 | sed 's/^/# /' ;;
	esac
done
echo "gpu: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
