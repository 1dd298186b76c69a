// SPDX-License-Identifier: MIT
/*
 * stripe.c — a store striped over several files or block devices: open
 * the members and make their generations agree, route requests, wait
 * on every ring, flush in two steps.  See stripe.h for the design.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "pool.h"
#include "store_int.h"
#include "stripe.h"

/*
 * Allocated with the front by stripe_open, freed by stripe_close.
 * Touched only by the thread driving the store (as a store's fields).
 */
struct hmm_stripe {
	unsigned n;
	struct hmm_store *m[HMM_STRIPE_MAX];
	char *path[HMM_STRIPE_MAX];	/* into list */
	char *list;			/* a copy of the path, split */
	uint64_t size;			/* each new member's */
	struct hmm_pool *pool;		/* every member's; owned */
	int efd;			/* every ring signals it; -1: none */
	int rings;			/* members with an io_uring */
	unsigned rr;			/* member reaped first next */
	char note[1024];
};

static unsigned member_index(uint64_t key, unsigned n)
{
	return (unsigned)(((key >> 32) + (uint32_t)key) % n);
}

struct hmm_store *stripe_member(struct hmm_store *f, unsigned i)
{
	return f->stripe->m[i];
}

struct hmm_store *stripe_member_of(struct hmm_store *f, uint64_t key)
{
	return f->stripe->m[member_index(key, f->stripe->n)];
}

/* Split cfg->path into members: no empty name, none twice. */
static int split(struct hmm_stripe *p, const char *all)
{
	char *save = NULL, *tok;

	p->list = strdup(all);
	if (!p->list)
		return hmm_err(-ENOMEM, "store %s: out of memory", all);
	if (*all == ',' || all[strlen(all) - 1] == ',' || strstr(all, ",,"))
		return hmm_err(-EINVAL, "store %s: an empty member name", all);
	for (tok = strtok_r(p->list, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (p->n == HMM_STRIPE_MAX)
			return hmm_err(-E2BIG, "store %s: more than %d members",
				       all, HMM_STRIPE_MAX);
		for (unsigned i = 0; i < p->n; i++)
			if (!strcmp(p->path[i], tok))
				return hmm_err(-EINVAL, "store %s: member %s "
					       "named twice", all, tok);
		p->path[p->n++] = tok;
	}
	return 0;
}

/*
 * Each new member's size (0: the file's own).  With extent_bytes (the
 * tensor layer's chunk) and default geometry: room for ceil(E / n)
 * extents, E the most one store of cfg->size holds; else an even split.
 */
static uint64_t member_size(const struct hmm_store_config *cfg, unsigned n)
{
	uint64_t lo = 0, hi, e, sz;

	if (!cfg->size)
		return 0;
	if (cfg->extent_bytes && !cfg->max_extents && !cfg->meta_bytes &&
	    (!cfg->block_size || cfg->block_size == 4096)) {
		hi = cfg->size / cfg->extent_bytes;
		while (lo < hi) {	/* size_for grows with E */
			uint64_t mid = lo + (hi - lo + 1) / 2;

			sz = hmm_store_size_for(mid, cfg->extent_bytes);
			if (sz && sz <= cfg->size)
				lo = mid;
			else
				hi = mid - 1;
		}
		e = (lo + n - 1) / n;
		sz = e ? hmm_store_size_for(e, cfg->extent_bytes) : 0;
		if (sz)
			return sz;
	}
	return cfg->size / n / 4096 * 4096;
}

static int open_member(struct hmm_stripe *p, const struct hmm_store_config *cfg,
		       unsigned i, uint32_t flags, uint64_t set_uuid,
		       uint64_t at_gen)
{
	struct hmm_store_config mc = *cfg;
	struct store_role r = {
		.member = 1, .index = (uint16_t)i, .count = (uint16_t)p->n,
		.set_uuid = set_uuid, .any_uuid = i == 0 && !at_gen,
		.at_gen = at_gen, .pool = p->pool,
	};

	mc.path = p->path[i];
	mc.size = p->size;
	mc.flags = flags;
	return store_open(&mc, &r, &p->m[i]);
}

/* Every extent on the member its key names (else a read would miss it). */
static int check_placement(struct hmm_stripe *p, unsigned i)
{
	struct hmm_store *m = p->m[i];

	for (size_t k = 0; k < m->map.cap; k++)
		if (m->map.v[k].used &&
		    member_index(m->map.v[k].key, p->n) != i)
			return hmm_err(-EUCLEAN, "store %s: extent %#llx "
				       "belongs on member %u, not on this "
				       "member %u",
				       m->path,
				       (unsigned long long)m->map.v[k].key,
				       member_index(m->map.v[k].key, p->n), i);
	return 0;
}

/*
 * Open member 0, then the rest (created only if member 0 holds nothing
 * yet: new, or never flushed, as a crash between the members' formats
 * leaves it; one new member beside existing extents would be empty
 * where they should be).  Then bring every member to the oldest
 * generation among them, which may be one behind the newest (stripe.h).
 */
static int open_members(struct hmm_stripe *p, const struct hmm_store_config *cfg)
{
	uint64_t set_uuid, lo = UINT64_MAX, hi = 0;
	uint32_t flags = cfg->flags;
	unsigned ilo = 0, ihi = 0;
	int err;

	if (getrandom(&set_uuid, sizeof(set_uuid), 0) != sizeof(set_uuid))
		set_uuid = (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL);
	set_uuid |= 1;		/* never 0: 0 means "no set" */
	err = open_member(p, cfg, 0, flags, set_uuid, 0);
	if (err)
		return err;
	set_uuid = p->m[0]->sb.set_uuid;
	if (!p->m[0]->formatted && p->m[0]->sb.generation > 1)
		flags &= ~(HMM_STORE_CREATE | HMM_STORE_TRUNCATE);
	for (unsigned i = 1; i < p->n; i++) {
		err = open_member(p, cfg, i, flags, set_uuid, 0);
		if (err == -ENODATA && flags != cfg->flags)
			return hmm_err(err, "store %s: no store here, beside "
				       "member 0 at generation %llu: member %u "
				       "of the set is lost, and is not made "
				       "anew (its extents would be missing)",
				       p->path[i], (unsigned long long)
				       p->m[0]->sb.generation, i);
		if (err)
			return err;
	}
	for (unsigned i = 0; i < p->n; i++) {
		uint64_t g = p->m[i]->sb.generation;

		if (g < lo) {
			lo = g;
			ilo = i;
		}
		if (g > hi) {
			hi = g;
			ihi = i;
		}
	}
	if (hi > lo + 1)
		return hmm_err(-ESTALE, "store %s: at generation %llu, but member "
			       "%s is at %llu: not one striped store's flushes",
			       p->path[ihi], (unsigned long long)hi, p->path[ilo],
			       (unsigned long long)lo);
	for (unsigned i = 0; i < p->n && hi > lo; i++) {
		if (p->m[i]->sb.generation == lo)
			continue;
		hmm_store_close(p->m[i]);
		p->m[i] = NULL;
		err = open_member(p, cfg, i, flags & ~(HMM_STORE_CREATE |
						       HMM_STORE_TRUNCATE),
				  set_uuid, lo);
		if (err)
			return err;
	}
	for (unsigned i = 0; i < p->n; i++) {
		err = check_placement(p, i);
		if (err)
			return err;
	}
	return 0;
}

/* One eventfd that every member's ring signals on each completion. */
static void setup_wait(struct hmm_stripe *p)
{
	p->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	for (unsigned i = 0; i < p->n; i++) {
		struct hmm_store *m = p->m[i];

		if (!m->ring_up)
			continue;
		p->rings++;
		if (p->efd >= 0 && io_uring_register_eventfd(&m->u.ring, p->efd)) {
			close(p->efd);
			p->efd = -1;
		}
	}
	if (p->rings && p->efd < 0)
		snprintf(p->note, sizeof(p->note), "no eventfd on the members' "
			 "rings: waits poll them every millisecond");
}

static void add_note(struct hmm_stripe *p, const char *who, const char *what)
{
	size_t n = strlen(p->note);

	if (!*what || n + 4 >= sizeof(p->note))
		return;
	snprintf(p->note + n, sizeof(p->note) - n, "%s%s: %s", n ? "; " : "",
		 who, what);
}

int stripe_open(const struct hmm_store_config *cfg, struct hmm_store **out)
{
	struct hmm_stripe *p = calloc(1, sizeof(*p));
	struct hmm_store *f = calloc(1, sizeof(*f));
	int err;

	if (!p || !f || !(f->path = strdup(cfg->path))) {
		free(p);
		if (f)
			free(f->path);
		free(f);
		return hmm_err(-ENOMEM, "store %s: out of memory", cfg->path);
	}
	f->fd = -1;
	f->stripe = p;
	p->efd = -1;
	err = split(p, cfg->path);
	if (err)
		goto out_free;
	p->size = member_size(cfg, p->n);
	err = hmm_pool_new(cfg->pool_bytes ? cfg->pool_bytes : STORE_DEF_POOL,
			   cfg->numa_node, cfg->pool_flags, &p->pool);
	if (err)
		goto out_free;
	err = open_members(p, cfg);
	if (err)
		goto out_free;
	setup_wait(p);
	if (!hmm_pool_locked(p->pool))
		add_note(p, "pool", "not mlock'd (RLIMIT_MEMLOCK)");
	for (unsigned i = 0; i < p->n; i++)
		add_note(p, p->path[i], p->m[i]->note);
	*out = f;
	return 0;

out_free:
	/* as a plain store: leave no file this open created */
	for (unsigned i = 0; i < p->n; i++) {
		int created = p->m[i] && p->m[i]->created;

		hmm_store_close(p->m[i]);
		p->m[i] = NULL;
		if (created)
			unlink(p->path[i]);
	}
	stripe_close(f);
	return err;
}

void stripe_close(struct hmm_store *f)
{
	struct hmm_stripe *p = f ? f->stripe : NULL;

	if (p) {
		for (unsigned i = 0; i < p->n; i++)
			hmm_store_close(p->m[i]);	/* unregisters the efd */
		if (p->efd >= 0)
			close(p->efd);
		hmm_pool_delete(p->pool);		/* after every ring */
		free(p->list);
		free(p);
	}
	if (f) {
		free(f->path);
		free(f);
	}
}

/* The member a request goes to, and where its RAW offsets start. */
static unsigned route(struct hmm_stripe *p, const struct hmm_io *io,
		      uint64_t *base)
{
	unsigned i = 0;

	*base = 0;
	if (io->op != HMM_IO_READ_RAW && io->op != HMM_IO_WRITE_RAW)
		return member_index(io->key, p->n);
	while (i + 1 < p->n && io->off - *base >= p->m[i]->sb.data_bytes)
		*base += p->m[i++]->sb.data_bytes;
	return i;
}

static uint64_t raw_bytes(struct hmm_stripe *p)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < p->n; i++)
		n += p->m[i]->sb.data_bytes;
	return n;
}

/* A RAW request starts inside the data areas (the member it lands on
 * checks the rest), or the request is not RAW. */
static int raw_inside(struct hmm_stripe *p, const struct hmm_io *io)
{
	if (io->op != HMM_IO_READ_RAW && io->op != HMM_IO_WRITE_RAW)
		return 1;
	return io->off < raw_bytes(p);
}

int stripe_submit(struct hmm_store *f, struct hmm_io **ios, unsigned n)
{
	struct hmm_stripe *p = f->stripe;
	uint64_t touched = 0, base;
	unsigned i;
	int err = 0, perr = 0;

	for (i = 0; i < n; i++) {
		unsigned j;

		if (!ios[i]) {
			err = hmm_err(-EINVAL, "store %s: request %u is NULL",
				      f->path, i);
			break;
		}
		j = route(p, ios[i], &base);
		if (!raw_inside(p, ios[i])) {
			err = hmm_err(-EINVAL, "store %s: %s at %llu+%u: "
				      "outside the members' data areas "
				      "(%llu bytes in all)", f->path,
				      ios[i]->op == HMM_IO_READ_RAW ?
				      "raw read" : "raw write",
				      (unsigned long long)ios[i]->off,
				      ios[i]->len,
				      (unsigned long long)raw_bytes(p));
			break;
		}
		err = store_claim(p->m[j]);
		if (!err)
			err = store_queue(p->m[j], ios[i], base);
		if (err)
			break;
		touched |= 1ull << j;
	}
	for (unsigned j = 0; j < p->n; j++) {
		int r = touched & (1ull << j) ? store_kick(p->m[j]) : 0;

		if (r && !perr)
			perr = r;
	}
	if (i == 0 && err)
		return err;
	if (i == 0 && perr)
		return perr;
	return (int)i;
}

unsigned stripe_inflight(struct hmm_store *f)
{
	unsigned n = 0;

	for (unsigned i = 0; i < f->stripe->n; i++)
		n += hmm_store_inflight(f->stripe->m[i]);
	return n;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Reap every member once, starting at a rotating one: completed. */
static int reap_all(struct hmm_stripe *p)
{
	unsigned first = p->rr++ % p->n;
	int got = 0;

	for (unsigned k = 0; k < p->n; k++) {
		int r = hmm_store_poll(p->m[(first + k) % p->n], 0, 0);

		if (r < 0)
			return r;
		got += r;
	}
	return got;
}

int stripe_poll(struct hmm_store *f, unsigned min_complete, int timeout_ms,
		int wake_fd)
{
	struct hmm_stripe *p = f->stripe;
	double deadline = timeout_ms < 0 ? 0 : now_ms() + timeout_ms;
	unsigned got = 0, inflight = stripe_inflight(f);
	struct pollfd pfd[2];

	if (min_complete > inflight)
		min_complete = inflight;
	for (;;) {
		uint64_t v;
		int r, ms, nfd = 0;

		if (p->efd >= 0 && read(p->efd, &v, sizeof(v)) < 0 &&
		    errno != EAGAIN)
			return hmm_err(-errno, "store %s: reading its eventfd: "
				       "%s", f->path, strerror(errno));
		r = reap_all(p);	/* after the drain: none is missed */
		if (r < 0)
			return r;
		got += r;
		if (got >= min_complete)
			break;
		ms = timeout_ms < 0 ? -1 :
		     (int)(deadline - now_ms() + 0.999 > 0 ?
			   deadline - now_ms() + 0.999 : 0);
		if (!ms)
			break;
		if (!p->rings)		/* pread/pwrite: completions at once */
			continue;
		if (p->efd >= 0)
			pfd[nfd++] = (struct pollfd){ .fd = p->efd, .events = POLLIN };
		else if (ms < 0 || ms > 1)
			ms = 1;
		if (wake_fd >= 0)
			pfd[nfd++] = (struct pollfd){ .fd = wake_fd, .events = POLLIN };
		r = poll(pfd, nfd, ms);
		if (r < 0 && errno != EINTR)
			return hmm_err(-errno, "store %s: poll: %s", f->path,
				       strerror(errno));
		if (r > 0 && wake_fd >= 0 && pfd[nfd - 1].revents)
			break;
	}
	return (int)got;
}

/* Wait for everything in flight on every member. */
static int drain_all(struct hmm_store *f)
{
	while (stripe_inflight(f)) {
		int r = stripe_poll(f, stripe_inflight(f), -1, -1);

		if (r < 0)
			return r;
	}
	return 0;
}

int stripe_flush(struct hmm_store *f)
{
	struct hmm_stripe *p = f->stripe;
	struct hmm_sb nsb[HMM_STRIPE_MAX];
	int err = drain_all(f);

	/* every member durable at G + 1 before any frees a place of G */
	for (unsigned i = 0; i < p->n && !err; i++)
		err = store_flush_commit(p->m[i], &nsb[i]);
	if (err)
		return err;
	for (unsigned i = 0; i < p->n; i++)
		store_flush_settle(p->m[i], &nsb[i]);
	return 0;
}

static int by_key(const void *a, const void *b)
{
	uint64_t x = ((const struct hmm_xent *)a)->key;
	uint64_t y = ((const struct hmm_xent *)b)->key;

	return x < y ? -1 : x > y;
}

int stripe_each(struct hmm_store *f,
		int (*fn)(void *arg, uint64_t key, uint32_t len), void *arg)
{
	struct hmm_stripe *p = f->stripe;
	struct hmm_xent *v;
	size_t n = 0, k = 0;
	int r = 0;

	for (unsigned i = 0; i < p->n; i++)
		n += p->m[i]->map.n;
	v = malloc((n ? n : 1) * sizeof(*v));
	if (!v)
		return hmm_err(-ENOMEM, "store %s: out of memory", f->path);
	for (unsigned i = 0; i < p->n; i++)
		for (size_t j = 0; j < p->m[i]->map.cap; j++)
			if (p->m[i]->map.v[j].used)
				v[k++] = p->m[i]->map.v[j];
	qsort(v, k, sizeof(*v), by_key);
	for (size_t i = 0; i < k && !r; i++)
		r = fn(arg, v[i].key, v[i].len);
	free(v);
	return r;
}

void stripe_stats(struct hmm_store *f, struct hmm_store_stats *st)
{
	struct hmm_stripe *p = f->stripe;
	struct hmm_store_stats m;

	memset(st, 0, sizeof(*st));
	for (unsigned i = 0; i < p->n; i++) {
		hmm_store_stats(p->m[i], &m);
		if (i == 0) {
			*st = m;	/* generation, flushes, geometry, pool */
			continue;
		}
		st->capacity_bytes += m.capacity_bytes;
		st->used_bytes += m.used_bytes;
		st->extents += m.extents;
		st->read_bytes += m.read_bytes;
		st->write_bytes += m.write_bytes;
		st->read_ops += m.read_ops;
		st->write_ops += m.write_ops;
		st->short_resubmits += m.short_resubmits;
		st->errors += m.errors;
		st->crc_errors += m.crc_errors;
		st->quarantined_bytes += m.quarantined_bytes;
		st->flush_bytes += m.flush_bytes;
		st->inflight += m.inflight;
		st->queue_depth += m.queue_depth;
		st->direct &= m.direct;
		st->registered_files &= m.registered_files;
		st->registered_buffers &= m.registered_buffers;
		st->sqpoll &= m.sqpoll;
		st->ring_flags &= m.ring_flags;
		st->tmpfs |= m.tmpfs;
	}
	st->members = p->n;
}

const char *stripe_note(struct hmm_store *f)
{
	return f->stripe->note;
}

struct hmm_pool *stripe_pool(struct hmm_store *f)
{
	return f->stripe->pool;
}
