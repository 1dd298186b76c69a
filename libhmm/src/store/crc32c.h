/* SPDX-License-Identifier: MIT */
/*
 * crc32c.h — CRC-32C (Castagnoli), the checksum of every store extent.
 *
 * hmm_crc32c(0, buf, len) is the standard CRC-32C of buf (init and final
 * xor with ~0 included), so hmm_crc32c(0, "123456789", 9) == 0xe3069283.
 * Calls chain: hmm_crc32c(hmm_crc32c(0, a, n), b, m) == crc of a||b.
 *
 * Four paths: a slicing-by-8 table (soft); the SSE4.2 crc32 instruction
 * in three interleaved streams joined with a GF(2) shift (hw); folding
 * 64 bytes a step with PCLMULQDQ (clmul); folding 256 bytes a step with
 * AVX-512 VPCLMULQDQ (vclmul).  hmm_crc32c takes the one HMM_CRC32C
 * names (soft, hw, clmul or vclmul) where the CPU runs it, else the
 * fastest the CPU runs, timed once per process over 64 KiB (which is
 * fastest depends on the core, not on its flags: crc32c.c).  Any
 * thread, no lock.
 */
#ifndef HMM_CRC32C_H
#define HMM_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t hmm_crc32c(uint32_t crc, const void *buf, size_t len);

/* The four paths, for tests and benchmarks.  Each falls back to the
 * next when the CPU lacks what it needs: vclmul (AVX512F, VPCLMULQDQ)
 * to clmul (PCLMULQDQ, SSE4.2) to hw (SSE4.2) to soft. */
uint32_t hmm_crc32c_soft(uint32_t crc, const void *buf, size_t len);
uint32_t hmm_crc32c_hw(uint32_t crc, const void *buf, size_t len);
uint32_t hmm_crc32c_clmul(uint32_t crc, const void *buf, size_t len);
uint32_t hmm_crc32c_vclmul(uint32_t crc, const void *buf, size_t len);

/* The path hmm_crc32c takes: "vclmul", "clmul", "hw" or "soft". */
const char *hmm_crc32c_path(void);

#endif /* HMM_CRC32C_H */
