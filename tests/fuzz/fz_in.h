/* SPDX-License-Identifier: MIT */
/*
 * fz_in.h — a fuzz target's input read as a stream of bytes, missing
 * ones as zeros (header-only; fuzz_api, fuzz_store).
 */
#ifndef HMM_FZ_IN_H
#define HMM_FZ_IN_H

#include <stddef.h>
#include <stdint.h>

struct in {
	const uint8_t *p;
	size_t n;
};

static inline uint8_t u8(struct in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

/* bytes (at most 8) little-endian */
static inline uint64_t un(struct in *in, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes; i++)
		v |= (uint64_t)u8(in) << (8 * i);
	return v;
}

#endif /* HMM_FZ_IN_H */
