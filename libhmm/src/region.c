// SPDX-License-Identifier: MIT
/*
 * region.c — transparent regions: a plain pointer whose pages live in
 * host memory under the host budget and in the store beyond it.
 *
 * Backed by userfaultfd (MISSING mode) here; the kernel module (hmmk.ko,
 * through hmmd) will back the same three calls when it is loaded.  A
 * region is cut in 64 KiB blocks, each ABSENT (never touched: zeros),
 * RESIDENT (mapped, counted in the host budget), EVICTING (its pages
 * moved aside, being written to the store) or STORED.
 *
 *   fault:  the region's fault thread makes room in the host budget
 *           (evicting chunks or other blocks), then UFFDIO_ZEROPAGE for
 *           an ABSENT block or reads a STORED block from the store (via
 *           the I/O thread) and UFFDIO_COPY's it in.
 *   evict:  mremap(MREMAP_DONTUNMAP) moves the block's pages atomically
 *           to a staging mapping, leaving the range empty (an access now
 *           faults and waits for the write); the staging pages are
 *           written to the store and unmapped.  A failed write puts the
 *           pages back (UFFDIO_COPY) and keeps them resident.
 *
 * Locking: block states, the regions list and the clock hand are under
 * h->lock; the fault thread drops it around UFFDIO_* and store reads.
 * Struct hmm_region is allocated by hmm_region_new and freed by
 * hmm_region_free or hmm_close.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "chunk.h"
#include "err.h"

#define RBLOCK		(64u << 10)
#define RB_ABSENT	0
#define RB_RESIDENT	1
#define RB_EVICTING	2
#define RB_STORED	3
#define RB_FILLING	4	/* being copied in by the fault thread */

struct hmm_region {
	struct hmm_list link;	/* on h->regions */
	struct hmm *h;
	uint32_t id;
	char *base;
	uint64_t bytes;
	uint32_t nblocks;
	uint8_t *state;		/* per block, RB_* */
	uint32_t hand;		/* clock hand for reclaim */
	uint32_t evicting;	/* blocks in RB_EVICTING */
	int uffd, stopfd;
	pthread_t thr;
	void *bounce;		/* fault thread's read buffer */
};

/* An eviction's write, freed by its completion. */
struct region_wb {
	struct hmm_ioreq req;
	struct hmm_region *r;
	uint32_t block;
	void *staging;
};

static uint32_t region_ids;

static uint64_t block_key(struct hmm_region *r, uint32_t b)
{
	return (uint64_t)(0x80000000u | r->id) << 32 | b;
}

static char *block_addr(struct hmm_region *r, uint32_t b)
{
	return r->base + (uint64_t)b * RBLOCK;
}

/* ---- eviction ---------------------------------------------------------- */

static void region_wb_done(struct hmm_ioreq *q)
{
	struct region_wb *wb = hmm_container_of(q, struct region_wb, req);
	struct hmm_region *r = wb->r;
	struct hmm *h = r->h;
	int err = q->io.result;

	if (err) {
		struct uffdio_copy cp = {
			.dst = (uintptr_t)block_addr(r, wb->block),
			.src = (uintptr_t)wb->staging, .len = RBLOCK,
		};

		ioctl(r->uffd, UFFDIO_COPY, &cp);	/* put it back */
	}
	munmap(wb->staging, RBLOCK);
	pthread_mutex_lock(&h->lock);
	h->tier[HMM_TIER_HOST].pending_free -= RBLOCK;
	r->evicting--;
	if (err) {
		r->state[wb->block] = RB_RESIDENT;
		h->st.io_errors++;
		hmm_async_error(h, err, "region %u block %u: store write "
				"failed: %s", r->id, wb->block, strerror(-err));
	} else {
		r->state[wb->block] = RB_STORED;
		hmm_budget_give(h, HMM_TIER_HOST, RBLOCK);
		h->st.region_evictions++;
		h->tier[HMM_TIER_HOST].st.bytes_out += RBLOCK;
		h->tier[HMM_TIER_STORE].st.bytes_in += RBLOCK;
	}
	hmm_trace_event(h, "evict", "region write", "region", wb->block,
			RBLOCK, q->t0, hmm_now(), 4);
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
	free(wb);
}

/* Start evicting resident block b (h->lock held).  0 or -errno. */
static int region_evict_block(struct hmm *h, struct hmm_region *r,
			      uint32_t b)
{
	struct region_wb *wb = calloc(1, sizeof(*wb));
	void *p;

	if (!wb)
		return -ENOMEM;
	p = mremap(block_addr(r, b), RBLOCK, RBLOCK,
		   MREMAP_MAYMOVE | MREMAP_DONTUNMAP, NULL);
	if (p == MAP_FAILED) {
		free(wb);
		return -errno;
	}
	wb->r = r;
	wb->block = b;
	wb->staging = p;
	wb->req.h = h;
	wb->req.done = region_wb_done;
	wb->req.io.op = HMM_IO_WRITE;
	wb->req.io.len = RBLOCK;
	wb->req.io.key = block_key(r, b);
	wb->req.io.buf = p;
	r->state[b] = RB_EVICTING;
	r->evicting++;
	h->tier[HMM_TIER_HOST].pending_free += RBLOCK;
	hmm_iot_queue(h, &wb->req);
	return 0;
}

/*
 * The host budget needs bytes and no chunk can go: evict resident region
 * blocks, clock order over every region.  Returns the number started.
 */
int hmm_region_reclaim(struct hmm *h, uint64_t bytes)
{
	struct hmm_list *p;
	uint64_t got = 0;
	int n = 0;

	if (!h->store)
		return 0;
	for (p = h->regions.next; p != &h->regions && got < bytes;
	     p = p->next) {
		struct hmm_region *r = hmm_container_of(p, struct hmm_region,
							link);
		uint32_t i;

		for (i = 0; i < r->nblocks && got < bytes; i++) {
			uint32_t b = r->hand;

			r->hand = (r->hand + 1) % r->nblocks;
			if (r->state[b] != RB_RESIDENT)
				continue;
			if (region_evict_block(h, r, b) == 0) {
				got += RBLOCK;
				n++;
			}
		}
	}
	return n;
}

/* ---- faults ------------------------------------------------------------ */

/* Room for one block in the host budget (h->lock held; may wait). */
static void region_room(struct hmm *h)
{
	for (;;) {
		int r = hmm_budget_room(h, HMM_TIER_HOST, RBLOCK,
					HMM_NO_LIMIT);

		if (r == HMM_READY)
			return;
		if (r == HMM_STARVED && hmm_region_reclaim(h, RBLOCK) > 0)
			continue;
		pthread_cond_wait(&h->cond, &h->lock);
	}
}

static void region_fault(struct hmm_region *r, uint64_t addr)
{
	struct hmm *h = r->h;
	uint32_t b = (addr - (uintptr_t)r->base) / RBLOCK;
	double t0 = hmm_now();
	int stored, err = 0;

	pthread_mutex_lock(&h->lock);
	while (r->state[b] == RB_EVICTING)
		pthread_cond_wait(&h->cond, &h->lock);
	if (r->state[b] == RB_RESIDENT) {
		/* already there (a racing fault was served) */
		pthread_mutex_unlock(&h->lock);
		struct uffdio_range wr = { (uintptr_t)block_addr(r, b),
					   RBLOCK };
		ioctl(r->uffd, UFFDIO_WAKE, &wr);
		return;
	}
	region_room(h);
	hmm_budget_take(h, HMM_TIER_HOST, RBLOCK);
	stored = r->state[b] == RB_STORED;
	if (stored) {
		struct hmm_ioreq q;

		memset(&q, 0, sizeof(q));
		q.io.op = HMM_IO_READ;
		q.io.len = RBLOCK;
		q.io.key = block_key(r, b);
		q.io.buf = r->bounce;
		err = hmm_iot_sync(h, &q);
		if (!err) {
			h->tier[HMM_TIER_STORE].st.bytes_out += RBLOCK;
			h->tier[HMM_TIER_HOST].st.bytes_in += RBLOCK;
		}
	}
	r->state[b] = RB_FILLING;	/* not a reclaim victim yet */
	h->st.region_faults++;
	pthread_mutex_unlock(&h->lock);

	if (stored && !err) {
		struct uffdio_copy cp = {
			.dst = (uintptr_t)block_addr(r, b),
			.src = (uintptr_t)r->bounce, .len = RBLOCK,
		};
		ioctl(r->uffd, UFFDIO_COPY, &cp);
	} else {
		/* never written, or the read failed: zeros (and an error) */
		struct uffdio_zeropage zp = {
			.range = { (uintptr_t)block_addr(r, b), RBLOCK },
		};
		ioctl(r->uffd, UFFDIO_ZEROPAGE, &zp);
		if (err) {
			pthread_mutex_lock(&h->lock);
			h->st.io_errors++;
			hmm_async_error(h, err, "region %u block %u: store "
					"read failed: %s", r->id, b,
					strerror(-err));
			pthread_mutex_unlock(&h->lock);
		}
	}
	pthread_mutex_lock(&h->lock);
	r->state[b] = RB_RESIDENT;
	pthread_mutex_unlock(&h->lock);
	hmm_trace_event(h, "fault", stored ? "region fault (store)" :
			"region fault (zero)", "region", b, RBLOCK, t0,
			hmm_now(), 4);
}

static void *region_main(void *arg)
{
	struct hmm_region *r = arg;
	struct pollfd pf[2] = { { r->uffd, POLLIN, 0 },
				{ r->stopfd, POLLIN, 0 } };

	for (;;) {
		struct uffd_msg msg;
		ssize_t n;

		if (poll(pf, 2, -1) < 0 && errno != EINTR)
			return NULL;
		if (pf[1].revents)
			return NULL;
		n = read(r->uffd, &msg, sizeof(msg));
		if (n != sizeof(msg))
			continue;
		if (msg.event == UFFD_EVENT_PAGEFAULT)
			region_fault(r, msg.arg.pagefault.address);
	}
}

/* ---- the API ----------------------------------------------------------- */

static int region_uffd(struct hmm_region *r)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = {
		.range = { (uintptr_t)r->base, r->bytes },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};

	r->uffd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (r->uffd < 0)
		return hmm_err(-errno, "region: userfaultfd: %s (vm."
			       "unprivileged_userfaultfd?)", strerror(errno));
	if (ioctl(r->uffd, UFFDIO_API, &api) ||
	    ioctl(r->uffd, UFFDIO_REGISTER, &reg)) {
		int e = errno;

		close(r->uffd);
		return hmm_err(-e, "region: userfaultfd setup: %s",
			       strerror(e));
	}
	return 0;
}

int hmm_region_new(struct hmm *h, uint64_t bytes, void **ptr)
{
	struct hmm_region *r;
	int err;

	if (h && h->remote)
		return hmm_shared_no_regions("hmm_region_new");
	if (!h || !ptr || !bytes || bytes > (1ull << 46))
		return hmm_err(-EINVAL, "hmm_region_new: bytes %llu: must be "
			       "1..2^46 with a context and ptr",
			       (unsigned long long)bytes);
	if (!h->store)
		return hmm_err(-ENODEV, "hmm_region_new: no store tier to "
			       "evict to (config.store_path)");
	r = calloc(1, sizeof(*r));
	if (!r)
		return hmm_err(-ENOMEM, "hmm_region_new: no memory");
	r->h = h;
	r->bytes = HMM_ROUND_UP(bytes, RBLOCK);
	r->nblocks = r->bytes / RBLOCK;
	r->id = __atomic_fetch_add(&region_ids, 1, __ATOMIC_RELAXED) &
		0x7fffffff;
	err = -ENOMEM;
	r->state = calloc(r->nblocks, 1);
	if (!r->state || posix_memalign(&r->bounce, HMM_PAGE, RBLOCK))
		goto out_free;
	r->base = mmap(NULL, r->bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r->base == MAP_FAILED)
		goto out_free;
	err = region_uffd(r);
	if (err < 0)
		goto out_unmap;
	r->stopfd = eventfd(0, EFD_CLOEXEC);
	if (r->stopfd < 0) {
		err = -errno;
		goto out_uffd;
	}
	err = -pthread_create(&r->thr, NULL, region_main, r);
	if (err)
		goto out_stop;
	pthread_mutex_lock(&h->lock);
	hmm_list_add_tail(&h->regions, &r->link);
	pthread_mutex_unlock(&h->lock);
	*ptr = r->base;
	return 0;

out_stop:
	close(r->stopfd);
out_uffd:
	close(r->uffd);
out_unmap:
	munmap(r->base, r->bytes);
out_free:
	free(r->bounce);
	free(r->state);
	free(r);
	return hmm_err(err, "hmm_region_new: %llu bytes: %s",
		       (unsigned long long)bytes, strerror(-err));
}

/* The region holding [p, p + len) (h->lock held), or NULL. */
static struct hmm_region *region_find(struct hmm *h, const void *p,
				      uint64_t len)
{
	struct hmm_list *l;

	for (l = h->regions.next; l != &h->regions; l = l->next) {
		struct hmm_region *r = hmm_container_of(l, struct hmm_region,
							link);
		uintptr_t a = (uintptr_t)p, b = (uintptr_t)r->base;

		if (a >= b && a - b < r->bytes && len <= r->bytes - (a - b))
			return r;
	}
	return NULL;
}

int hmm_region_advise(struct hmm *h, void *ptr, uint64_t len, int advice)
{
	struct hmm_region *r;
	uint32_t b, first, last;

	if (h && h->remote)
		return hmm_shared_no_regions("hmm_region_advise");
	if (!h || !len)
		return hmm_err(-EINVAL, "hmm_region_advise: no context or "
			       "zero length");
	pthread_mutex_lock(&h->lock);
	r = region_find(h, ptr, len);
	if (!r || advice < HMM_ADVISE_WILLNEED || advice > HMM_ADVISE_NORMAL) {
		pthread_mutex_unlock(&h->lock);
		return hmm_err(-EINVAL, "hmm_region_advise: %p +%llu: %s", ptr,
			       (unsigned long long)len, r ? "unknown advice" :
			       "not inside one region");
	}
	first = ((char *)ptr - r->base) / RBLOCK;
	last = ((char *)ptr - r->base + len - 1) / RBLOCK;
	if (advice == HMM_ADVISE_COLD)
		for (b = first; b <= last; b++)
			if (r->state[b] == RB_RESIDENT)
				region_evict_block(h, r, b);
	pthread_mutex_unlock(&h->lock);
	if (advice == HMM_ADVISE_WILLNEED)
		for (b = first; b <= last; b++)
			(void)*(volatile char *)block_addr(r, b);
	return 0;
}

static void region_destroy(struct hmm *h, struct hmm_region *r)
{
	uint64_t eventv = 1;
	uint32_t b;

	if (write(r->stopfd, &eventv, sizeof(eventv)) != sizeof(eventv))
		return;
	pthread_join(r->thr, NULL);
	pthread_mutex_lock(&h->lock);
	while (r->evicting)
		pthread_cond_wait(&h->cond, &h->lock);
	hmm_list_del(&r->link);
	for (b = 0; b < r->nblocks; b++) {
		if (r->state[b] == RB_RESIDENT || r->state[b] == RB_FILLING)
			hmm_budget_give(h, HMM_TIER_HOST, RBLOCK);
		if (r->state[b] == RB_STORED && !h->io_stop) {
			struct hmm_ioreq q;

			memset(&q, 0, sizeof(q));
			q.io.op = HMM_IOREQ_FREE;
			q.io.key = block_key(r, b);
			hmm_iot_sync(h, &q);
		}
	}
	pthread_mutex_unlock(&h->lock);
	close(r->stopfd);
	close(r->uffd);
	munmap(r->base, r->bytes);
	free(r->bounce);
	free(r->state);
	free(r);
}

int hmm_region_free(struct hmm *h, void *ptr)
{
	struct hmm_region *r;

	if (h && h->remote)
		return hmm_shared_no_regions("hmm_region_free");
	if (!h)
		return hmm_err(-EINVAL, "hmm_region_free: no context");
	pthread_mutex_lock(&h->lock);
	r = region_find(h, ptr, 1);
	if (r && r->base != (char *)ptr)
		r = NULL;
	pthread_mutex_unlock(&h->lock);
	if (!r)
		return hmm_err(-EINVAL, "hmm_region_free: %p is not a region",
			       ptr);
	region_destroy(h, r);
	return 0;
}

void hmm_region_fini(struct hmm *h)
{
	while (!hmm_list_empty(&h->regions))
		region_destroy(h, hmm_container_of(h->regions.next,
						   struct hmm_region, link));
}
