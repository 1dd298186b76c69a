// SPDX-License-Identifier: MIT
/*
 * recycle.c — host pages handed from a dropped chunk to the next chunk
 * read in, instead of freed and faulted in anew (chunk.h).
 *
 * Dropping a chunk frees its pages, and the chunk read in its place
 * faults in fresh ones, which the kernel zeroes first: 2 MiB cleared for
 * every 2 MiB read, on the I/O thread (inside io_uring_enter, which pins
 * the pages).  A profile of hmm-bench offload put that clearing at 10.8%
 * of the process's samples, above the crc32c and the AdamW kernel
 * together.  Two ways keep the pages instead; both move them with
 * mremap(MREMAP_DONTUNMAP) (a page-table move, no copy: a whole huge
 * page is one entry) and leave the source range empty, as MADV_DONTNEED
 * would.  Anonymous host ranges only (a memfd's pages belong to its
 * offsets); any refusal (an old kernel, the map count limit) falls back
 * to the plain drop and fault.
 *
 *  - The victim's pages (hmm_recycle_victim): when a chunk about to be
 *    filled needs room and the policy's victim is clean and as large,
 *    the victim's pages go straight to it.
 *  - Spare slots (hmm_spare_*): a chunk dropped while no reclaimer is
 *    making room (an eviction the trainer asked for, or a write-back's
 *    end: hk_offload's pipeline evicts each piece behind it, so the
 *    first way rarely applies there) parks its pages in a slot of the
 *    context's spare range, and the next chunk filled by a copy takes
 *    them.  Parked pages stay counted in the host budget's "used" and
 *    peak (they are the process's memory); hmm_stats reports them as
 *    host_spare, apart from the chunks' "resident".  The spares are the
 *    first reclaimer (hmm_spare_reclaimer): any admission that needs
 *    room frees them before anything is evicted.
 *
 * Only chunks filled by a copy (store read, device-to-host copy, or a
 * never-written chunk's memset) take recycled pages: every byte is
 * overwritten before anyone can read it.  A DISCARD map gets fresh zeroed
 * pages as before, so a range a caller maps DISCARD and writes only in
 * part never shows another chunk's bytes.
 *
 * Each move splits the chunks' ranges out of their tensors' VMAs (moved
 * pages keep their own offsets: the pieces never merge back), so a
 * process could run into vm.max_map_count (65530) and then fail its
 * other mmaps.  The chunks split so far, process-wide, are counted
 * (own_vma); past SPLIT_MAX (each adds at most two VMAs) only chunks
 * already split recycle.  Freeing a tensor gives its split chunks back
 * (hmm_chunk_forget_vmas).  The spare range adds one VMA per slot.
 *
 * HMM_SPARE=0 in the environment parks nothing (the victim handoff
 * stays), so one build can be measured both ways.
 *
 * Everything here runs with h->lock held.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "budget.h"
#include "chunk.h"

#define SPLIT_MAX	16384
static unsigned long split_count;	/* __atomic, every context */

/*
 * Spare slots: as many chunks as fit a quarter of the host budget, or
 * SPARE_BYTES if that is more, at least 2, at most SPARE_SLOTS.
 * hmm-bench offload --n 16M (64 MiB budget) parked 139 chunks of 2 MiB
 * against 117 plain drops with 16 slots, 159 against 97 with 64: the
 * budget's room, not the slots, bounds it there.  With a 1 GiB budget
 * and 64 reads in flight, 16 slots were too few: write-backs end in
 * bursts, and a 64M-parameter step (6 steps and the fill) parked 1782
 * chunks of the 3072 it read; 128 slots parked 3071, and the process's
 * system time fell from 2.4-2.7 s to 1.0-1.6 s.
 */
#define SPARE_BYTES	(32ull << 20)
#define SPARE_SLOTS	1024
#define HUGE_BYTES	(2ull << 20)

static void *chunk_host(struct hmm_chunk *c)
{
	return c->t->host + hmm_chunk_off(c);
}

void hmm_chunk_forget_vmas(struct hmm_tensor *t)
{
	unsigned long n = 0;
	uint32_t i;

	for (i = 0; i < t->nchunks; i++) {
		n += t->chunks[i].own_vma;
		t->chunks[i].own_vma = 0;
	}
	if (n)
		__atomic_sub_fetch(&split_count, n, __ATOMIC_RELAXED);
}

/* Room in the split count for a and b (b may be NULL)?  Takes it. */
static int split_take(struct hmm_chunk *a, struct hmm_chunk *b)
{
	unsigned long add = !a->own_vma + (b && !b->own_vma);

	if (!add)
		return 1;
	if (__atomic_add_fetch(&split_count, add, __ATOMIC_RELAXED) <=
	    SPLIT_MAX)
		return 1;
	__atomic_sub_fetch(&split_count, add, __ATOMIC_RELAXED);
	return 0;
}

/* Move len bytes of pages from src to dst (both mapped); 0 when moved,
 * else the split count taken for a and b is given back. */
static int move_pages(void *src, void *dst, uint64_t len,
		      struct hmm_chunk *a, struct hmm_chunk *b)
{
	void *p;

	if (!split_take(a, b))
		return -1;
	p = mremap(src, len, len, MREMAP_MAYMOVE | MREMAP_FIXED |
		   MREMAP_DONTUNMAP, dst);
	if (p == dst) {
		a->own_vma = 1;
		if (b)
			b->own_vma = 1;
		return 0;
	}
	__atomic_sub_fetch(&split_count, !a->own_vma + (b && !b->own_vma),
			   __ATOMIC_RELAXED);
	return -1;
}

int hmm_recycle_victim(struct hmm *h, struct hmm_chunk *c, uint64_t limit)
{
	struct hmm_tier *T = &h->tier[HMM_TIER_HOST];
	uint64_t cost = hmm_chunk_cost(c, HMM_TIER_HOST);
	struct hmm_chunk *v;

	if (c->t->host_fd >= 0 || T->used - T->pending_free + cost <= T->cap)
		return 0;	/* a memfd, or room without an eviction */
	v = hmm_policy_victim(h, HMM_TIER_HOST, limit);
	if (!v || v->alloc != c->alloc || v->t->host_fd >= 0 ||
	    !(v->zero || (v->valid & ~TB(HMM_TIER_HOST))))
		return 0;	/* none, another size, or dirty */
	if (move_pages(chunk_host(v), chunk_host(c), c->alloc, c, v))
		return 0;
	hmm_chunk_forget(h, v, HMM_TIER_HOST, "recycle host");
	return 1;
}

/* ---- spare slots --------------------------------------------------------- */

static char *spare_slot(struct hmm *h, unsigned i)
{
	return h->spare.base + (uint64_t)i * h->chunk_bytes;
}

/* The spare range, made at the first park: 2 MiB-aligned (a huge page
 * moves as one entry only between aligned addresses), no access. */
static int spare_reserve(struct hmm *h)
{
	uint64_t cap = h->tier[HMM_TIER_HOST].cap / 4;
	uint64_t n = (cap > SPARE_BYTES ? cap : SPARE_BYTES) / h->chunk_bytes;
	const char *env = getenv("HMM_SPARE");
	uint64_t len;
	char *p;

	if (h->spare.base)
		return 0;
	if (h->spare.failed)
		return -1;
	if (env && !strcmp(env, "0")) {
		h->spare.failed = 1;	/* off: to measure against */
		return -1;
	}
	n = n < 2 ? 2 : n > SPARE_SLOTS ? SPARE_SLOTS : n;
	len = n * h->chunk_bytes + HUGE_BYTES;
	p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
		 MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		h->spare.failed = 1;
		return -1;
	}
	h->spare.map = p;
	h->spare.map_len = len;
	h->spare.base = (char *)(((uintptr_t)p + HUGE_BYTES - 1) &
				 ~(uintptr_t)(HUGE_BYTES - 1));
	h->spare.cap = (unsigned)n;
	return 0;
}

/*
 * Park c's pages, unless a reclaimer is dropping c to make room (then
 * the room must come now).  A full budget, or maps waiting for room, do
 * not stop it: parking leaves "used" as it was, a fill that waits takes
 * the slot (chunk.c tries that before asking for room) and any other
 * admission frees it first of all.  With the drops of a full budget
 * freed instead, as before, hmm-bench offload at 16M parameters (64 MiB
 * budget, 64 I/Os in flight) faulted in about 600 more fresh huge pages
 * over its run (1724-1808 against 1118-1211 in all, fio's and the
 * setup's included), each zeroed inside io_uring_enter on the I/O
 * thread.
 */
int hmm_spare_put(struct hmm *h, struct hmm_chunk *c)
{
	if (c->t->host_fd >= 0 || c->alloc != h->chunk_bytes ||
	    h->in_reclaim || spare_reserve(h) || h->spare.n == h->spare.cap)
		return 0;	/* a memfd, a short chunk, room wanted, full */
	if (move_pages(chunk_host(c), spare_slot(h, h->spare.n), c->alloc,
		       c, NULL))
		return 0;
	h->spare.n++;
	h->spare.parked++;
	return 1;
}

int hmm_spare_get(struct hmm *h, struct hmm_chunk *c)
{
	if (!h->spare.n || c->t->host_fd >= 0 || c->alloc != h->chunk_bytes)
		return 0;
	if (move_pages(spare_slot(h, h->spare.n - 1), chunk_host(c), c->alloc,
		       c, NULL))
		return 0;
	h->spare.n--;
	h->spare.reused++;
	return 1;
}

uint64_t hmm_spare_bytes(const struct hmm *h)
{
	return h->spare.n * HMM_ROUND_UP((uint64_t)h->chunk_bytes, HMM_PAGE);
}

/* Free every parked page (hmm_close, or the reclaimer wants them all). */
static uint64_t spare_free(struct hmm *h, uint64_t bytes)
{
	uint64_t freed = 0;

	while (h->spare.n && freed < bytes) {
		h->spare.n--;
		madvise(spare_slot(h, h->spare.n), h->chunk_bytes,
			MADV_DONTNEED);
		freed += HMM_ROUND_UP((uint64_t)h->chunk_bytes, HMM_PAGE);
	}
	if (freed)
		hmm_budget_give(h, HMM_TIER_HOST, freed);
	return freed;
}

void hmm_spare_fini(struct hmm *h)
{
	spare_free(h, UINT64_MAX);
	if (h->spare.map)
		munmap(h->spare.map, h->spare.map_len);
	h->spare.map = h->spare.base = NULL;
}

/* The spares as a reclaimer (budget.h), registered first: parked pages
 * are freed before anything resident is evicted. */
static int spare_reclaim(struct hmm *h, int tier, uint64_t bytes,
			 uint64_t limit)
{
	(void)limit;
	if (tier != HMM_TIER_HOST || !spare_free(h, bytes))
		return HMM_NOTHING;
	return HMM_READY;
}

const struct hmm_reclaimer hmm_spare_reclaimer = {
	.name = "spare",
	.reclaim = spare_reclaim,
};
