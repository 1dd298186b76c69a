/* SPDX-License-Identifier: MIT */
/*
 * table.h — the store's on-disk format: superblock slots and the table.
 *
 *   offset 0      superblock slot 0 (4 KiB)
 *   offset 4096   superblock slot 1 (4 KiB)
 *   table_off[0]  table area 0 (table_cap bytes)
 *   table_off[1]  table area 1
 *   data_off      data area (data_bytes, in block_size blocks)
 *
 * Superblock slot i names table area i.  A superblock is the struct
 * below, little-endian, magic "HMMSTORE" then version (1), with a crc32c
 * over its first 124 bytes at byte 124.  The table is nextents entries
 * of 24 bytes (key u64, first block u64, length u32, crc32c u32; sorted
 * by key) followed by the meta blob; its crc32c is in the superblock.
 * Bytes 112-123 name the striped store a member belongs to (set uuid
 * u64, member index u16, member count u16; zero in a plain store).
 * The live superblock is the valid one with the highest generation
 * whose table's crc also matches.
 *
 * Pure functions, any thread.
 */
#ifndef HMM_TABLE_H
#define HMM_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "xmap.h"

#define HMM_SB_MAGIC	"HMMSTORE"
#define HMM_SB_VERSION	1
#define HMM_SB_BYTES	4096	/* one slot */
#define HMM_SB_USED	128	/* encoded bytes in a slot */
#define HMM_TENT_BYTES	24	/* one table entry */

struct hmm_sb {
	uint64_t generation;
	uint64_t store_bytes;	/* whole file or device */
	uint64_t data_off, data_bytes;
	uint64_t table_off[2], table_cap;
	uint32_t block_size, max_extents, meta_cap, slot;
	uint64_t nextents;
	uint32_t meta_len, table_crc;
	uint64_t uuid;		/* the same in both slots; chosen at format */
	/* a member of a striped store (stripe.h); all 0 in a plain one */
	uint64_t set_uuid;	/* the same in every member of the set */
	uint16_t set_index, set_count;	/* this member's place; members */
};

/*
 * Lay out a store of size bytes: block_size a power of two >= 4096;
 * max_extents 0 = one per block (at most 1 << 22); meta_cap bytes of
 * meta blob.  0, -EINVAL on a bad argument, -ENOSPC when size cannot
 * hold the superblocks, two tables and one block (*need says how much
 * would).
 */
int hmm_sb_layout(uint64_t size, uint32_t block_size, uint32_t max_extents,
		  uint32_t meta_cap, struct hmm_sb *sb, uint64_t *need);

/*
 * Sizing by extents.  A store laid out for E extents of up to extent
 * bytes (a multiple of block_size) has tables of
 *	T(E) = up(24 E + meta_cap, 4096)
 * bytes each and a data area of E + k(E) extents, k(E) = E/16 within
 * [8, 64] (HMM_SB_SLACK; the slack
 * holds the new copies of extents rewritten while their old place is
 * still in use), so its size is
 *	hmm_sb_size_for(E) = up(8192 + 2 T(E), block_size)
 *	                     + (E + k(E)) extent.
 * hmm_sb_extents_fit(size) is the largest E whose size_for fits in size
 * (0 when not even one does): the table capacity a store of size bytes
 * gets when its extent size is known.  0 on a bad argument.
 */
/* the slack: E / 16 extents, at least 8 and at most 64 */
#define HMM_SB_SLACK(e)	((e) / 16 < 8 ? 8u : (e) / 16 > 64 ? 64u : (uint32_t)((e) / 16))
uint64_t hmm_sb_size_for(uint64_t extents, uint32_t block_size,
			 uint32_t extent, uint32_t meta_cap);
uint32_t hmm_sb_extents_fit(uint64_t size, uint32_t block_size,
			    uint32_t extent, uint32_t meta_cap);

void hmm_sb_encode(const struct hmm_sb *sb, void *slot);
/* 0; -ENODATA: no magic (never formatted, or not a store); -EBADMSG: crc
 * or geometry wrong; -EPROTONOSUPPORT: another version.  why (may be
 * NULL) gets what was wrong: "magic", "crc", "version" or the field
 * (hmm_sb's name) that no store of file_bytes can have; NULL on 0. */
int hmm_sb_decode(const void *slot, uint64_t file_bytes, struct hmm_sb *sb,
		  const char **why);

/* Bytes of a table with n entries and a meta blob of meta_len. */
uint64_t hmm_table_bytes(uint64_t n, uint32_t meta_len);

/* Encode sorted entries and meta into buf; returns the crc32c of the
 * hmm_table_bytes() bytes written. */
uint32_t hmm_table_encode(void *buf, const struct hmm_xent *e, size_t n,
			  const void *meta, uint32_t meta_len);
void hmm_table_entry(const void *buf, size_t i, struct hmm_xent *e);

#endif /* HMM_TABLE_H */
