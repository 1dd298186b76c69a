// SPDX-License-Identifier: MIT
/* size.c — hmm_size_parse(), the one parser of byte sizes in the tree,
 * and hmm_dtype_size().
 *
 * K, M, G, T are powers of 1024, and "KiB" says the same; "512B" is
 * bytes.  "KB", "MB", "GB", "TB" are refused rather than read as powers
 * of 1024: MB is 10^6 bytes wherever hmm prints it (MB/s), so a user
 * who wrote 8MB would silently get 8 MiB, which is not what was said. */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <strings.h>

#include "hmm.h"

int hmm_size_parse(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (!s || !out || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	switch (toupper((unsigned char)*end)) {
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	case 'T': shift = 40; end++; break;
	}
	if (shift && !strcasecmp(end, "iB"))
		end += 2;
	else if (!shift && !strcasecmp(end, "B"))
		end++;
	if (*end)
		return -EINVAL;
	if (v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

static const uint8_t dtype_size[] = {
	[HMM_DTYPE_F32] = 4, [HMM_DTYPE_F64] = 8, [HMM_DTYPE_F16] = 2,
	[HMM_DTYPE_BF16] = 2, [HMM_DTYPE_I8] = 1, [HMM_DTYPE_U8] = 1,
	[HMM_DTYPE_I32] = 4, [HMM_DTYPE_I64] = 8,
};

size_t hmm_dtype_size(uint32_t dtype)
{
	return dtype < sizeof(dtype_size) ? dtype_size[dtype] : 0;
}
