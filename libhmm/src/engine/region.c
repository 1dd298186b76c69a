// SPDX-License-Identifier: MIT
/*
 * region.c — transparent regions: a plain pointer whose pages live in
 * host memory under the host budget and, beyond it, in a backing store.
 *
 * Backed by userfaultfd (MISSING mode) in this process, in both modes; in
 * shared mode with hmmk.ko loaded and hmmd attached to it, by the module
 * instead (region_hmmk.c).  A userfaultfd region is cut in 64 KiB blocks,
 * each ABSENT (never touched: zeros), RESIDENT (mapped, counted in the
 * host budget), EVICTING (its pages moved aside, being written out),
 * STORED, FILLING (being copied in) or BROKEN (its bytes are lost: an
 * access gets SIGBUS, never wrong bytes).
 *
 *   fault:  the region's fault thread makes room in the host budget
 *           (evicting chunks or other blocks), then UFFDIO_ZEROPAGE for
 *           an ABSENT block or UFFDIO_COPY from the backend's copy of a
 *           STORED one.
 *   evict:  mremap(MREMAP_DONTUNMAP) moves the block's pages atomically
 *           to a staging mapping, leaving the range empty (an access now
 *           faults and waits for the write); the backend writes the
 *           staging pages and they are unmapped.  A failed write puts the
 *           pages back (UFFDIO_COPY) and keeps them resident.
 *
 * Two backends hold the evicted blocks (struct region_ops):
 *   store:  embedded mode: extents of the context's store, written and
 *           read by the I/O thread.
 *   remote: shared mode: a tensor in hmmd as large as the region; a
 *           write is hmm_map(WRITE) of the block's range + memcpy +
 *           unmap, a read UFFDIO_COPYs straight from an hmm_map(READ)
 *           of it (hmmd's shared memory: no bounce copy).  Those are
 *           round trips, so they run without h->lock: evictions chosen
 *           under the lock wait on r->todo until the thread that needs
 *           the room (or advise, or free) writes them (region_drain).
 *           hmmd gone: that region evicts no more, and its faults that
 *           need hmmd or room get SIGBUS.
 * In shared mode the host budget (config.host_budget) counts this
 * process's resident region bytes; hmmd counts its tensors in its quota.
 *
 * Locking: block states, todo lists, the regions list and the clock hand
 * are under h->lock; the fault thread drops it around UFFDIO_* and the
 * backend's reads.  Struct hmm_region is allocated by hmm_region_new and
 * freed by hmm_region_free or hmm_close.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "chunk.h"
#include "client.h"
#include "err.h"
#include "region_int.h"

#define RB_ABSENT	0
#define RB_RESIDENT	1
#define RB_EVICTING	2
#define RB_STORED	3
#define RB_FILLING	4	/* being copied in by the fault thread */
#define RB_BROKEN	5	/* contents lost: mapped to SIGBUS */

struct region_wb;

/*
 * Where evicted blocks go.  write: start writing wb (h->lock held);
 * region_wb_done ends it.  read: a source for UFFDIO_COPY of stored
 * block b (no lock held), released by read_end.  fini: forget every
 * stored block (the region is off the list; no lock held).
 */
struct region_ops {
	void (*write)(struct hmm_region *r, struct region_wb *wb);
	int (*read)(struct hmm_region *r, uint32_t b, void **src);
	void (*read_end)(struct hmm_region *r, void *src);
	void (*fini)(struct hmm_region *r);
};

struct hmm_region {
	struct hmm_list link;	/* on h->regions */
	struct hmm *h;
	uint32_t id;
	char *base;
	uint64_t bytes;
	struct hmm_region_hmmk *mk;	/* module-backed: the rest is idle */
	const struct region_ops *ops;
	uint32_t nblocks;
	uint8_t *state;		/* per block, RB_* */
	uint32_t hand;		/* clock hand for reclaim */
	uint32_t evicting;	/* blocks in RB_EVICTING */
	int dead;		/* -errno: the remote backend is gone */
	int uffd, stopfd;
	int busfd;		/* empty memfd: mapped over BROKEN blocks */
	pthread_t thr;
	void *bounce;		/* store backend: the fault thread's buffer */
	struct hmm_remote_tensor *back;	/* remote backend: its tensor */
	struct region_wb *todo;	/* remote backend: writes not started */
};

/* An eviction's write, freed by its completion. */
struct region_wb {
	struct hmm_ioreq req;
	struct hmm_region *r;
	uint32_t block;
	void *staging;
	struct region_wb *next;	/* on r->todo */
};

static uint32_t region_ids;

/* Serialises making a module region and listing it, so that a context's
 * module regions find each other's space (region_hmmk.c). */
static pthread_mutex_t region_hmmk_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t block_key(struct hmm_region *r, uint32_t b)
{
	return (uint64_t)(0x80000000u | r->id) << 32 | b;
}

static char *block_addr(struct hmm_region *r, uint32_t b)
{
	return r->base + (uint64_t)b * RBLOCK;
}

/* ---- the store backend (embedded mode) --------------------------------- */

static void store_write(struct hmm_region *r, struct region_wb *wb)
{
	wb->req.io.op = HMM_IO_WRITE;
	wb->req.io.len = RBLOCK;
	wb->req.io.key = block_key(r, wb->block);
	wb->req.io.buf = wb->staging;
	hmm_iot_queue(r->h, &wb->req);
}

static int store_read(struct hmm_region *r, uint32_t b, void **src)
{
	struct hmm_ioreq q;
	int err;

	memset(&q, 0, sizeof(q));
	q.io.op = HMM_IO_READ;
	q.io.len = RBLOCK;
	q.io.key = block_key(r, b);
	q.io.buf = r->bounce;
	pthread_mutex_lock(&r->h->lock);
	err = hmm_iot_sync(r->h, &q);
	pthread_mutex_unlock(&r->h->lock);
	*src = r->bounce;
	return err;
}

static void store_read_end(struct hmm_region *r, void *src)
{
}

static void store_fini(struct hmm_region *r)
{
	struct hmm *h = r->h;
	uint32_t b;

	pthread_mutex_lock(&h->lock);
	for (b = 0; b < r->nblocks && !h->io_stop; b++) {
		struct hmm_ioreq q;

		if (r->state[b] != RB_STORED && r->state[b] != RB_BROKEN)
			continue;
		memset(&q, 0, sizeof(q));
		q.io.op = HMM_IOREQ_FREE;
		q.io.key = block_key(r, b);
		hmm_iot_sync(h, &q);
	}
	pthread_mutex_unlock(&h->lock);
}

static const struct region_ops store_ops = {
	store_write, store_read, store_read_end, store_fini,
};

/* ---- the remote backend (shared mode) ---------------------------------- */

static void remote_write(struct hmm_region *r, struct region_wb *wb)
{
	wb->next = r->todo;	/* region_drain writes it */
	r->todo = wb;
}

static int remote_read(struct hmm_region *r, uint32_t b, void **src)
{
	return hmm_remote_map(r->back, (uint64_t)b * RBLOCK, RBLOCK,
			      HMM_TIER_HOST, HMM_READ, src);
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

static const struct region_ops remote_ops = {
	remote_write, remote_read, remote_read_end, remote_fini,
};

/* The write itself: a round trip to hmmd and a copy (no lock held). */
static int remote_write_now(struct region_wb *wb)
{
	struct hmm_region *r = wb->r;
	void *dst;
	int err;

	err = hmm_remote_map(r->back, (uint64_t)wb->block * RBLOCK, RBLOCK,
			     HMM_TIER_HOST, HMM_WRITE, &dst);
	if (err)
		return err;
	memcpy(dst, wb->staging, RBLOCK);
	return hmm_remote_unmap(r->back, dst);
}

static void region_wb_done(struct hmm_ioreq *q);

/*
 * Write one waiting remote eviction, if any region has one (h->lock held,
 * dropped meanwhile).  Returns 1 when it did, 0 when none waits.
 */
static int region_drain(struct hmm *h)
{
	struct hmm_list *p;

	for (p = h->regions.next; p != &h->regions; p = p->next) {
		struct hmm_region *r = hmm_container_of(p, struct hmm_region,
							link);
		struct region_wb *wb = r->todo;

		if (!wb)
			continue;
		r->todo = wb->next;
		pthread_mutex_unlock(&h->lock);
		wb->req.io.result = remote_write_now(wb);
		region_wb_done(&wb->req);
		pthread_mutex_lock(&h->lock);
		return 1;
	}
	return 0;
}

/* Wait for an eviction to end, writing one ourselves if one waits. */
static void region_wait(struct hmm *h)
{
	if (!region_drain(h))
		pthread_cond_wait(&h->cond, &h->lock);
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
		if (r->back && !r->dead)
			r->dead = err;	/* hmmd is gone: evict no more */
		h->st.io_errors++;
		hmm_async_error(h, err, "region %u block %u: %s write "
				"failed: %s", r->id, wb->block,
				r->back ? "hmmd" : "store", strerror(-err));
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
	wb->req.t0 = hmm_now();
	r->state[b] = RB_EVICTING;
	r->evicting++;
	h->tier[HMM_TIER_HOST].pending_free += RBLOCK;
	r->ops->write(r, wb);
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

	if (!h->store && !h->remote)
		return 0;
	for (p = h->regions.next; p != &h->regions && got < bytes;
	     p = p->next) {
		struct hmm_region *r = hmm_container_of(p, struct hmm_region,
							link);
		uint32_t i;

		for (i = 0; !r->mk && !r->dead && i < r->nblocks &&
		     got < bytes; i++) {
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

/*
 * Room for one block in the host budget (h->lock held; may wait).
 * 0, or r->dead when there is none and its backend is gone (nothing of
 * it can be evicted, so none may ever come).
 */
static int region_room(struct hmm *h, struct hmm_region *r)
{
	for (;;) {
		int st = hmm_budget_room(h, HMM_TIER_HOST, RBLOCK,
					 HMM_NO_LIMIT);

		if (st == HMM_READY)
			return 0;
		if (r->dead)
			return r->dead;
		if (st == HMM_STARVED && hmm_region_reclaim(h, RBLOCK) > 0)
			continue;
		region_wait(h);
	}
}

static void region_wake(struct hmm_region *r, uint32_t b)
{
	struct uffdio_range wr = { (uintptr_t)block_addr(r, b), RBLOCK };

	ioctl(r->uffd, UFFDIO_WAKE, &wr);
}

/*
 * Block b's bytes are lost: map the empty memfd over it, so that every
 * access (the waiting one too, once woken) gets SIGBUS.  No lock held.
 */
static void region_sigbus(struct hmm_region *r, uint32_t b)
{
	void *p = mmap(block_addr(r, b), RBLOCK, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_FIXED, r->busfd, 0);

	if (p == MAP_FAILED) {	/* last resort: zeros, never a hang */
		struct uffdio_zeropage zp = {
			.range = { (uintptr_t)block_addr(r, b), RBLOCK },
		};

		ioctl(r->uffd, UFFDIO_ZEROPAGE, &zp);
	}
	region_wake(r, b);
}

/* Bring stored block b in from the backend (no lock held).  0 or -errno. */
static int region_fill(struct hmm_region *r, uint32_t b)
{
	void *src;
	int err = r->ops->read(r, b, &src);

	if (err)
		return err;
	struct uffdio_copy cp = {
		.dst = (uintptr_t)block_addr(r, b),
		.src = (uintptr_t)src, .len = RBLOCK,
	};
	if (ioctl(r->uffd, UFFDIO_COPY, &cp) && errno != EEXIST)
		err = -errno;
	r->ops->read_end(r, src);
	return err;
}

/* The block failed to come in: BROKEN, said once (h->lock held). */
static void region_broken(struct hmm *h, struct hmm_region *r, uint32_t b,
			  int err, const char *why)
{
	r->state[b] = RB_BROKEN;
	h->st.io_errors++;
	hmm_async_error(h, err, "region %u block %u: %s: %s (accesses get "
			"SIGBUS)", r->id, b, why, strerror(-err));
}

static void region_fault(struct hmm_region *r, uint64_t addr)
{
	struct hmm *h = r->h;
	uint32_t b = (addr - (uintptr_t)r->base) / RBLOCK;
	double t0 = hmm_now();
	int stored, err;

	pthread_mutex_lock(&h->lock);
	while (r->state[b] == RB_EVICTING)
		region_wait(h);
	if (r->state[b] == RB_RESIDENT || r->state[b] == RB_BROKEN) {
		/* already there (a racing fault was served) */
		pthread_mutex_unlock(&h->lock);
		region_wake(r, b);
		return;
	}
	err = region_room(h, r);
	if (err) {
		region_broken(h, r, b, err, "no room and hmmd is gone");
		pthread_mutex_unlock(&h->lock);
		region_sigbus(r, b);
		return;
	}
	hmm_budget_take(h, HMM_TIER_HOST, RBLOCK);
	stored = r->state[b] == RB_STORED;
	r->state[b] = RB_FILLING;	/* not a reclaim victim yet */
	h->st.region_faults++;
	pthread_mutex_unlock(&h->lock);

	if (stored) {
		err = region_fill(r, b);
	} else {	/* never written: zeros */
		struct uffdio_zeropage zp = {
			.range = { (uintptr_t)block_addr(r, b), RBLOCK },
		};
		ioctl(r->uffd, UFFDIO_ZEROPAGE, &zp);
	}
	pthread_mutex_lock(&h->lock);
	if (err) {
		hmm_budget_give(h, HMM_TIER_HOST, RBLOCK);
		region_broken(h, r, b, err, "read failed");
	} else {
		r->state[b] = RB_RESIDENT;
		if (stored) {
			h->tier[HMM_TIER_STORE].st.bytes_out += RBLOCK;
			h->tier[HMM_TIER_HOST].st.bytes_in += RBLOCK;
		}
	}
	pthread_mutex_unlock(&h->lock);
	if (err)
		region_sigbus(r, b);
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

/* The backend's side of a new region: the store's bounce buffer, or
 * hmmd's tensor.  0 or -errno. */
static int region_backend_new(struct hmm *h, struct hmm_region *r)
{
	char name[48];
	int64_t n = r->bytes;

	if (!h->remote) {
		r->ops = &store_ops;
		if (posix_memalign(&r->bounce, HMM_PAGE, RBLOCK))
			return hmm_err(-ENOMEM, "region: no bounce buffer");
		return 0;
	}
	r->ops = &remote_ops;
	snprintf(name, sizeof(name), "hmm-region.%d.%u", (int)getpid(),
		 r->id);
	return hmm_remote_tensor_new(h->remote, name, HMM_DTYPE_U8, 1, &n, 0,
				     &r->back);
}

/* A userfaultfd region of r->bytes at r->base (mapped here).  0 or -errno
 * with the detail set; nothing to undo on failure but r->base. */
static int region_uffd_new(struct hmm *h, struct hmm_region *r)
{
	int err;

	r->nblocks = r->bytes / RBLOCK;
	r->uffd = r->stopfd = r->busfd = -1;
	r->state = calloc(r->nblocks, 1);
	if (!r->state) {
		err = hmm_err(-ENOMEM, "region: no memory for %u blocks",
			      r->nblocks);
		goto out;
	}
	err = region_backend_new(h, r);
	if (err)
		goto out_free;
	r->busfd = memfd_create("hmm-region-lost", MFD_CLOEXEC);
	if (r->busfd < 0) {
		err = hmm_err(-errno, "region: memfd: %s", strerror(errno));
		goto out_backend;
	}
	err = region_uffd(r);
	if (err < 0)
		goto out_bus;
	r->stopfd = eventfd(0, EFD_CLOEXEC);
	if (r->stopfd < 0) {
		err = hmm_err(-errno, "region: eventfd: %s", strerror(errno));
		goto out_uffd;
	}
	err = -pthread_create(&r->thr, NULL, region_main, r);
	if (err) {
		hmm_err(err, "region: fault thread: %s", strerror(-err));
		goto out_stop;
	}
	return 0;

out_stop:
	close(r->stopfd);
out_uffd:
	close(r->uffd);
out_bus:
	close(r->busfd);
out_backend:
	if (r->back)
		remote_fini(r);
	free(r->bounce);
out_free:
	free(r->state);
out:
	return err;
}

int hmm_region_new(struct hmm *h, uint64_t bytes, void **ptr)
{
	struct hmm_region *r;
	int err;

	if (!h || !ptr || !bytes || bytes > (1ull << 46))
		return hmm_err(-EINVAL, "hmm_region_new: bytes %llu: must be "
			       "1..2^46 with a context and ptr",
			       (unsigned long long)bytes);
	if (!h->store && !h->remote)
		return hmm_err(-ENODEV, "hmm_region_new: no store tier to "
			       "evict to (config.store_path)");
	if (h->tier[HMM_TIER_HOST].cap < RBLOCK)
		return hmm_err(-EINVAL, "hmm_region_new: config.host_budget "
			       "%llu: regions need at least %u bytes",
			       (unsigned long long)h->tier[HMM_TIER_HOST].cap,
			       RBLOCK);
	r = calloc(1, sizeof(*r));
	if (!r)
		return hmm_err(-ENOMEM, "hmm_region_new: no memory");
	r->h = h;
	r->bytes = HMM_ROUND_UP(bytes, RBLOCK);
	r->id = __atomic_fetch_add(&region_ids, 1, __ATOMIC_RELAXED) &
		0x7fffffff;
	err = -ENODEV;
	if (h->remote) {
		pthread_mutex_lock(&region_hmmk_lock);
		err = hmm_region_hmmk_new(h, r->bytes, &r->mk, &r->base);
		if (!err) {
			pthread_mutex_lock(&h->lock);
			hmm_list_add_tail(&h->regions, &r->link);
			pthread_mutex_unlock(&h->lock);
		}
		pthread_mutex_unlock(&region_hmmk_lock);
		if (!err) {
			*ptr = r->base;
			return 0;
		}
	}
	if (err == -ENODEV) {	/* no module (or daemon): userfaultfd */
		r->base = mmap(NULL, r->bytes, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			       -1, 0);
		if (r->base == MAP_FAILED) {
			err = hmm_err(-errno, "hmm_region_new: mmap %llu "
				      "bytes: %s", (unsigned long long)bytes,
				      strerror(errno));
			goto out_free;
		}
		err = region_uffd_new(h, r);
		if (err)
			goto out_unmap;
	} else if (err) {
		goto out_free;
	}
	pthread_mutex_lock(&h->lock);
	hmm_list_add_tail(&h->regions, &r->link);
	pthread_mutex_unlock(&h->lock);
	*ptr = r->base;
	return 0;

out_unmap:
	munmap(r->base, r->bytes);
out_free:
	free(r);
	return err;	/* the detail says which step */
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

/* Advice on blocks first..last of a userfaultfd region. */
static int region_uffd_advise(struct hmm *h, struct hmm_region *r,
			      uint32_t first, uint32_t last, int advice)
{
	uint32_t b;
	int err = 0;

	pthread_mutex_lock(&h->lock);
	if (advice == HMM_ADVISE_COLD) {
		for (b = first; b <= last; b++)
			if (r->state[b] == RB_RESIDENT)
				region_evict_block(h, r, b);
		while (region_drain(h))
			;
		err = r->dead;
	}
	pthread_mutex_unlock(&h->lock);
	for (b = first; advice == HMM_ADVISE_WILLNEED && b <= last; b++) {
		int broken;

		pthread_mutex_lock(&h->lock);
		broken = r->state[b] == RB_BROKEN;	/* would SIGBUS */
		pthread_mutex_unlock(&h->lock);
		if (!broken)
			(void)*(volatile char *)block_addr(r, b);
	}
	if (err)
		return hmm_err(err, "hmm_region_advise: region %u: hmmd is "
			       "gone: %s", r->id, strerror(-err));
	return 0;
}

int hmm_region_advise(struct hmm *h, void *ptr, uint64_t len, int advice)
{
	struct hmm_region *r;
	uint64_t off;

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
	pthread_mutex_unlock(&h->lock);
	/* r stays: no thread may free a region while advising it */
	off = (char *)ptr - r->base;
	if (r->mk)
		return hmm_region_hmmk_advise(r->mk, r->base, off, len,
					      advice);
	return region_uffd_advise(h, r, off / RBLOCK, (off + len - 1) / RBLOCK,
				  advice);
}

static void region_destroy(struct hmm *h, struct hmm_region *r)
{
	uint64_t eventv = 1;
	uint32_t b;

	if (r->mk) {
		pthread_mutex_lock(&h->lock);
		hmm_list_del(&r->link);
		pthread_mutex_unlock(&h->lock);
		hmm_region_hmmk_free(r->mk, r->base, r->bytes);
		free(r);
		return;
	}
	if (write(r->stopfd, &eventv, sizeof(eventv)) != sizeof(eventv))
		return;
	pthread_join(r->thr, NULL);
	pthread_mutex_lock(&h->lock);
	while (r->evicting)
		region_wait(h);
	hmm_list_del(&r->link);
	for (b = 0; b < r->nblocks; b++)
		if (r->state[b] == RB_RESIDENT || r->state[b] == RB_FILLING)
			hmm_budget_give(h, HMM_TIER_HOST, RBLOCK);
	pthread_mutex_unlock(&h->lock);
	r->ops->fini(r);
	close(r->stopfd);
	close(r->uffd);
	close(r->busfd);
	munmap(r->base, r->bytes);
	free(r->bounce);
	free(r->state);
	free(r);
}

int hmm_region_free(struct hmm *h, void *ptr)
{
	struct hmm_region *r;

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

struct hmm_region_hmmk *hmm_region_hmmk_any(struct hmm *h)
{
	struct hmm_list *l;

	for (l = h->regions.next; l != &h->regions; l = l->next) {
		struct hmm_region *r = hmm_container_of(l, struct hmm_region,
							link);

		if (r->mk)
			return r->mk;
	}
	return NULL;
}

void hmm_region_stats(struct hmm *h, struct hmm_stats *st)
{
	struct hmm_list *l;

	pthread_mutex_lock(&h->lock);
	st->region_faults = h->st.region_faults;
	st->region_evictions = h->st.region_evictions;
	for (l = h->regions.next; l != &h->regions; l = l->next) {
		struct hmm_region *r = hmm_container_of(l, struct hmm_region,
							link);

		if (r->mk)
			hmm_region_hmmk_stats(r->mk, &st->region_faults,
					      &st->region_evictions);
	}
	pthread_mutex_unlock(&h->lock);
}

void hmm_region_fini(struct hmm *h)
{
	while (!hmm_list_empty(&h->regions))
		region_destroy(h, hmm_container_of(h->regions.next,
						   struct hmm_region, link));
}
