// SPDX-License-Identifier: MIT
/* table.c — superblock and table encoding (see table.h). */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "crc32c.h"
#include "table.h"

#define ALIGN	4096u

static uint64_t up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

/* Where the data area of a store of size bytes starts: after the two
 * superblocks and two tables of max_extents entries (0: one a block of
 * size, at most 1 << 22) and meta_cap bytes each.  *cap: a table's. */
static uint64_t data_start(uint64_t size, uint32_t block_size,
			   uint32_t max_extents, uint32_t meta_cap,
			   uint32_t *ext, uint64_t *cap)
{
	uint64_t head = 2 * HMM_SB_BYTES, blocks;

	if (!max_extents) {
		blocks = size > head ? (size - head) / block_size : 1;
		max_extents = blocks < 1 ? 1 : blocks > (1u << 22) ?
			      (1u << 22) : (uint32_t)blocks;
	}
	*ext = max_extents;
	*cap = up((uint64_t)max_extents * HMM_TENT_BYTES + meta_cap, ALIGN);
	return up(head + 2 * *cap, block_size);
}

int hmm_sb_layout(uint64_t size, uint32_t block_size, uint32_t max_extents,
		  uint32_t meta_cap, struct hmm_sb *sb, uint64_t *need)
{
	uint64_t head = 2 * HMM_SB_BYTES, cap;
	uint32_t ext;

	if (block_size < ALIGN || (block_size & (block_size - 1)) ||
	    block_size > (1u << 30))
		return -EINVAL;
	memset(sb, 0, sizeof(*sb));
	sb->data_off = data_start(size, block_size, max_extents, meta_cap,
				  &ext, &cap);
	*need = sb->data_off + block_size;
	if (size < *need) {
		/* the least size that holds one: a larger size has larger
		   tables when they go by blocks, so size's own need fell
		   short (1 MiB said 2125824; 2142208 is the least);
		   data_start only grows with size, so this is the least */
		uint64_t n = *need, c;
		uint32_t e;

		while ((c = data_start(n, block_size, max_extents, meta_cap,
				       &e, &cap) + block_size) > n)
			n = c;
		*need = n;
		return -ENOSPC;
	}
	sb->table_off[0] = head;
	sb->table_off[1] = head + cap;
	sb->table_cap = cap;
	sb->data_bytes = (size - sb->data_off) / block_size * block_size;
	sb->store_bytes = size;
	sb->block_size = block_size;
	sb->max_extents = ext;
	sb->meta_cap = meta_cap;
	return 0;
}

static int bad_geometry(uint32_t block_size, uint32_t extent)
{
	return block_size < ALIGN || (block_size & (block_size - 1)) ||
	       block_size > (1u << 30) || !extent || extent % block_size;
}

uint64_t hmm_sb_size_for(uint64_t extents, uint32_t block_size,
			 uint32_t extent, uint32_t meta_cap)
{
	uint64_t cap;

	if (bad_geometry(block_size, extent) || extents > UINT32_MAX)
		return 0;
	cap = up(extents * HMM_TENT_BYTES + meta_cap, ALIGN);
	return up(2 * HMM_SB_BYTES + 2 * cap, block_size) +
	       (extents + HMM_SB_SLACK(extents)) * extent;
}

uint32_t hmm_sb_extents_fit(uint64_t size, uint32_t block_size,
			    uint32_t extent, uint32_t meta_cap)
{
	uint64_t lo = 0, hi;

	if (bad_geometry(block_size, extent))
		return 0;
	hi = size / extent;
	if (hi > UINT32_MAX)
		hi = UINT32_MAX;
	/* size_for grows with E: the last E in [0, hi] that fits */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo + 1) / 2;

		if (hmm_sb_size_for(mid, block_size, extent, meta_cap) <= size)
			lo = mid;
		else
			hi = mid - 1;
	}
	return (uint32_t)lo;
}

#define PUT64(p, o, v) do { uint64_t t_ = htole64(v); memcpy((p) + (o), &t_, 8); } while (0)
#define PUT32(p, o, v) do { uint32_t t_ = htole32(v); memcpy((p) + (o), &t_, 4); } while (0)

static uint64_t get64(const uint8_t *p, size_t o)
{
	uint64_t v;

	memcpy(&v, p + o, 8);
	return le64toh(v);
}

static uint32_t get32(const uint8_t *p, size_t o)
{
	uint32_t v;

	memcpy(&v, p + o, 4);
	return le32toh(v);
}

void hmm_sb_encode(const struct hmm_sb *sb, void *slot)
{
	uint8_t *p = slot;

	memset(p, 0, HMM_SB_BYTES);
	memcpy(p, HMM_SB_MAGIC, 8);
	PUT32(p, 8, HMM_SB_VERSION);
	PUT32(p, 12, HMM_SB_USED);
	PUT64(p, 16, sb->generation);
	PUT64(p, 24, sb->store_bytes);
	PUT64(p, 32, sb->data_off);
	PUT64(p, 40, sb->data_bytes);
	PUT64(p, 48, sb->table_off[0]);
	PUT64(p, 56, sb->table_off[1]);
	PUT64(p, 64, sb->table_cap);
	PUT32(p, 72, sb->block_size);
	PUT32(p, 76, sb->max_extents);
	PUT32(p, 80, sb->meta_cap);
	PUT32(p, 84, sb->slot);
	PUT64(p, 88, sb->nextents);
	PUT32(p, 96, sb->meta_len);
	PUT32(p, 100, sb->table_crc);
	PUT64(p, 104, sb->uuid);
	PUT64(p, 112, sb->set_uuid);
	PUT32(p, 120, sb->set_index | (uint32_t)sb->set_count << 16);
	PUT32(p, 124, hmm_crc32c(0, p, 124));
}

/*
 * NULL when sb is a geometry hmm_sb_layout could have made for a file of
 * file_bytes, else the field that is not.  A crafted or rewritten slot
 * has a valid crc, so every field a reader or a later flush uses is
 * bounded here: table_cap by the file (the table areas' ends are sums
 * that wrap), the table by what a flush may write into it (max_extents
 * entries and meta_cap bytes of blob), the generation by its successor.
 */
static const char *sb_insane(const struct hmm_sb *sb, uint64_t file_bytes)
{
	uint64_t tend = sb->table_off[1] + sb->table_cap;

	if (sb->block_size < ALIGN || (sb->block_size & (sb->block_size - 1)) ||
	    sb->block_size > (1u << 30))
		return "block_size";
	if (sb->slot > 1)
		return "slot";
	if (sb->table_off[0] != 2 * HMM_SB_BYTES)
		return "table_off[0]";
	if (sb->table_cap % ALIGN || !sb->table_cap ||
	    sb->table_cap > file_bytes)
		return "table_cap";
	if (sb->table_off[1] != sb->table_off[0] + sb->table_cap)
		return "table_off[1]";
	if (sb->data_off < tend || sb->data_off % sb->block_size)
		return "data_off";
	if (sb->data_bytes % sb->block_size ||
	    sb->data_off + sb->data_bytes > file_bytes ||
	    sb->data_off + sb->data_bytes < sb->data_off)
		return "data_bytes";
	if (sb->set_count && (sb->set_index >= sb->set_count || !sb->set_uuid))
		return "set_index";
	if ((uint64_t)sb->max_extents * HMM_TENT_BYTES + sb->meta_cap >
	    sb->table_cap)
		return "max_extents";
	if (sb->nextents > sb->max_extents)
		return "nextents";
	if (sb->meta_len > sb->meta_cap)
		return "meta_len";
	if (hmm_table_bytes(sb->nextents, sb->meta_len) > sb->table_cap)
		return "nextents";
	if (sb->generation == UINT64_MAX)
		return "generation";	/* the next flush's would be 0 */
	return NULL;
}

int hmm_sb_decode(const void *slot, uint64_t file_bytes, struct hmm_sb *sb,
		  const char **why)
{
	const uint8_t *p = slot;
	const char *bad;

	if (why)
		*why = "magic";
	if (memcmp(p, HMM_SB_MAGIC, 8))
		return -ENODATA;
	if (why)
		*why = "crc";
	if (get32(p, 124) != hmm_crc32c(0, p, 124))
		return -EBADMSG;
	if (why)
		*why = "version";
	if (get32(p, 8) != HMM_SB_VERSION)
		return -EPROTONOSUPPORT;
	sb->generation = get64(p, 16);
	sb->store_bytes = get64(p, 24);
	sb->data_off = get64(p, 32);
	sb->data_bytes = get64(p, 40);
	sb->table_off[0] = get64(p, 48);
	sb->table_off[1] = get64(p, 56);
	sb->table_cap = get64(p, 64);
	sb->block_size = get32(p, 72);
	sb->max_extents = get32(p, 76);
	sb->meta_cap = get32(p, 80);
	sb->slot = get32(p, 84);
	sb->nextents = get64(p, 88);
	sb->meta_len = get32(p, 96);
	sb->table_crc = get32(p, 100);
	sb->uuid = get64(p, 104);
	sb->set_uuid = get64(p, 112);
	sb->set_index = (uint16_t)get32(p, 120);
	sb->set_count = (uint16_t)(get32(p, 120) >> 16);
	bad = sb_insane(sb, file_bytes);
	if (why)
		*why = bad;
	return bad ? -EBADMSG : 0;
}

uint64_t hmm_table_bytes(uint64_t n, uint32_t meta_len)
{
	return n * HMM_TENT_BYTES + meta_len;
}

uint32_t hmm_table_encode(void *buf, const struct hmm_xent *e, size_t n,
			  const void *meta, uint32_t meta_len)
{
	uint8_t *p = buf;

	for (size_t i = 0; i < n; i++, p += HMM_TENT_BYTES) {
		PUT64(p, 0, e[i].key);
		PUT64(p, 8, e[i].blk);
		PUT32(p, 16, e[i].len);
		PUT32(p, 20, e[i].crc);
	}
	if (meta_len)
		memcpy(p, meta, meta_len);
	return hmm_crc32c(0, buf, hmm_table_bytes(n, meta_len));
}

void hmm_table_entry(const void *buf, size_t i, struct hmm_xent *e)
{
	const uint8_t *p = (const uint8_t *)buf + i * HMM_TENT_BYTES;

	memset(e, 0, sizeof(*e));
	e->key = get64(p, 0);
	e->blk = get64(p, 8);
	e->len = get32(p, 16);
	e->crc = get32(p, 20);
}
