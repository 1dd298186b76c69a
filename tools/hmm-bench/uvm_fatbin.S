/* SPDX-License-Identifier: MIT */
/*
 * uvm_fatbin.S — uvm_sweep.cu's fatbin, embedded in hmm-bench as
 * hb_uvm_fatbin[] (hb_uvm_fatbin_end marks its end).  Assembled only
 * where nvcc built the fatbin (Makefile: HB_UVM_FATBIN is its path);
 * elsewhere the symbols stay undefined and uvm.c's weak references say
 * "built without nvcc".
 */
	.section .rodata
	.balign 16
	.globl hb_uvm_fatbin
	.globl hb_uvm_fatbin_end
hb_uvm_fatbin:
	.incbin HB_UVM_FATBIN
hb_uvm_fatbin_end:
	.section .note.GNU-stack,"",%progbits
