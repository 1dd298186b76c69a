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

/* Bring stored block b in from the backend (no lock held).  0 or -errno. */
static int region_fill(struct hmm_region *r, uint32_t b)
{
	void *src;
	int err = r->ops->read(r, b, &src);

	if (err)
		return err;
	struct uffdio_copy cp = {
		.dst = (uintptr_t)region_block_addr(r, b),
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

/*
 * Room in the host budget for one block (h->lock held, dropped while
 * waiting), however long it takes; fails only when none is there and
 * r's evictions ended (r->dead): nothing of it can go.  Admitted in
 * turns of REGION_RETRY_S, so that a region's eviction that failed for
 * want of room in its backend (r->retry_at) is tried again after each.
 */
static int region_room(struct hmm *h, struct hmm_region *r)
{
	for (;;) {
		struct hmm_admit a = {
			.tier = HMM_TIER_HOST, .bytes = RBLOCK,
			.wait_s = REGION_RETRY_S, .cancel = &r->dead,
		};
		int err = hmm_budget_admit(h, &a);

		if (!err || !a.starved || r->dead)
			return err;
	}
}

/* Wait REGION_RETRY_S before a read is tried again (h->lock held). */
static void region_pause(struct hmm *h)
{
	double until = hmm_now() + REGION_RETRY_S;

	while (hmm_now() < until)
		hmm_cond_wait_until(h, until);
}

static void region_fault(struct hmm_region *r, uint64_t addr)
{
	struct hmm *h = r->h;
	uint32_t b = (addr - (uintptr_t)r->base) / RBLOCK;
	double t0 = hmm_now();
	int stored, err, tries = 0;

	pthread_mutex_lock(&h->lock);
again:
	while (r->state[b] == RB_EVICTING)
		hmm_region_wait(h);
	if (r->state[b] == RB_RESIDENT || r->state[b] == RB_BROKEN) {
		/* already there (a racing fault was served) */
		pthread_mutex_unlock(&h->lock);
		region_wake(r, b);
		return;
	}
	err = region_room(h, r);
	if (err) {
		region_broken(h, r, b, err, "no room, and the region can "
			      "evict no more");
		pthread_mutex_unlock(&h->lock);
		region_sigbus(r, b);
		return;
	}
	stored = r->state[b] == RB_STORED;
	r->state[b] = RB_FILLING;	/* not a reclaim victim yet */
	if (!tries++)
		h->st.region_faults++;
	pthread_mutex_unlock(&h->lock);

	if (stored) {
		err = region_fill(r, b);
	} else {	/* never written: zeros */
		struct uffdio_zeropage zp = {
			.range = { (uintptr_t)region_block_addr(r, b),
				   RBLOCK },
		};
		ioctl(r->uffd, UFFDIO_ZEROPAGE, &zp);
	}
	pthread_mutex_lock(&h->lock);
	if (err && region_short(err) && !r->ops->gone(err)) {
		/* the backend is short of room for now (hmmd: this
		   client's quota full): the block stays stored */
		hmm_budget_give(h, HMM_TIER_HOST, RBLOCK);
		r->state[b] = RB_STORED;
		region_pause(h);
		goto again;
	}
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
	return err;
}

void hmm_region_uffd_stop(struct hmm_region *r)
{
	uint64_t one = 1;

	if (write(r->stopfd, &one, sizeof(one)) == sizeof(one))
		pthread_join(r->thr, NULL);
	close(r->stopfd);
	close(r->uffd);
	close(r->busfd);
}
