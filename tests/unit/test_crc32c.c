// SPDX-License-Identifier: MIT
/* test_crc32c — known vectors, vclmul == clmul == hw == soft on every
 * length and alignment, chaining, and the 3-stream and both folding
 * paths on long buffers (each path the CPU runs; the others fall back,
 * and the diag line says which ran). */
#include "t.h"
#include "crc32c.h"

static uint32_t bitwise(const uint8_t *p, size_t n)
{
	uint32_t c = ~0u;

	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
	}
	return ~c;
}

int main(void)
{
	static uint8_t buf[3 * 4096 * 5 + 123];
	uint8_t zeros[32] = { 0 }, ones[32];
	int bad_len = 0, bad_chain = 0;

	memset(ones, 0xff, sizeof(ones));
	t_eq(hmm_crc32c(0, "123456789", 9), 0xe3069283u, "check value");
	t_eq(hmm_crc32c_soft(0, "123456789", 9), 0xe3069283u, "soft check");
	t_eq(hmm_crc32c(0, zeros, 32), 0x8a9136aau, "RFC 3720 32 zeros");
	t_eq(hmm_crc32c(0, ones, 32), 0x62a8ab43u, "RFC 3720 32 ones");
	t_eq(hmm_crc32c(0, buf, 0), 0, "empty buffer");
	t_diag("path: %s", hmm_crc32c_path());
	__builtin_cpu_init();
	t_diag("paths run: soft%s%s%s",
	       __builtin_cpu_supports("sse4.2") ? " hw" : "",
	       __builtin_cpu_supports("sse4.2") &&
	       __builtin_cpu_supports("pclmul") ? " clmul" : "",
	       __builtin_cpu_supports("sse4.2") &&
	       __builtin_cpu_supports("pclmul") &&
	       __builtin_cpu_supports("avx512f") &&
	       __builtin_cpu_supports("vpclmulqdq") ? " vclmul" : "");

	t_fill(buf, sizeof(buf), 7);
	for (size_t off = 0; off < 9; off++) {
		size_t lens[] = { 0, 1, 7, 8, 63, 255, 256, 257, 319, 320,
				  511, 512, 513, 767, 768, 1000,
				  4096, 12287, 12288, 12289,
				  3 * 4096 * 4 + 5, sizeof(buf) - 9 };

		for (unsigned i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
			uint32_t ref = bitwise(buf + off, lens[i]);

			if (hmm_crc32c_hw(0, buf + off, lens[i]) != ref ||
			    hmm_crc32c_clmul(0, buf + off, lens[i]) != ref ||
			    hmm_crc32c_vclmul(0, buf + off, lens[i]) != ref ||
			    hmm_crc32c_vclmul(0x1234567u, buf + off, lens[i]) !=
			    hmm_crc32c_soft(0x1234567u, buf + off, lens[i]) ||
			    hmm_crc32c_clmul(0x1234567u, buf + off, lens[i]) !=
			    hmm_crc32c_soft(0x1234567u, buf + off, lens[i]) ||
			    hmm_crc32c_soft(0, buf + off, lens[i]) != ref ||
			    hmm_crc32c(0, buf + off, lens[i]) != ref)
				bad_len++;
		}
	}
	t_eq(bad_len, 0, "vclmul, clmul, hw, soft and bitwise agree on "
	     "lengths/alignments, from a zero and a nonzero crc");

	for (size_t cut = 0; cut < sizeof(buf); cut += 4093) {
		uint32_t a = hmm_crc32c(0, buf, cut);

		if (hmm_crc32c(a, buf + cut, sizeof(buf) - cut) !=
		    hmm_crc32c(0, buf, sizeof(buf)))
			bad_chain++;
	}
	t_eq(bad_chain, 0, "chained calls equal one call");

	buf[5000] ^= 1;
	t_ok(hmm_crc32c(0, buf, sizeof(buf)) != bitwise(buf, 0) &&
	     hmm_crc32c(0, buf, sizeof(buf)) == bitwise(buf, sizeof(buf)),
	     "a flipped bit changes the crc and both paths see it");
	return t_done();
}
