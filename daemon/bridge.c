// SPDX-License-Identifier: MIT
/*
 * bridge.c — hmmd as the hmmk module's daemon (see bridge.h).  One thread
 * polls the module's fd and an eventfd (stop); each wake-up takes up to
 * BATCH requests with DAEMON_FETCH, submits their store I/O in one go,
 * waits for it, drops the pages of regions the batch FORGETs (after the
 * I/O, so that an earlier EVICT of the batch is dropped too), flushes the
 * store when the batch evicted or forgot anything, and completes every
 * request with DAEMON_COMPLETE.
 *
 * Why a store of its own: the engine's store belongs to the engine's I/O
 * thread (its ring binds to one thread) and its extents are keyed by
 * tensor; module pages are keyed by region and page.  Same code, another
 * file, the bridge thread as its one issuer.
 *
 * Region handles are unique only within one load of the module, and a
 * region freed while no daemon is attached sends no FORGET, so the store
 * holds pages of one load only: its meta blob names that load (the
 * module's load_id, HMMK_F_LOAD_ID), and at attach every page of another
 * load is dropped.  A new region with an old handle then gets EIO for a
 * page the store never had from it, never an old region's bytes; an hmmd
 * restarted on the same load serves what the earlier one took.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "uapi/hmmk.h"
#include "bridge.h"
#include "log.h"
#include "hmm.h"
#include "pool.h"
#include "store.h"

#define BATCH		64			/* requests per wake-up */
#define PAGE		HMMK_PAGE_SIZE
#define STORE_SIZE_DEF	(1ull << 30)
#define POOL_BYTES	(BATCH * PAGE)
#define LOAD_MAGIC	"hmmkload"		/* 8 bytes, no NUL kept */

/* The store's meta blob: the module load its pages belong to. */
struct load_meta {
	char magic[8];			/* LOAD_MAGIC */
	uint64_t load_id;		/* DAEMON_INFO's, host byte order */
};

/* One request of a batch, on the bridge thread's stack. */
struct slot {
	struct hmmk_daemon_req r;
	struct hmm_io io;
	int queued;			/* io was submitted */
	int forget;			/* FORGET: no io, served after it */
	int status;			/* positive errno for COMPLETE */
};

/*
 * Allocated by hmmd_bridge_open, freed by hmmd_bridge_close.  Fields
 * below "thread's" are touched only by the bridge thread once it runs;
 * lock/cond/state hand the open result back to the opener.
 */
struct hmmd_bridge {
	int mfd;			/* /dev/hmmk, attached */
	int efd;			/* eventfd: stop */
	pthread_t thread;
	const char *dev;
	char *store_path;
	uint64_t store_size;
	uint64_t load_id;		/* the module's, read at attach */
	pthread_mutex_t lock;		/* protects state */
	pthread_cond_t cond;
	int state;			/* 0 opening, 1 serving, < 0 -errno */
	/* thread's */
	struct hmm_store *st;
	char *bufs;			/* BATCH pages of the store's pool */
	uint64_t dropped;		/* pages of another load, at open */
	int fill_delay_ms;
	/* written by the thread, read by anyone: atomic */
	struct hmmd_bridge_stats c;
};

#define INC(b, f)	__atomic_add_fetch(&(b)->c.f, 1, __ATOMIC_RELAXED)
#define GET(b, f)	__atomic_load_n(&(b)->c.f, __ATOMIC_RELAXED)

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int drop_extent(void *arg, uint64_t key, uint32_t len)
{
	struct hmmd_bridge *b = arg;

	(void)len;
	if (hmm_store_extent_free(b->st, key))
		return -EIO;	/* hmm_last_error() says which */
	b->dropped++;
	return 0;
}

/*
 * Unless the store's meta names this module load, drop every page it
 * holds (they are of regions of another load, all gone, whose handles
 * new regions reuse) and name this load, durably, before any EVICT of
 * it is taken: a later hmmd on this load must not drop those.
 */
static int load_check(struct hmmd_bridge *b)
{
	struct load_meta m;
	int len, ret;

	memset(&m, 0, sizeof(m));
	len = hmm_store_meta_get(b->st, &m, sizeof(m));
	if (len == (int)sizeof(m) && !memcmp(m.magic, LOAD_MAGIC, 8) &&
	    m.load_id == b->load_id)
		return 0;
	ret = hmm_store_extent_each(b->st, drop_extent, b);
	memcpy(m.magic, LOAD_MAGIC, 8);
	m.load_id = b->load_id;
	if (!ret)
		ret = hmm_store_meta_set(b->st, &m, sizeof(m));
	if (!ret)
		ret = hmm_store_flush(b->st);
	if (ret) {
		hmmd_log("module bridge: store %s: naming the module load: %s",
			 b->store_path, hmm_last_error());
		return ret;
	}
	if (b->dropped)
		hmmd_log("module bridge: store %s: dropped %llu pages of "
			 "another load of the module", b->store_path,
			 (unsigned long long)b->dropped);
	return 0;
}

/* Open the store on the bridge thread (the ring binds to it). */
static int store_setup(struct hmmd_bridge *b)
{
	struct hmm_store_config sc;
	struct stat st;
	int ret;

	memset(&sc, 0, sizeof(sc));
	sc.path = b->store_path;
	sc.flags = HMM_STORE_CREATE;
	sc.numa_node = -1;
	sc.pool_bytes = POOL_BYTES;
	sc.queue_depth = BATCH;
	sc.pool_flags = HMM_POOL_NOHUGE;
	if (stat(b->store_path, &st) < 0 ||
	    (S_ISREG(st.st_mode) && st.st_size == 0))
		sc.size = b->store_size ? b->store_size : STORE_SIZE_DEF;
	ret = hmm_store_open(&sc, &b->st);
	if (ret) {
		hmmd_log("module bridge: store %s: %s", b->store_path,
			 hmm_last_error());
		return ret;
	}
	b->bufs = hmm_pool_alloc(hmm_store_pool(b->st), POOL_BYTES);
	if (!b->bufs) {
		hmmd_log("module bridge: store %s: no pool buffers: %s",
			 b->store_path, hmm_last_error());
		hmm_store_close(b->st);
		b->st = NULL;
		return -ENOMEM;
	}
	if (*hmm_store_note(b->st))
		hmmd_log("module bridge: store %s: %s", b->store_path,
			 hmm_store_note(b->st));
	ret = load_check(b);
	if (ret) {
		hmm_pool_free(hmm_store_pool(b->st), b->bufs);
		hmm_store_close(b->st);
		b->st = NULL;
	}
	return ret;
}

/* Validate r and fill s->io; s->status set when it cannot be served. */
static void prepare(struct hmmd_bridge *b, struct slot *s, char *buf)
{
	const struct hmmk_daemon_req *r = &s->r;
	uint64_t key = r->region << 32 | r->page;
	int64_t len;

	memset(&s->io, 0, sizeof(s->io));
	s->queued = 0;
	s->forget = 0;
	s->status = 0;
	if (r->region > UINT32_MAX || r->page > UINT32_MAX) {
		hmmd_log("module bridge: region %llu page %llu: key out of range",
			 (unsigned long long)r->region,
			 (unsigned long long)r->page);
		s->status = EFBIG;
		return;
	}
	s->io.key = key;
	s->io.len = PAGE;
	s->io.buf = buf;
	if (r->op == HMMK_OP_FORGET) {
		s->forget = 1;		/* page: the region's page count */
	} else if (r->op == HMMK_OP_EVICT) {
		s->io.op = HMM_IO_WRITE;
	} else if (r->op == HMMK_OP_FILL) {
		len = hmm_store_extent_len(b->st, key);
		if (len != (int64_t)PAGE) {
			hmmd_log("module bridge: FILL region %llu page %llu: %s",
				 (unsigned long long)r->region,
				 (unsigned long long)r->page,
				 len < 0 ? "not in the store" : "bad extent");
			s->status = EIO;
			return;
		}
		s->io.op = HMM_IO_READ;
	} else {
		hmmd_log("module bridge: request %llu: unknown op %u",
			 (unsigned long long)r->id, r->op);
		s->status = EINVAL;
	}
}

/* Submit every prepared io, then wait for each; sets status from result. */
static void do_io(struct hmmd_bridge *b, struct slot *sl, unsigned n)
{
	struct hmm_io *ios[BATCH];
	struct slot *who[BATCH];
	unsigned k = 0, off = 0, i;
	int q;

	for (i = 0; i < n; i++)
		if (!sl[i].status && !sl[i].forget) {
			who[k] = &sl[i];
			ios[k++] = &sl[i].io;
		}
	while (off < k) {
		q = hmm_store_submit(b->st, ios + off, k - off);
		if (q <= 0) {
			hmmd_log("module bridge: store submit: %s",
				 q ? hmm_last_error() : "queue full");
			break;
		}
		for (i = off; i < off + (unsigned)q; i++)
			who[i]->queued = 1;
		off += q;
		if (off < k && hmm_store_poll(b->st, 1, -1) < 0)
			break;
	}
	for (i = 0; i < k; i++) {
		struct slot *s = who[i];

		if (!s->queued) {
			s->status = EIO;
			continue;
		}
		if (hmm_store_wait(b->st, &s->io)) {
			hmmd_log("module bridge: %s region %llu page %llu: %s",
				 s->r.op == HMMK_OP_EVICT ? "EVICT" : "FILL",
				 (unsigned long long)s->r.region,
				 (unsigned long long)s->r.page,
				 hmm_last_error());
			s->status = EIO;
		}
	}
}

/* FORGET: drop every page the store holds of region r->region. */
static void forget(struct hmmd_bridge *b, const struct hmmk_daemon_req *r)
{
	uint64_t pg, n = 0;

	for (pg = 0; pg < r->page; pg++) {
		uint64_t key = r->region << 32 | pg;

		if (hmm_store_extent_len(b->st, key) >= 0 &&
		    hmm_store_extent_free(b->st, key) == 0)
			n++;
	}
	if (n)
		hmmd_log("module bridge: region %llu is gone: dropped %llu "
			 "pages", (unsigned long long)r->region,
			 (unsigned long long)n);
}

/* Serve a fetched batch: I/O, forgets, flush, complete all. */
static void serve(struct hmmd_bridge *b, struct slot *sl, unsigned n)
{
	struct hmmk_daemon_cmpl c;
	int evicted = 0, filled = 0, ret;
	unsigned i;

	for (i = 0; i < n; i++)
		prepare(b, &sl[i], b->bufs + i * PAGE);
	do_io(b, sl, n);
	for (i = 0; i < n; i++) {
		if (sl[i].forget && !sl[i].status) {
			forget(b, &sl[i].r);
			evicted = 1;	/* the table changed: flush it */
		}
		evicted |= sl[i].r.op == HMMK_OP_EVICT && !sl[i].status;
		filled |= sl[i].r.op == HMMK_OP_FILL && !sl[i].status;
	}
	/* an evicted page is the store's only copy once we complete it */
	if (evicted) {
		ret = hmm_store_flush(b->st);
		INC(b, flushes);
		for (i = 0; ret && i < n; i++)
			if (sl[i].r.op == HMMK_OP_EVICT)
				sl[i].status = EIO;
		if (ret)
			hmmd_log("module bridge: flush %s: %s", b->store_path,
				 hmm_last_error());
	}
	if (filled && b->fill_delay_ms)
		sleep_ms(b->fill_delay_ms);	/* test knob: requests held */
	for (i = 0; i < n; i++) {
		memset(&c, 0, sizeof(c));
		c.id = sl[i].r.id;
		c.status = sl[i].status;
		c.buf = (uintptr_t)(b->bufs + i * PAGE);
		if (c.status)
			INC(b, failed);
		else if (sl[i].r.op == HMMK_OP_EVICT)
			INC(b, evictions);
		else if (sl[i].forget)
			INC(b, forgets);
		else
			INC(b, fills);
		/* ENOENT: the module gave up on it (deadline) */
		if (ioctl(b->mfd, HMMK_IOC_DAEMON_COMPLETE, &c) &&
		    errno != ENOENT)
			hmmd_log("module bridge: DAEMON_COMPLETE %llu: %s",
				 (unsigned long long)c.id, strerror(errno));
	}
}

/* Take up to BATCH requests; the number taken. */
static unsigned fetch(struct hmmd_bridge *b, struct slot *sl)
{
	unsigned n = 0;

	while (n < BATCH) {
		memset(&sl[n].r, 0, sizeof(sl[n].r));
		sl[n].r.buf = (uintptr_t)(b->bufs + n * PAGE);
		if (ioctl(b->mfd, HMMK_IOC_DAEMON_FETCH, &sl[n].r)) {
			/* other errors: the module failed that request */
			if (errno != EAGAIN)
				hmmd_log("module bridge: DAEMON_FETCH: %s",
					 strerror(errno));
			break;
		}
		n++;
	}
	return n;
}

static void set_state(struct hmmd_bridge *b, int state)
{
	pthread_mutex_lock(&b->lock);
	b->state = state;
	pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

static void *bridge_main(void *arg)
{
	struct hmmd_bridge *b = arg;
	struct slot sl[BATCH];
	int ret;

	ret = store_setup(b);
	set_state(b, ret ? ret : 1);
	if (ret)
		return NULL;
	for (;;) {
		struct pollfd pfd[2] = {
			{ .fd = b->mfd, .events = POLLIN },
			{ .fd = b->efd, .events = POLLIN },
		};
		unsigned n;

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			hmmd_log("module bridge: poll: %s", strerror(errno));
			break;
		}
		if (pfd[1].revents)
			break;
		if (pfd[0].revents & (POLLERR | POLLNVAL)) {
			hmmd_log("module bridge: %s: poll error", b->dev);
			break;
		}
		while ((n = fetch(b, sl))) {
			INC(b, batches);
			serve(b, sl, n);
		}
	}
	if (hmm_store_flush(b->st))
		hmmd_log("module bridge: final flush %s: %s", b->store_path,
			 hmm_last_error());
	hmm_pool_free(hmm_store_pool(b->st), b->bufs);
	hmm_store_close(b->st);
	hmmd_log("module bridge: stopped after %llu evictions, %llu fills, "
		 "%llu regions forgotten, %llu failed, %llu flushes, "
		 "%llu batches", (unsigned long long)GET(b, evictions),
		 (unsigned long long)GET(b, fills),
		 (unsigned long long)GET(b, forgets),
		 (unsigned long long)GET(b, failed),
		 (unsigned long long)GET(b, flushes),
		 (unsigned long long)GET(b, batches));
	return NULL;
}

static void bridge_free(struct hmmd_bridge *b)
{
	if (b->efd >= 0)
		close(b->efd);
	if (b->mfd >= 0)
		close(b->mfd);	/* the module fails what we still hold */
	pthread_cond_destroy(&b->cond);
	pthread_mutex_destroy(&b->lock);
	free(b->store_path);
	free(b);
}

int hmmd_bridge_open(const char *dev, const char *store_path,
		     uint64_t store_size, struct hmmd_bridge **out)
{
	struct hmmk_daemon_info di;
	struct hmmk_features f;
	struct hmmd_bridge *b;
	const char *delay;
	int ret;

	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->efd = -1;
	b->dev = dev;
	b->store_size = store_size;
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->cond, NULL);
	delay = getenv("HMMD_BRIDGE_FILL_DELAY_MS");
	b->fill_delay_ms = delay ? atoi(delay) : 0;
	b->store_path = strdup(store_path);
	b->mfd = open(dev, O_RDWR | O_CLOEXEC);
	if (b->mfd < 0) {
		ret = -errno;
		hmmd_log("module bridge: %s: %s", dev, strerror(errno));
		goto out;
	}
	memset(&f, 0, sizeof(f));
	if (ioctl(b->mfd, HMMK_IOC_GET_FEATURES, &f) ||
	    f.api_version != HMMK_API_VERSION ||
	    !(f.features & HMMK_F_DAEMON) ||
	    !(f.features & HMMK_F_LOAD_ID) || f.page_size != PAGE) {
		hmmd_log("module bridge: %s: no daemon channel (api %u, "
			 "features %#llx, page %u)", dev, f.api_version,
			 (unsigned long long)f.features, f.page_size);
		ret = -EOPNOTSUPP;
		goto out;
	}
	if (ioctl(b->mfd, HMMK_IOC_DAEMON_ATTACH)) {
		ret = -errno;
		hmmd_log("module bridge: %s: DAEMON_ATTACH: %s%s", dev,
			 strerror(errno),
			 errno == EBUSY ? " (another daemon is attached)" :
			 errno == EPERM ? " (needs CAP_SYS_ADMIN, or hmmk's "
					  "daemon_uid / daemon_gid)" : "");
		goto out;
	}
	/* the load cannot change while our file holds the module */
	memset(&di, 0, sizeof(di));
	if (ioctl(b->mfd, HMMK_IOC_DAEMON_INFO, &di)) {
		ret = -errno;
		hmmd_log("module bridge: %s: DAEMON_INFO: %s", dev,
			 strerror(errno));
		goto out;
	}
	if (!di.load_id) {
		ret = -EOPNOTSUPP;
		hmmd_log("module bridge: %s: DAEMON_INFO: no load_id", dev);
		goto out;
	}
	b->load_id = di.load_id;
	b->efd = eventfd(0, EFD_CLOEXEC);
	if (!b->store_path || b->efd < 0) {
		ret = -ENOMEM;
		goto out;
	}
	ret = -pthread_create(&b->thread, NULL, bridge_main, b);
	if (ret)
		goto out;
	pthread_mutex_lock(&b->lock);
	while (!b->state)
		pthread_cond_wait(&b->cond, &b->lock);
	ret = b->state < 0 ? b->state : 0;
	pthread_mutex_unlock(&b->lock);
	if (ret) {
		pthread_join(b->thread, NULL);
		goto out;
	}
	hmmd_log("module bridge: attached to %s, store %s%s", dev,
		 store_path, b->fill_delay_ms ? " (FILL delay, test knob)" : "");
	*out = b;
	return 0;

out:
	bridge_free(b);
	return ret;
}

void hmmd_bridge_stats(struct hmmd_bridge *b, struct hmmd_bridge_stats *st)
{
	st->evictions = GET(b, evictions);
	st->fills = GET(b, fills);
	st->forgets = GET(b, forgets);
	st->failed = GET(b, failed);
	st->flushes = GET(b, flushes);
	st->batches = GET(b, batches);
}

void hmmd_bridge_close(struct hmmd_bridge *b)
{
	uint64_t one = 1;

	if (!b)
		return;
	if (write(b->efd, &one, sizeof(one)) != sizeof(one))
		hmmd_log("module bridge: cannot wake its thread: %s",
			 strerror(errno));
	pthread_join(b->thread, NULL);
	bridge_free(b);
}
