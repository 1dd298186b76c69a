#!/bin/sh
# SPDX-License-Identifier: MIT
#
# tests/gpu/run.sh — on a machine with an NVIDIA GPU: build the CUDA
# kernels and every tests/gpu/*.cu program, run each (tests and the
# bench_* benchmarks), libhmm's device tiers on the real driver, the main
# job on the GPU and the unified-memory benchmark, and print one line per
# check:
#
#	PASS test_attn_gpu (3.1 s, 120 ok)
#	FAIL test_adamw_gpu (0.4 s, rc 1): see build/test-logs/gpu/test_adamw_gpu.log
#	# not ok 3 - ...			(its first failures)
#	BENCH bench_attn_gpu: {"bench":"attn_gpu",...}   (one per JSON line)
#	SKIP test_tensor_uvm (shared): does not build here (...)
#	gpu: 9 passed, 0 failed, 1 skipped
#
# The checks: make; each tests/gpu program; test_tensor_cuda and
# test_tensor_uvm, embedded and in shared mode through an hmmd;
# hmm-train --device cuda for 20 steps at two device budgets (the loss
# falls; the two runs' losses are bit-identical; step 1 within 1e-5 and
# every step within 1e-3 of --device cpu); the default preset at all and half of its device plan (a BENCH
# line); hmm-bench uvm --json, only with HMM_GPU_UVM_OVERSUB=1 (see
# there).  Without a GPU (or nvcc) every check is listed as skipped, and
# the exit is 77.  Exit 0 when nothing failed, 1 when something did.
#
# What the machine lacks: a GPU machine's image may have no liburing,
# libnuma, inih or OpenBLAS headers and reach no archive.  When one is
# missing and .gpudeps/ holds Debian packages (tests/gpu/deps.sh, run
# here; carry .gpudeps), they are unpacked into the scratch folder, never
# into /, and the compiler, linker and loader pointed at them.  cuBLAS
# for hmm-train is the loader's, else HMM_CUBLAS is set to the toolkit's
# or the Python wheel's libcublas.so.13 (or .12).  With $OUT set (the
# lab's device runner), the logs are copied there on every exit.
#
# Time: the whole run stays under BUDGET seconds (default 450, so that
# it fits 8 minutes of a machine with its start): each program gets
# PER_TEST seconds (default 120; hmm-bench uvm 240), cut to what is left
# of BUDGET, and a check with under 15 seconds left is skipped saying
# so; `timeout` kills each program's whole process group (an hmmd too).
# Scratch (stores, test directories) lives in one folder under $B/tmp,
# removed on every exit, interrupted or not; the logs stay in
# $B/test-logs/gpu.  B=DIR picks the build folder, as for make.
set -u
cd "$(dirname "$0")/../.." || exit 1
B=${B:-build}
PER_TEST=${PER_TEST:-120}
BUDGET=${BUDGET:-450}
LOGS=$B/test-logs/gpu
pass=0 fail=0 skip=0
t_start=$(date +%s)

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
	echo "hmm-train --device cuda (default preset)"
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
mkdir -p "$LOGS" "$B/tmp"
SCRATCH=$(mktemp -d "$PWD/$B/tmp/gpu-run.XXXXXX") || exit 1
child=
# on any exit: the running program's process group (timeout made it,
# its pid is the group's id), then the scratch folder
stop_child() {
	[ -n "$child" ] || return 0
	kill -TERM -- "-$child" 2>/dev/null || kill -TERM "$child" 2>/dev/null
	child=
}
save_logs() {	# into $OUT, which the device runner brings back
	[ -n "${OUT:-}" ] && [ -d "$OUT" ] && cp -r "$LOGS" "$OUT/gpu-logs" 2>/dev/null
	return 0
}
trap 'stop_child; save_logs; rm -rf "$SCRATCH"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap \
	--format=csv,noheader 2>/dev/null | sed 's/^/# GPU: /'
echo "# nvcc: $("${NVCC:-nvcc}" --version | tail -1)"

# ---- what the image lacks ---------------------------------------------------
have_hdr() { echo "#include <$1>" | "${CC:-cc}" -E - >/dev/null 2>&1; }
deb_x() {	# DEB DIR: DEB's files under DIR (a .deb is an ar archive)
	if command -v dpkg-deb >/dev/null && [ -z "${NO_DPKG:-}" ]; then
		dpkg-deb -x "$1" "$2"
		return
	fi
	dx_m=$(ar t "$1" | grep '^data\.tar') && mkdir -p "$2" &&
		ar p "$1" "$dx_m" >"$2.data" && tar xf "$2.data" -C "$2"
	dx_r=$?
	rm -f "$2.data"
	return $dx_r
}
missing=
for h in liburing.h numa.h ini.h cblas.h; do
	have_hdr $h || missing="$missing $h"
done
if [ -n "$missing" ] && ls .gpudeps/*.deb >/dev/null 2>&1; then
	P=$SCRATCH/deps a=x86_64-linux-gnu
	for f in .gpudeps/*.deb; do
		deb_x "$f" "$P" || echo "# $f: cannot unpack"
	done
	inc=$P/usr/include:$P/usr/include/$a:$P/usr/include/$a/openblas-pthread
	lib=$P/usr/lib/$a:$P/usr/lib/$a/openblas-pthread
	export C_INCLUDE_PATH="$inc${C_INCLUDE_PATH:+:$C_INCLUDE_PATH}"
	export LIBRARY_PATH="$lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
	export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	echo "# headers missing here:$missing: using .gpudeps"
	missing=
	for h in liburing.h numa.h ini.h cblas.h; do
		have_hdr $h || missing="$missing $h"
	done
fi
[ -n "$missing" ] && echo "# headers still missing:$missing (tests/gpu/deps.sh, then carry .gpudeps)"
# cuBLAS (hmm-train --device cuda): the loader's, else one found here
if [ -z "${HMM_CUBLAS:-}" ] &&
   ! ldconfig -p 2>/dev/null | grep -q 'libcublas\.so\.1[23] '; then
	nv=$(dirname "$(command -v "${NVCC:-nvcc}")")
	# the wheels' nvidia/ folders in each site-packages
	sp=$(python3 -c 'import site
for d in site.getsitepackages(): print(d + "/nvidia")' 2>/dev/null)
	# shellcheck disable=SC2086
	HMM_CUBLAS=$(find "${CUDA_HOME:-/usr/local/cuda}/lib64" "$nv/../lib64" \
		"$nv/../targets/x86_64-linux/lib" $sp \
		-maxdepth 4 -name 'libcublas.so.1[23]' 2>/dev/null | sort -r | head -1)
	if [ -n "$HMM_CUBLAS" ]; then	# its libcublasLt beside it
		LD_LIBRARY_PATH="$(dirname "$HMM_CUBLAS")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
		export HMM_CUBLAS LD_LIBRARY_PATH
	fi
fi
echo "# cuBLAS: ${HMM_CUBLAS:-as the loader finds it}"
# the loader's path for the real-driver tests: without tests/fakecuda
real_ld=$(printf %s "${LD_LIBRARY_PATH:-}" | tr : '\n' | grep -v fakecuda | paste -sd: -)

secs_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
# tally PASS|FAIL|SKIP TEXT: a check's verdict line ("FAIL TEXT"),
# counted in $pass, $fail or $skip: every line the summary counts comes
# through here (never in a pipeline or $(...), whose count would be lost)
tally() {
	case $1 in
	PASS) pass=$((pass + 1)) ;;
	FAIL) fail=$((fail + 1)) ;;
	SKIP) skip=$((skip + 1)) ;;
	esac
	echo "$*"
}
# left LIMIT: lim = min(LIMIT, what is left of BUDGET); 1 (and a SKIP
# line for $label) when under 15 seconds are left
left() {
	lim=$((BUDGET - ($(date +%s) - t_start)))
	if [ "$lim" -lt 15 ]; then
		tally SKIP "$label: out of time (BUDGET=$BUDGET s, $lim s left)"
		return 1
	fi
	[ "$1" -lt "$lim" ] && lim=$1
	return 0
}
# run CMD...: CMD (which starts with timeout, through env or not) in the
# background, waited for, so that a signal to this script stops it
# (stop_child); its exit status
run() {
	"$@" &
	child=$!
	wait "$child"
	r_rc=$?
	child=
	return $r_rc
}
# builds SLUG TARGETS: make TARGETS (log $LOGS/SLUG.make.log); 1, with a
# SKIP line for $label, when they do not build
builds() {
	b_log=$LOGS/$1.make.log; shift
	# shellcheck disable=SC2086,SC2048
	if ! make -j"$(nproc)" B="$B" $* >"$b_log" 2>&1; then
		tally SKIP "$label: does not build here (liburing-dev, libnuma-dev, libinih-dev?): see $b_log"
		grep -m3 -i 'error' "$b_log" | sed 's/^/# /'
		return 1
	fi
}
# verdict NAME RC SECS LIMIT LOG: one line for a test program's exit
# status, and on a failure its first failed checks.  A program that
# skips itself (77: no device, no driver) fails here: nvidia-smi saw a
# GPU, so it is the program that could not find it.
verdict() {
	case $2 in
	0) tally PASS "$1 ($3 s, $(grep -c '^ok' "$5") ok$(grep -m1 -o ', driver: .*' "$5"))" ;;
	77) tally FAIL "$1: skipped itself where nvidia-smi sees a GPU: $(grep -m1 SKIP "$5")" ;;
	124|137) tally FAIL "$1 (timed out after $4 s): see $5"
	   tail -3 "$5" | sed 's/^/# /' ;;
	*) tally FAIL "$1 ($3 s, rc $2): see $5"
	   if grep -q '^not ok' "$5"; then
		grep -A1 '^not ok' "$5" | head -10 | sed 's/^/# /'
	   else
		tail -5 "$5" | sed 's/^/# /'
	   fi ;;
	esac
}

# ---- build what the checks need, at once (the GPU programs must build) -----
label="make"
targets="$B/lib/libhk.a $B/lib/libhk_cuda.a"
for p in $(gpu_progs); do targets="$targets $B/tests/gpu/$p"; done
# shellcheck disable=SC2086
if ! make -j"$(nproc)" B="$B" $targets >"$LOGS/make.log" 2>&1; then
	echo "FAIL make ($(($(date +%s) - t_start)) s): see $LOGS/make.log"
	grep -m5 -i 'error' "$LOGS/make.log" | sed 's/^/# /'
	echo "gpu: 0 passed, 1 failed, 0 skipped"
	exit 1
fi
# the rest in one parallel make; what fails here is named by its check
make -j"$(nproc)" -k B="$B" "$B/tests/unit/test_tensor_cuda" \
	"$B/tests/unit/test_tensor_uvm" "$B/bin/hmmd" "$B/bin/hmm-train" \
	"$B/bin/hmm-bench" >"$LOGS/make.rest.log" 2>&1
tally PASS "make ($(($(date +%s) - t_start)) s)"

# ---- the kernels' tests and benchmarks --------------------------------------
for name in $(gpu_progs); do
	label=$name
	left "$PER_TEST" || continue
	bin=$B/tests/gpu/$name log=$LOGS/$name.log
	t0=$(date +%s.%N)
	run timeout -k 5 "$lim" "$bin" >"$log" 2>&1
	rc=$? secs=$(secs_since "$t0")
	case "$name:$rc" in
	bench_*:0)
		grep '^{' "$log" | sed "s/^/BENCH $name: /"
		tally PASS "$name ($secs s)" ;;
	*) verdict "$name" $rc "$secs" "$lim" "$log" ;;
	esac
done

# ---- libhmm's device tiers on the real driver -------------------------------
# "cuda" (test_tensor_cuda) and "uvm" (test_tensor_uvm); on machines
# without a GPU they run on tests/fakecuda instead (test_cuda_fake.sh,
# test_uvm_fake.sh).  Shared mode stages device maps through an hmmd.
for name in test_tensor_cuda test_tensor_uvm; do
	for mode in embedded shared; do
		label="$name ($mode)"
		what="$B/tests/unit/$name"
		[ $mode = shared ] && what="$what $B/bin/hmmd"
		builds "$name.$mode" "$what" || continue
		left "$PER_TEST" || continue
		log=$LOGS/$name.$mode.log t0=$(date +%s.%N)
		run env LD_LIBRARY_PATH="$real_ld" HMM_TEST_DIR="$SCRATCH" \
			HMM_TEST_MODE=$mode HMM_BUILD="$PWD/$B" \
			timeout -k 5 "$lim" "$B/tests/unit/$name" >"$log" 2>&1
		verdict "$label" $? "$(secs_since "$t0")" "$lim" "$log"
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
train=$B/bin/hmm-train
# train TAG ARGS...: hmm-train --json ARGS with its store in the scratch
# folder, stdout $LOGS/train.TAG.json, stderr .log, PER_TEST seconds or
# what is left of BUDGET; its exit status (124: no time)
train() {
	tr_tag=$1; shift
	lim=$((BUDGET - ($(date +%s) - t_start)))
	if [ "$lim" -lt 15 ]; then
		echo "# hmm-train $* : not run, out of time (BUDGET=$BUDGET s)"
		return 124
	fi
	[ "$PER_TEST" -lt "$lim" ] && lim=$PER_TEST
	run timeout -k 5 "$lim" "$train" --json --store "$SCRATCH/$tr_tag.store" \
		"$@" >"$LOGS/train.$tr_tag.json" 2>"$LOGS/train.$tr_tag.log"
	tr_rc=$?
	rm -f "$SCRATCH/$tr_tag.store"
	if [ $tr_rc != 0 ]; then
		echo "# hmm-train $* : rc $tr_rc$([ $tr_rc = 124 ] && echo ", timed out after $lim s")"
		grep -v '^blas:' "$LOGS/train.$tr_tag.log" | tail -3 | sed 's/^/#   /'
	fi
	return $tr_rc
}
losses() { grep -o '"loss":[0-9.e+-]*' "$1" | cut -d: -f2; }
exact() { grep -o '"loss_hex":"[0-9a-fx.p+-]*"' "$1"; }
label="hmm-train --device cuda"
if builds hmm-train "$train"; then
	if ! "$train" --help 2>&1 | grep -q -- '--device-budget'; then
		tally SKIP "$label: this hmm-train has no --device option"
		tally SKIP "$label (default preset): this hmm-train has no --device option"
	elif left "$PER_TEST"; then
		t0=$(date +%s.%N) rc=0
		for budget in 4G 10M; do
			train "tiny.$budget" --preset tiny --steps 20 --device cuda \
				--device-budget $budget || rc=1
		done
		train tiny.cpu --preset tiny --steps 20 || rc=1
		secs=$(secs_since "$t0")
		G=$LOGS/train.tiny.4G.json
		first=$(losses "$G" | head -1) last=$(losses "$G" | tail -1)
		# the largest relative difference of a step's loss, GPU vs CPU
		losses "$G" | head -20 >"$SCRATCH/l.gpu"
		losses "$LOGS/train.tiny.cpu.json" | head -20 >"$SCRATCH/l.cpu"
		losses "$LOGS/train.tiny.10M.json" | head -20 >"$SCRATCH/l.10M"
		far=$(paste "$SCRATCH/l.gpu" "$SCRATCH/l.cpu" | awk '
			{ d = ($1 - $2) / $2; d = d < 0 ? -d : d; if (d > m) { m = d; s = NR } }
			END { printf "%.2e (step %d)", m + 0, s }')
		# step 1 is the forward at the same initial parameters: only
		# rounding differs (a causal mask left off moved the tiny
		# preset's step-2 loss by only 1e-3 on the emulator)
		far1=$(paste "$SCRATCH/l.gpu" "$SCRATCH/l.cpu" | awk 'NR == 1 {
			d = ($1 - $2) / $2; printf "%.2e", d < 0 ? -d : d }')
		grep -m1 'device budget' "$LOGS/train.tiny.10M.log" | sed 's/^hmm-train: /# 10M: /'
		if [ $rc != 0 ]; then
			tally FAIL "$label ($secs s): see $LOGS/train.tiny.*.log"
		elif [ "$(losses "$G" | wc -l)" -lt 20 ] ||
		     [ "$(exact "$G" | wc -l)" -lt 20 ] ||
		     ! awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < f) }'; then
			tally FAIL "$label ($secs s): the loss did not fall over 20 steps ($first -> $last, $(losses "$G" | wc -l) steps)"
		elif ! [ "$(exact "$G")" = "$(exact "$LOGS/train.tiny.10M.json")" ]; then
			tally FAIL "$label ($secs s): losses differ between device budgets 4G and 10M"
			paste "$SCRATCH/l.gpu" "$SCRATCH/l.10M" |
				awk '$1 != $2 { print "# first at step " NR ": " $1 " at 4G, " $2 " at 10M"; exit }'
		elif ! awk -v m="${far1:-1}" 'BEGIN { exit !(m <= 1e-5) }'; then
			tally FAIL "$label ($secs s): step 1's loss (the forward at the initial parameters) is $far1 (relative) from --device cpu's, past 1e-5"
		elif ! awk -v m="${far%% *}" 'BEGIN { exit !(m <= 1e-3) }'; then
			tally FAIL "$label ($secs s): a step's loss is $far (relative) from --device cpu's, past 1e-3"
		else
			tally PASS "$label ($secs s, loss $first -> $last, bit-identical at two device budgets, step 1 within $far1 and every step within $far of --device cpu)"
		fi
		# the target: half of the parameters and gradients on the device
		# (the everything-resident run's plan line, on stderr, says how
		# many bytes "everything" is)
		label="hmm-train --device cuda (default preset)"
		med() { grep -o '"step_s":[0-9.]*' "$1" 2>/dev/null | cut -d: -f2 | tail -8 | sort -n | sed -n 4p; }
		if left "$PER_TEST"; then
			t0=$(date +%s.%N) rc=0 b=0 late=0
			train default.all --preset default --steps 10 --device cuda || rc=1
			b=$(grep -o 'of [0-9]* bytes' "$LOGS/train.default.all.log" | head -1 | tr -dc 0-9)
			b=$(( ${b:-0} / 2 ))
			if [ $rc != 0 ] || [ "$b" = 0 ]; then
				rc=1
			elif left "$PER_TEST"; then
				train default.half --preset default --steps 10 \
					--device cuda --device-budget "$b" || rc=1
			else
				late=1	# said SKIP
			fi
			sa=$(med "$LOGS/train.default.all.json") sh=$(med "$LOGS/train.default.half.json")
			r=$(awk -v a="${sa:-0}" -v h="${sh:-0}" 'BEGIN { if (a > 0 && h > 0) printf "%.3f", h / a; else print "null" }')
			echo "BENCH $label: {\"preset\":\"default\",\"device_budget_half\":$b,\"step_s_all\":${sa:-null},\"step_s_half\":${sh:-null},\"ratio_half_over_all\":$r,\"target\":1.3}"
			if [ $late = 1 ]; then
				:
			elif [ $rc = 0 ] && [ "$r" != null ]; then
				tally PASS "$label ($(secs_since "$t0") s, ratio $r, target <= 1.3)"
			else
				tally FAIL "$label ($(secs_since "$t0") s): see $LOGS/train.default.*.log"
			fi
		fi
	else
		tally SKIP "hmm-train --device cuda (default preset): out of time"
	fi
else
	tally SKIP "hmm-train --device cuda (default preset): does not build here"
fi

# ---- unified memory 1.5x oversubscribed: faults, advice, hmm ----------------
# --device-mem 4G (a 6 GiB working set): the ratio is the point, and the
# driver's own faulting of 12 GiB could eat the whole budget.  Only with
# HMM_GPU_UVM_OVERSUB=1: the lab's GPU machines warn that asking for more
# managed memory than the card has free can hang the GPU, not only the
# program, so there it runs alone, after everything else came back.
label="hmm-bench uvm"
if [ "${HMM_GPU_UVM_OVERSUB:-0}" != 1 ]; then
	tally SKIP "$label: oversubscribes managed memory 1.5x; run it alone with HMM_GPU_UVM_OVERSUB=1 (it can hang a GPU in a sandboxed runtime)"
elif builds hmm-bench "$B/bin/hmm-bench" && left 240; then
	log=$LOGS/bench_uvm.log t0=$(date +%s.%N)
	run timeout -k 5 "$lim" "$B/bin/hmm-bench" uvm --device-mem 4G --json >"$log" 2>&1
	rc=$? secs=$(secs_since "$t0")
	case $rc in
	0) grep '^{' "$log" | sed "s/^/BENCH $label: /"
	   tally PASS "$label ($secs s, target ratio_fault_over_hmm >= 2)" ;;
	77) tally FAIL "$label: skipped itself where nvidia-smi sees a GPU: $(grep -m1 SKIP "$log")" ;;
	124|137) tally FAIL "$label (timed out after $lim s): see $log"
	   tail -3 "$log" | sed 's/^/# /' ;;
	*) tally FAIL "$label ($secs s, rc $rc): see $log"
	   tail -5 "$log" | sed 's/^/# /' ;;
	esac
fi

echo "# total $(($(date +%s) - t_start)) s of BUDGET=$BUDGET"
echo "gpu: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
