#!/bin/sh
# SPDX-License-Identifier: MIT
#
# tests/gpu/emu/build.sh WHAT — builds, when stale, with the C++ compiler
# ($CXX, g++) into $B/tests/gpu-emu (B: $HMM_BUILD, else build):
#	test_kern_emu		the kernels against their CPU references
#	libkernels_emu.so	the kernels for the fake driver
#				(FAKECUDA_KERNELS, tests/fakecuda/launch.c)
# and prints the path.  Exit 77 (with why on stderr) without a C++
# compiler or the archives test_kern_emu links; 1 when the build fails
# (its log on stderr).  Run from the repository root.
set -u
B=${HMM_BUILD:-${B:-build}}
CXX=${CXX:-g++}
out=$B/tests/gpu-emu
command -v "$CXX" >/dev/null 2>&1 || { echo "no C++ compiler ($CXX)" >&2; exit 77; }
# -Wno-unknown-pragmas: nvcc's #pragma unroll (adamw.cu); g++ 12 cannot
# be told to ignore it from cuda_emu.h
flags="-std=c++17 -O2 -g -Wall -Werror -fno-strict-aliasing -Wno-unused-function
       -Wno-unknown-pragmas
       -Itests/gpu/emu -Ikernels/core -Itests -Itools/hmm-train -Iinclude"
deps="tests/gpu/*.h tests/gpu/emu/*.h tests/gpu/emu/*.cpp
      tools/hmm-train/gpu_kern.cu tools/hmm-bench/uvm_sweep.cu
      kernels/core/cuda/*.cu kernels/core/cuda/*.cuh kernels/core/cuda/*.h"
case ${1:-} in
test_kern_emu)
	libs="$B/lib/libhmmtrain.a $B/lib/libhk.a"
	for a in $libs; do
		[ -f "$a" ] || { echo "$a not built" >&2; exit 77; }
	done
	deps="$deps $libs"
	# shellcheck disable=SC2086
	set -- tests/gpu/emu/test_kern_emu.cpp $libs -lpthread -lm ;;
libkernels_emu.so)
	flags="$flags -fPIC -shared"
	set -- tests/gpu/emu/kernels_emu.cpp ;;
*)
	echo "usage: $0 test_kern_emu | libkernels_emu.so" >&2
	exit 2 ;;
esac
mkdir -p "$out"
case $1 in *test_kern_emu.cpp) bin=$out/test_kern_emu ;; *) bin=$out/libkernels_emu.so ;; esac
# shellcheck disable=SC2086
if [ ! -e "$bin" ] || [ -n "$(find $deps -newer "$bin" 2>/dev/null)" ]; then
	# shellcheck disable=SC2086
	if ! "$CXX" $flags -o "$bin" "$@" >"$out/build.log" 2>&1; then
		cat "$out/build.log" >&2
		exit 1
	fi
fi
echo "$bin"
