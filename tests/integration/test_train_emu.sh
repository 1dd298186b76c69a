#!/usr/bin/env bash
# test_train_emu — hmm-train --device cuda, its whole step, where no GPU
# is: on the fake driver (tests/fakecuda) with the kernels built for the
# CPU (FAKECUDA_KERNELS: tests/gpu/emu's libkernels_emu.so, gpu_kern.cu
# and attn_simt.cuh under cuda_emu.h) and the fake's cuBLAS (HMM_CUBLAS:
# the fake itself).  So gpu_lib.c's loading, gpu_step.c's launches (each
# kernel's parameters as its prototype reads them, grids, pointers into
# the arena and the device tensors: every pointer parameter must be
# device memory), the products' transposes, the stream order and the
# device tensors under libhmm's cuda device run as they will on a GPU.
# Two steps of the tiny preset at a device budget holding everything
# (4G) and at 10M (two of eight layers resident: the others evicted to
# libhmm's host tier and brought back for the backward): exit 0, no
# contract violation or leak in the fake, copies at 10M (the evictions),
# the same loss bits at both budgets, and each step's loss within 1e-5
# (relative) of --device cpu's (the emulated kernels round as the CPU
# does but for summation order).
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/bin/hmm-train
fake=$B/tests/fakecuda/libcuda.so.1
need "$bin"
[ -e "$fake" ] || skip_all "$fake not built"
"$bin" --help 2>&1 | grep -q -- '--device-budget' || skip_all "hmm-train has no --device"
kern=$(tests/gpu/emu/build.sh libkernels_emu.so 2>/dev/null)
rc=$?
[ $rc = 77 ] && skip_all "no C++ compiler for the emulated kernels"
[ $rc = 0 ] || { ok 1 "libkernels_emu.so builds (tests/gpu/emu/build.sh)"; t_done; }
scratch train-emu
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
fake=$(abs "$fake") kern=$(abs "$kern")

losses() { grep -o '"loss":[0-9.e+-]*' "$1" | cut -d: -f2; }
exact() { grep -o '"loss_hex":"[^"]*"' "$1"; }
for b in 4G 10M; do
	LD_LIBRARY_PATH=$(dirname "$fake") FAKECUDA_KERNELS=$kern HMM_CUBLAS=$fake \
		timeout 300 "$bin" --preset tiny --steps 2 --device cuda \
		--device-budget $b --json --store "$dir/s.$b" \
		>"$dir/$b.json" 2>"$dir/$b.err"
	rc=$?
	grep -v '^blas:' "$dir/$b.err" | sed 's/^/# /'
	ok $([ $rc = 0 ] && [ "$(losses "$dir/$b.json" | wc -l)" = 2 ]; echo $?) "device budget $b: two steps on the fake driver and the emulated kernels"
	ok $(grep -q 'fakecuda: summary: .*violations 0 leaks 0 ' "$dir/$b.err"; echo $?) "... no contract violation, nothing leaked"
done
ok $(grep -q 'fakecuda: summary: .* async_copies [1-9]' "$dir/10M.err"; echo $?) "at 10M libhmm moved parameters off the device and back"
ok $([ -n "$(exact "$dir/4G.json")" ] && [ "$(exact "$dir/4G.json")" = "$(exact "$dir/10M.json")" ]; echo $?) "the same loss bits at 4G and 10M"
timeout 300 "$bin" --preset tiny --steps 2 --json --store "$dir/s.cpu" >"$dir/cpu.json" 2>/dev/null
far=$(paste <(losses "$dir/4G.json") <(losses "$dir/cpu.json") | awk '
	{ d = ($1 - $2) / $2; d = d < 0 ? -d : d; if (d > m) m = d; n++ }
	END { printf "%g", n == 2 ? m : 1 }')
ok $(awk -v m="$far" 'BEGIN { exit !(m <= 1e-5) }'; echo $?) "each step's loss within 1e-5 of --device cpu's ($far)"
t_done
