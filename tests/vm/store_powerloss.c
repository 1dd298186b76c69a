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
 * A striped store of two members (stripe.h) is recorded the same way,
 * each member through its own log-writes target and log, both marked
 * when a flush returns.  A power loss leaves each member in a state its
 * own log allows, both at one instant.  The marks are the only order
 * the two logs share: flush N returned, every member's commit durable,
 * before either member's next write.  So between marks N - 1 and N
 * (round N) any state of one member goes with any state of the other:
 * the order in which the store commits its members is not assumed, and
 * either member may be ahead.  In each round:
 *   - each member at each of its FLUSHes (mark N - 1, its table's FLUSH,
 *     mark N), every pair;
 *   - random pairs, one member or both at a prefix or a random subset
 *     (reordered, torn) of its writes after one of them.
 * The set must open at N - 1 or N (exactly N with both at mark N), every
 * extent byte-exact on its member.  A member ahead by one must be
 * brought back, the note saying "generation N dropped", and the state
 * opened again must give the same store with nothing left to drop; with
 * both members at a mark neither may be ahead.  With nothing
 * acknowledged yet and member 0 formatted, the creating open
 * (HMM_STORE_CREATE) must make the set again, new and empty.
 * Then the repair under power loss: from two crashes between the
 * members' commits (member 0 ahead, then member 1), the set is opened
 * again through log-writes (the repair), written and flushed three
 * times, and those logs are replayed the same way: the repair must be
 * durable when open returns (at its mark nothing is ahead), and no later
 * state may pair the generation it dropped with a new one.
 *
 * Needs loop.ko, dm-mod.ko and dm-log-writes.ko (tests/vm/run loads
 * them before this test) and skips without them.  Linked static with
 * libhmm (tests/vm/run).  HMM_PL_SEED=<n> replays another workload.
 * Scratch: files and nodes /tmp/store_powerloss*, loop devices and
 * device-mapper targets hmm_powerloss*, removed at exit.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "err.h"
#include "pool.h"
#include "store.h"
#include "table.h"
#include "blk_t.h"
#include "logw_t.h"
#include "kselftest_harness.h"

#define PL_DEVS		2		/* a striped store's members */
#define PL_KEYS		20		/* distinct keys the workload uses */
#define PL_ROUNDS	60		/* flushes after the format */
#define PL_S_ROUNDS	16		/* ... of the striped store */
#define PL_R_ROUNDS	3		/* ... of it after a repair */
#define PL_MAXGEN	(PL_ROUNDS + 1)
#define PL_MAXLEN	(256u << 10)	/* the largest extent */
#define PL_META_CAP	(16u << 10)
#define PL_BATCH	4		/* writes submitted together */
#define PL_MAXPLACE	2048		/* data writes of a workload */
#define PL_SUBSETS	12		/* random subsets of each group */
#define PL_SAMPLES	3		/* prefixes sampled inside a group */
#define PL_PAIRS	4		/* random pairs of states a round */
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
	unsigned dev;		/* the member */
};

/*
 * One device the store wrote through log-writes: the plain store, or a
 * member of the striped one.  pl_names names it; the recording sets up
 * the rest and leaves the image's loop device bound for the replay;
 * pl_cleanup (at the parent's exit) undoes it.
 */
struct pl_dev {
	char img[64], logf[64], node[64], dm[32];
	char dev[32];			/* the image's loop device */
	int devfd, logfd, dm_up;
	struct logw log;
	uint32_t *tag;			/* [p]: gen acknowledged at point p */
	char status[128];		/* log-writes' at the end */
};

/*
 * One recording, made by main() before the tests run (each test is a
 * forked child and reads it): the plain store, the striped one, and the
 * striped one again from a crash of it.  Static.
 */
struct pl_rec {
	const char *name;		/* in file and device names */
	unsigned ndev, rounds;		/* devices; flushes it makes */
	uint64_t img_bytes, log_bytes;	/* logs sparse; ~10 MiB in all */
	uint64_t mix;			/* its seed: the run's ^ mix */
	const struct pl_rec *from;	/* NULL: from blank devices */
	size_t from_at[PL_DEVS];	/* else from's logs up to these */
	unsigned base_gen;		/* the store opens there, repaired */
	unsigned ahead;			/* the member it repairs */
	int skip, err;			/* why says why */
	char why[512];
	char nodes[140], path[80];	/* recorded on; replays open */
	struct pl_dev d[PL_DEVS];
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
};

static struct pl_rec plain = {
	.name = "", .ndev = 1, .rounds = PL_ROUNDS,
	.img_bytes = 32ull << 20, .log_bytes = 128ull << 20,
};
static struct pl_rec stripe = {
	.name = "s", .ndev = 2, .rounds = PL_S_ROUNDS,
	.img_bytes = 16ull << 20, .log_bytes = 64ull << 20, .mix = 5,
};
static struct pl_rec again[2] = {
	{ .name = "r0", .ndev = 2, .rounds = PL_R_ROUNDS, .ahead = 0,
	  .img_bytes = 16ull << 20, .log_bytes = 16ull << 20, .mix = 7 },
	{ .name = "r1", .ndev = 2, .rounds = PL_R_ROUNDS, .ahead = 1,
	  .img_bytes = 16ull << 20, .log_bytes = 16ull << 20, .mix = 9 },
};
static struct pl_rec *const pl_recs[] = { &plain, &stripe, &again[0],
					  &again[1] };
static uint64_t pl_seed;
static pid_t pl_pid;

static int pl_fail(struct pl_rec *r, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->why, sizeof(r->why), fmt, ap);
	va_end(ap);
	r->err = err ? err : -EIO;
	return r->err;
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

/* The member key's writes went to (the place it was written last). */
static unsigned pl_key_dev(const struct pl_rec *r, uint64_t key)
{
	for (unsigned k = r->nplace; k-- > 0;)
		if (r->place[k].key == key)
			return r->place[k].dev;
	return 0;
}

/* Flush k of r changed what member dev holds: an extent of it written,
 * added or deleted, or (member 0's) the meta blob. */
static int pl_changed(const struct pl_rec *r, unsigned k, unsigned dev)
{
	const struct pl_gen *a = &r->gen[k - 1], *b = &r->gen[k];

	if (!dev && (a->meta_len != b->meta_len || a->meta_ver != b->meta_ver))
		return 1;
	for (uint32_t i = 0; i < a->n; i++) {
		int j = pl_find(b, a->ext[i].key);

		if (pl_key_dev(r, a->ext[i].key) == dev &&
		    (j < 0 || b->ext[j].ver != a->ext[i].ver))
			return 1;
	}
	for (uint32_t i = 0; i < b->n; i++)
		if (pl_key_dev(r, b->ext[i].key) == dev &&
		    pl_find(a, b->ext[i].key) < 0)
			return 1;
	return 0;
}

/* ---- the workload ---------------------------------------------------- */

static uint32_t pl_len(uint64_t *rng)
{
	static const uint32_t len[] = { 4096, 8192, 12288, 16384, 28672,
					65536, 131072, PL_MAXLEN };

	return len[pl_rand(rng) % 8];
}

/* The device extent key went to. */
static unsigned pl_dev_of(const struct pl_rec *r, struct hmm_store *s,
			  uint64_t key)
{
	const char *at = hmm_store_extent_path(s, key);
	unsigned i = 0;

	while (at && i + 1 < r->ndev && strcmp(at, r->d[i].node))
		i++;
	return i;
}

/* Write n extents of keys ki[] at once (distinct keys: they may
 * complete in any order) and wait for all of them. */
static int pl_write(struct pl_rec *r, struct hmm_store *s, void **bufs,
		    const unsigned *ki, unsigned n, uint64_t *rng)
{
	struct hmm_io io[PL_BATCH], *p[PL_BATCH];
	uint32_t ver[PL_BATCH];
	int q, err = 0;

	for (unsigned i = 0; i < n; i++) {
		uint32_t len = pl_len(rng);

		ver[i] = ++r->nver;
		pl_fill(bufs[i], pl_key(ki[i]), ver[i], len);
		io[i] = (struct hmm_io){ .op = HMM_IO_WRITE,
					 .key = pl_key(ki[i]), .len = len,
					 .buf = bufs[i] };
		p[i] = &io[i];
	}
	q = hmm_store_submit(s, p, n);
	if (q < 0)
		return pl_fail(r, q, "submit: %s", hmm_last_error());
	for (int i = 0; i < q; i++) {
		int w = hmm_store_wait(s, &io[i]);

		if (w && !err)
			err = pl_fail(r, w, "write: %s", hmm_last_error());
	}
	if (!err && q != (int)n)
		err = pl_fail(r, -EIO, "submit queued %d of %u", q, n);
	for (unsigned i = 0; !err && i < n; i++) {
		uint64_t off;

		r->overwrites += pl_find(&r->cur, io[i].key) >= 0;
		r->writes++;
		r->batched += n > 1;
		pl_put(&r->cur, io[i].key, io[i].len, ver[i]);
		if (r->nplace < PL_MAXPLACE &&
		    !hmm_store_extent_where(s, io[i].key, &off))
			r->place[r->nplace++] = (struct pl_place){
				off, io[i].key, io[i].len, ver[i],
				pl_dev_of(r, s, io[i].key) };
	}
	return err;
}

/* One operation: a write, a batch of writes, a delete or a meta blob. */
static int pl_op(struct pl_rec *r, struct hmm_store *s, void **bufs,
		 uint64_t *rng)
{
	uint64_t x = pl_rand(rng) % 100;
	unsigned ki[PL_BATCH], n = 1;
	static uint8_t meta[PL_META_CAP];

	if (x >= 65 && x < 85 && r->cur.n) {
		int i = (int)(pl_rand(rng) % r->cur.n);
		int e = hmm_store_extent_free(s, r->cur.ext[i].key);

		if (e)
			return pl_fail(r, e, "free: %s", hmm_last_error());
		pl_del(&r->cur, i);
		r->deletes++;
		return 0;
	}
	if (x >= 85) {
		uint32_t len = pl_rand(rng) % 3000, ver = ++r->nver;
		int e;

		pl_meta(meta, ver, len);
		e = hmm_store_meta_set(s, meta, len);
		if (e)
			return pl_fail(r, e, "meta: %s", hmm_last_error());
		r->cur.meta_len = len;
		r->cur.meta_ver = ver;
		r->metas++;
		return 0;
	}
	if (x >= 45 && x < 65) {
		n = 2 + pl_rand(rng) % (PL_BATCH - 1);
		r->batches++;
	}
	for (unsigned i = 0; i < n; i++) {
		unsigned j;

		do {
			ki[i] = pl_rand(rng) % PL_KEYS;
			for (j = 0; j < i && ki[j] != ki[i]; j++)
				;
		} while (j < i);
	}
	return pl_write(r, s, bufs, ki, n, rng);
}

/* Mark every log of r: the flush that made generation g (or the open
 * that repaired the set to it) has returned. */
static int pl_mark(struct pl_rec *r, unsigned g)
{
	char msg[32];
	int e;

	snprintf(msg, sizeof(msg), "mark gen%u", g);
	for (unsigned i = 0; i < r->ndev; i++) {
		e = t_dm_message(r->d[i].dm, msg);
		if (e)
			return pl_fail(r, e, "dm message \"%s\" to %s: %s", msg,
				       r->d[i].dm, strerror(-e));
	}
	return 0;
}

/* Flush; the model of the new generation; a mark in the logs. */
static int pl_flush(struct pl_rec *r, struct hmm_store *s)
{
	struct hmm_store_stats st;
	int e = hmm_store_flush(s);

	if (e)
		return pl_fail(r, e, "flush: %s", hmm_last_error());
	hmm_store_stats(s, &st);
	if (st.generation != r->last_gen + 1 || st.generation > PL_MAXGEN)
		return pl_fail(r, -EPROTO, "flush made generation %llu after "
			       "%u", (unsigned long long)st.generation,
			       r->last_gen);
	r->last_gen = (unsigned)st.generation;
	r->gen[r->last_gen] = r->cur;
	return pl_mark(r, r->last_gen);
}

static int pl_workload(struct pl_rec *r, struct hmm_store *s, uint64_t *rng)
{
	void *bufs[PL_BATCH];
	int err = 0;

	for (int i = 0; i < PL_BATCH; i++) {
		bufs[i] = hmm_pool_alloc(hmm_store_pool(s), PL_MAXLEN);
		if (!bufs[i])
			return pl_fail(r, -ENOMEM, "pool: %s",
				       hmm_last_error());
	}
	for (unsigned k = 0; !err && k < r->rounds; k++) {
		unsigned nops = pl_rand(rng) % 6;

		r->empty += !nops;
		for (unsigned i = 0; !err && i < nops; i++)
			err = pl_op(r, s, bufs, rng);
		if (!err)
			err = pl_flush(r, s);
	}
	/* the tail: never flushed, so never seen after a crash */
	for (unsigned i = 0; !err && i < 6; i++, r->tail_ops++)
		err = pl_op(r, s, bufs, rng);
	return err;
}

/* ---- images: a log's writes applied, and what they overwrote ---------- */

struct pl_undo {
	uint64_t off, len;
	uint8_t *old;
};

/* A device's image file while a replay rewrites it. */
struct pl_img {
	int fd;
	struct pl_undo *undo;	/* what pl_apply overwrote, oldest first */
	size_t nundo, cap_undo;
};

static int pl_writes(const struct logw_entry *e)
{
	return e->len && !(e->flags & (LOGW_DISCARD | LOGW_MARK));
}

/* Keep the len bytes at off of the image, for pl_undo_to. */
static int pl_save(struct pl_img *im, uint64_t off, uint64_t len)
{
	struct pl_undo *u;

	if (im->nundo == im->cap_undo) {
		size_t cap = im->cap_undo ? 2 * im->cap_undo : 64;
		void *p = realloc(im->undo, cap * sizeof(*u));

		if (!p)
			return -ENOMEM;
		im->undo = p;
		im->cap_undo = cap;
	}
	u = &im->undo[im->nundo];
	u->old = malloc(len);
	if (!u->old)
		return -ENOMEM;
	if (pread(im->fd, u->old, len, (off_t)off) != (ssize_t)len) {
		free(u->old);
		return -EIO;
	}
	u->off = off;
	u->len = len;
	im->nundo++;
	return 0;
}

/* Write len bytes of data at off of the image, keeping what was there
 * when undo is set. */
static int pl_apply(struct pl_img *im, uint64_t off, const void *data,
		    uint64_t len, int undo)
{
	int err = undo ? pl_save(im, off, len) : 0;

	if (err)
		return err;
	return pwrite(im->fd, data, len, (off_t)off) == (ssize_t)len ? 0 :
	       -EIO;
}

/* Apply the writes of entries [from, to) of log l, in log order. */
static int pl_apply_log(struct pl_img *im, const struct logw *l,
			size_t from, size_t to, int undo)
{
	int err = 0;

	for (size_t p = from; !err && p < to; p++)
		if (pl_writes(&l->e[p]))
			err = pl_apply(im, l->e[p].off, l->e[p].data,
				       l->e[p].len, undo);
	return err;
}

/* The image of r's device i before its workload: blank, or from's log
 * up to r->from_at[i] (where it crashed). */
static int pl_base(const struct pl_rec *r, unsigned i, int fd)
{
	struct pl_img im = { .fd = fd };

	if (ftruncate(fd, 0) || ftruncate(fd, (off_t)r->img_bytes))
		return -errno;
	if (!r->from)
		return 0;
	return pl_apply_log(&im, &r->from->d[i].log, 0, r->from_at[i], 0);
}

/* ---- recording: loop devices, log-writes, the workload ---------------- */

static void pl_names(struct pl_rec *r)
{
	for (unsigned i = 0; i < r->ndev; i++) {
		struct pl_dev *d = &r->d[i];
		char sfx[16] = "";

		if (r->name[0])
			snprintf(sfx, sizeof(sfx), "_%s%u", r->name, i);
		snprintf(d->img, sizeof(d->img), "/tmp/store_powerloss%s.img",
			 sfx);
		snprintf(d->logf, sizeof(d->logf),
			 "/tmp/store_powerloss%s.log", sfx);
		snprintf(d->node, sizeof(d->node), "/tmp/store_powerloss%s.dm",
			 sfx);
		snprintf(d->dm, sizeof(d->dm), "hmm_powerloss%s", sfx);
		d->devfd = d->logfd = -1;
	}
}

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

/* Device i's image (blank, or where r starts) on a loop device under
 * log-writes, logging to another. */
static int pl_device(struct pl_rec *r, unsigned i)
{
	struct pl_dev *d = &r->d[i];
	char a[32], b[32], logdev[32], params[80];
	dev_t dn;
	int fd, err;

	err = pl_mkfile(d->img, r->img_bytes);
	if (!err)
		err = pl_mkfile(d->logf, r->log_bytes);
	if (err)
		return pl_fail(r, err, "files in /tmp: %s", strerror(-err));
	if (r->from) {
		fd = open(d->img, O_RDWR | O_CLOEXEC);
		err = fd < 0 ? -errno : pl_base(r, i, fd);
		if (fd >= 0)
			close(fd);
		if (err)
			return pl_fail(r, err, "%s: the crash to start from: "
				       "%s", d->img, strerror(-err));
	}
	err = t_loop_attach(d->img, d->dev, &d->devfd);
	if (!err)
		err = t_loop_attach(d->logf, logdev, &d->logfd);
	if (err)
		return pl_fail(r, err, "loop device: %s", strerror(-err));
	err = t_devno(d->dev, a, sizeof(a));
	if (!err)
		err = t_devno(logdev, b, sizeof(b));
	if (err)
		return pl_fail(r, err, "loop node: %s", strerror(-err));
	snprintf(params, sizeof(params), "%s %s", a, b);
	err = t_dm_create(d->dm, r->img_bytes >> 9, "log-writes", params,
			  &dn);
	if (err)
		return pl_fail(r, err, "dm create log-writes %s: %s", params,
			       strerror(-err));
	d->dm_up = 1;
	unlink(d->node);
	if (mknod(d->node, S_IFBLK | 0600, dn))
		return pl_fail(r, -errno, "mknod %s: %s", d->node,
			       strerror(errno));
	return 0;
}

/* r's devices, and the store paths naming them ("a,b" for a set). */
static int pl_devices(struct pl_rec *r)
{
	int err;

	if (access(T_LOOP_CONTROL, F_OK) || access(T_DM_CONTROL, F_OK)) {
		int noloop = access(T_LOOP_CONTROL, F_OK) != 0;

		r->skip = 1;
		snprintf(r->why, sizeof(r->why), "no %s: %s not loaded",
			 noloop ? T_LOOP_CONTROL : T_DM_CONTROL,
			 noloop ? "loop.ko" : "dm-mod.ko");
		return 0;
	}
	err = t_dm_has_target("log-writes");
	if (err) {
		r->skip = 1;
		snprintf(r->why, sizeof(r->why), "device-mapper has no "
			 "log-writes target (dm-log-writes.ko): %s",
			 strerror(-err));
		return 0;
	}
	for (unsigned i = 0; i < r->ndev; i++) {
		size_t n = strlen(r->nodes), m = strlen(r->path);

		err = pl_device(r, i);
		if (err)
			return err;
		snprintf(r->nodes + n, sizeof(r->nodes) - n, "%s%s",
			 i ? "," : "", r->d[i].node);
		snprintf(r->path + m, sizeof(r->path) - m, "%s%s",
			 i ? "," : "", r->d[i].dev);
	}
	return 0;
}

/* The gen acknowledged at each point of d's log: a mark "genN" names
 * the last barrier before it (the flush's final FLUSH) as making N
 * durable.  Point p: entries [0, p) applied; a FLUSH entry i is a
 * barrier at point i, a FUA write i one at point i + 1. */
static int pl_tags(struct pl_rec *r, struct pl_dev *d)
{
	const struct logw *l = &d->log;
	size_t last = 0;

	d->tag = calloc(l->n + 1, sizeof(*d->tag));
	if (!d->tag)
		return pl_fail(r, -ENOMEM, "out of memory");
	for (size_t i = 0; i < l->n; i++) {
		const struct logw_entry *e = &l->e[i];
		unsigned g;

		if (e->flags & LOGW_FLUSH)
			last = i;
		if (e->flags & LOGW_FUA)
			last = i + 1;
		if (e->flags & LOGW_MARK && sscanf(e->mark, "gen%u", &g) == 1 &&
		    g > d->tag[last])
			d->tag[last] = g;
	}
	return 0;
}

/* The store as the workload starts: new at generation 1, or from a
 * crash, repaired to base_gen (generation base_gen + 1 dropped); the
 * model; the first mark. */
static int pl_start(struct pl_rec *r, struct hmm_store *s)
{
	struct hmm_store_stats st;
	unsigned want = r->from ? r->base_gen : 1;
	char said[48];

	hmm_store_stats(s, &st);
	r->data_off = st.data_offset;
	/* 4 KiB blocks: the data area follows the two tables at once */
	r->table1_off = 8192 + (st.data_offset - 8192) / 2;
	if (st.generation != want)
		return pl_fail(r, -EPROTO, "%s at generation %llu, not %u",
			       r->from ? "the crashed set opened" :
			       "a new store", (unsigned long long)st.generation,
			       want);
	if (r->from) {
		snprintf(said, sizeof(said), "generation %u dropped",
			 want + 1);
		if (!strstr(hmm_store_note(s), said))
			return pl_fail(r, -EPROTO, "the crashed set opened at "
				       "%u, its note not saying \"%s\": %s",
				       want, said, hmm_store_note(s));
		memcpy(r->gen, r->from->gen, (want + 1) * sizeof(r->gen[0]));
		r->cur = r->gen[want];
		r->nver = r->from->nver;	/* new bytes from here on */
	}
	r->last_gen = want;
	return pl_mark(r, want);
}

/* After the workload: d's target's status, the target gone, its log
 * read and tagged. */
static int pl_log(struct pl_rec *r, struct pl_dev *d)
{
	int err;

	t_dm_status(d->dm, d->status, sizeof(d->status));
	err = t_dm_remove(d->dm);
	if (err)
		return pl_fail(r, err, "dm remove %s: %s", d->dm,
			       strerror(-err));
	d->dm_up = 0;
	t_loop_detach(d->logfd);
	d->logfd = -1;
	err = logw_open(d->logf, &d->log);
	if (err)
		return pl_fail(r, err, "reading the log %s: %s", d->logf,
			       strerror(-err));
	return pl_tags(r, d);
}

static void pl_record(struct pl_rec *r)
{
	struct hmm_store_config cfg = {
		.path = r->nodes, .flags = r->from ? 0 : HMM_STORE_CREATE,
		.queue_depth = 8, .pool_bytes = 2 << 20,
		.pool_flags = HMM_POOL_NOHUGE, .numa_node = -1,
		.meta_bytes = PL_META_CAP,
	};
	struct hmm_store *s = NULL;
	uint64_t rng = pl_mix(pl_seed ^ r->mix) | 1;
	int err;

	if (r->from && (r->from->skip || r->from->err)) {
		r->skip = r->from->skip;
		r->err = r->from->err;
		snprintf(r->why, sizeof(r->why), "%s", r->from->why);
		return;
	}
	if (pl_devices(r) || r->skip)
		return;
	err = hmm_store_open(&cfg, &s);
	if (err) {
		pl_fail(r, err, "%s %s: %s", r->from ? "open" : "format",
			r->nodes, hmm_last_error());
		return;
	}
	err = pl_start(r, s);
	if (!err)
		err = pl_workload(r, s, &rng);
	hmm_store_close(s);	/* no flush: the tail stays unflushed */
	for (unsigned i = 0; !err && i < r->ndev; i++)
		err = pl_log(r, &r->d[i]);
}

static void pl_cleanup(void)
{
	if (getpid() != pl_pid)
		return;
	for (size_t k = 0; k < ARRAY_SIZE(pl_recs); k++) {
		for (unsigned i = 0; i < pl_recs[k]->ndev; i++) {
			struct pl_dev *d = &pl_recs[k]->d[i];

			if (!d->img[0])
				continue;
			if (d->dm_up)
				t_dm_remove(d->dm);
			t_loop_detach(d->logfd);
			t_loop_detach(d->devfd);
			logw_close(&d->log);
			free(d->tag);
			unlink(d->node);
			unlink(d->img);
			unlink(d->logf);
		}
	}
}

/* ---- replay ------------------------------------------------------------ */

#define PL_AT_FLUSH	1u	/* the prefix at every barrier */
#define PL_INSIDE	2u	/* prefixes sampled between barriers */
#define PL_SUBSET	4u	/* subsets, reordered, torn */

/* One replay of a recording's logs onto its images (in a test). */
struct pl_walk {
	const struct pl_rec *r;
	unsigned kinds;		/* PL_AT_FLUSH | ... */
	struct pl_img img[PL_DEVS];
	uint64_t rng;
	uint8_t *want;		/* PL_MAXLEN */
	unsigned states, blank, fails, torn, dropped;
	uint8_t seen[PL_MAXGEN + 1];
	char state[3072];	/* the state being checked, in words */
};

/* Put back what was kept since im->nundo was n, newest first. */
static void pl_undo_to(struct pl_walk *w, struct pl_img *im, size_t n)
{
	while (im->nundo > n) {
		struct pl_undo *u = &im->undo[--im->nundo];

		if (pwrite(im->fd, u->old, u->len, (off_t)u->off) !=
		    (ssize_t)u->len)
			w->fails++;	/* the replay itself broke */
		free(u->old);
	}
}

static void pl_undo_all(struct pl_walk *w)
{
	for (unsigned i = 0; i < w->r->ndev; i++)
		pl_undo_to(w, &w->img[i], 0);
}

/* Name entry i of device dev's log in words: which part of the store it
 * wrote. */
static void pl_name(const struct pl_rec *r, unsigned dev, size_t i,
		    char *out, size_t len)
{
	const struct logw_entry *e = &r->d[dev].log.e[i];
	uint64_t first = 0;

	if (e->len >= 8)
		memcpy(&first, e->data, 8);
	if (e->off < 8192) {
		snprintf(out, len, "e%zu superblock %llu", i,
			 (unsigned long long)(e->off / 4096));
		return;
	}
	if (e->off < r->data_off) {
		snprintf(out, len, "e%zu table %d (%llu bytes)", i,
			 e->off >= r->table1_off, (unsigned long long)e->len);
		return;
	}
	for (unsigned k = 0; k < r->nplace; k++) {
		const struct pl_place *p = &r->place[k];
		uint64_t w0;

		pl_fill(&w0, p->key, p->ver, 8);
		if (p->dev == dev && p->off == e->off && w0 == first) {
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

/* Say the state of device dev at barrier point p: entries [0, p). */
static void pl_say_point(struct pl_walk *w, unsigned dev, size_t p)
{
	const struct pl_dev *d = &w->r->d[dev];
	const struct logw *l = &d->log;

	if (!p)
		pl_say(w, "%s", w->r->from ? "the crash it starts from" :
		       "the blank device");
	else if (p == l->n)
		pl_say(w, "the whole log (%zu entries)", p);
	else if (l->e[p].flags & LOGW_FLUSH)
		pl_say(w, "the log through the FLUSH at entry %zu", p);
	else
		pl_say(w, "the log through the FUA write at entry %zu", p - 1);
	if (d->tag[p])
		pl_say(w, " (mark gen%u)", d->tag[p]);
}

/* Start w->state with the plain store's state at barrier point p. */
static void pl_say_base(struct pl_walk *w, size_t p)
{
	w->state[0] = 0;
	pl_say_point(w, 0, p);
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
static int pl_same_list(const struct pl_rec *r, struct hmm_store *s,
			unsigned g, char *why, size_t len)
{
	const struct pl_gen *want = &r->gen[g];
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
	const struct pl_gen *want = &w->r->gen[g];
	static uint8_t meta[PL_META_CAP], mwant[PL_META_CAP];
	uint8_t *buf = hmm_pool_alloc(hmm_store_pool(s), PL_MAXLEN);
	int m;

	if (!buf)
		return snprintf(why, len, "pool: %s", hmm_last_error()), -1;
	if (pl_same_list(w->r, s, g, why, len))
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
 * Open the store on the replayed images (with flags): it must open at a
 * generation in [lo, hi] holding exactly that generation; 1 when there
 * is no store and lo is 0 (before the format was durable, "no store" is
 * right too), 0 when it holds (*g and note: what it opened at, its
 * note), else -1 and why.
 */
static int pl_open(struct pl_walk *w, uint32_t flags, unsigned lo,
		   unsigned hi, unsigned *g, char *note, size_t nlen, char *why,
		   size_t len)
{
	struct hmm_store_config cfg = {
		.path = w->r->path, .flags = flags, .queue_depth = 4,
		.pool_bytes = 1 << 20, .pool_flags = HMM_POOL_NOHUGE,
		.numa_node = -1, .meta_bytes = PL_META_CAP,
	};
	struct hmm_store *s = NULL;
	struct hmm_store_stats st;
	int r = hmm_store_open(&cfg, &s);

	if (r == -ENODATA && !lo)
		return 1;
	if (r)
		return snprintf(why, len, "open: %s", hmm_last_error()), -1;
	hmm_store_stats(s, &st);
	snprintf(note, nlen, "%s", hmm_store_note(s));
	if (st.generation < lo || st.generation > hi || !st.generation) {
		snprintf(why, len, "opened at generation %llu",
			 (unsigned long long)st.generation);
	} else {
		*g = (unsigned)st.generation;
		if (!pl_same(w, s, *g, why, len))
			w->seen[*g] = 1;
	}
	hmm_store_close(s);
	return why[0] ? -1 : 0;
}

/* The newest generation a superblock on member i's image names (valid
 * as open decodes it; its table not read), 0 for none. */
static unsigned pl_sb_gen(struct pl_walk *w, unsigned i)
{
	static uint8_t slots[2 * HMM_SB_BYTES];
	unsigned best = 0;

	if (pread(w->img[i].fd, slots, sizeof(slots), 0) !=
	    (ssize_t)sizeof(slots))
		return 0;
	for (unsigned j = 0; j < 2; j++) {
		struct hmm_sb sb;

		if (!hmm_sb_decode(slots + j * HMM_SB_BYTES, w->r->img_bytes,
				   &sb, NULL) &&
		    sb.slot == j && sb.generation > best)
			best = (unsigned)sb.generation;
	}
	return best;
}

/* The newest generation on any member, and on which. */
static unsigned pl_newest(struct pl_walk *w, unsigned *who)
{
	unsigned best = 0;

	for (unsigned i = 0; i < w->r->ndev; i++) {
		unsigned g = pl_sb_gen(w, i);

		if (g > best) {
			best = g;
			*who = i;
		}
	}
	return best;
}

/*
 * No set to open, nothing acknowledged, but member 0 formatted (a crash
 * between the members' formats): the creating open (HMM_STORE_CREATE)
 * must make the set again, new and empty, as it makes a plain store
 * whose format was lost.  Leaves why empty when it does.
 */
static void pl_created(struct pl_walk *w, char *why, size_t len)
{
	char note[1024], why2[768] = "";
	unsigned g = 0;

	if (!pl_sb_gen(w, 0) ||
	    !pl_open(w, HMM_STORE_CREATE, 1, 1, &g, note, sizeof(note), why2,
		     sizeof(why2)))
		return;
	snprintf(why, len, "no store, member 0 formatted: opened again with "
		 "HMM_STORE_CREATE, %s", why2);
}

/*
 * A striped store opened at g while member who held newest: a member
 * ahead must be brought back and said ("generation N dropped"; or its
 * superblock names a damaged table, which open says too), and the state
 * opened again must give the same store with nothing left to drop; with
 * every member at a mark (at_mark) none may be ahead.  Leaves why empty
 * when all holds.
 */
static void pl_repaired(struct pl_walk *w, unsigned g, unsigned newest,
			unsigned who, int at_mark, char *note, size_t nlen,
			char *why, size_t len)
{
	char said[48], damaged[64], why2[768] = "";
	unsigned g2 = 0, left, who2 = 0;

	snprintf(said, sizeof(said), "generation %u dropped", newest);
	snprintf(damaged, sizeof(damaged), "(generation %u) names a damaged "
		 "table", newest);
	if (newest <= g) {
		if (strstr(note, "dropped"))
			snprintf(why, len, "no member ahead of generation %u, "
				 "but the note says: %s", g, note);
		return;
	}
	if (at_mark) {
		snprintf(why, len, "every member at a mark, but member %u "
			 "holds generation %u, above the set's %u: a flush "
			 "or a repair was not durable when it returned", who,
			 newest, g);
		return;
	}
	if (strstr(note, damaged))
		return;
	if (!strstr(note, said)) {
		snprintf(why, len, "member %u at generation %u, the set "
			 "opened at %u, and its note does not say \"%s\": %s",
			 who, newest, g, said, note);
		return;
	}
	w->dropped++;
	left = pl_newest(w, &who2);
	if (left > g)
		snprintf(why2, sizeof(why2), "member %u still holds "
			 "generation %u", who2, left);
	else if (!pl_open(w, 0, g, g, &g2, note, nlen, why2, sizeof(why2)) &&
		 strstr(note, "dropped"))
		snprintf(why2, sizeof(why2), "it drops again: %s", note);
	if (why2[0])
		snprintf(why, len, "opened again after generation %u was "
			 "dropped: %s", newest, why2);
}

/*
 * Check the state on the images: the store opens at a generation in
 * [lo, hi] holding exactly it (pl_open); a striped one repairs as
 * pl_repaired says, at_mark set when every member is at one mark, or is
 * made again as pl_created says.  What open writes (a dropped or a new
 * superblock) is undone after.  0 or -1, counted.
 */
static int pl_check(struct pl_walk *w, unsigned lo, unsigned hi,
		    int at_mark, const char *kind)
{
	const struct pl_rec *r = w->r;
	size_t keep[PL_DEVS];
	unsigned g = 0, newest = 0, who = 0;
	char why[768] = "", note[1024] = "";
	int ret = 0;

	w->states++;
	for (unsigned i = 0; i < r->ndev; i++) {
		keep[i] = w->img[i].nundo;
		if (!why[0] && pl_save(&w->img[i], 0, 2 * HMM_SB_BYTES))
			snprintf(why, sizeof(why), "keeping the superblocks "
				 "of %s", r->d[i].img);
	}
	if (!why[0] && r->ndev > 1)
		newest = pl_newest(w, &who);
	if (!why[0])
		ret = pl_open(w, 0, lo, hi, &g, note, sizeof(note), why,
			      sizeof(why));
	if (ret == 1)
		w->blank++;
	if (ret == 1 && r->ndev > 1)
		pl_created(w, why, sizeof(why));
	else if (!why[0] && r->ndev > 1)
		pl_repaired(w, g, newest, who, at_mark, note, sizeof(note),
			    why, sizeof(why));
	for (unsigned i = 0; i < r->ndev; i++)
		pl_undo_to(w, &w->img[i], keep[i]);
	if (!why[0])
		return 0;
	if (++w->fails <= PL_REPORT) {
		ksft_print_msg("FAIL %s state (generation %u acknowledged, %u "
			       "at most): %s\n", kind, lo, hi, why);
		ksft_print_msg("  state: %s\n", w->state);
		fflush(stdout);	/* the test's child leaves with _exit */
	}
	return -1;
}

/* Apply entry i of log l torn: a random part of its sectors, not all,
 * not none (one sector: whole). */
static int pl_tear(struct pl_walk *w, struct pl_img *im,
		   const struct logw *l, size_t i)
{
	const struct logw_entry *e = &l->e[i];
	uint64_t ss = l->sectorsize, ns = e->len / ss, kept = 0;
	uint64_t keep_first = pl_rand(&w->rng) % ns;
	int err = 0;

	for (uint64_t k = 0; !err && k < ns; k++) {
		int keep = k == keep_first ||
			   (k != (keep_first + 1) % ns && pl_rand(&w->rng) & 1);

		if (keep || ns == 1) {
			kept++;
			err = pl_apply(im, e->off + k * ss, e->data + k * ss,
				       ss, 1);
		}
	}
	pl_say(w, " (torn: %llu of %llu sectors)", (unsigned long long)kept,
	       (unsigned long long)ns);
	w->torn++;
	return err;
}

/* Entries a and b of log l write a common byte. */
static int pl_overlap(const struct logw *l, size_t a, size_t b)
{
	const struct logw_entry *x = &l->e[a], *y = &l->e[b];

	return x->off < y->off + y->len && y->off < x->off + x->len;
}

/*
 * Put ord[0..n) (in log order) in a random order, except that two
 * writes to a common sector keep their log order: in this store the
 * later one was issued after the earlier had completed (a place is
 * reused only then), and no disk lets the older bytes win then.
 */
static void pl_shuffle(struct pl_walk *w, const struct logw *l, size_t *ord,
		       size_t n)
{
	for (size_t j = 0; j + 1 < n; j++) {
		size_t ready = 0, pick, k, i, t;

		/* ord[j..n) stays in log order: k is ready when no
		 * entry before it there overlaps it */
		for (k = j; k < n; k++) {
			for (i = j; i < k && !pl_overlap(l, ord[i], ord[k]);
			     i++)
				;
			ready += i == k;
		}
		pick = pl_rand(&w->rng) % ready;
		for (k = j;; k++) {
			for (i = j; i < k && !pl_overlap(l, ord[i], ord[k]);
			     i++)
				;
			if (i == k && !pick--)
				break;
		}
		t = ord[k];
		memmove(&ord[j + 1], &ord[j], (k - j) * sizeof(*ord));
		ord[j] = t;
	}
}

/* A random subset of device dev's group of writes grp[0..m) (not all of
 * them in log order, not none), in log or random order, maybe one torn,
 * applied to its image (kept for pl_undo_*) and said.  0 or -errno. */
static int pl_some(struct pl_walk *w, unsigned dev, const size_t *grp,
		   size_t m)
{
	const struct logw *l = &w->r->d[dev].log;
	size_t *ord = malloc(m * sizeof(*ord)), n = 0, torn;
	int shuffle = m > 1 && pl_rand(&w->rng) & 1, err = 0;

	if (!ord)
		return -ENOMEM;
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
		pl_shuffle(w, l, ord, n);
	torn = m == 1 || pl_rand(&w->rng) % 3 == 0 ?
	       pl_rand(&w->rng) % n : n;
	pl_say(w, "; then %zu of the %zu writes after it%s:", n, m,
	       shuffle ? ", reordered" : "");
	for (size_t j = 0; !err && j < n; j++) {
		const struct logw_entry *e = &l->e[ord[j]];
		char name[160];

		pl_name(w->r, dev, ord[j], name, sizeof(name));
		pl_say(w, "%s %s", j ? "," : "", name);
		err = j == torn ? pl_tear(w, &w->img[dev], l, ord[j]) :
		      pl_apply(&w->img[dev], e->off, e->data, e->len, 1);
	}
	pl_say(w, "; lost:");
	for (size_t j = 0, k, lost = 0; j < m; j++) {
		char name[160];

		for (k = 0; k < n && ord[k] != grp[j]; k++)
			;
		if (k < n)
			continue;
		pl_name(w->r, dev, grp[j], name, sizeof(name));
		pl_say(w, "%s %s", lost++ ? "," : "", name);
	}
	free(ord);
	return err;
}

/* A random subset of the plain store's group (pl_some), checked; then
 * back. */
static void pl_subset(struct pl_walk *w, const size_t *grp, size_t m,
		      unsigned lo, unsigned hi)
{
	if (pl_some(w, 0, grp, m))
		w->fails++;
	else
		pl_check(w, lo, hi, 0, "subset");
	pl_undo_all(w);
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
 * The writes grp[0..m) of the plain store's log between two barriers
 * (the image holds everything before them, entries [0, base_at); lo was
 * acknowledged then): subsets, then in order with sampled prefixes.
 * Leaves them all applied.
 */
static void pl_group(struct pl_walk *w, const size_t *grp, size_t m,
		     unsigned lo, size_t base_at)
{
	const struct logw *l = &w->r->d[0].log;
	unsigned hi = lo + 1 > w->r->last_gen ? w->r->last_gen : lo + 1;
	size_t nsub = m > 1 ? PL_SUBSETS : 0;
	int err = 0;

	if (m == 1 && l->e[grp[0]].len > l->sectorsize)
		nsub = 1;	/* only a torn one is new */
	for (size_t k = 0; w->kinds & PL_SUBSET && k < nsub; k++) {
		pl_say_base(w, base_at);
		pl_subset(w, grp, m, lo, hi);
	}
	for (size_t j = 0; !err && j < m; j++) {
		const struct logw_entry *e = &l->e[grp[j]];

		err = pl_apply(&w->img[0], e->off, e->data, e->len, 0);
		if (err || !(w->kinds & PL_INSIDE) || !pl_sampled(j + 1, m))
			continue;
		pl_say_base(w, base_at);
		pl_say(w, "; then in order the first %zu of the %zu writes "
		       "after it, through entry %zu", j + 1, m, grp[j]);
		pl_check(w, lo, hi, 0, "prefix");
	}
	if (err)
		w->fails++;
}

/* Point p of log l is a barrier: a FLUSH entry at p, a FUA write just
 * before it, or the log's end. */
static int pl_barrier(const struct logw *l, size_t p)
{
	return p == l->n || l->e[p].flags & LOGW_FLUSH ||
	       (p && l->e[p - 1].flags & LOGW_FUA);
}

/* Replay the plain store's log, checking the kinds of states w->kinds
 * names. */
static void pl_walk(struct pl_walk *w)
{
	const struct pl_rec *r = w->r;
	const struct logw *l = &r->d[0].log;
	size_t *grp = calloc(l->n + 1, sizeof(*grp)), m = 0, base_at = 0;
	unsigned ack = 0;

	if (!grp) {
		w->fails++;
		return;
	}
	for (size_t p = 0; p <= l->n; p++) {
		const struct logw_entry *e = p < l->n ? &l->e[p] : NULL;

		if (pl_barrier(l, p)) {
			pl_group(w, grp, m, ack, base_at);
			m = 0;
			base_at = p;
			if (r->d[0].tag[p] > ack)
				ack = r->d[0].tag[p];
			pl_say_base(w, p);
			if (w->kinds & PL_AT_FLUSH)
				pl_check(w, ack, ack + 1 > r->last_gen ?
					 r->last_gen : ack + 1, 0,
					 p == l->n ? "end" : "flush");
		}
		if (e && pl_writes(e))
			grp[m++] = p;
	}
	free(grp);
}

/* ---- replay of a striped store: pairs of member states ----------------- */

/* The first mark in r's logs: the format's, or the repaired start's. */
static unsigned pl_first(const struct pl_rec *r)
{
	return r->from ? r->base_gen : 1;
}

/* The point of device dev's log that mark g names (0 before the first
 * mark, the log's end after the last). */
static size_t pl_bar(const struct pl_rec *r, unsigned dev, unsigned g)
{
	const struct pl_dev *d = &r->d[dev];

	if (g < pl_first(r))
		return 0;
	for (size_t p = 0; g <= r->last_gen && p <= d->log.n; p++)
		if (d->tag[p] == g)
			return p;
	return d->log.n;
}

/* The rounds a member state of round k (its log from b[0] to b[1]) can
 * be the crash of: [*lo, *hi].  At a mark it ends one and starts the
 * next; inside (a subset or prefix), or at its table's FLUSH, only k. */
static void pl_rounds_of(const struct pl_rec *r, unsigned k,
			 const size_t b[2], size_t at, int inside,
			 unsigned *lo, unsigned *hi)
{
	*lo = *hi = k;
	if (inside)
		return;
	if (at == b[0] && k > pl_first(r))
		*lo = k - 1;
	if (at == b[1] && k <= r->last_gen)
		*hi = k + 1;
}

/*
 * Check the pair of member states on the images, member i's a crash of
 * rounds [lo[i], hi[i]]: the crash was in a round both allow, where the
 * store had acknowledged the generation before it and may hold that
 * round's, so the set must open in the intersection of those windows.
 */
static void pl_pair_check(struct pl_walk *w, const unsigned lo[2],
			  const unsigned hi[2], const char *kind)
{
	const struct pl_rec *r = w->r;
	unsigned a = lo[0] > lo[1] ? lo[0] : lo[1];
	unsigned b = hi[0] < hi[1] ? hi[0] : hi[1];

	pl_check(w, b > pl_first(r) ? b - 1 : r->base_gen,
		 a < r->last_gen ? a : r->last_gen, b > a, kind);
}

/* The next barrier point of log l after p, at most end. */
static size_t pl_next(const struct logw *l, size_t p, size_t end)
{
	do
		p++;
	while (p < end && !pl_barrier(l, p));
	return p;
}

/* Member dev at barrier point at of round b: its writes [b[0], at)
 * applied (kept), said. */
static int pl_member_at(struct pl_walk *w, unsigned dev, const size_t b[2],
			size_t at)
{
	pl_say(w, "%smember %u: ", dev ? "; " : "", dev);
	pl_say_point(w, dev, at);
	return pl_apply_log(&w->img[dev], &w->r->d[dev].log, b[0], at, 1);
}

/* Member dev at a random barrier point of round b (its ends included). */
static int pl_member_flush(struct pl_walk *w, unsigned dev,
			   const size_t b[2], size_t *at)
{
	const struct logw *l = &w->r->d[dev].log;
	size_t n = 0, pick, p;

	for (p = b[0]; p < b[1]; p = pl_next(l, p, b[1]))
		n++;
	pick = pl_rand(&w->rng) % (n + 1);
	for (p = b[0]; pick--; p = pl_next(l, p, b[1]))
		;
	*at = p;
	return pl_member_at(w, dev, b, p);
}

/*
 * Member dev inside round b: after one of its barriers (a random one of
 * those with writes after them), a prefix or a random subset (pl_some)
 * of the writes up to the next, applied (kept) and said.  1, 0 when the
 * round has no writes (nothing done), -errno.
 */
static int pl_member_inside(struct pl_walk *w, unsigned dev,
			    const size_t b[2])
{
	const struct logw *l = &w->r->d[dev].log;
	size_t ng = 0, pick, p, q, m = 0, *grp, j;
	int err;

	for (p = b[0]; p < b[1]; p = q) {
		q = pl_next(l, p, b[1]);
		for (j = p; j < q && !pl_writes(&l->e[j]); j++)
			;
		ng += j < q;
	}
	if (!ng)
		return 0;
	pick = pl_rand(&w->rng) % ng;
	for (p = b[0];; p = q) {
		q = pl_next(l, p, b[1]);
		for (j = p; j < q && !pl_writes(&l->e[j]); j++)
			;
		if (j < q && !pick--)
			break;
	}
	grp = malloc((q - p) * sizeof(*grp));
	if (!grp)
		return -ENOMEM;
	for (j = p; j < q; j++)
		if (pl_writes(&l->e[j]))
			grp[m++] = j;
	err = pl_member_at(w, dev, b, p);
	if (!err && m > 1 && !(pl_rand(&w->rng) & 3)) {
		j = 1 + pl_rand(&w->rng) % (m - 1);
		pl_say(w, "; then in order the first %zu of the %zu writes "
		       "after it", j, m);
		err = pl_apply_log(&w->img[dev], l, grp[0], grp[j - 1] + 1, 1);
	} else if (!err) {
		err = pl_some(w, dev, grp, m);
	}
	free(grp);
	return err ? err : 1;
}

/* Round k (logs from b[i][0] to b[i][1]): each member at each of its
 * barriers, every pair but both at the round's start (the last round's
 * end). */
static void pl_round_flushes(struct pl_walk *w, unsigned k,
			     size_t b[PL_DEVS][2])
{
	const struct pl_rec *r = w->r;
	const struct logw *l0 = &r->d[0].log, *l1 = &r->d[1].log;

	for (size_t p0 = b[0][0]; p0 <= b[0][1];
	     p0 = pl_next(l0, p0, b[0][1])) {
		for (size_t p1 = b[1][0]; p1 <= b[1][1];
		     p1 = pl_next(l1, p1, b[1][1])) {
			size_t at[2] = { p0, p1 };
			unsigned lo[2], hi[2];
			int err = 0;

			if (k > pl_first(r) && p0 == b[0][0] && p1 == b[1][0])
				continue;
			w->state[0] = 0;
			for (unsigned i = 0; i < 2; i++) {
				pl_rounds_of(r, k, b[i], at[i], 0, &lo[i],
					     &hi[i]);
				if (!err)
					err = pl_member_at(w, i, b[i], at[i]);
			}
			if (err)
				w->fails++;
			else
				pl_pair_check(w, lo, hi, "flush");
			pl_undo_all(w);
		}
	}
}

/* Round k: a random pair, member j % 3 (2: both) inside the round
 * (pl_member_inside), the other at a random barrier of it. */
static void pl_round_random(struct pl_walk *w, unsigned k,
			    size_t b[PL_DEVS][2], unsigned j)
{
	unsigned lo[2], hi[2];
	int err = 0;

	w->state[0] = 0;
	for (unsigned i = 0; i < 2 && !err; i++) {
		int in = j % 3 == 2 || j % 3 == i ?
			 pl_member_inside(w, i, b[i]) : 0;
		size_t at = 0;

		if (in < 0)
			err = in;
		else if (!in)
			err = pl_member_flush(w, i, b[i], &at);
		pl_rounds_of(w->r, k, b[i], at, in, &lo[i], &hi[i]);
	}
	if (err)
		w->fails++;
	else
		pl_pair_check(w, lo, hi, "random");
	pl_undo_all(w);
}

/* Replay a striped store's logs round by round (round k: each log from
 * the barrier of mark k - 1 to that of mark k), checking the pairs of
 * member states w->kinds names in each; then on to the round's end. */
static void pl_pairs(struct pl_walk *w)
{
	const struct pl_rec *r = w->r;

	if (r->ndev != 2) {
		w->fails++;
		return;
	}
	for (unsigned k = pl_first(r); k <= r->last_gen + 1; k++) {
		size_t b[PL_DEVS][2];

		for (unsigned i = 0; i < 2; i++) {
			b[i][0] = pl_bar(r, i, k - 1);
			b[i][1] = pl_bar(r, i, k);
		}
		if (w->kinds & PL_AT_FLUSH)
			pl_round_flushes(w, k, b);
		for (unsigned j = 0; w->kinds & PL_SUBSET && j < PL_PAIRS; j++)
			pl_round_random(w, k, b, j);
		for (unsigned i = 0; i < 2; i++)
			if (pl_apply_log(&w->img[i], &r->d[i].log, b[i][0],
					 b[i][1], 0))
				w->fails++;
	}
}

/*
 * Start r (a striped recording again) from a crash inside a flush k of
 * from, the first from flush `at` on that changed what member r->ahead
 * holds (else its dropped generation would look like the one before):
 * that member through its commit of k, the other through its table's
 * FLUSH only (its superblock of k lost).  The set opens at k - 1.  k.
 */
static unsigned pl_from_crash(struct pl_rec *r, const struct pl_rec *from,
			      unsigned at)
{
	unsigned k = at;

	r->from = from;
	if (from->skip || from->err)
		return k;
	while (k < from->last_gen && !pl_changed(from, k, r->ahead))
		k++;
	r->base_gen = k - 1;
	for (unsigned i = 0; i < r->ndev; i++)
		r->from_at[i] = i == r->ahead ? pl_bar(from, i, k) :
				pl_next(&from->d[i].log, pl_bar(from, i, k - 1),
					from->d[i].log.n);
	return k;
}

/* ---- the tests ----------------------------------------------------------- */

static int pl_walk_init(struct pl_walk *w, const struct pl_rec *r,
			unsigned kinds)
{
	memset(w, 0, sizeof(*w));
	w->r = r;
	w->kinds = kinds;
	w->rng = pl_mix(pl_seed ^ kinds ^ r->mix) | 1;
	for (unsigned i = 0; i < PL_DEVS; i++)
		w->img[i].fd = -1;
	w->want = malloc(PL_MAXLEN);
	if (!w->want)
		return -ENOMEM;
	for (unsigned i = 0; i < r->ndev; i++) {
		w->img[i].fd = open(r->d[i].img, O_RDWR | O_CLOEXEC);
		if (w->img[i].fd < 0)
			return -errno;
		/* the devices as they were before the workload */
		if (pl_base(r, i, w->img[i].fd))
			return -EIO;
	}
	return 0;
}

static void pl_walk_fini(struct pl_walk *w)
{
	free(w->want);
	w->want = NULL;
	for (unsigned i = 0; i < PL_DEVS; i++) {
		struct pl_img *im = &w->img[i];

		while (im->nundo)
			free(im->undo[--im->nundo].old);
		free(im->undo);
		im->undo = NULL;
		im->cap_undo = 0;
		if (im->fd >= 0)
			close(im->fd);
		im->fd = -1;
	}
}

/* "1-41" for the generations seen */
static void pl_seen(const struct pl_walk *w, char *out, size_t len)
{
	unsigned last = w->r->last_gen;
	size_t n = 0;

	out[0] = 0;
	for (unsigned g = 1; g <= last && n + 16 < len; g++) {
		unsigned e = g;

		if (!w->seen[g])
			continue;
		while (e < last && w->seen[e + 1])
			e++;
		n += snprintf(out + n, len - n, "%s%u", n ? "," : "", g);
		if (e > g)
			n += snprintf(out + n, len - n, "-%u", e);
		g = e;
	}
}

/* What a device's log holds. */
struct pl_count {
	unsigned flushes, fua, writes, marks, other, acked;
	uint64_t bytes;
};

static void pl_count(const struct pl_dev *d, struct pl_count *c)
{
	const struct logw *l = &d->log;

	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < l->n; i++) {
		const struct logw_entry *e = &l->e[i];

		c->flushes += !!(e->flags & LOGW_FLUSH);
		c->fua += !!(e->flags & LOGW_FUA);
		c->marks += !!(e->flags & LOGW_MARK);
		c->other += !!(e->flags & LOGW_DISCARD);
		if (pl_writes(e)) {
			c->writes++;
			c->bytes += e->len;
		}
	}
	for (size_t p = 0; p <= l->n; p++)
		c->acked += d->tag[p] != 0;
}

FIXTURE(powerloss) {
	struct pl_walk w;
};

FIXTURE_SETUP(powerloss)
{
	for (unsigned i = 0; i < PL_DEVS; i++)
		self->w.img[i].fd = -1;
}

FIXTURE_TEARDOWN(powerloss)
{
	pl_walk_fini(&self->w);
}

/* Skip without the modules; fail when the recording failed. */
#define PL_NEED_LOG(r) do {						\
	if ((r)->skip)							\
		SKIP(return, "%s", (r)->why);				\
	ASSERT_EQ(0, (r)->err) {					\
		TH_LOG("recording %s: %s", (r)->nodes, (r)->why);	\
	}								\
} while (0)

TEST_F_TIMEOUT(powerloss, log_holds_every_flush_and_mark, 120)
{
	struct pl_count c;

	PL_NEED_LOG(&plain);
	pl_count(&plain.d[0], &c);
	TH_LOG("seed %#llx: %u writes (%u overwrites, %u in %u batches "
	       "of 2-4), %u deletes, %u meta blobs, %u flushes (%u with "
	       "nothing new), then %u operations unflushed",
	       (unsigned long long)pl_seed, plain.writes, plain.overwrites,
	       plain.batched, plain.batches, plain.deletes,
	       plain.metas, plain.last_gen - 1, plain.empty, plain.tail_ops);
	TH_LOG("log: %zu entries: %u writes (%llu KiB), %u FLUSH, %u FUA, "
	       "%u marks, %u discards; log-writes status \"%s\"",
	       plain.d[0].log.n, c.writes, (unsigned long long)c.bytes >> 10,
	       c.flushes, c.fua, c.marks, c.other, plain.d[0].status);
	EXPECT_EQ(NULL, strstr(plain.d[0].status, "logging_disabled"));
	/* genN's mark, and "dm-log-writes-end" */
	EXPECT_EQ(plain.last_gen + 1, c.marks);
	/* each mark follows its own FLUSH: a FLUSH per generation */
	EXPECT_EQ(plain.last_gen, c.acked);
	EXPECT_EQ(0, c.other);
}

TEST_F_TIMEOUT(powerloss, at_every_flush_the_acknowledged_generation, 300)
{
	char seen[256];

	PL_NEED_LOG(&plain);
	ASSERT_EQ(0, pl_walk_init(&self->w, &plain, PL_AT_FLUSH));
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

	PL_NEED_LOG(&plain);
	ASSERT_EQ(0, pl_walk_init(&self->w, &plain, PL_INSIDE));
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

	PL_NEED_LOG(&plain);
	ASSERT_EQ(0, pl_walk_init(&self->w, &plain, PL_SUBSET));
	pl_walk(&self->w);
	pl_seen(&self->w, seen, sizeof(seen));
	TH_LOG("%u states (the log to a FLUSH and a random part of the "
	       "writes after it, %u with a torn write), %u with no store yet; "
	       "generations %s seen", self->w.states, self->w.torn,
	       self->w.blank, seen);
	EXPECT_EQ(0, self->w.fails);
	EXPECT_LT(0, self->w.states);
}

TEST_F_TIMEOUT(powerloss, striped_logs_hold_every_flush_and_mark, 120)
{
	struct pl_count c;

	PL_NEED_LOG(&stripe);
	TH_LOG("seed %#llx, striped over 2 members: %u writes (%u "
	       "overwrites, %u in %u batches), %u deletes, %u meta blobs, %u "
	       "flushes (%u with nothing new), then %u operations unflushed",
	       (unsigned long long)pl_seed, stripe.writes, stripe.overwrites,
	       stripe.batched, stripe.batches, stripe.deletes, stripe.metas,
	       stripe.last_gen - 1, stripe.empty, stripe.tail_ops);
	for (size_t k = 1; k < ARRAY_SIZE(pl_recs); k++) {
		const struct pl_rec *r = pl_recs[k];
		unsigned marks = r->last_gen - pl_first(r) + 1;

		EXPECT_EQ(0, r->err) {
			TH_LOG("recording %s: %s", r->nodes, r->why);
		}
		if (r->err)
			continue;
		if (r->from)
			TH_LOG("again from a crash in flush %u: member %u "
			       "through its commit, member %u through its "
			       "table; opened at %u, %u dropped; %u flushes "
			       "more", r->base_gen + 1, r->ahead, !r->ahead,
			       r->base_gen, r->base_gen + 1,
			       r->last_gen - r->base_gen);
		for (unsigned i = 0; i < r->ndev; i++) {
			pl_count(&r->d[i], &c);
			TH_LOG("  member %u's log: %zu entries: %u writes "
			       "(%llu KiB), %u FLUSH, %u FUA, %u marks; "
			       "log-writes status \"%s\"", i, r->d[i].log.n,
			       c.writes, (unsigned long long)c.bytes >> 10,
			       c.flushes, c.fua, c.marks, r->d[i].status);
			EXPECT_EQ(NULL, strstr(r->d[i].status,
					       "logging_disabled"));
			EXPECT_EQ(marks + 1, c.marks);
			/* each mark names its own barrier on each member */
			EXPECT_EQ(marks, c.acked);
			EXPECT_EQ(0, c.other);
		}
	}
}

TEST_F_TIMEOUT(powerloss, striped_members_at_their_flushes, 300)
{
	char seen[256];

	PL_NEED_LOG(&stripe);
	ASSERT_EQ(0, pl_walk_init(&self->w, &stripe, PL_AT_FLUSH));
	pl_pairs(&self->w);
	pl_seen(&self->w, seen, sizeof(seen));
	TH_LOG("%u pairs (in each round, each member at each of its "
	       "FLUSHes), %u with a member ahead (dropped, then opened again "
	       "the same), %u with no store yet; generations %s seen",
	       self->w.states, self->w.dropped, self->w.blank, seen);
	EXPECT_EQ(0, self->w.fails);
	EXPECT_LT(0, self->w.dropped);
}

TEST_F_TIMEOUT(powerloss, striped_members_unflushed_lost_reordered_torn, 300)
{
	char seen[256];

	PL_NEED_LOG(&stripe);
	ASSERT_EQ(0, pl_walk_init(&self->w, &stripe, PL_SUBSET));
	pl_pairs(&self->w);
	pl_seen(&self->w, seen, sizeof(seen));
	TH_LOG("%u pairs (in each round, %d with a member or both at a "
	       "prefix or random subset of its writes after a FLUSH, %u torn "
	       "writes), %u with a member ahead, %u with no store yet; "
	       "generations %s seen", self->w.states, PL_PAIRS, self->w.torn,
	       self->w.dropped, self->w.blank, seen);
	EXPECT_EQ(0, self->w.fails);
	EXPECT_LT(0, self->w.states);
}

TEST_F_TIMEOUT(powerloss, striped_repair_then_crash_again, 300)
{
	char seen[256];

	for (unsigned j = 0; j < 2; j++) {
		PL_NEED_LOG(&again[j]);
		ASSERT_EQ(0, pl_walk_init(&self->w, &again[j],
					  PL_AT_FLUSH | PL_SUBSET));
		pl_pairs(&self->w);
		pl_seen(&self->w, seen, sizeof(seen));
		TH_LOG("member %u ahead at generation %u, dropped: %u pairs "
		       "(the repair, then %u flushes), %u with a member ahead; "
		       "generations %s seen", again[j].ahead,
		       again[j].base_gen + 1, self->w.states,
		       again[j].last_gen - again[j].base_gen, self->w.dropped,
		       seen);
		EXPECT_EQ(0, self->w.fails);
		EXPECT_LT(0, self->w.dropped);
		pl_walk_fini(&self->w);
	}
}

/* TEST_HARNESS_MAIN's constructor ordering, then a main that records
 * the workloads once, before the harness forks the tests. */
static void __attribute__((constructor)) __constructor_order_last(void)
{
	if (!__constructor_order)
		__constructor_order = _CONSTRUCTOR_ORDER_BACKWARD;
}

int main(int argc, char **argv)
{
	const char *env = getenv("HMM_PL_SEED");
	unsigned k;

	pl_pid = getpid();
	pl_seed = env ? strtoull(env, NULL, 0) : PL_SEED;
	for (size_t i = 0; i < ARRAY_SIZE(pl_recs); i++)
		pl_names(pl_recs[i]);
	atexit(pl_cleanup);
	pl_record(&plain);
	pl_record(&stripe);
	k = pl_from_crash(&again[0], &stripe, stripe.last_gen / 2);
	pl_record(&again[0]);
	pl_from_crash(&again[1], &stripe, k + 1);
	pl_record(&again[1]);
	return test_harness_run(argc, argv);
}
