#!/usr/bin/env bash
# test_gpu_emu — the CUDA kernels no GPU has run yet, run on the CPU:
# tests/gpu/emu/test_kern_emu.cpp (hmm-train's gpu_kern.cu, the SIMT
# attention of attn_simt.cuh, the tensor-core kernels of attn_mma.cu and
# adamw.cu's AdamW step, called through hk_adamw_step_cuda) under
# tests/gpu/emu/cuda_emu.h (a thread a fiber, real barriers and warp
# exchanges, poisoned shared memory, the PTX mma fragment layout), each
# against its CPU reference (AdamW: the scalar path's bits) and, run
# under several orders of its threads, against itself bit for bit
# (races).  Built here with the C++ compiler (tests/gpu/emu/build.sh; no
# CUDA toolkit or GPU needed); its TAP lines are this script's.  Skipped
# without g++ or the archives it links.
set -u
. "$(dirname "$0")/../t.sh"
bin=$(tests/gpu/emu/build.sh test_kern_emu 2>"$B/tmp.emu.$$")
rc=$?
why=$(head -20 "$B/tmp.emu.$$"); rm -f "$B/tmp.emu.$$"
[ $rc = 77 ] && skip_all "$why"
if [ $rc != 0 ]; then
	echo "$why" | sed 's/^/# /'
	ok 1 "test_kern_emu builds"
	t_done
fi
exec "$bin"
