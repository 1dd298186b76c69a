/* SPDX-License-Identifier: MIT */
/*
 * crc32c.h — CRC-32C (Castagnoli), the checksum of every store extent.
 *
 * hmm_crc32c(0, buf, len) is the standard CRC-32C of buf (init and final
 * xor with ~0 included), so hmm_crc32c(0, "123456789", 9) == 0xe3069283.
 * Calls chain: hmm_crc32c(hmm_crc32c(0, a, n), b, m) == crc of a||b.
 *
 * Long buffers are folded with PCLMULQDQ when the CPU has it (and
 * SSE4.2), else run through the SSE4.2 crc32 instruction (three
 * interleaved streams, joined with a GF(2) shift), else a slicing-by-8
 * table.  HMM_CRC32C=hw skips the folding, HMM_CRC32C=soft forces the
 * table (read once, at the first call).  Any thread, no lock.
 */
#ifndef HMM_CRC32C_H
#define HMM_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t hmm_crc32c(uint32_t crc, const void *buf, size_t len);

/* The three implementations, for tests and benchmarks.  Each falls
 * back to the next when the CPU lacks what it needs: clmul (PCLMULQDQ
 * and SSE4.2) to hw (SSE4.2) to soft. */
uint32_t hmm_crc32c_soft(uint32_t crc, const void *buf, size_t len);
uint32_t hmm_crc32c_hw(uint32_t crc, const void *buf, size_t len);
uint32_t hmm_crc32c_clmul(uint32_t crc, const void *buf, size_t len);

/* The path hmm_crc32c takes: "clmul", "hw" or "soft". */
const char *hmm_crc32c_path(void);

#endif /* HMM_CRC32C_H */
