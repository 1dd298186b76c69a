#!/usr/bin/env bash
# test_bench_uvm — `hmm-bench uvm` is GPU only, and where it cannot run it
# says why and exits 77, never crashes or pretends: with no driver
# (libcuda.so.1 not found) and when hmm-bench was built without nvcc
# ("built without nvcc"); on the fake driver (tests/fakecuda) without
# kernels it fails naming cuModuleLoadData's error (exit 1: on a GPU
# that is a broken build), and with the sweep built for the CPU
# (FAKECUDA_KERNELS) the whole bench runs; bad options exit 2 before any
# of that.  Its measurement runs in tests/gpu/run.sh.
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/bin/hmm-bench
need "$bin"
scratch bench-uvm

out=$(env -u LD_LIBRARY_PATH LD_LIBRARY_PATH=/nonexistent "$bin" uvm --json 2>&1)
rc=$?
echo "# $out" | head -3
if echo "$out" | grep -q 'built without nvcc'; then
	ok $([ $rc = 77 ]; echo $?) "built without nvcc: exit 77, saying so"
elif [ -e /usr/lib/x86_64-linux-gnu/libcuda.so.1 ] || ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1 '; then
	skip "a real driver is installed (tests/gpu/run.sh runs the bench)"
else
	ok $([ $rc = 77 ] && echo "$out" | grep -q 'SKIP needs a GPU: no driver (dlopen libcuda.so.1'; echo $?) "no driver: exit 77 naming libcuda.so.1"
	ok $(echo "$out" | grep -q '^{'; [ $? = 1 ]; echo $?) "... and no JSON (no result pretended)"
fi
if [ -e "$B/tests/fakecuda/libcuda.so.1" ] && ! echo "$out" | grep -q 'built without nvcc'; then
	out=$(LD_LIBRARY_PATH=$B/tests/fakecuda FAKECUDA_KERNELS= "$bin" uvm 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# /'
	ok $([ $rc = 1 ] && echo "$out" | grep -q 'does not load .*cuModuleLoadData: ' &&
	     echo "$out" | grep -q 'violations 0 leaks 0 '; echo $?) "the fake driver without kernels: exit 1 naming cuModuleLoadData's error, nothing leaked"
	# with them (the sweep built for the CPU): the whole bench, every
	# block's values checked by it, on 64M of "device" memory
	kern=$(tests/gpu/emu/build.sh libkernels_emu.so 2>/dev/null)
	if [ $? = 0 ]; then
		out=$(LD_LIBRARY_PATH=$B/tests/fakecuda FAKECUDA_MEM=$((512 << 20)) \
		      FAKECUDA_KERNELS=$(cd "$(dirname "$kern")" && pwd)/libkernels_emu.so \
		      timeout 300 "$bin" uvm --device-mem 64M --block 8M --passes 2 --json 2>&1)
		rc=$?
		echo "$out" | sed 's/^/# /'
		ok $([ $rc = 0 ] && echo "$out" | grep -q '^{"bench":"uvm"' &&
		     echo "$out" | grep -q 'violations 0 leaks 0 '; echo $?) "the fake driver with the emulated sweep: the three modes run, values right, nothing leaked"
	else
		skip "no C++ compiler for the emulated sweep"
	fi
fi
"$bin" uvm --block 3M >/dev/null 2>&1
ok $([ $? = 2 ]; echo $?) "--block not a multiple of 2M: exit 2"
"$bin" uvm --device-mem 1M >/dev/null 2>&1
ok $([ $? = 2 ]; echo $?) "--device-mem below 64M: exit 2"
"$bin" uvm --bogus >/dev/null 2>&1
ok $([ $? = 2 ]; echo $?) "an unknown option: exit 2"
t_done
