// SPDX-License-Identifier: MIT
/*
 * region_fault.c — a userfaultfd region's fault thread (region_int.h).
 *
 * A fault makes room in the host budget (evicting chunks or other
 * blocks), then UFFDIO_ZEROPAGE for an ABSENT block or UFFDIO_COPY from
 * the block backend's copy of a STORED one.  A block whose bytes cannot
 * come back gets an empty memfd mapped over it: SIGBUS, never zeros.
 * A read the backend fails for want of room for now (region_short: hmmd
 * maps the block in this client's quota) leaves the block stored and is
 * tried again REGION_RETRY_S later.
 *
 * Nothing waits for ever.  A fault that finds no room and none to come
 * for config.wait_ms gives up: nothing evictable and no eviction in
 * flight (one that was, and failed for want of room in the backend,
 * brought none), or a backend that refuses the read that long.  Its
 * access gets SIGBUS, and hmm_wait reports the failure, naming the
 * region, the block, the budget and what holds it.  The block keeps its
 * bytes (stored, or zeros never written): UFFDIO_POISON fails this
 * access and any until room returns, and the fault thread lifts the
 * poison (MADV_DONTNEED drops its markers) once an admission for a
 * block passes, looking every REGION_RETRY_S.  A kernel without
 * UFFDIO_POISON (before 6.6) leaves one way to SIGBUS, the empty memfd,
 * and no way back that keeps the block registered throughout (between
 * the mmap of anonymous memory and its UFFDIO_REGISTER an access would
 * read zeros): there the block is BROKEN.  After a give-up the region's
 * next faults wait REGION_RETRY_S, not wait_ms (r->starving), until a
 * block comes in; hmm_region_free ends a waiting fault at once
 * (r->quit).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "chunk.h"
#include "err.h"
#include "region_int.h"

static void region_wake(struct hmm_region *r, uint32_t b)
{
	struct uffdio_range wr = { (uintptr_t)region_block_addr(r, b),
				   RBLOCK };

	ioctl(r->uffd, UFFDIO_WAKE, &wr);
}

/*
 * Block b's bytes are lost: map the empty memfd over it, so that every
 * access (the waiting one too, once woken) gets SIGBUS.  No lock held.
 */
static void region_sigbus(struct hmm_region *r, uint32_t b)
{
	void *p = mmap(region_block_addr(r, b), RBLOCK,
		       PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		       r->busfd, 0);

	if (p == MAP_FAILED) {	/* last resort: zeros, never a hang */
		struct uffdio_zeropage zp = {
			.range = { (uintptr_t)region_block_addr(r, b),
				   RBLOCK },
		};

		ioctl(r->uffd, UFFDIO_ZEROPAGE, &zp);
	}
	region_wake(r, b);
}

/*
 * Fill block b: zeros, or the backend's copy (stored).  No lock held;
 * one fill at a time per region (the backend reads into one buffer).
 * 0 or the read's -errno.
 */
static int region_fill(struct hmm_region *r, uint32_t b, int stored)
{
	void *src;
	int err;

	if (!stored) {	/* never written: zeros */
		struct uffdio_zeropage zp = {
			.range = { (uintptr_t)region_block_addr(r, b),
				   RBLOCK },
		};

		ioctl(r->uffd, UFFDIO_ZEROPAGE, &zp);
		return 0;
	}
	pthread_mutex_lock(&r->fill_lock);
	err = r->ops->read(r, b, &src);
	if (!err) {
		struct uffdio_copy cp = {
			.dst = (uintptr_t)region_block_addr(r, b),
			.src = (uintptr_t)src, .len = RBLOCK,
		};

		if (ioctl(r->uffd, UFFDIO_COPY, &cp) && errno != EEXIST)
			err = -errno;
		r->ops->read_end(r, src);
	}
	pthread_mutex_unlock(&r->fill_lock);
	return err;
}

/* The block's bytes are lost: BROKEN, said once (h->lock held). */
static void region_broken(struct hmm *h, struct hmm_region *r, uint32_t b,
			  int err, const char *detail)
{
	r->state[b] = RB_BROKEN;
	h->st.io_errors++;
	hmm_async_error(h, err, "region %u block %u: %s (its bytes are lost: "
			"accesses get SIGBUS)", r->id, b, detail);
}

/* Append ", what" to buf[*o..len) (the first part without ", "). */
static void region_part(char *buf, size_t len, size_t *o, const char *fmt,
			...) __attribute__((format(printf, 4, 5)));
static void region_part(char *buf, size_t len, size_t *o, const char *fmt,
			...)
{
	va_list ap;
	int n;

	if (*o >= len)
		return;
	if (*o)
		*o += snprintf(buf + *o, len - *o, ", ");
	if (*o >= len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *o, len - *o, fmt, ap);
	va_end(ap);
	if (n > 0)
		*o += n;
}

/*
 * What holds the host budget that no reclaimer may take, in words
 * (h->lock held): pinned chunks, chunks whose write-back failed, chunks
 * in copies, blocks of regions that evict no more, blocks whose writes
 * the backend refuses for now.
 */
static void region_why(struct hmm *h, char *buf, size_t len)
{
	struct hmm_list *l = &h->tier[HMM_TIER_HOST].lru, *p;
	uint64_t pin = 0, nowb = 0, busy = 0, dead = 0, fail = 0;
	int dead_err = 0, fail_err = 0;
	size_t o = 0;

	for (p = l->next; p != l; p = p->next) {
		struct hmm_chunk *c = hmm_container_of(p, struct hmm_chunk,
						       lru[HMM_TIER_HOST]);
		uint64_t cost = hmm_chunk_cost(c, HMM_TIER_HOST);

		if (c->pins[HMM_TIER_HOST])
			pin += cost;
		else if (c->busy)
			busy += cost;
		else if (!hmm_chunk_evictable(h, c, HMM_TIER_HOST))
			nowb += cost;
	}
	for (p = h->regions.next; p != &h->regions; p = p->next) {
		struct hmm_region *q = hmm_container_of(p, struct hmm_region,
							link);
		uint64_t n = 0;
		uint32_t b;

		for (b = 0; !q->whole && (q->dead || q->again) &&
		     b < q->nblocks; b++)
			n += q->state[b] == RB_RESIDENT;
		if (n && q->dead) {
			dead += n * RBLOCK;
			dead_err = q->dead;
		} else if (n) {
			fail += n * RBLOCK;
			fail_err = q->again;
		}
	}
	buf[0] = 0;
	if (pin)
		region_part(buf, len, &o, "%llu B pinned chunks",
			    (unsigned long long)pin);
	if (nowb)
		region_part(buf, len, &o, "%llu B chunks whose write-back "
			    "failed", (unsigned long long)nowb);
	if (busy)
		region_part(buf, len, &o, "%llu B chunks in copies",
			    (unsigned long long)busy);
	if (dead)
		region_part(buf, len, &o, "%llu B blocks of regions that "
			    "evict no more (%s)", (unsigned long long)dead,
			    strerror(-dead_err));
	if (fail)
		region_part(buf, len, &o, "%llu B blocks whose writes failed "
			    "(%s)", (unsigned long long)fail,
			    strerror(-fail_err));
	if (!o)
		snprintf(buf, len, "nothing evictable");
}

/*
 * The detail of a fault on b that got no room (h->lock held): err is
 * -ENOMEM (starved for wait s), -ESHUTDOWN (the region is being freed),
 * r->dead (it evicts no more) or a reclaimer's.  Returns err.
 */
static int region_no_room(struct hmm *h, struct hmm_region *r, uint32_t b,
			  int err, double wait)
{
	const struct hmm_tier *T = &h->tier[HMM_TIER_HOST];
	unsigned long long off = (unsigned long long)b * RBLOCK;
	char why[160];

	if (err == -ESHUTDOWN)
		return hmm_err(err, "region %u block %u: the region was freed "
			       "while an access waited for room", r->id, b);
	region_why(h, why, sizeof(why));
	if (err != -ENOMEM)
		return hmm_err(err, "region %u block %u (offset %llu): no host "
			       "room (budget %llu, used %llu)%s (%s): %s",
			       r->id, b, off, (unsigned long long)T->cap,
			       (unsigned long long)T->used, err == r->dead ?
			       " and the region evicts no more" : "",
			       strerror(-err), why);
	return hmm_err(err, "region %u block %u (offset %llu): no host room "
		       "for %.0f ms (budget %llu, used %llu): nothing could "
		       "go: %s", r->id, b, off, wait * 1e3,
		       (unsigned long long)T->cap,
		       (unsigned long long)T->used, why);
}

/*
 * Room in the host budget for one block (h->lock held, dropped while
 * waiting), admitted in turns, so that a region's eviction that failed
 * for want of room in its backend (r->retry_at) is tried again between
 * them.  A turn lasts half REGION_RETRY_S at most: one as long as the
 * retry never ended starved, since the eviction tried again at its end
 * was in flight (room to come) each time it looked, and the fault
 * retried for ever.  *since: when this fault began to starve (0: not
 * yet), set by the first turn that ends starved (no room and none to
 * come for its length) and never reset: an eviction that was in flight
 * and failed brought no room.  0, -ENOMEM once starved for wait
 * seconds, r->quit at once (the region evicts no more, or is freed).
 */
static int region_room(struct hmm *h, struct hmm_region *r, double wait,
		       double *since)
{
	for (;;) {
		double turn = wait < REGION_RETRY_S / 2 ? wait :
			      REGION_RETRY_S / 2;
		struct hmm_admit a = {
			.tier = HMM_TIER_HOST, .bytes = RBLOCK,
			.wait_s = turn, .cancel = &r->quit,
		};
		int err = hmm_budget_admit(h, &a);
		double now;

		if (!err || !a.starved)
			return err;
		now = hmm_now();
		if (!*since)
			*since = now - turn;
		if (now - *since >= wait)
			return -ENOMEM;
	}
}

/* Wait up to s before a read is tried again (h->lock held); less when
 * the region is being freed. */
static void region_pause(struct hmm *h, struct hmm_region *r, double s)
{
	double until = hmm_now() + s;

	while (r->quit != -ESHUTDOWN && hmm_now() < until)
		hmm_cond_wait_until(h, until);
}

/* A read the backend refused for want of room for wait s: the detail
 * (the backend's is this thread's latest), h->lock held.  -ENOMEM. */
static int region_no_read(struct hmm_region *r, uint32_t b, int err,
			  double wait)
{
	char detail[320];

	snprintf(detail, sizeof(detail), "%s", hmm_last_error());
	return hmm_err(-ENOMEM, "region %u block %u (offset %llu): the %s "
		       "had no room to read it for %.0f ms (%s): %s", r->id, b,
		       (unsigned long long)b * RBLOCK, r->ops->name,
		       wait * 1e3, strerror(-err), detail);
}

/* Block b came in (h->lock held). */
static void region_filled(struct hmm *h, struct hmm_region *r, uint32_t b,
			  int stored, double t0)
{
	r->state[b] = RB_RESIDENT;
	r->starving = 0;
	if (stored) {
		h->tier[HMM_TIER_STORE].st.bytes_out += RBLOCK;
		h->tier[HMM_TIER_HOST].st.bytes_in += RBLOCK;
	}
	pthread_cond_broadcast(&h->cond);	/* FILLING ended */
	hmm_trace_event(h, "fault", stored ? "region fault (store)" :
			"region fault (zero)", "region", b, RBLOCK, t0,
			hmm_now(), 4);
}

int hmm_region_bring(struct hmm *h, struct hmm_region *r, uint32_t b)
{
	double t0 = hmm_now(), wait = h->cfg.wait_ms / 1e3, since = 0, t;
	int stored, err, counted = 0;

	for (;;) {
		while (r->state[b] == RB_EVICTING || r->state[b] == RB_FILLING)
			hmm_region_wait(h);
		if (r->state[b] == RB_RESIDENT)
			return 0;
		if (r->state[b] == RB_BROKEN || (r->state[b] & RB_STARVED))
			return 1;	/* mapped to SIGBUS */
		if (r->quit == -ESHUTDOWN)
			return region_no_room(h, r, b, r->quit, wait);
		if (r->starving && wait > REGION_RETRY_S)
			wait = REGION_RETRY_S;
		err = region_room(h, r, wait, &since);
		if (err)
			return region_no_room(h, r, b, err, wait);
		stored = r->state[b] == RB_STORED;
		r->state[b] = RB_FILLING;	/* not a reclaim victim yet */
		if (!counted++)
			h->st.region_faults++;
		t = hmm_now();
		pthread_mutex_unlock(&h->lock);
		err = region_fill(r, b, stored);
		pthread_mutex_lock(&h->lock);
		if (!err) {
			region_filled(h, r, b, stored, t0);
			return 0;
		}
		hmm_budget_give(h, HMM_TIER_HOST, RBLOCK);	/* wakes */
		if (!region_short(err) || r->ops->gone(err)) {
			char detail[320];

			snprintf(detail, sizeof(detail), "%s read failed: %s",
				 r->ops->name, *hmm_last_error() ?
				 hmm_last_error() : strerror(-err));
			region_broken(h, r, b, err, detail);
			pthread_mutex_unlock(&h->lock);
			region_sigbus(r, b);	/* WILLNEED's too */
			pthread_mutex_lock(&h->lock);
			return hmm_err(err, "region %u block %u: %s", r->id, b,
				       detail);
		}
		/* the backend is short of room for now (hmmd: this
		   client's quota full): the block stays stored */
		r->state[b] = RB_STORED;
		if (!since)
			since = t;
		if (hmm_now() - since >= wait) {
			r->starving = 1;
			return region_no_read(r, b, err, wait);
		}
		t = since + wait - hmm_now();
		region_pause(h, r, t < REGION_RETRY_S ? t : REGION_RETRY_S);
	}
}

/*
 * A fault on b gave up (err, the detail set; h->lock held, dropped):
 * hmm_wait says so, and the access gets SIGBUS: b poisoned, its bytes
 * kept; broken where the kernel has no UFFDIO_POISON, or it fails.
 */
static void region_starve(struct hmm *h, struct hmm_region *r, uint32_t b,
			  int err)
{
	struct uffdio_poison po = {
		.range = { (uintptr_t)region_block_addr(r, b), RBLOCK },
	};
	char detail[400];

	snprintf(detail, sizeof(detail), "%s", hmm_last_error());
	r->starving = 1;
	if (r->poison) {
		/* said before the poison wakes the access: a SIGBUS
		   handler's hmm_wait must find it */
		int mine = !h->async_err;

		hmm_async_error(h, err, "%s: SIGBUS, the block keeps its "
				"bytes", detail);
		r->state[b] |= RB_STARVED;	/* no one else touches it */
		pthread_mutex_unlock(&h->lock);
		if (!ioctl(r->uffd, UFFDIO_POISON, &po)) {	/* wakes */
			r->nstarved++;
			r->unstarve_at = hmm_now() + REGION_RETRY_S;
			return;
		}
		pthread_mutex_lock(&h->lock);
		r->state[b] &= ~RB_STARVED;
		if (mine)	/* the bytes are lost after all: say that */
			h->async_err = 0;
	}
	/* skip "region N block B: ", which region_broken says */
	region_broken(h, r, b, err, strstr(detail, ": ") ?
		      strstr(detail, ": ") + 2 : detail);
	pthread_mutex_unlock(&h->lock);
	region_sigbus(r, b);
}

/*
 * Lift the poison of r's starved blocks once room has returned: an
 * admission for one block passes now (it may start evictions; the room
 * goes back, for the access that comes).  Not sooner than REGION_RETRY_S
 * after the latest poison, so that the access it failed met it.  The
 * fault thread, no lock held.
 */
static void region_unstarve(struct hmm_region *r)
{
	struct hmm *h = r->h;
	struct hmm_admit a = {
		.tier = HMM_TIER_HOST, .bytes = RBLOCK, .cancel = &r->quit,
	};
	uint32_t b, seen = 0, n = 0;

	if (hmm_now() < r->unstarve_at)
		return;
	pthread_mutex_lock(&h->lock);
	if (hmm_budget_admit(h, &a)) {
		while (hmm_region_drain(h))	/* evictions it started */
			;
		pthread_mutex_unlock(&h->lock);
		r->unstarve_at = hmm_now() + REGION_RETRY_S;
		return;
	}
	hmm_budget_give(h, HMM_TIER_HOST, RBLOCK);
	for (b = 0; b < r->nblocks && seen < r->nstarved; b++) {
		if (!(r->state[b] & RB_STARVED))
			continue;
		seen++;
		if (madvise(region_block_addr(r, b), RBLOCK, MADV_DONTNEED)) {
			n++;	/* still poisoned: keep it so */
			continue;
		}
		r->state[b] &= ~RB_STARVED;
	}
	pthread_mutex_unlock(&h->lock);
	r->nstarved = n;
	r->unstarve_at = hmm_now() + REGION_RETRY_S;
}

static void region_fault(struct hmm_region *r, uint64_t addr)
{
	struct hmm *h = r->h;
	uint32_t b = (addr - (uintptr_t)r->base) / RBLOCK;
	int err;

	pthread_mutex_lock(&h->lock);
	err = hmm_region_bring(h, r, b);
	if (err < 0 && r->state[b] != RB_BROKEN) {	/* no room */
		region_starve(h, r, b, err);
		return;
	}
	/* resident, or mapped to SIGBUS (a lost block: bring did it) */
	pthread_mutex_unlock(&h->lock);
	region_wake(r, b);
}

static void *region_main(void *arg)
{
	struct hmm_region *r = arg;
	struct pollfd pf[2] = { { r->uffd, POLLIN, 0 },
				{ r->stopfd, POLLIN, 0 } };

	for (;;) {
		int ms = r->nstarved ? (int)(REGION_RETRY_S * 1e3) : -1;
		struct uffd_msg msg;
		int n = poll(pf, 2, ms);

		if (n < 0 && errno != EINTR)
			return NULL;
		if (n > 0 && pf[1].revents)
			return NULL;
		if (n > 0 && pf[0].revents &&
		    read(r->uffd, &msg, sizeof(msg)) == sizeof(msg) &&
		    msg.event == UFFD_EVENT_PAGEFAULT)
			region_fault(r, msg.arg.pagefault.address);
		if (r->nstarved)
			region_unstarve(r);
	}
}

/* A userfaultfd with features (0, or UFFD_FEATURE_POISON) in r->uffd:
 * 0, or -errno with *what the call that failed (r->uffd -1). */
static int region_uffd_api(struct hmm_region *r, uint64_t features,
			   const char **what)
{
	struct uffdio_api api = { .api = UFFD_API, .features = features };
	int e;

	*what = "userfaultfd";
	r->uffd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (r->uffd < 0)
		return -errno;
	*what = "userfaultfd setup";
	if (!ioctl(r->uffd, UFFDIO_API, &api))
		return 0;
	e = errno;
	close(r->uffd);
	r->uffd = -1;
	return -e;
}

/*
 * The region's userfaultfd, registered over it, with UFFD_FEATURE_POISON
 * where the kernel has it (one without refuses the feature: then a fresh
 * one without; HMM_REGION_POISON=0 does as such a kernel, for tests).
 */
static int region_uffd(struct hmm_region *r)
{
	const char *env = getenv("HMM_REGION_POISON");
	uint64_t want = env && !strcmp(env, "0") ? 0 : UFFD_FEATURE_POISON;
	struct uffdio_register reg = {
		.range = { (uintptr_t)r->base, r->bytes },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	const char *what;
	int err;

	err = region_uffd_api(r, want, &what);
	if (err == -EINVAL && want) {
		want = 0;
		err = region_uffd_api(r, 0, &what);
	}
	if (err)
		return hmm_err(err, "region: %s: %s%s", what, strerror(-err),
			       !strcmp(what, "userfaultfd") ?
			       " (vm.unprivileged_userfaultfd?)" : "");
	if (ioctl(r->uffd, UFFDIO_REGISTER, &reg)) {
		int e = errno;

		close(r->uffd);
		return hmm_err(-e, "region: userfaultfd setup: %s",
			       strerror(e));
	}
	r->poison = want && (reg.ioctls & (1ull << _UFFDIO_POISON));
	return 0;
}

int hmm_region_uffd_start(struct hmm_region *r)
{
	int err;

	r->busfd = memfd_create("hmm-region-lost", MFD_CLOEXEC);
	if (r->busfd < 0)
		return hmm_err(-errno, "region: memfd: %s", strerror(errno));
	err = region_uffd(r);
	if (err < 0)
		goto out_bus;
	r->stopfd = eventfd(0, EFD_CLOEXEC);
	if (r->stopfd < 0) {
		err = hmm_err(-errno, "region: eventfd: %s", strerror(errno));
		goto out_uffd;
	}
	err = -pthread_mutex_init(&r->fill_lock, NULL);
	if (err) {
		hmm_err(err, "region: mutex: %s", strerror(-err));
		goto out_stop;
	}
	err = -pthread_create(&r->thr, NULL, region_main, r);
	if (err) {
		hmm_err(err, "region: fault thread: %s", strerror(-err));
		goto out_mutex;
	}
	return 0;

out_mutex:
	pthread_mutex_destroy(&r->fill_lock);
out_stop:
	close(r->stopfd);
out_uffd:
	close(r->uffd);
out_bus:
	close(r->busfd);
	return err;
}

/* A fault waiting for room gives up at once (r->quit), then the thread
 * stops. */
void hmm_region_uffd_stop(struct hmm_region *r)
{
	struct hmm *h = r->h;
	uint64_t one = 1;

	pthread_mutex_lock(&h->lock);
	r->quit = -ESHUTDOWN;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
	if (write(r->stopfd, &one, sizeof(one)) == sizeof(one))
		pthread_join(r->thr, NULL);
	pthread_mutex_destroy(&r->fill_lock);
	close(r->stopfd);
	close(r->uffd);
	close(r->busfd);
}
