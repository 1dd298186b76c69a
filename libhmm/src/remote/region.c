// SPDX-License-Identifier: MIT
/*
 * region.c — shared mode's block backend for userfaultfd regions
 * (engine/region_int.h): evicted blocks go to a tensor in hmmd as large
 * as the region (r->back).  A write is a map(WRITE) of the block's range
 * + memcpy + unmap, a read UFFDIO_COPYs straight from a map(READ) of it
 * (hmmd's shared memory: no bounce copy).  Those are round trips, so
 * they run without h->lock: evictions chosen under the lock wait on
 * r->todo until the thread that needs the room (or advise, or free)
 * writes them (write_now).  hmmd gone: that region evicts no more, and
 * its faults that need hmmd or room get SIGBUS; hmmd short of room (this
 * client's quota full for hmmd's wait_ms, as its own tensor maps may
 * keep it) only fails that write or read, tried again later
 * (remote_gone, region_short).  In shared mode the host
 * budget (config.host_budget) counts this process's resident region
 * bytes; hmmd counts the tensor in this client's quota, and each block
 * map pins whole chunks of it: a quota too small for one is refused at
 * hmm_region_new (quota_check).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "region_int.h"
#include "remote.h"

static void remote_write(struct hmm_region *r, struct region_wb *wb)
{
	wb->next = r->todo;	/* hmm_region_drain writes it */
	r->todo = wb;
}

static int quota_check(struct hmm *h, struct hmm_region *r,
		       const struct hmm_proto_stats_reply *st);

/*
 * A block's map that hmmd refused with -EDQUOT: this client's quota was
 * full for hmmd's wait_ms (-EDQUOT: tried again later), unless it is now
 * below what one block's map pins (a QUOTA_SET since hmm_region_new):
 * then quota_check's -EINVAL, which ends the region's evictions.  Other
 * errors as they are.  No lock held.
 */
static int remote_map_err(struct hmm_region *r, int err)
{
	struct hmm_proto_stats_reply st;
	char detail[512];
	int q;

	if (err != -EDQUOT)
		return err;
	snprintf(detail, sizeof(detail), "%s", hmm_last_error());
	q = hmm_client_stats(hmm_remote_client(r->h), &st);
	if (!q)
		q = quota_check(r->h, r, &st);
	if (q == -EINVAL)
		return q;
	return hmm_err(err, "%s", detail);	/* hmmd's word on it */
}

/* The write itself: a round trip to hmmd and a copy (no lock held). */
static int remote_write_now(struct region_wb *wb)
{
	struct hmm_region *r = wb->r;
	void *dst;
	int err;

	err = hmm_remote_map(r->back, (uint64_t)wb->block * RBLOCK, RBLOCK,
			     HMM_TIER_HOST, HMM_WRITE, &dst);
	if (err)
		return remote_map_err(r, err);
	memcpy(dst, wb->staging, RBLOCK);
	return hmm_remote_unmap(r->back, dst);
}

static int remote_read(struct hmm_region *r, uint32_t b, void **src)
{
	int err = hmm_remote_map(r->back, (uint64_t)b * RBLOCK, RBLOCK,
				 HMM_TIER_HOST, HMM_READ, src);

	return err ? remote_map_err(r, err) : 0;
}

static void remote_read_end(struct hmm_region *r, void *src)
{
	hmm_remote_unmap(r->back, src);
}

static void remote_fini(struct hmm_region *r)
{
	hmm_remote_tensor_free(r->back);	/* frees it even on error */
	r->back = NULL;
}

/*
 * A failed map, write or read: hmmd is gone (the connection lost:
 * -EPIPE, -ECONNRESET, -ENOTCONN, -EPROTO, hmmd stopping: -ESHUTDOWN),
 * or refuses the block for good (-EINVAL above), unless it was short of
 * room for now: this client's quota or its budget full for its wait_ms
 * (-EDQUOT, -ENOMEM), or the call timed out.
 */
static int remote_gone(int err)
{
	return !region_short(err);
}

static const struct region_ops remote_ops = {
	.name = "hmmd", .gone = remote_gone, .write = remote_write,
	.write_now = remote_write_now, .read = remote_read,
	.read_end = remote_read_end, .fini = remote_fini,
};

/*
 * The host quota in hmmd one block's map pins at most: hmmd charges a
 * map whole chunks, and a block (at a multiple of RBLOCK) starts at most
 * chunk - g into a chunk, g the two sizes' greatest common divisor, so
 * it straddles a chunk boundary unless one size divides the other; never
 * more chunks than the region's tensor has.
 */
static uint64_t block_charge(uint64_t chunk, uint64_t bytes)
{
	uint64_t g = chunk, b = RBLOCK, n, total;

	while (b) {
		uint64_t t = g % b;

		g = b;
		b = t;
	}
	n = (chunk - g + RBLOCK - 1) / chunk + 1;
	total = (bytes + chunk - 1) / chunk;
	return (n < total ? n : total) * chunk;
}

/*
 * Each eviction of a block maps it in hmmd, pinning block_charge() of
 * this client's host quota there: a quota below that fails every
 * eviction (-EDQUOT, tried again for ever while an access waits for
 * room; once a QUOTA_SET makes it so, remote_map_err ends the region's
 * evictions: the next access that needs room gets SIGBUS).  Refuse such
 * a region now, naming
 * the sizes; a quota that only other maps fill waits for them.  The
 * quota is the one in force (st, STATS: the uid's, as hmmd's QUOTA_SET
 * left it), the chunk hmmd's.
 */
static int quota_check(struct hmm *h, struct hmm_region *r,
		       const struct hmm_proto_stats_reply *st)
{
	uint64_t chunk = hmm_client_chunk_bytes(hmm_remote_client(h));
	uint64_t need, quota;

	if (!chunk)
		return 0;	/* not said: hmmd charges what it will */
	quota = st->quota[HMM_TIER_HOST];
	need = block_charge(chunk, r->bytes);
	if (quota >= need)
		return 0;
	return hmm_err(-EINVAL, "region of %llu bytes: shared mode evicts its "
		       "%u-byte blocks through maps in hmmd, each pinning "
		       "%llu bytes of whole chunks (hmmd's chunk %llu "
		       "bytes), more than this client's host quota %llu "
		       "bytes there (%s config.host_budget %llu): raise it "
		       "to %llu at least", (unsigned long long)r->bytes,
		       RBLOCK, (unsigned long long)need,
		       (unsigned long long)chunk, (unsigned long long)quota,
		       quota < h->cfg.host_budget ? "hmmd's client_quota or "
		       "a quota set capped" : "asked as",
		       (unsigned long long)h->cfg.host_budget,
		       (unsigned long long)need);
}

/*
 * The region's tensor in hmmd, as large as the region.  First the checks
 * on one STATS: the region against hmmd's capacities (hmm_region_fits,
 * the bound hmmd's own tensor_new would put on that tensor, here before
 * this process allocates the block table, with the detail naming the
 * region), then the quota.
 */
int hmm_remote_region_back(struct hmm *h, struct hmm_region *r)
{
	struct hmm_proto_stats_reply st;
	struct hmm_remote_tensor *t;
	uint64_t cap[HMM_TIERS];
	char name[48];
	int64_t n = r->bytes;
	int err, i;

	err = hmm_client_stats(hmm_remote_client(h), &st);
	if (err)
		return err;
	for (i = 0; i < HMM_TIERS; i++)
		cap[i] = st.tier[i].capacity;
	err = hmm_region_fits(r, "hmmd", cap);
	if (!err)
		err = quota_check(h, r, &st);
	if (err)
		return err;
	snprintf(name, sizeof(name), "hmm-region.%d.%u", (int)getpid(),
		 r->id);
	err = hmm_remote_tensor_new(hmm_remote_client(h), name, HMM_DTYPE_U8,
				    1, &n, 0, &t);
	if (err)
		return err;
	r->back = t;
	r->ops = &remote_ops;
	return 0;
}
