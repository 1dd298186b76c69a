// SPDX-License-Identifier: MIT
/*
 * region_hmmk.c — a shared-mode region backed by the hmmk kernel module.
 *
 * When /dev/hmmk exists and the process attached to it as the module's
 * daemon is the very hmmd this context talks to (DAEMON_INFO's pid equals
 * the socket's SO_PEERCRED pid), a region is a module region: its own
 * open of /dev/hmmk (a space bound to this mm), REGION_CREATE and an
 * mmap(MAP_SHARED) of it.  The module serves the faults; pages it evicts
 * go to hmmd (daemon/bridge.c), which stores them and fills them back on
 * a fault.  A context's module regions share one space, held to
 * config.host_budget of CPU pages (SPACE_LIMIT): a fault at the limit
 * evicts first.
 * hmmd gone: those faults get SIGBUS, nothing hangs.  No thread and no
 * lock here: the module serialises.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "uapi/hmmk.h"
#include "err.h"
#include "region_int.h"
#include "remote.h"

#define HMMK_NEED	(HMMK_F_REGIONS | HMMK_F_DAEMON | HMMK_F_DAEMON_INFO)

/* Allocated by hmmk_new, freed by hmmk_free. */
struct hmm_region_hmmk {
	int fd;			/* /dev/hmmk: this region's space */
	uint64_t handle;	/* the module's region */
};

/* Whether hmmd, at the other end of h's socket, is the module's daemon. */
static int hmmk_served_by_our_hmmd(struct hmm *h, int fd,
				   struct hmmk_features *f)
{
	struct hmmk_daemon_info di;
	struct ucred cr;
	socklen_t len = sizeof(cr);

	memset(f, 0, sizeof(*f));
	memset(&di, 0, sizeof(di));
	if (ioctl(fd, HMMK_IOC_GET_FEATURES, f) ||
	    (f->features & HMMK_NEED) != HMMK_NEED ||
	    f->page_size != HMMK_PAGE_SIZE)
		return 0;
	if (ioctl(fd, HMMK_IOC_DAEMON_INFO, &di) || !di.attached || !di.pid)
		return 0;
	if (getsockopt(hmm_client_fd(hmm_remote_client(h)), SOL_SOCKET,
		       SO_PEERCRED, &cr, &len) || len != sizeof(cr))
		return 0;
	return (uint32_t)cr.pid == di.pid;
}

/*
 * The host budget as the module's CPU limit: on the space when it is new
 * (SPACE_LIMIT), else on the region alone where only that exists.
 */
static int hmmk_limit(struct hmm *h, int fd, const struct hmmk_features *f,
		      int new_space, struct hmmk_region_create *rc)
{
	uint64_t pages = h->tier[HMM_TIER_HOST].cap / HMMK_PAGE_SIZE;
	struct hmmk_space_limit sl;

	if (f->features & HMMK_F_SPACE_LIMIT) {
		if (!new_space)
			return 0;
		memset(&sl, 0, sizeof(sl));
		sl.cpu_limit = pages;
		if (ioctl(fd, HMMK_IOC_SPACE_LIMIT, &sl))
			return hmm_err(-errno, "hmm_region_new: %s SPACE_LIMIT "
				       "%llu pages: %s", HMMK_DEVICE,
				       (unsigned long long)pages,
				       strerror(errno));
	} else if (f->features & HMMK_F_CPU_LIMIT) {
		rc->flags = HMMK_REGION_F_CPU_LIMIT;
		rc->cpu_limit = pages;
	}
	return 0;
}

static const struct region_whole_ops hmmk_ops;

/* One of h's module regions, or NULL (h->lock held). */
static struct hmm_region_hmmk *hmmk_any(struct hmm *h)
{
	struct hmm_list *l;

	for (l = h->regions.next; l != &h->regions; l = l->next) {
		struct hmm_region *r = hmm_container_of(l, struct hmm_region,
							link);

		if (r->whole == &hmmk_ops)
			return r->whole_priv;
	}
	return NULL;
}

/*
 * A module region of bytes (a multiple of RBLOCK) mapped at *base, when
 * /dev/hmmk exists and the process attached to it as the module's daemon
 * is the hmmd that h is connected to.  All of h's module regions share
 * one space (a dup of another's fd), held to config.host_budget of CPU
 * pages together (HMMK_F_SPACE_LIMIT; with only HMMK_F_CPU_LIMIT, each
 * region alone).  Returns 0, -ENODEV when the module cannot back it (the
 * caller falls back to userfaultfd; no detail set), or another -errno
 * with the detail set.  The caller serialises calls for one h until the
 * region is on h's list.
 */
static int hmmk_new(struct hmm *h, uint64_t bytes,
		    struct hmm_region_hmmk **out, char **base)
{
	struct hmmk_region_create rc;
	struct hmmk_region_destroy rd;
	struct hmm_region_hmmk *mk, *other;
	struct hmmk_features f;
	const char *env = getenv("HMM_REGION_BACKEND");
	void *p;
	int err;

	if (env && !strcmp(env, "uffd"))
		return -ENODEV;		/* asked for userfaultfd */
	mk = calloc(1, sizeof(*mk));
	if (!mk)
		return hmm_err(-ENOMEM, "hmm_region_new: no memory");
	pthread_mutex_lock(&h->lock);	/* h's space, if it has one */
	other = hmmk_any(h);
	mk->fd = other ? fcntl(other->fd, F_DUPFD_CLOEXEC, 0) :
			 open(HMMK_DEVICE, O_RDWR | O_CLOEXEC);
	pthread_mutex_unlock(&h->lock);
	if (mk->fd < 0 || !hmmk_served_by_our_hmmd(h, mk->fd, &f)) {
		err = -ENODEV;
		goto out_close;
	}
	memset(&rc, 0, sizeof(rc));
	rc.size = bytes;
	rc.preferred_node = HMMK_NODE_ANY;
	err = hmmk_limit(h, mk->fd, &f, !other, &rc);
	if (err)
		goto out_close;
	if (ioctl(mk->fd, HMMK_IOC_REGION_CREATE, &rc)) {
		err = hmm_err(-errno, "hmm_region_new: %s REGION_CREATE %llu "
			      "bytes: %s", HMMK_DEVICE,
			      (unsigned long long)bytes, strerror(errno));
		goto out_close;
	}
	mk->handle = rc.handle;
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, mk->fd,
		 rc.mmap_offset);
	if (p == MAP_FAILED) {
		err = hmm_err(-errno, "hmm_region_new: mmap of %s region "
			      "%llu: %s", HMMK_DEVICE,
			      (unsigned long long)rc.handle, strerror(errno));
		goto out_destroy;
	}
	*out = mk;
	*base = p;
	return 0;

out_destroy:
	memset(&rd, 0, sizeof(rd));
	rd.handle = mk->handle;
	ioctl(mk->fd, HMMK_IOC_REGION_DESTROY, &rd);
out_close:
	if (mk->fd >= 0)
		close(mk->fd);
	free(mk);
	return err;
}

/* COLD = the module's EVICT (pages go to hmmd), WILLNEED = touch every
 * page (faults fill them from hmmd), NORMAL = nothing.  Any thread. */
static int hmmk_advise(struct hmm_region *reg, uint64_t off, uint64_t len,
		       int advice)
{
	struct hmm_region_hmmk *mk = reg->whole_priv;
	char *base = reg->base;
	uint64_t lo = off / HMMK_PAGE_SIZE * HMMK_PAGE_SIZE;
	uint64_t hi = HMM_ROUND_UP(off + len, HMMK_PAGE_SIZE), o;
	struct hmmk_range r;

	switch (advice) {
	case HMM_ADVISE_COLD:
		memset(&r, 0, sizeof(r));
		r.handle = mk->handle;
		r.start = lo;
		r.length = hi - lo;
		if (ioctl(mk->fd, HMMK_IOC_EVICT, &r))
			return hmm_err(-errno, "hmm_region_advise: %s EVICT "
				       "region %llu +%llu: %s", HMMK_DEVICE,
				       (unsigned long long)lo,
				       (unsigned long long)(hi - lo),
				       strerror(errno));
		return 0;
	case HMM_ADVISE_WILLNEED:
		for (o = lo; o < hi; o += HMMK_PAGE_SIZE)
			(void)*(volatile char *)(base + o);
		return 0;
	default:
		return 0;
	}
}

/* Adds the module's counters of the region: CPU faults, evicted pages. */
static void hmmk_stats(struct hmm_region *r, uint64_t *faults,
		       uint64_t *evictions)
{
	struct hmm_region_hmmk *mk = r->whole_priv;
	struct hmmk_stats s;

	memset(&s, 0, sizeof(s));
	s.handle = mk->handle;
	if (ioctl(mk->fd, HMMK_IOC_STATS, &s))
		return;		/* counters only: nothing to add */
	*faults += s.faults;
	*evictions += s.evictions;
}

/* Unmap, destroy the module's region, close.  No thread may touch the
 * region during or after. */
static void hmmk_free(struct hmm_region *r)
{
	struct hmm_region_hmmk *mk = r->whole_priv;
	struct hmmk_region_destroy rd;

	munmap(r->base, r->bytes);
	memset(&rd, 0, sizeof(rd));
	rd.handle = mk->handle;
	ioctl(mk->fd, HMMK_IOC_REGION_DESTROY, &rd);
	close(mk->fd);
	free(mk);
}

static const struct region_whole_ops hmmk_ops = {
	.advise = hmmk_advise,
	.stats = hmmk_stats,
	.free = hmmk_free,
};

/* Serialises making a module region and listing it, so that a context's
 * module regions find each other's space. */
static pthread_mutex_t hmmk_lock = PTHREAD_MUTEX_INITIALIZER;

int hmm_remote_region_whole(struct hmm *h, struct hmm_region *r)
{
	struct hmm_region_hmmk *mk = NULL;
	int err;

	pthread_mutex_lock(&hmmk_lock);
	err = hmmk_new(h, r->bytes, &mk, &r->base);
	if (!err) {
		r->whole = &hmmk_ops;
		r->whole_priv = mk;
		pthread_mutex_lock(&h->lock);
		hmm_list_add_tail(&h->regions, &r->link);
		pthread_mutex_unlock(&h->lock);
	}
	pthread_mutex_unlock(&hmmk_lock);
	return err;
}
