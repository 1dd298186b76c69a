#!/bin/sh
# SPDX-License-Identifier: MIT
#
# tests/gpu/run.sh — on a machine with an NVIDIA GPU: build the CUDA
# kernels and every tests/gpu/*.cu program, run each (tests and the
# bench_* benchmarks), libhmm's device tiers on the real driver, the main
# job on the GPU and the unified-memory benchmark, and print one line per
# check:
#
#	PASS test_attn_gpu (3.1 s)
#	FAIL test_adamw_gpu (0.4 s, rc 1): see build/test-logs/gpu/test_adamw_gpu.log
#	BENCH bench_attn_gpu: {"bench":"attn_gpu",...}   (one per JSON line)
#	SKIP test_tensor_uvm (shared): does not build here (...)
#	gpu: 9 passed, 0 failed, 1 skipped
#
# The checks: make; each tests/gpu program; test_tensor_cuda and
# test_tensor_uvm, embedded and in shared mode through an hmmd;
# hmm-train --device cuda for 20 steps at two device budgets (the loss
# falls; the two runs' losses are bit-identical); hmm-bench uvm --json.
# Without a GPU (or nvcc) every check is listed as skipped, and the exit
# is 77.  Exit 0 when nothing failed, 1 when something did.  Each program
# gets PER_TEST seconds (default 120; the bench 300); the whole run is
# meant to stay under 8 minutes on one H200.  B=DIR picks the build
# folder, as for make.
set -u
cd "$(dirname "$0")/../.." || exit 1
B=${B:-build}
PER_TEST=${PER_TEST:-120}
LOGS=$B/test-logs/gpu
pass=0 fail=0 skip=0

gpu_progs() {
	for src in tests/gpu/*.cu; do
		[ -e "$src" ] && basename "$src" .cu
	done
}
all_checks() {
	echo make
	gpu_progs
	for t in test_tensor_cuda test_tensor_uvm; do
		echo "$t (embedded)"
		echo "$t (shared)"
	done
	echo "hmm-train --device cuda"
	echo "hmm-bench uvm"
}
skip_all() {	# WHY: every check skipped
	all_checks | while read -r c; do echo "SKIP $c: $1"; done
	echo "gpu: 0 passed, 0 failed, $(all_checks | wc -l) skipped"
	exit 77
}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	skip_all "no NVIDIA GPU (nvidia-smi -L fails)"
fi
if ! command -v "${NVCC:-nvcc}" >/dev/null 2>&1; then
	skip_all "nvcc not found"
fi
mkdir -p "$LOGS"
nvidia-smi -L | sed 's/^/# /'

secs_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
# builds SLUG LABEL TARGETS: make TARGETS (log $LOGS/SLUG.make.log);
# 1, with a SKIP line for LABEL, when they do not build
builds() {
	b_log=$LOGS/$1.make.log b_label=$2; shift 2
	# shellcheck disable=SC2086,SC2048
	if ! make -j"$(nproc)" B="$B" $* >"$b_log" 2>&1; then
		skip=$((skip + 1))
		echo "SKIP $b_label: does not build here (liburing-dev, libnuma-dev, libinih-dev?): see $b_log"
		return 1
	fi
}
# verdict NAME RC SECS LOG: one line for a test program's exit status
verdict() {
	case $2 in
	0) pass=$((pass + 1)); echo "PASS $1 ($3 s, $(grep -c '^ok' "$4") ok$(grep -m1 -o ', driver: .*' "$4"))" ;;
	77) skip=$((skip + 1)); echo "SKIP $1: $(grep -m1 SKIP "$4")" ;;
	124|137) fail=$((fail + 1)); echo "FAIL $1 (timed out after $PER_TEST s): see $4" ;;
	*) fail=$((fail + 1)); echo "FAIL $1 ($3 s, rc $2): see $4"
	   grep -A1 '^not ok' "$4" | head -10 | sed 's/^/# /' ;;
	esac
}

# ---- build only what the GPU programs need ---------------------------------
targets="$B/lib/libhk.a $B/lib/libhk_cuda.a"
for p in $(gpu_progs); do targets="$targets $B/tests/gpu/$p"; done
start=$(date +%s)
# shellcheck disable=SC2086
if ! make -j"$(nproc)" B="$B" $targets >"$LOGS/make.log" 2>&1; then
	echo "FAIL make ($(($(date +%s) - start)) s): see $LOGS/make.log"
	tail -20 "$LOGS/make.log" | sed 's/^/# /'
	echo "gpu: 0 passed, 1 failed, 0 skipped"
	exit 1
fi
pass=1
echo "PASS make ($(($(date +%s) - start)) s)"

# ---- the kernels' tests and benchmarks --------------------------------------
for name in $(gpu_progs); do
	bin=$B/tests/gpu/$name log=$LOGS/$name.log
	t0=$(date +%s.%N)
	timeout -k 5 "$PER_TEST" "$bin" >"$log" 2>&1
	rc=$? secs=$(secs_since "$t0")
	case "$name:$rc" in
	bench_*:0)
		pass=$((pass + 1))
		grep '^{' "$log" | sed "s/^/BENCH $name: /"
		echo "PASS $name ($secs s)" ;;
	*) verdict "$name" $rc "$secs" "$log" ;;
	esac
done

# ---- libhmm's device tiers on the real driver -------------------------------
# "cuda" (test_tensor_cuda) and "uvm" (test_tensor_uvm); on machines
# without a GPU they run on tests/fakecuda instead (test_cuda_fake.sh,
# test_uvm_fake.sh).  Shared mode stages device maps through an hmmd.
for name in test_tensor_cuda test_tensor_uvm; do
	for mode in embedded shared; do
		what="$B/tests/unit/$name"
		[ $mode = shared ] && what="$what $B/bin/hmmd"
		builds "$name.$mode" "$name ($mode)" "$what" || continue
		log=$LOGS/$name.$mode.log t0=$(date +%s.%N)
		env -u LD_LIBRARY_PATH HMM_TEST_DIR="${HMM_TEST_DIR:-$PWD/$B/tmp}" \
			HMM_TEST_MODE=$mode HMM_BUILD="$PWD/$B" \
			timeout -k 5 "$PER_TEST" "$B/tests/unit/$name" >"$log" 2>&1
		verdict "$name ($mode)" $? "$(secs_since "$t0")" "$log"
	done
done

# ---- the main job on the GPU ------------------------------------------------
# 20 steps of the tiny preset at a device budget holding everything (4G)
# and at 10M (its least is 8M: two of its 8 layers' parameters resident,
# the others evicted to libhmm's host tier and brought back for the
# backward): the loss falls, and the two runs' per-step losses
# (loss_hex) are the same bits.  Then the same 20 steps with --device cpu:
# every step's loss within 1e-3 (relative) of the GPU's, the tolerance
# man/hmm-train.1 states.  Then the target: the default preset, 10 steps,
# with everything resident and at half of that (the plan's "everything"
# is every layer's parameters and one shared layer gradient, so half of
# it is stricter than half of P+G): a BENCH line with the ratio of the
# median steps (target <= 1.3).
name="hmm-train --device cuda"
train=$B/bin/hmm-train
if builds hmm-train "$name" "$train"; then
	if ! "$train" --help 2>&1 | grep -q -- '--device-budget'; then
		skip=$((skip + 1))
		echo "SKIP $name: this hmm-train has no --device option"
	else
		t0=$(date +%s.%N) rc=0
		for budget in 4G 10M; do
			timeout -k 5 "$PER_TEST" "$train" --preset tiny --steps 20 \
				--device cuda --device-budget $budget --json \
				>"$LOGS/train.$budget.json" 2>"$LOGS/train.$budget.log" || rc=$?
		done
		timeout -k 5 "$PER_TEST" "$train" --preset tiny --steps 20 --json \
			>"$LOGS/train.cpu.json" 2>"$LOGS/train.cpu.log" || rc=$?
		secs=$(secs_since "$t0")
		losses() { grep -o '"loss":[0-9.e+-]*' "$1" | cut -d: -f2; }
		exact() { grep -o '"loss_hex":"[0-9a-fx.p+-]*"' "$1"; }
		first=$(losses "$LOGS/train.4G.json" | head -1)
		last=$(losses "$LOGS/train.4G.json" | tail -1)
		# the largest relative difference of a step's loss, GPU vs CPU
		far=$(losses "$LOGS/train.4G.json" | head -20 >"$LOGS/l.gpu"
		      losses "$LOGS/train.cpu.json" | head -20 >"$LOGS/l.cpu"
		      paste "$LOGS/l.gpu" "$LOGS/l.cpu" | awk '
			{ d = ($1 - $2) / $2; d = d < 0 ? -d : d; if (d > m) m = d }
			END { printf "%.2e", m + 0 }')
		rm -f "$LOGS/l.gpu" "$LOGS/l.cpu"
		if [ $rc != 0 ]; then
			fail=$((fail + 1))
			echo "FAIL $name ($secs s, rc $rc): see $LOGS/train.*.log"
			tail -3 "$LOGS"/train.*.log | sed 's/^/# /'
		elif [ "$(losses "$LOGS/train.4G.json" | wc -l)" -lt 20 ] ||
		     ! awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < f) }'; then
			fail=$((fail + 1))
			echo "FAIL $name ($secs s): the loss did not fall over 20 steps ($first -> $last)"
		elif ! [ "$(exact "$LOGS/train.4G.json")" = "$(exact "$LOGS/train.10M.json")" ]; then
			fail=$((fail + 1))
			echo "FAIL $name ($secs s): losses differ between device budgets 4G and 10M"
		elif ! awk -v m="$far" 'BEGIN { exit !(m <= 1e-3) }'; then
			fail=$((fail + 1))
			echo "FAIL $name ($secs s): a step's loss is $far (relative) from --device cpu's, past 1e-3"
		else
			pass=$((pass + 1))
			echo "PASS $name ($secs s, loss $first -> $last, bit-identical at two device budgets, within $far of --device cpu)"
		fi
		# the target: half of the parameters and gradients on the device
		# (the everything-resident run's plan line, on stderr, says how
		# many bytes "everything" is)
		med() { grep -o '"step_s":[0-9.]*' "$1" | cut -d: -f2 | tail -8 | sort -n | sed -n 4p; }
		for budget in 4G half; do
			b=$budget
			if [ "$b" = half ]; then
				b=$(grep -o 'of [0-9]* bytes' "$LOGS/train.default.4G.log" | head -1 | tr -dc 0-9)
				b=$(( ${b:-0} / 2 ))
			fi
			timeout -k 5 "$PER_TEST" "$train" --preset default --steps 10 \
				--device cuda --device-budget "$b" --json \
				>"$LOGS/train.default.$budget.json" 2>"$LOGS/train.default.$budget.log"
		done
		sa=$(med "$LOGS/train.default.4G.json") sh=$(med "$LOGS/train.default.half.json")
		r=$(awk -v a="${sa:-0}" -v h="${sh:-0}" 'BEGIN { if (a > 0 && h > 0) printf "%.3f", h / a; else print "null" }')
		echo "BENCH $name: {\"preset\":\"default\",\"device_budget_half\":${b:-0},\"step_s_all\":${sa:-null},\"step_s_half\":${sh:-null},\"ratio_half_over_all\":$r,\"target\":1.3}"
	fi
fi

# ---- unified memory 1.5x oversubscribed: faults, advice, hmm ----------------
name="hmm-bench uvm"
if builds hmm-bench "$name" "$B/bin/hmm-bench"; then
	log=$LOGS/bench_uvm.log t0=$(date +%s.%N)
	timeout -k 5 300 "$B/bin/hmm-bench" uvm --json >"$log" 2>&1
	rc=$? secs=$(secs_since "$t0")
	case $rc in
	0) pass=$((pass + 1))
	   grep '^{' "$log" | sed "s/^/BENCH $name: /"
	   echo "PASS $name ($secs s, target ratio_fault_over_hmm >= 2)" ;;
	77) skip=$((skip + 1)); echo "SKIP $name: $(grep -m1 SKIP "$log")" ;;
	*) fail=$((fail + 1)); echo "FAIL $name ($secs s, rc $rc): see $log"
	   tail -5 "$log" | sed 's/^/# /' ;;
	esac
fi

echo "gpu: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
