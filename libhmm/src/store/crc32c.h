/* SPDX-License-Identifier: MIT */
/*
 * crc32c.h — CRC-32C (Castagnoli), the checksum of every store extent.
 *
 * hmm_crc32c(0, buf, len) is the standard CRC-32C of buf (init and final
 * xor with ~0 included), so hmm_crc32c(0, "123456789", 9) == 0xe3069283.
 * Calls chain: hmm_crc32c(hmm_crc32c(0, a, n), b, m) == crc of a||b.
 *
 * The SSE4.2 crc32 instruction is used when the CPU has it (three
 * interleaved streams for long buffers, joined with a GF(2) shift),
 * otherwise a slicing-by-8 table.  HMM_CRC32C=soft forces the table path
 * (read once, at the first call).  Any thread, no lock.
 */
#ifndef HMM_CRC32C_H
#define HMM_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t hmm_crc32c(uint32_t crc, const void *buf, size_t len);

/* The two implementations, for tests and benchmarks.  hw returns the
 * soft result when the CPU lacks SSE4.2. */
uint32_t hmm_crc32c_soft(uint32_t crc, const void *buf, size_t len);
uint32_t hmm_crc32c_hw(uint32_t crc, const void *buf, size_t len);

/* 1 when hmm_crc32c uses the crc32 instruction. */
int hmm_crc32c_is_hw(void);

#endif /* HMM_CRC32C_H */
