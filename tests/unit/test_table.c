// SPDX-License-Identifier: MIT
/* test_table — the on-disk format: layout arithmetic, superblock encode /
 * decode round trip, little-endian bytes at fixed offsets, crc, version
 * and geometry checks, and the table's entries and meta blob. */
#include "t.h"
#include "crc32c.h"
#include "table.h"

int main(void)
{
	struct hmm_sb sb, back;
	static uint8_t slot[HMM_SB_BYTES], tab[4096];
	struct hmm_xent e[3] = {
		{ .key = 1, .blk = 0, .len = 4096, .crc = 0x11111111 },
		{ .key = 7, .blk = 5, .len = 8192, .crc = 0x22222222 },
		{ .key = ~0ull, .blk = 9, .len = 4096, .crc = 0x33333333 },
	}, x;
	uint64_t need;
	uint32_t crc;

	t_eq(hmm_sb_layout(64 << 20, 5000, 0, 4096, &sb, &need), -EINVAL,
	     "block size 5000 refused");
	t_eq(hmm_sb_layout(16384, 4096, 0, 1 << 20, &sb, &need), -ENOSPC,
	     "16 KiB is too small");
	t_ok(need > 2 << 20, "and says how much is needed (%llu)",
	     (unsigned long long)need);
	t_eq(hmm_sb_layout(64 << 20, 1 << 20, 100, 4096, &sb, &need), 0,
	     "layout 64 MiB, 1 MiB blocks, 100 extents");
	t_eq(sb.table_off[0], 8192, "table 0 after the two slots");
	t_eq(sb.table_cap, 4096 * 2, "table area: 100*24 + 4096 rounded to 4 KiB");
	t_eq(sb.data_off % (1 << 20), 0, "data area aligned to a block");
	t_eq(sb.data_bytes, 63 << 20, "63 blocks of data");
	t_ok(sb.data_off + sb.data_bytes <= 64 << 20, "fits in the file");

	/* sizing by extents: the formula and its inverse agree */
	t_eq(hmm_sb_size_for(3, 4096, 6000, 0), 0, "an extent not a whole "
	     "number of blocks is refused");
	t_eq(hmm_sb_size_for(1000, 4096, 2 << 20, 1 << 20),
	     8192 + 2 * (24000 + (1 << 20) + 4096 - (24000 + (1 << 20)) % 4096)
	     + 1062ull * (2 << 20), "size for 1000 2 MiB extents: 8 KiB + 2 "
	     "tables + 1062 extents (the slack: 1000 / 16)");
	for (uint64_t n = 1; n <= 5000; n = n * 3 + 1) {
		uint64_t sz = hmm_sb_size_for(n, 4096, 64 << 10, 1 << 20);

		t_eq(hmm_sb_extents_fit(sz, 4096, 64 << 10, 1 << 20), n,
		     "%llu bytes hold %llu extents", (unsigned long long)sz,
		     (unsigned long long)n);
		t_eq(hmm_sb_extents_fit(sz - 1, 4096, 64 << 10, 1 << 20), n - 1,
		     "one byte less holds one fewer");
	}
	t_eq(hmm_sb_extents_fit(1 << 20, 4096, 2 << 20, 0), 0, "1 MiB holds no "
	     "2 MiB extent and its slack");

	sb.generation = 0x0102030405060708ull;
	sb.slot = 1;
	sb.nextents = 3;
	sb.meta_len = 5;
	sb.uuid = 42;
	crc = hmm_table_encode(tab, e, 3, "hello", 5);
	sb.table_crc = crc;
	hmm_sb_encode(&sb, slot);
	t_ok(!memcmp(slot, "HMMSTORE", 8), "magic at 0");
	t_eq(slot[8], HMM_SB_VERSION, "version at 8, little-endian");
	t_eq(slot[16], 0x08, "generation at 16, little-endian (low byte)");
	t_eq(slot[23], 0x01, "generation high byte at 23");
	t_eq(hmm_sb_decode(slot, 64 << 20, &back, NULL), 0, "decode");
	t_ok(!memcmp(&sb, &back, sizeof(sb)), "round trip is exact");
	t_eq(hmm_crc32c(0, tab, hmm_table_bytes(3, 5)), crc, "table crc");
	hmm_table_entry(tab, 2, &x);
	t_ok(x.key == ~0ull && x.blk == 9 && x.len == 4096 &&
	     x.crc == 0x33333333, "entry 2 decodes");
	t_ok(!memcmp(tab + 3 * HMM_TENT_BYTES, "hello", 5), "meta after entries");

	t_eq(hmm_sb_decode(slot, (64 << 20) - 4096, &back, NULL), -EBADMSG,
	     "a file shorter than the data area");
	slot[40] ^= 1;
	t_eq(hmm_sb_decode(slot, 64 << 20, &back, NULL), -EBADMSG, "a flipped bit");
	slot[40] ^= 1;
	slot[8] = 2;
	hmm_sb_encode(&sb, slot);
	slot[8] = 2;	/* re-crc by hand with version 2 */
	{
		uint32_t c = hmm_crc32c(0, slot, 124);

		memcpy(slot + 124, &c, 4);
	}
	t_eq(hmm_sb_decode(slot, 64 << 20, &back, NULL), -EPROTONOSUPPORT,
	     "another version");
	memset(slot, 0, sizeof(slot));
	t_eq(hmm_sb_decode(slot, 64 << 20, &back, NULL), -ENODATA, "zeros: no store");
	sb.nextents = sb.max_extents + 1;
	hmm_sb_encode(&sb, slot);
	t_eq(hmm_sb_decode(slot, 64 << 20, &back, NULL), -EBADMSG,
	     "more extents than the table holds");
	return t_done();
}
