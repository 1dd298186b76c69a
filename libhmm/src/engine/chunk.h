/* SPDX-License-Identifier: MIT */
/*
 * chunk.h — tensors, chunks and the chunk state machine.
 *
 * A tensor owns one virtual range per mappable tier (host: anonymous
 * memory, or its own memfd with HMM_CONFIG_HOST_SHARED; device: the
 * backend's reservation), so that a mapped range is
 * contiguous and a tensor's address at a tier never changes.  Memory
 * behind a chunk is "resident" (counted in the tier's budget) or dropped
 * (MADV_DONTNEED / punched out of the memfd / depopulated).
 *
 * Chunk state, all under h->lock:
 *   res    tiers where the chunk has memory (DEVICE, HOST bits)
 *   valid  tiers holding the current contents (DEVICE, HOST, STORE bits)
 *   zero   never written: the contents are zeros, valid everywhere
 *   busy   one copy in flight (CH_IO_*); nobody touches the chunk's bytes
 *          at either end until it completes
 *   pins   per tier; a pinned chunk is never evicted from that tier
 * A chunk is dirty at tier X when X is its only valid tier (and !zero).
 * Transitions:
 *   map READ at X:   X resident, then valid at X (copy from the nearest
 *                    valid tier: store -> host -> device)
 *   map WRITE at X:  as READ, then valid = {X} (others stale)
 *   map DISCARD at X: X resident, valid = {X}, no copy
 *   evict from host: clean -> drop; dirty -> write to store, then drop
 *   evict from dev:  clean -> drop; dirty -> copy to host, then drop
 */
#ifndef HMM_CHUNK_H
#define HMM_CHUNK_H

#include "ctx.h"

#define TB(tier)	(1u << (tier))	/* tier bit */

/* chunk.busy */
#define CH_IO_NONE	0
#define CH_IO_READ	1	/* store -> host */
#define CH_IO_WRITE	2	/* host -> store */
#define CH_IO_H2D	3	/* host -> device */
#define CH_IO_D2H	4	/* device -> host */

/* Part of a tensor (t->chunks[], allocated with the tensor). */
struct hmm_chunk {
	struct hmm_tensor *t;
	uint32_t idx;
	uint32_t bytes;		/* payload (the last chunk may be short) */
	uint32_t alloc;		/* bytes rounded to 4 KiB: what budgets count */
	uint8_t res, valid, zero, busy;
	uint8_t want;		/* tiers a prefetch asked for */
	uint8_t evicting;	/* tier bits to drop when the copy is done */
	uint8_t prefetched;	/* brought by a prefetch, not mapped since */
	uint8_t nowb;		/* its copy down (write-back, or an
				   eviction's device-to-host) failed: not
				   a victim until written again or a flush
				   retries it */
	uint8_t dfail;		/* eviction device-to-host copies that
				   failed in a row (the first is retried) */
	int err;		/* last failed copy, for the next map */
	uint32_t gen;		/* bumped by every write (hmm_chunk_written) */
	uint32_t copy_gen;	/* gen when the copy in flight started: a
				   copy that raced a write makes nothing valid */
	uint32_t wpins;		/* write mappings: no prefetch copies out */
	uint32_t pins[2];	/* DEVICE, HOST */
	struct hmm_list lru[2];	/* on h->tier[X].lru while resident at X */
	struct hmm_list wlink;	/* on h->wantq while a prefetch waits */
	uint8_t stored;		/* the store holds an extent for it */
	uint8_t own_vma;	/* its host range was split into a VMA of
				   its own by page recycling (chunk.c) */
	uint32_t *pos;		/* schedule: positions in the record */
	uint32_t npos;
	struct hmm_ioreq req;	/* the store copy (one at a time) */
	double t0;		/* the current copy's start */
};

/* One hmm_map() not yet unmapped (on t->maps). */
struct hmm_mapping {
	struct hmm_list link;
	void *ptr;
	uint64_t off, len;
	int tier;
	unsigned access;
};

/* Allocated by hmm_tensor_new, freed by hmm_tensor_free / hmm_close. */
struct hmm_tensor {
	struct hmm *h;
	uint32_t id;		/* store key high half (hmm_tensor_by_id) */
	char name[64];
	uint32_t dtype;
	unsigned ndim;
	int64_t shape[HMM_MAX_DIMS];
	uint64_t bytes;
	uint64_t span;		/* bytes rounded up to 4 KiB */
	uint32_t nchunks;
	struct hmm_chunk *chunks;
	char *host;		/* host range (mmap; see tensor.c) */
	int host_fd;		/* its memfd (owned), -1 = anonymous */
	uint64_t dev;		/* device range (backend), 0 = none */
	struct hmm_list maps;	/* struct hmm_mapping, under h->lock */
	uint32_t inflight;	/* chunks busy */
	int async_err;		/* with h->async_by_tensor: its chunks'
				   first async error, h->lock */
	char async_detail[256];
	void *be_priv;		/* another backend's (backend.h): no
				   chunks, no host range here */
};

static inline uint64_t hmm_chunk_key(const struct hmm_chunk *c)
{
	return (uint64_t)c->t->id << 32 | c->idx;
}

/*
 * What c costs in tier's budget: its 4 KiB-rounded size, on the device
 * rounded to the backend's allocation granularity (2 MiB on CUDA), so
 * that a budget counts what is really allocated.
 */
static inline uint64_t hmm_chunk_cost(const struct hmm_chunk *c, int tier)
{
	uint64_t g = tier == HMM_TIER_DEVICE ? c->t->h->dev_gran : HMM_PAGE;

	return HMM_ROUND_UP((uint64_t)c->alloc, g);
}

static inline uint64_t hmm_chunk_off(const struct hmm_chunk *c)
{
	return (uint64_t)c->idx * c->t->h->chunk_bytes;
}

/* chunk.c, all with h->lock held. */
#define HMM_STEP_MAP		0	/* a map: may wait, evict anything */
#define HMM_STEP_PREFETCH	1	/* never waits for space */
int hmm_chunk_step(struct hmm *h, struct hmm_chunk *c, int tier,
		   unsigned access, int mode, uint64_t limit);
int hmm_chunk_evict(struct hmm *h, struct hmm_chunk *c, int tier);
void hmm_chunk_drop(struct hmm *h, struct hmm_chunk *c, int tier);
int hmm_chunk_evictable(struct hmm *h, struct hmm_chunk *c, int tier);
/* Bytes of unpinned chunks at tier that another call's copy holds. */
uint64_t hmm_chunk_busy_bytes(struct hmm *h, int tier);
void hmm_chunk_written(struct hmm *h, struct hmm_chunk *c, int tier);
int hmm_chunk_writeback(struct hmm *h, struct hmm_chunk *c);
void hmm_chunk_want(struct hmm *h, struct hmm_chunk *c, int tier);
/* Retry the prefetches waiting on h->wantq: whenever a copy ends or a
 * region's eviction gives room back (h->lock held). */
void hmm_chunk_want_retry(struct hmm *h);
/* c no longer has memory at tier (already released): the bookkeeping. */
void hmm_chunk_forget(struct hmm *h, struct hmm_chunk *c, int tier,
		      const char *what);

/* recycle.c, h->lock held: host pages passed from a dropped chunk to
 * the next one filled by a copy.  Each returns 1 when pages moved. */
int hmm_recycle_victim(struct hmm *h, struct hmm_chunk *c, uint64_t limit);
int hmm_spare_put(struct hmm *h, struct hmm_chunk *c);	/* c's to a slot */
int hmm_spare_get(struct hmm *h, struct hmm_chunk *c);	/* a slot's to c */
void hmm_spare_fini(struct hmm *h);
uint64_t hmm_spare_bytes(const struct hmm *h);	/* parked, in used */
extern const struct hmm_reclaimer hmm_spare_reclaimer;
/* t's host range is about to be unmapped: its split VMAs go with it. */
void hmm_chunk_forget_vmas(struct hmm_tensor *t);

#endif /* HMM_CHUNK_H */
