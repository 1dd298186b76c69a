#!/usr/bin/env bash
# test_gpu_emu — the CUDA kernels no GPU has run yet, run on the CPU:
# tests/gpu/emu/test_kern_emu.cpp (hmm-train's gpu_kern.cu, the SIMT
# attention of attn_simt.cuh and the tensor-core kernels of attn_mma.cu)
# under tests/gpu/emu/cuda_emu.h (a thread a fiber, real barriers and
# warp exchanges, poisoned shared memory, the PTX mma fragment layout),
# each against its CPU reference.  Built here with the C++ compiler
# (no CUDA toolkit or GPU needed) into $B/tests/gpu-emu; its TAP lines
# are this script's.  Skipped without g++ or the archives it links.
set -u
. "$(dirname "$0")/../t.sh"
CXX=${CXX:-g++}
command -v "$CXX" >/dev/null 2>&1 || skip_all "no C++ compiler ($CXX)"
for a in "$B/lib/libhmmtrain.a" "$B/lib/libhk.a"; do
	[ -f "$a" ] || skip_all "$a not built"
done
out=$B/tests/gpu-emu
mkdir -p "$out"
src=tests/gpu/emu/test_kern_emu.cpp
deps="$src tests/gpu/emu/*.h tools/hmm-train/gpu_kern.cu kernels/core/cuda/*.cu
      kernels/core/cuda/*.cuh kernels/core/cuda/*.h $B/lib/libhmmtrain.a $B/lib/libhk.a"
# shellcheck disable=SC2086
if [ ! -x "$out/test_kern_emu" ] || [ -n "$(find $deps -newer "$out/test_kern_emu" 2>/dev/null)" ]; then
	# shellcheck disable=SC2086
	if ! "$CXX" -std=c++17 -O2 -g -Wall -Werror -fno-strict-aliasing \
		-Wno-unused-function -Itests/gpu/emu -Ikernels/core -Itests \
		-Itools/hmm-train -Iinclude -o "$out/test_kern_emu" "$src" \
		"$B/lib/libhmmtrain.a" "$B/lib/libhk.a" -lpthread -lm \
		>"$out/build.log" 2>&1; then
		sed 's/^/# /' "$out/build.log" | head -20
		echo "not ok 1 - test_kern_emu builds with $CXX"
		echo "1..1"
		exit 1
	fi
fi
exec "$out/test_kern_emu"
