#!/usr/bin/env bash
# test_train_device — hmm-train --device cuda, where no GPU is, exits
# non-zero at once (before any training or store) naming what is
# missing: the driver (no libcuda.so.1), a GPU (the fake driver with
# FAKECUDA_NODEV=1: cuInit fails; =2: no devices), or cuBLAS (the fake
# driver, which cuBLAS cannot initialise on; or no libcublas.so.13, .12 or .so),
# or the kernels (the fake and its cuBLAS, but no FAKECUDA_KERNELS).
# Bad --device / --device-budget values exit 2, a budget below what one
# layer's backward pins too (the plan needs no GPU), and so does
# --offload-activations with --device cuda.  Where the probe succeeds
# (a real GPU) the step runs: tests/gpu/run.sh checks it.
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/bin/hmm-train
need "$bin"
scratch train-device
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
bin=$(abs "$bin")	# B may be relative (make) or absolute (make check)
fake=$(abs "$B/tests/fakecuda")

# run ENV... : hmm-train --device cuda in $dir, TMPDIR=$dir (where a
# default store would appear)
run() {
	(cd "$dir" && env TMPDIR="$PWD" "$@" timeout 60 "$bin" --device cuda --preset tiny --steps 2 >out 2>err)
	rc=$?
	sed 's/^/# /' "$dir/err" | grep -v summary
}
run LD_LIBRARY_PATH=/nonexistent
if grep -q 'found .*GPU' "$dir/err"; then
	skip "a real driver and GPU are here (tests/gpu/run.sh runs --device cuda)"
else
	ok $([ $rc = 1 ] && grep -q 'no driver: dlopen libcuda.so.1' "$dir/err"; echo $?) "no driver: exit 1 naming libcuda.so.1"
fi
ok $([ $rc = 1 ] && [ ! -s "$dir/out" ] && [ -z "$(ls "$dir" | grep -v '^out$\|^err$')" ]; echo $?) "... at once: no step, no store"
if [ -e "$fake/libcuda.so.1" ]; then
	run LD_LIBRARY_PATH="$fake" FAKECUDA_NODEV=1
	ok $([ $rc = 1 ] && grep -q 'no GPU: cuInit: no CUDA-capable device' "$dir/err"; echo $?) "a driver but no GPU (cuInit fails): exit 1 saying so"
	run LD_LIBRARY_PATH="$fake" FAKECUDA_NODEV=2
	ok $([ $rc = 1 ] && grep -q 'no GPU: the driver sees 0 devices' "$dir/err"; echo $?) "a driver that sees no device: exit 1 saying so"
	run LD_LIBRARY_PATH="$fake"
	ok $([ $rc = 1 ] && grep -q 'no cuBLAS: ' "$dir/err"; echo $?) "a driver and a GPU (the fake), cuBLAS unusable or absent: exit 1 naming cuBLAS"
	run LD_LIBRARY_PATH="$fake" HMM_CUBLAS=/nonexistent/libcublas.so.99
	ok $([ $rc = 1 ] && grep -q 'no cuBLAS: dlopen /nonexistent/libcublas.so.99 (\$HMM_CUBLAS)' "$dir/err"; echo $?) "HMM_CUBLAS naming no library: exit 1 naming it"
	# past the probe (the fake's own cuBLAS), the GPU step's loader on
	# a fake without kernels (no FAKECUDA_KERNELS): it must say so, not
	# crash (test_train_emu.sh runs the step with them)
	run LD_LIBRARY_PATH="$fake" HMM_CUBLAS="$fake/libcuda.so.1" FAKECUDA_KERNELS=
	ok $([ $rc = 1 ] && grep -q "cuModuleLoadData of hmm-train's kernels" "$dir/err"; echo $?) "the fake without kernels: exit 1 naming cuModuleLoadData"
	plan=$B/tests/unit/test_gpu_plan
	if [ -x "$plan" ]; then	# its library has no fatbin: nothing left open
		LD_LIBRARY_PATH="$fake" "$plan" "no kernels" >"$dir/out" 2>&1
		rc=$?
		sed 's/^/# /' "$dir/out" | grep 'gpu_lib_open'
		ok $([ $rc = 0 ]; echo $?) "the step's loader without kernels, on the fake driver: -ENODEV saying so, nothing left open"
		rm -f "$dir/out"
	fi
fi
"$bin" --device tpu >/dev/null 2>&1
ok $([ $? = 2 ]; echo $?) "--device tpu: exit 2"
"$bin" --device cuda --device-budget 0 >/dev/null 2>&1
ok $([ $? = 2 ]; echo $?) "--device-budget 0: exit 2"
"$bin" --device-budget 1G >/dev/null 2>"$dir/err"
ok $([ $? = 2 ] && grep -q -- '--device-budget 1G: only with --device cuda' "$dir/err"; echo $?) "--device-budget without --device cuda: exit 2, the value named"
LD_LIBRARY_PATH=/nonexistent "$bin" --device cuda --preset tiny --device-budget 1M >/dev/null 2>"$dir/err"
rc=$?
ok $([ $rc = 2 ] && grep -q -- '--device-budget.*too small.*holds everything' "$dir/err"; echo $?) "--device-budget 1M (tiny needs 8M): exit 2 naming the least, before looking for a GPU"
LD_LIBRARY_PATH=/nonexistent "$bin" --device cuda --offload-activations >/dev/null 2>&1
ok $([ $? = 2 ]; echo $?) "--offload-activations with --device cuda: exit 2"
t_done
