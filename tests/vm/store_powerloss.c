// SPDX-License-Identifier: GPL-2.0
/*
 * tests/vm/store_powerloss.c — libhmm's store under power loss, not only
 * SIGKILL: a device that loses its volatile write cache, and with it any
 * subset of the writes since the last FLUSH, in any order, torn at
 * sector boundaries.  The claim under test (store.h, architecture.md):
 * after a crash the store holds exactly the last completed flush, or
 * the one in flight.
 *
 * The xfstests method: device-mapper's log-writes target between the
 * store and a loop device records every write, FLUSH and FUA in the
 * order the disk could have made them durable (logw_t.h) on a second
 * loop device.  A seeded workload (writes, overwrites and deletes of
 * 4 KiB..256 KiB extents, batches that complete out of order, meta
 * blobs, a flush every 0-5 operations, then a tail it never flushes)
 * runs on the target, keeping in memory what every generation holds and
 * marking the log ("mark genN") each time a flush returns.  Then the
 * log is replayed onto the blanked store device, and at each state the
 * store is opened (no CREATE) and must: open, at a generation no older
 * than the last flush acknowledged before that state's last FLUSH and
 * no newer than the one after it, with every extent of that generation
 * byte-exact, none missing, none extra, and its meta blob.
 *   - at every FLUSH (and FUA) entry: the prefix up to it;
 *   - inside each run of writes between two FLUSHes: sampled prefixes;
 *   - the prefix to a FLUSH plus random subsets of the writes after it,
 *     applied in log or random order (two writes to one sector keep
 *     theirs), one of them sometimes torn at a sector boundary.
 *
 * Needs loop.ko, dm-mod.ko and dm-log-writes.ko (tests/vm/run loads
 * them before this test) and skips without them.  Linked static with
 * libhmm (tests/vm/run).  HMM_PL_SEED=<n> replays another workload.
 * Scratch: two files and a node in /tmp and two loop devices, removed
 * at exit.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "err.h"
#include "pool.h"
#include "store.h"
#include "blk_t.h"
#include "logw_t.h"
#include "kselftest_harness.h"

#define PL_DM		"hmm_powerloss"
#define PL_IMG		"/tmp/store_powerloss.img"
#define PL_LOG		"/tmp/store_powerloss.log"
#define PL_NODE		"/tmp/store_powerloss.dm"
#define PL_IMG_BYTES	(32ull << 20)
#define PL_LOG_BYTES	(128ull << 20)	/* sparse; a run logs ~10 MiB */
#define PL_KEYS		20		/* distinct keys the workload uses */
#define PL_ROUNDS	60		/* flushes after the format's */
#define PL_MAXGEN	(PL_ROUNDS + 1)
#define PL_MAXLEN	(256u << 10)	/* the largest extent */
#define PL_META_CAP	(16u << 10)
#define PL_BATCH	4		/* writes submitted together */
#define PL_MAXPLACE	2048		/* data writes the workload makes */
#define PL_SUBSETS	12		/* random subsets of each group */
#define PL_SAMPLES	3		/* prefixes sampled inside a group */
#define PL_REPORT	3		/* failing states described in full */
#define PL_SEED		0x5eed2024u

/* ---- what the workload wrote ---------------------------------------- */

struct pl_ext {
	uint64_t key;
	uint32_t len, ver;	/* ver picks the bytes: pl_fill */
};

/* What a generation holds: extents sorted by key, and the meta blob. */
struct pl_gen {
	uint32_t n;
	struct pl_ext ext[PL_KEYS];
	uint32_t meta_len, meta_ver;
};

/* Where a data write went, to name log entries in reports. */
struct pl_place {
	uint64_t off, key;
	uint32_t len, ver;
};

/*
 * The recording, made by main() before the tests run (each test is a
 * forked child and reads it).  Allocated statically; pl_cleanup (at
 * the parent's exit) undoes the devices and files.
 */
static struct {
	pid_t pid;
	uint64_t seed;
	int skip, err;			/* why says why */
	char why[512];
	struct pl_gen gen[PL_MAXGEN + 1];	/* [g]: what flush g holds */
	struct pl_gen cur;		/* the store now, flushed or not */
	unsigned last_gen;
	uint32_t nver;
	uint64_t data_off, table1_off;	/* the layout, to name writes */
	unsigned writes, overwrites, deletes, metas, batches, batched;
	unsigned empty;
	unsigned tail_ops;
	struct pl_place place[PL_MAXPLACE];
	unsigned nplace;
	char status[128];		/* log-writes' at the end */
	char dev[32];			/* the store's loop device */
	int devfd, logfd, dm_up;
	struct logw log;
	uint32_t *tag;			/* [p]: gen acknowledged at point p */
} rec = { .devfd = -1, .logfd = -1 };

static int pl_fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rec.why, sizeof(rec.why), fmt, ap);
	va_end(ap);
	rec.err = err ? err : -EIO;
	return rec.err;
}

static uint64_t pl_rand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

static uint64_t pl_mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The bytes of version ver of key: len of them (a multiple of 8). */
static void pl_fill(void *buf, uint64_t key, uint32_t ver, uint32_t len)
{
	uint64_t *w = buf, base = pl_mix(key ^ (uint64_t)ver << 40);

	for (uint32_t i = 0; i < len / 8; i++)
		w[i] = pl_mix(base + i);
}

/* The meta blob of version ver (len bytes) in buf (PL_META_CAP). */
static void pl_meta(uint8_t *buf, uint32_t ver, uint32_t len)
{
	pl_fill(buf, ~0ull, ver, PL_META_CAP);
	memset(buf + len, 0, PL_META_CAP - len);
}

static uint64_t pl_key(unsigned i)
{
	return (uint64_t)(1 + i / 4) << 32 | i % 4;
}

static int pl_find(const struct pl_gen *g, uint64_t key)
{
	for (uint32_t i = 0; i < g->n; i++)
		if (g->ext[i].key == key)
			return (int)i;
	return -1;
}

/* Put (key, len, ver) in g, keeping the keys sorted. */
static void pl_put(struct pl_gen *g, uint64_t key, uint32_t len,
		   uint32_t ver)
{
	int i = pl_find(g, key);
	uint32_t j;

	if (i < 0) {
		for (j = g->n; j && g->ext[j - 1].key > key; j--)
			g->ext[j] = g->ext[j - 1];
		g->n++;
		i = (int)j;
	}
	g->ext[i] = (struct pl_ext){ key, len, ver };
}

static void pl_del(struct pl_gen *g, int i)
{
	memmove(&g->ext[i], &g->ext[i + 1],
		(g->n - i - 1) * sizeof(g->ext[0]));
	g->n--;
}

/* ---- the workload ---------------------------------------------------- */

static uint32_t pl_len(uint64_t *rng)
{
	static const uint32_t len[] = { 4096, 8192, 12288, 16384, 28672,
					65536, 131072, PL_MAXLEN };

	return len[pl_rand(rng) % 8];
}

/* Write n extents of keys ki[] at once (distinct keys: they may
 * complete in any order) and wait for all of them. */
static int pl_write(struct hmm_store *s, void **bufs, const unsigned *ki,
		    unsigned n, uint64_t *rng)
{
	struct hmm_io io[PL_BATCH], *p[PL_BATCH];
	uint32_t ver[PL_BATCH];
	int r, err = 0;

	for (unsigned i = 0; i < n; i++) {
		uint32_t len = pl_len(rng);

		ver[i] = ++rec.nver;
		pl_fill(bufs[i], pl_key(ki[i]), ver[i], len);
		io[i] = (struct hmm_io){ .op = HMM_IO_WRITE,
					 .key = pl_key(ki[i]), .len = len,
					 .buf = bufs[i] };
		p[i] = &io[i];
	}
	r = hmm_store_submit(s, p, n);
	if (r < 0)
		return pl_fail(r, "submit: %s", hmm_last_error());
	for (int i = 0; i < r; i++) {
		int w = hmm_store_wait(s, &io[i]);

		if (w && !err)
			err = pl_fail(w, "write: %s", hmm_last_error());
	}
	if (!err && r != (int)n)
		err = pl_fail(-EIO, "submit queued %d of %u", r, n);
	for (unsigned i = 0; !err && i < n; i++) {
		uint64_t off;

		rec.overwrites += pl_find(&rec.cur, io[i].key) >= 0;
		rec.writes++;
		rec.batched += n > 1;
		pl_put(&rec.cur, io[i].key, io[i].len, ver[i]);
		if (rec.nplace < PL_MAXPLACE &&
		    !hmm_store_extent_where(s, io[i].key, &off))
			rec.place[rec.nplace++] = (struct pl_place){
				off, io[i].key, io[i].len, ver[i] };
	}
	return err;
}

/* One operation: a write, a batch of writes, a delete or a meta blob. */
static int pl_op(struct hmm_store *s, void **bufs, uint64_t *rng)
{
	uint64_t x = pl_rand(rng) % 100;
	unsigned ki[PL_BATCH], n = 1;
	static uint8_t meta[PL_META_CAP];

	if (x >= 65 && x < 85 && rec.cur.n) {
		int i = (int)(pl_rand(rng) % rec.cur.n);
		int r = hmm_store_extent_free(s, rec.cur.ext[i].key);

		if (r)
			return pl_fail(r, "free: %s", hmm_last_error());
		pl_del(&rec.cur, i);
		rec.deletes++;
		return 0;
	}
	if (x >= 85) {
		uint32_t len = pl_rand(rng) % 3000, ver = ++rec.nver;
		int r;

		pl_meta(meta, ver, len);
		r = hmm_store_meta_set(s, meta, len);
		if (r)
			return pl_fail(r, "meta: %s", hmm_last_error());
		rec.cur.meta_len = len;
		rec.cur.meta_ver = ver;
		rec.metas++;
		return 0;
	}
	if (x >= 45 && x < 65) {
		n = 2 + pl_rand(rng) % (PL_BATCH - 1);
		rec.batches++;
	}
	for (unsigned i = 0; i < n; i++) {
		unsigned j;

		do {
			ki[i] = pl_rand(rng) % PL_KEYS;
			for (j = 0; j < i && ki[j] != ki[i]; j++)
				;
		} while (j < i);
	}
	return pl_write(s, bufs, ki, n, rng);
}

/* Mark the log: the flush that made generation g has returned. */
static int pl_mark(unsigned g)
{
	char msg[32];
	int r;

	snprintf(msg, sizeof(msg), "mark gen%u", g);
	r = t_dm_message(PL_DM, msg);
	return r ? pl_fail(r, "dm message \"%s\": %s", msg, strerror(-r)) : 0;
}

/* Flush; the model of the new generation; a mark in the log. */
static int pl_flush(struct hmm_store *s)
{
	struct hmm_store_stats st;
	int r = hmm_store_flush(s);

	if (r)
		return pl_fail(r, "flush: %s", hmm_last_error());
	hmm_store_stats(s, &st);
	if (st.generation != rec.last_gen + 1 || st.generation > PL_MAXGEN)
		return pl_fail(-EPROTO, "flush made generation %llu after %u",
			       (unsigned long long)st.generation,
			       rec.last_gen);
	rec.last_gen = (unsigned)st.generation;
	rec.gen[rec.last_gen] = rec.cur;
	return pl_mark(rec.last_gen);
}

static int pl_workload(struct hmm_store *s, uint64_t *rng)
{
	void *bufs[PL_BATCH];
	int err = 0;

	for (int i = 0; i < PL_BATCH; i++) {
		bufs[i] = hmm_pool_alloc(hmm_store_pool(s), PL_MAXLEN);
		if (!bufs[i])
			return pl_fail(-ENOMEM, "pool: %s", hmm_last_error());
	}
	for (int r = 0; !err && r < PL_ROUNDS; r++) {
		unsigned nops = pl_rand(rng) % 6;

		rec.empty += !nops;
		for (unsigned i = 0; !err && i < nops; i++)
			err = pl_op(s, bufs, rng);
		if (!err)
			err = pl_flush(s);
	}
	/* the tail: never flushed, so never seen after a crash */
	for (unsigned i = 0; !err && i < 6; i++, rec.tail_ops++)
		err = pl_op(s, bufs, rng);
	return err;
}

/* ---- recording: loop devices, log-writes, the workload ---------------- */

static int pl_mkfile(const char *path, uint64_t bytes)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int err = 0;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)bytes))
		err = -errno;
	close(fd);
	return err;
}

/* The store's loop device under log-writes, logging to another. */
static int pl_devices(void)
{
	char a[32], b[32], logdev[32], params[80];
	dev_t dn;
	int err;

	if (access(T_LOOP_CONTROL, F_OK) || access(T_DM_CONTROL, F_OK)) {
		int noloop = access(T_LOOP_CONTROL, F_OK) != 0;

		rec.skip = 1;
		snprintf(rec.why, sizeof(rec.why), "no %s: %s not loaded",
			 noloop ? T_LOOP_CONTROL : T_DM_CONTROL,
			 noloop ? "loop.ko" : "dm-mod.ko");
		return 0;
	}
	err = t_dm_has_target("log-writes");
	if (err) {
		rec.skip = 1;
		snprintf(rec.why, sizeof(rec.why), "device-mapper has no "
			 "log-writes target (dm-log-writes.ko): %s",
			 strerror(-err));
		return 0;
	}
	err = pl_mkfile(PL_IMG, PL_IMG_BYTES);
	if (!err)
		err = pl_mkfile(PL_LOG, PL_LOG_BYTES);
	if (err)
		return pl_fail(err, "files in /tmp: %s", strerror(-err));
	err = t_loop_attach(PL_IMG, rec.dev, &rec.devfd);
	if (!err)
		err = t_loop_attach(PL_LOG, logdev, &rec.logfd);
	if (err)
		return pl_fail(err, "loop device: %s", strerror(-err));
	err = t_devno(rec.dev, a, sizeof(a));
	if (!err)
		err = t_devno(logdev, b, sizeof(b));
	if (err)
		return pl_fail(err, "loop node: %s", strerror(-err));
	snprintf(params, sizeof(params), "%s %s", a, b);
	err = t_dm_create(PL_DM, PL_IMG_BYTES >> 9, "log-writes", params,
			  &dn);
	if (err)
		return pl_fail(err, "dm create log-writes %s: %s", params,
			       strerror(-err));
	rec.dm_up = 1;
	unlink(PL_NODE);
	if (mknod(PL_NODE, S_IFBLK | 0600, dn))
		return pl_fail(-errno, "mknod %s: %s", PL_NODE,
			       strerror(errno));
	return 0;
}

/* The gen acknowledged at each point of the log: a mark "genN" names
 * the last barrier before it (the flush's final FLUSH) as making N
 * durable.  Point p: entries [0, p) applied; a FLUSH entry i is a
 * barrier at point i, a FUA write i one at point i + 1. */
static int pl_tags(void)
{
	const struct logw *l = &rec.log;
	size_t last = 0;

	rec.tag = calloc(l->n + 1, sizeof(*rec.tag));
	if (!rec.tag)
		return pl_fail(-ENOMEM, "out of memory");
	for (size_t i = 0; i < l->n; i++) {
		const struct logw_entry *e = &l->e[i];
		unsigned g;

		if (e->flags & LOGW_FLUSH)
			last = i;
		if (e->flags & LOGW_FUA)
			last = i + 1;
		if (e->flags & LOGW_MARK && sscanf(e->mark, "gen%u", &g) == 1 &&
		    g > rec.tag[last])
			rec.tag[last] = g;
	}
	return 0;
}

static void pl_record(void)
{
	struct hmm_store_config cfg = {
		.path = PL_NODE, .flags = HMM_STORE_CREATE,
		.queue_depth = 8, .pool_bytes = 2 << 20,
		.pool_flags = HMM_POOL_NOHUGE, .numa_node = -1,
		.meta_bytes = PL_META_CAP,
	};
	struct hmm_store *s = NULL;
	struct hmm_store_stats st;
	const char *env = getenv("HMM_PL_SEED");
	uint64_t rng;
	int err;

	rec.seed = env ? strtoull(env, NULL, 0) : PL_SEED;
	rng = pl_mix(rec.seed) | 1;
	if (pl_devices() || rec.skip)
		return;
	err = hmm_store_open(&cfg, &s);
	if (err) {
		pl_fail(err, "format on %s: %s", PL_NODE, hmm_last_error());
		return;
	}
	hmm_store_stats(s, &st);
	rec.data_off = st.data_offset;
	/* 4 KiB blocks: the data area follows the two tables at once */
	rec.table1_off = 8192 + (st.data_offset - 8192) / 2;
	rec.last_gen = (unsigned)st.generation;
	if (st.generation != 1)
		err = pl_fail(-EPROTO, "a new store at generation %llu",
			      (unsigned long long)st.generation);
	else
		err = pl_mark(1);
	if (!err)
		err = pl_workload(s, &rng);
	hmm_store_close(s);	/* no flush: the tail stays unflushed */
	if (err)
		return;
	t_dm_status(PL_DM, rec.status, sizeof(rec.status));
	err = t_dm_remove(PL_DM);
	if (err) {
		pl_fail(err, "dm remove: %s", strerror(-err));
		return;
	}
	rec.dm_up = 0;
	t_loop_detach(rec.logfd);
	rec.logfd = -1;
	err = logw_open(PL_LOG, &rec.log);
	if (err) {
		pl_fail(err, "reading the log %s: %s", PL_LOG, strerror(-err));
		return;
	}
	pl_tags();
}

static void pl_cleanup(void)
{
	if (getpid() != rec.pid)
		return;
	if (rec.dm_up)
		t_dm_remove(PL_DM);
	t_loop_detach(rec.logfd);
	t_loop_detach(rec.devfd);
	logw_close(&rec.log);
	free(rec.tag);
	unlink(PL_NODE);
	unlink(PL_IMG);
	unlink(PL_LOG);
}

/* ---- replay ------------------------------------------------------------ */

#define PL_AT_FLUSH	1u	/* the prefix at every barrier */
#define PL_INSIDE	2u	/* prefixes sampled between barriers */
#define PL_SUBSET	4u	/* subsets, reordered, torn */

struct pl_undo {
	uint64_t off, len;
	uint8_t *old;
};

/* One replay of the log onto the blanked store device (in a test). */
struct pl_walk {
	unsigned kinds;		/* PL_AT_FLUSH | ... */
	int fd;			/* the image under the loop device */
	uint64_t rng;
	uint8_t *want;		/* PL_MAXLEN */
	struct pl_undo *undo;	/* what a subset overwrote */
	size_t nundo, cap_undo;
	unsigned states, blank, fails, torn;
	uint8_t seen[PL_MAXGEN + 1];
	char state[2048];	/* the state being checked, in words */
};

/* Write len bytes of data at off of the image, keeping what was there
 * when undo is set. */
static int pl_apply(struct pl_walk *w, uint64_t off, const void *data,
		    uint64_t len, int undo)
{
	if (undo) {
		struct pl_undo *u;

		if (w->nundo == w->cap_undo) {
			size_t cap = w->cap_undo ? 2 * w->cap_undo : 64;
			void *p = realloc(w->undo, cap * sizeof(*u));

			if (!p)
				return -ENOMEM;
			w->undo = p;
			w->cap_undo = cap;
		}
		u = &w->undo[w->nundo];
		u->old = malloc(len);
		if (!u->old)
			return -ENOMEM;
		if (pread(w->fd, u->old, len, (off_t)off) != (ssize_t)len) {
			free(u->old);
			return -EIO;
		}
		u->off = off;
		u->len = len;
		w->nundo++;
	}
	return pwrite(w->fd, data, len, (off_t)off) == (ssize_t)len ? 0 :
	       -EIO;
}

/* Put back what pl_apply overwrote, newest first. */
static void pl_undo_all(struct pl_walk *w)
{
	while (w->nundo) {
		struct pl_undo *u = &w->undo[--w->nundo];

		if (pwrite(w->fd, u->old, u->len, (off_t)u->off) !=
		    (ssize_t)u->len)
			w->fails++;	/* the replay itself broke */
		free(u->old);
	}
}

/* Name log entry i in words: which part of the store it wrote. */
static void pl_name(size_t i, char *out, size_t len)
{
	const struct logw_entry *e = &rec.log.e[i];
	uint64_t first = 0;

	if (e->len >= 8)
		memcpy(&first, e->data, 8);
	if (e->off < 8192) {
		snprintf(out, len, "e%zu superblock %llu", i,
			 (unsigned long long)(e->off / 4096));
		return;
	}
	if (e->off < rec.data_off) {
		snprintf(out, len, "e%zu table %d (%llu bytes)", i,
			 e->off >= rec.table1_off, (unsigned long long)e->len);
		return;
	}
	for (unsigned k = 0; k < rec.nplace; k++) {
		const struct pl_place *p = &rec.place[k];
		uint64_t w0;

		pl_fill(&w0, p->key, p->ver, 8);
		if (p->off == e->off && w0 == first) {
			snprintf(out, len, "e%zu data of extent %#llx v%u "
				 "(%llu bytes at %llu)", i,
				 (unsigned long long)p->key, p->ver,
				 (unsigned long long)e->len,
				 (unsigned long long)e->off);
			return;
		}
	}
	snprintf(out, len, "e%zu %llu bytes at %llu", i,
		 (unsigned long long)e->len, (unsigned long long)e->off);
}

static void pl_say(struct pl_walk *w, const char *fmt, ...)
{
	size_t n = strlen(w->state);
	va_list ap;

	if (n + 1 >= sizeof(w->state))
		return;
	va_start(ap, fmt);
	vsnprintf(w->state + n, sizeof(w->state) - n, fmt, ap);
	va_end(ap);
}

/* Start w->state with the state at barrier point p: entries [0, p). */
static void pl_say_base(struct pl_walk *w, size_t p)
{
	const struct logw *l = &rec.log;

	w->state[0] = 0;
	if (!p)
		pl_say(w, "the blank device");
	else if (p == l->n)
		pl_say(w, "the whole log (%zu entries)", p);
	else if (l->e[p].flags & LOGW_FLUSH)
		pl_say(w, "the log through the FLUSH at entry %zu", p);
	else
		pl_say(w, "the log through the FUA write at entry %zu", p - 1);
}

struct pl_list {
	uint32_t n, extra;
	uint64_t key[PL_KEYS];
	uint32_t len[PL_KEYS];
};

static int pl_list_one(void *arg, uint64_t key, uint32_t len)
{
	struct pl_list *l = arg;

	if (l->n == PL_KEYS) {
		l->extra++;
		return 0;
	}
	l->key[l->n] = key;
	l->len[l->n++] = len;
	return 0;
}

/* The extents s lists are generation g's (keys and lengths): 0, or -1
 * and why. */
static int pl_same_list(struct hmm_store *s, unsigned g, char *why,
			size_t len)
{
	const struct pl_gen *want = &rec.gen[g];
	struct pl_list got = { 0 };
	uint32_t i;

	hmm_store_extent_each(s, pl_list_one, &got);
	for (i = 0; i < want->n && i < got.n; i++)
		if (got.key[i] != want->ext[i].key ||
		    got.len[i] != want->ext[i].len)
			break;
	if (i == want->n && i == got.n && !got.extra)
		return 0;
	snprintf(why, len, "%u extents listed, generation %u has %u; first "
		 "difference at #%u: %#llx of %u bytes listed, %#llx of %u "
		 "bytes wanted", got.n + got.extra, g, want->n, i,
		 (unsigned long long)(i < got.n ? got.key[i] : 0),
		 i < got.n ? got.len[i] : 0,
		 (unsigned long long)(i < want->n ? want->ext[i].key : 0),
		 i < want->n ? want->ext[i].len : 0);
	return -1;
}

/* The extents and meta blob of s are exactly generation g's: 0, or -1
 * and why. */
static int pl_same(struct pl_walk *w, struct hmm_store *s, unsigned g,
		   char *why, size_t len)
{
	const struct pl_gen *want = &rec.gen[g];
	static uint8_t meta[PL_META_CAP], mwant[PL_META_CAP];
	uint8_t *buf = hmm_pool_alloc(hmm_store_pool(s), PL_MAXLEN);
	int m;

	if (!buf)
		return snprintf(why, len, "pool: %s", hmm_last_error()), -1;
	if (pl_same_list(s, g, why, len))
		return -1;
	for (uint32_t i = 0; i < want->n; i++) {
		const struct pl_ext *x = &want->ext[i];
		struct hmm_io io = { .op = HMM_IO_READ, .key = x->key,
				     .len = x->len, .buf = buf };
		struct hmm_io *p = &io;
		int r = hmm_store_submit(s, &p, 1);

		if (r == 1)
			r = hmm_store_wait(s, &io);
		if (r)
			return snprintf(why, len, "extent %#llx (v%u): %s",
					(unsigned long long)x->key, x->ver,
					hmm_last_error()), -1;
		pl_fill(w->want, x->key, x->ver, x->len);
		if (memcmp(buf, w->want, x->len))
			return snprintf(why, len, "extent %#llx (v%u): bytes "
					"differ", (unsigned long long)x->key,
					x->ver), -1;
	}
	m = hmm_store_meta_get(s, meta, sizeof(meta));
	pl_meta(mwant, want->meta_ver, want->meta_len);
	if (m != (int)want->meta_len || memcmp(meta, mwant, want->meta_len))
		return snprintf(why, len, "meta blob of %d bytes, generation "
				"%u's is %u (v%u)", m, g, want->meta_len,
				want->meta_ver), -1;
	return 0;
}

/*
 * Open the store on the replayed device: it must open at a generation
 * in [lo, hi] (lo 0: before the format was durable, so "no store" is
 * right too) holding exactly that generation.  0 or -1, counted.
 */
static int pl_check(struct pl_walk *w, unsigned lo, unsigned hi,
		    const char *kind, size_t at)
{
	struct hmm_store_config cfg = {
		.path = rec.dev, .queue_depth = 4, .pool_bytes = 1 << 20,
		.pool_flags = HMM_POOL_NOHUGE, .numa_node = -1,
	};
	struct hmm_store *s = NULL;
	struct hmm_store_stats st;
	char why[768] = "";
	int r;

	w->states++;
	r = hmm_store_open(&cfg, &s);
	if (r == -ENODATA && !lo) {
		w->blank++;
		return 0;
	}
	if (r) {
		snprintf(why, sizeof(why), "open: %s", hmm_last_error());
	} else {
		hmm_store_stats(s, &st);
		if (st.generation < lo || st.generation > hi || !st.generation)
			snprintf(why, sizeof(why), "opened at generation %llu",
				 (unsigned long long)st.generation);
		else if (!pl_same(w, s, (unsigned)st.generation, why,
				  sizeof(why)))
			w->seen[st.generation] = 1;
		hmm_store_close(s);
	}
	if (!why[0])
		return 0;
	if (++w->fails <= PL_REPORT) {
		ksft_print_msg("FAIL %s state at log entry %zu (generation "
			       "%u acknowledged, %u at most): %s\n", kind, at,
			       lo, hi, why);
		ksft_print_msg("  state: %s\n", w->state);
	}
	return -1;
}

/* Apply entry i torn: a random part of its sectors, not all, not none
 * (one sector: whole). */
static int pl_tear(struct pl_walk *w, size_t i)
{
	const struct logw_entry *e = &rec.log.e[i];
	uint64_t ss = rec.log.sectorsize, ns = e->len / ss, kept = 0;
	uint64_t keep_first = pl_rand(&w->rng) % ns;
	int err = 0;

	for (uint64_t k = 0; !err && k < ns; k++) {
		int keep = k == keep_first ||
			   (k != (keep_first + 1) % ns && pl_rand(&w->rng) & 1);

		if (keep || ns == 1) {
			kept++;
			err = pl_apply(w, e->off + k * ss, e->data + k * ss, ss,
				       1);
		}
	}
	pl_say(w, " (torn: %llu of %llu sectors)", (unsigned long long)kept,
	       (unsigned long long)ns);
	w->torn++;
	return err;
}

/* Log entries a and b write a common byte. */
static int pl_overlap(size_t a, size_t b)
{
	const struct logw_entry *x = &rec.log.e[a], *y = &rec.log.e[b];

	return x->off < y->off + y->len && y->off < x->off + x->len;
}

/*
 * Put ord[0..n) (in log order) in a random order, except that two
 * writes to a common sector keep their log order: in this store the
 * later one was issued after the earlier had completed (a place is
 * reused only then), and no disk lets the older bytes win then.
 */
static void pl_shuffle(struct pl_walk *w, size_t *ord, size_t n)
{
	for (size_t j = 0; j + 1 < n; j++) {
		size_t ready = 0, pick, k, i, t;

		/* ord[j..n) stays in log order: k is ready when no
		 * entry before it there overlaps it */
		for (k = j; k < n; k++) {
			for (i = j; i < k && !pl_overlap(ord[i], ord[k]); i++)
				;
			ready += i == k;
		}
		pick = pl_rand(&w->rng) % ready;
		for (k = j;; k++) {
			for (i = j; i < k && !pl_overlap(ord[i], ord[k]); i++)
				;
			if (i == k && !pick--)
				break;
		}
		t = ord[k];
		memmove(&ord[j + 1], &ord[j], (k - j) * sizeof(*ord));
		ord[j] = t;
	}
}

/* A random subset of the group's writes (not all of them in log
 * order, not none), in log or random order, maybe one torn; then back. */
static void pl_subset(struct pl_walk *w, const size_t *grp, size_t m,
		      unsigned lo, unsigned hi, size_t at)
{
	size_t *ord = malloc(m * sizeof(*ord)), n = 0, torn;
	int shuffle = m > 1 && pl_rand(&w->rng) & 1, err = 0;

	if (!ord) {
		w->fails++;
		return;
	}
	for (size_t j = 0; j < m; j++)
		if (m == 1 || pl_rand(&w->rng) & 1)
			ord[n++] = grp[j];
	if (!n)
		ord[n++] = grp[pl_rand(&w->rng) % m];
	if (n == m && m > 1 && !shuffle) {
		size_t k = pl_rand(&w->rng) % n;	/* drop one */

		memmove(&ord[k], &ord[k + 1], (n - k - 1) * sizeof(*ord));
		n--;
	}
	if (shuffle)
		pl_shuffle(w, ord, n);
	torn = m == 1 || pl_rand(&w->rng) % 3 == 0 ?
	       pl_rand(&w->rng) % n : n;
	pl_say(w, "; then %zu of the %zu writes after it%s:", n, m,
	       shuffle ? ", reordered" : "");
	for (size_t j = 0; !err && j < n; j++) {
		const struct logw_entry *e = &rec.log.e[ord[j]];
		char name[160];

		pl_name(ord[j], name, sizeof(name));
		pl_say(w, "%s %s", j ? "," : "", name);
		err = j == torn ? pl_tear(w, ord[j]) :
		      pl_apply(w, e->off, e->data, e->len, 1);
	}
	pl_say(w, "; lost:");
	for (size_t j = 0, k, lost = 0; j < m; j++) {
		char name[160];

		for (k = 0; k < n && ord[k] != grp[j]; k++)
			;
		if (k < n)
			continue;
		pl_name(grp[j], name, sizeof(name));
		pl_say(w, "%s %s", lost++ ? "," : "", name);
	}
	if (err)
		w->fails++;
	else
		pl_check(w, lo, hi, "subset", at);
	pl_undo_all(w);
	free(ord);
}

/* 1 when the first j of a group's m writes make a sampled prefix:
 * PL_SAMPLES points spread over the group, never all of it. */
static int pl_sampled(size_t j, size_t m)
{
	for (size_t k = 1; k <= PL_SAMPLES; k++)
		if (j == k * m / (PL_SAMPLES + 1))
			return j > 0 && j < m;
	return 0;
}

/*
 * The writes grp[0..m) of the log between two barriers (the image holds
 * everything before them, entries [0, base_at); lo was acknowledged
 * then): subsets, then in order with sampled prefixes.  Leaves them all
 * applied.
 */
static void pl_group(struct pl_walk *w, const size_t *grp, size_t m,
		     unsigned lo, size_t base_at)
{
	unsigned hi = lo + 1 > rec.last_gen ? rec.last_gen : lo + 1;
	size_t nsub = m > 1 ? PL_SUBSETS : 0;
	int err = 0;

	if (m == 1 && rec.log.e[grp[0]].len > rec.log.sectorsize)
		nsub = 1;	/* only a torn one is new */
	for (size_t k = 0; w->kinds & PL_SUBSET && k < nsub; k++) {
		pl_say_base(w, base_at);
		pl_subset(w, grp, m, lo, hi, base_at);
	}
	for (size_t j = 0; !err && j < m; j++) {
		const struct logw_entry *e = &rec.log.e[grp[j]];

		err = pl_apply(w, e->off, e->data, e->len, 0);
		if (err || !(w->kinds & PL_INSIDE) || !pl_sampled(j + 1, m))
			continue;
		pl_say_base(w, base_at);
		pl_say(w, "; then in order the first %zu of the %zu writes "
		       "after it, through entry %zu", j + 1, m, grp[j]);
		pl_check(w, lo, hi, "prefix", grp[j] + 1);
	}
	if (err)
		w->fails++;
}

/* Replay the whole log, checking the kinds of states w->kinds names. */
static void pl_walk(struct pl_walk *w)
{
	const struct logw *l = &rec.log;
	size_t *grp = calloc(l->n + 1, sizeof(*grp)), m = 0, base_at = 0;
	unsigned ack = 0;

	if (!grp) {
		w->fails++;
		return;
	}
	for (size_t p = 0; p <= l->n; p++) {
		const struct logw_entry *e = p < l->n ? &l->e[p] : NULL;
		int barrier = p == l->n || e->flags & LOGW_FLUSH ||
			      (p && l->e[p - 1].flags & LOGW_FUA);

		if (barrier) {
			pl_group(w, grp, m, ack, base_at);
			m = 0;
			base_at = p;
			if (rec.tag[p] > ack)
				ack = rec.tag[p];
			pl_say_base(w, p);
			if (w->kinds & PL_AT_FLUSH)
				pl_check(w, ack, ack + 1 > rec.last_gen ?
					 rec.last_gen : ack + 1,
					 p == l->n ? "end" : "flush", p);
		}
		if (e && e->len && !(e->flags & (LOGW_DISCARD | LOGW_MARK)))
			grp[m++] = p;
	}
	free(grp);
}

static int pl_walk_init(struct pl_walk *w, unsigned kinds)
{
	memset(w, 0, sizeof(*w));
	w->kinds = kinds;
	w->rng = pl_mix(rec.seed ^ kinds) | 1;
	w->want = malloc(PL_MAXLEN);
	w->fd = open(PL_IMG, O_RDWR | O_CLOEXEC);
	if (!w->want || w->fd < 0)
		return -ENOMEM;
	/* blank: the device as it was before the workload */
	if (ftruncate(w->fd, 0) || ftruncate(w->fd, PL_IMG_BYTES))
		return -errno;
	return 0;
}

/* "1-41" for the generations seen */
static void pl_seen(const struct pl_walk *w, char *out, size_t len)
{
	size_t n = 0;

	out[0] = 0;
	for (unsigned g = 1; g <= rec.last_gen && n + 16 < len; g++) {
		unsigned e = g;

		if (!w->seen[g])
			continue;
		while (e < rec.last_gen && w->seen[e + 1])
			e++;
		n += snprintf(out + n, len - n, "%s%u", n ? "," : "", g);
		if (e > g)
			n += snprintf(out + n, len - n, "-%u", e);
		g = e;
	}
}

/* ---- the tests ----------------------------------------------------------- */

FIXTURE(powerloss) {
	struct pl_walk w;
};

FIXTURE_SETUP(powerloss)
{
	self->w.fd = -1;
}

FIXTURE_TEARDOWN(powerloss)
{
	free(self->w.want);
	free(self->w.undo);
	if (self->w.fd >= 0)
		close(self->w.fd);
}

/* Skip without the modules; fail when the recording failed. */
#define PL_NEED_LOG() do {						\
	if (rec.skip)							\
		SKIP(return, "%s", rec.why);				\
	ASSERT_EQ(0, rec.err) {						\
		TH_LOG("recording the workload: %s", rec.why);		\
	}								\
} while (0)

TEST_F_TIMEOUT(powerloss, log_holds_every_flush_and_mark, 120)
{
	const struct logw *l = &rec.log;
	unsigned flushes = 0, fua = 0, writes = 0, marks = 0, other = 0;
	unsigned acked = 0;
	uint64_t bytes = 0;

	PL_NEED_LOG();
	for (size_t i = 0; i < l->n; i++) {
		const struct logw_entry *e = &l->e[i];

		flushes += !!(e->flags & LOGW_FLUSH);
		fua += !!(e->flags & LOGW_FUA);
		marks += !!(e->flags & LOGW_MARK);
		other += !!(e->flags & LOGW_DISCARD);
		if (e->len && !(e->flags & (LOGW_MARK | LOGW_DISCARD))) {
			writes++;
			bytes += e->len;
		}
	}
	for (size_t p = 0; p <= l->n; p++)
		acked += rec.tag[p] != 0;
	TH_LOG("seed %#llx: %u writes (%u overwrites, %u in %u batches "
	       "of 2-4), %u deletes, %u meta blobs, %u flushes (%u with "
	       "nothing new), then %u operations unflushed",
	       (unsigned long long)rec.seed, rec.writes, rec.overwrites,
	       rec.batched, rec.batches, rec.deletes,
	       rec.metas, rec.last_gen - 1, rec.empty, rec.tail_ops);
	TH_LOG("log: %zu entries: %u writes (%llu KiB), %u FLUSH, %u FUA, "
	       "%u marks, %u discards; log-writes status \"%s\"", l->n,
	       writes, (unsigned long long)bytes >> 10, flushes, fua, marks,
	       other, rec.status);
	EXPECT_EQ(NULL, strstr(rec.status, "logging_disabled"));
	/* genN's mark, and "dm-log-writes-end" */
	EXPECT_EQ(rec.last_gen + 1, marks);
	/* each mark follows its own FLUSH: a FLUSH per generation */
	EXPECT_EQ(rec.last_gen, acked);
	EXPECT_EQ(0, other);
}

TEST_F_TIMEOUT(powerloss, at_every_flush_the_acknowledged_generation, 300)
{
	char seen[256];

	PL_NEED_LOG();
	ASSERT_EQ(0, pl_walk_init(&self->w, PL_AT_FLUSH));
	pl_walk(&self->w);
	pl_seen(&self->w, seen, sizeof(seen));
	TH_LOG("%u states (the log up to each FLUSH, and its end), %u "
	       "with no store yet; generations %s seen", self->w.states,
	       self->w.blank, seen);
	EXPECT_EQ(0, self->w.fails);
	EXPECT_LT(0, self->w.states);
}

TEST_F_TIMEOUT(powerloss, between_flushes_a_prefix_is_a_whole_generation, 300)
{
	char seen[256];

	PL_NEED_LOG();
	ASSERT_EQ(0, pl_walk_init(&self->w, PL_INSIDE));
	pl_walk(&self->w);
	pl_seen(&self->w, seen, sizeof(seen));
	TH_LOG("%u states (up to %d prefixes of the writes between two "
	       "FLUSHes), %u with no store yet; generations %s seen",
	       self->w.states, PL_SAMPLES, self->w.blank, seen);
	EXPECT_EQ(0, self->w.fails);
	EXPECT_LT(0, self->w.states);
}

TEST_F_TIMEOUT(powerloss, unflushed_writes_lost_reordered_torn, 300)
{
	char seen[256];

	PL_NEED_LOG();
	ASSERT_EQ(0, pl_walk_init(&self->w, PL_SUBSET));
	pl_walk(&self->w);
	pl_seen(&self->w, seen, sizeof(seen));
	TH_LOG("%u states (the log to a FLUSH and a random part of the "
	       "writes after it, %u with a torn write), %u with no store yet; "
	       "generations %s seen", self->w.states, self->w.torn,
	       self->w.blank, seen);
	EXPECT_EQ(0, self->w.fails);
	EXPECT_LT(0, self->w.states);
}

/* TEST_HARNESS_MAIN's constructor ordering, then a main that records
 * the workload once, before the harness forks the tests. */
static void __attribute__((constructor)) __constructor_order_last(void)
{
	if (!__constructor_order)
		__constructor_order = _CONSTRUCTOR_ORDER_BACKWARD;
}

int main(int argc, char **argv)
{
	rec.pid = getpid();
	atexit(pl_cleanup);
	pl_record();
	return test_harness_run(argc, argv);
}
