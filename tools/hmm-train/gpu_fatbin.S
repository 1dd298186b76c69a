/* SPDX-License-Identifier: MIT */
/*
 * gpu_fatbin.S — gpu_kern.cu's fatbin, embedded in hmm-train as
 * ht_gpu_fatbin[] (ht_gpu_fatbin_end marks its end).  Assembled only
 * where nvcc built the fatbin (Makefile: HT_GPU_FATBIN is its path);
 * elsewhere the symbols stay undefined and gpu_lib.c's weak reference
 * says "built without nvcc".
 */
	.section .rodata
	.balign 16
	.globl ht_gpu_fatbin
	.globl ht_gpu_fatbin_end
ht_gpu_fatbin:
	.incbin HT_GPU_FATBIN
ht_gpu_fatbin_end:
	.section .note.GNU-stack,"",%progbits
