// SPDX-License-Identifier: MIT
/*
 * state.c — the training state as hmm tensors (state.h).
 *
 * One libhmm context per run.  Before it is opened, the store path is
 * checked by hand (created, space reserved with posix_fallocate) so that
 * a read-only or full file system is reported, with the path and the
 * sizes, before any training starts rather than at the first eviction.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "optim.h"
#include "state.h"
#ifndef HMM_TRAIN_NO_LIBHMM	/* -DHMM_TRAIN_NO_LIBHMM: plain memory */
#define HAVE_LIBHMM 1
#endif
#ifdef HAVE_LIBHMM
#include "hk_offload.h"
#include "hmm.h"
#endif

#define CHUNK_MAX	(2ull << 20)
#define CHUNK_MIN	(16ull << 10)
#define ROUND(x)	(((x) + s->chunk - 1) / s->chunk * s->chunk)

struct state {
	int nblocks;
	size_t *floats;			/* [nblocks] */
	int shared_grad;		/* see state_config */
	size_t grad_floats;		/* the shared gradient's size */
	uint64_t bytes, budget, store_size;
	uint64_t chunk;		/* chunk bytes: a quarter of the largest array */
	uint32_t depth;		/* pieces the optimizer reads ahead */
	int whole;		/* 1: AdamW maps a layer's p, g, m, v whole */
	int keep_p;		/* layers below it keep p after AdamW */
	int pending[2];		/* blocks stepped last, write-back unchecked
				   (-1: none); [1] is the older */
	int offloaded, unlink_store;
	int has_store, reopen, format;	/* see state_config */
	char store_path[4096];
	double map_s;
#ifdef HAVE_LIBHMM
	struct hmm *h;
	struct hmm_tensor **t;		/* [nblocks * ST_KINDS] */
	struct hmm_tensor *tag;		/* "train.ckpt", with a store */
#else
	float **mem;			/* [nblocks * ST_KINDS] */
#endif
};

static __thread char errbuf[1024];

const char *state_error(void)
{
	return errbuf;
}

static int fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(errbuf, sizeof(errbuf), fmt, ap);
	va_end(ap);
	return err;
}

static const char *kind_name(int k)
{
	static const char *const n[] = { "p", "g", "m", "v" };

	return n[k];
}

static __attribute__((unused)) double st_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void human(char *buf, size_t cap, uint64_t b)
{
	if (b >= 10ull << 30)
		snprintf(buf, cap, "%.1f GiB", b / 1073741824.0);
	else if (b >= 10ull << 20)
		snprintf(buf, cap, "%.1f MiB", b / 1048576.0);
	else
		snprintf(buf, cap, "%.1f KiB", b / 1024.0);
}

static void default_store(char *buf, size_t cap)
{
	struct stat st;
	const char *dir = "build/tmp";

	if (stat("build", &st) || !S_ISDIR(st.st_mode))
		dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/var/tmp";
	else
		mkdir(dir, 0755);
	snprintf(buf, cap, "%s/hmm-train.%d.store", dir, (int)getpid());
}

/*
 * An existing file may be reused as the store only when it is empty,
 * starts with libhmm's superblock magic, or starts with zeros (reserved
 * by an earlier run that stopped before formatting it).
 */
static int looks_like_store(int fd, off_t size)
{
	char head[8];

	if (size == 0)
		return 1;
	if (pread(fd, head, sizeof(head), 0) != sizeof(head))
		return 0;
	return !memcmp(head, "HMMSTORE", 8) ||
	       !memcmp(head, "\0\0\0\0\0\0\0\0", 8);
}

/*
 * Create the store file (or open the device) and reserve its size, so a
 * full or read-only file system fails here, named, before training.
 */
static int store_preflight(struct state *s)
{
	const char *p = s->store_path;
	struct statvfs vfs;
	struct stat st;
	char need[32], have[32];
	int fd, r, created = 1;

	fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST) {
		created = 0;
		fd = open(p, O_RDWR | O_CLOEXEC);
	}
	if (fd < 0)
		return fail(-errno, "store %s: cannot open for writing: %s%s",
			    p, strerror(errno), errno == EROFS ?
			    " (pick a writable place with --store)" : "");
	if (fstat(fd, &st) == 0 && S_ISBLK(st.st_mode)) {
		close(fd);
		return 0;
	}
	if (!created && !s->format && !looks_like_store(fd, st.st_size)) {
		close(fd);
		return fail(-EEXIST, "store %s: the file exists (%lld bytes) and "
			    "is not an hmm store; refusing to overwrite it "
			    "(remove it, pick another --store, or --format)", p,
			    (long long)st.st_size);
	}
	r = posix_fallocate(fd, 0, s->store_size);
	human(need, sizeof(need), s->store_size);
	if (r == ENOSPC || r == EDQUOT) {
		uint64_t avail = fstatvfs(fd, &vfs) ? 0 :
				 (uint64_t)vfs.f_bavail * vfs.f_frsize;

		human(have, sizeof(have), avail);
		close(fd);
		if (created)
			unlink(p);
		return fail(-ENOSPC, "store %s: the store needs %s but its "
			    "file system has %s free (pick another place with "
			    "--store, or a larger --host-budget)", p, need,
			    have);
	}
	close(fd);
	if (r && r != EOPNOTSUPP && r != EINVAL && created)
		unlink(p);
	if (r && r != EOPNOTSUPP && r != EINVAL)
		return fail(-r, "store %s: cannot reserve %s: %s", p, need,
			    strerror(r));
	return 0;
}

static uint64_t min_budget(const struct state *s)
{
	uint64_t big = 0;

	for (int i = 0; i + 1 < s->nblocks; i++)
		if (s->floats[i] * 4 > big)
			big = s->floats[i] * 4;
	/* mapped at once: the embeddings' p and g, one layer's p and g,
	 * and the optimizer's m and v chunks */
	return 2 * ROUND(s->floats[s->nblocks - 1] * 4) + 2 * ROUND(big) +
	       4 * s->chunk;
}

#define PAGE_UP(x)	(((x) + 4095) / 4096 * 4096)

/*
 * Can AdamW map a layer's p, g, m and v whole (next to the embeddings'
 * p and g, with a chunk to spare)?  Then it needs no streaming, and the
 * I/O of m and v overlaps the backward instead of stalling AdamW.
 */
static void whole_plan(struct state *s)
{
	uint64_t big = 0, need, emb = s->floats[s->nblocks - 1] * 4;

	for (int i = 0; i + 1 < s->nblocks; i++)
		if (PAGE_UP(s->floats[i] * 4) > big)
			big = PAGE_UP(s->floats[i] * 4);
	need = 2 * PAGE_UP(emb) + 4 * big + s->chunk;
	/* HMM_TRAIN_STREAM: kernels/bind's streamed step regardless */
	s->whole = getenv("HMM_TRAIN_STREAM") ? 0 : s->budget >= need;
	s->keep_p = 1;
}

/* Is array (blk, kind) the shared layer gradient? */
static int shares_grad(const struct state *s, int blk, int kind)
{
	return s->shared_grad && kind == ST_G && blk < s->nblocks - 1;
}

float *state_map(struct state *s, int blk, int kind, unsigned access)
{
	return state_map_range(s, blk, kind, 0, s->floats[blk], access);
}

size_t state_chunk_floats(const struct state *s)
{
	return s->chunk / 4;
}

#ifdef HAVE_LIBHMM
#define TAG_NAME	"train.ckpt"
#define TAG_BYTES	32

/*
 * Make array name (shape floats) anew, or with a reopened store open the
 * saved one and check its size.
 */
static int array_open(struct state *s, const char *name, int64_t floats,
		      uint32_t dtype, struct hmm_tensor **out)
{
	uint64_t want = (uint64_t)floats * hmm_dtype_size(dtype);
	int err;

	if (!s->reopen) {
		err = hmm_tensor_new(s->h, name, dtype, 1, &floats, out);
		if (err)
			return fail(err, "tensor %s: %s", name,
				    hmm_last_error());
		return 0;
	}
	err = hmm_tensor_open(s->h, name, out);
	if (err)
		return fail(err, "store %s: tensor %s: %s: %s", s->store_path,
			    name, hmm_strerror(err), hmm_last_error());
	if (hmm_tensor_bytes(*out) != want || hmm_tensor_dtype(*out) != dtype)
		return fail(-EINVAL, "store %s: tensor %s holds %llu bytes, "
			    "this model's needs %llu (another --preset?)",
			    s->store_path, name,
			    (unsigned long long)hmm_tensor_bytes(*out),
			    (unsigned long long)want);
	return 0;
}

static int backend_open(struct state *s, const struct state_config *cfg)
{
	struct hmm_config hc;
	int err;

	hmm_config_default(&hc);
	hc.host_budget = s->budget;
	hc.chunk_bytes = s->chunk;
	/* look ahead as far as the budget left over by the pinned working
	 * set allows: the sequence counts every chunk access (p, m, v of
	 * each optimizer piece), so three entries per chunk of room */
	if (s->offloaded) {
		uint64_t room = (s->budget - min_budget(s)) / s->chunk;

		hc.prefetch_depth = room * 3 < 8 ? 8 : room * 3 > 256 ? 256 :
				    room * 3;
		s->depth = room / 3 < 2 ? 2 : room / 3 > 16 ? 16 : room / 3;
	}
	hc.daemon = cfg->daemon;
	hc.policy = getenv("HMM_TRAIN_LRU") ? HMM_POLICY_LRU :
		    HMM_POLICY_SCHEDULE;
	if (s->has_store) {
		hc.store_path = s->store_path;
		hc.store_size = s->store_size;
	}
	if (s->reopen)
		hc.flags |= HMM_CONFIG_STORE_KEEP;
	else if (s->format)
		hc.flags |= HMM_CONFIG_STORE_FORMAT;
	err = hmm_open(&hc, &s->h);
	if (err)
		return fail(err, "libhmm: %s%s%s%s", hmm_strerror(err),
			    *hmm_last_error() ? ": " : "", hmm_last_error(),
			    err == -EEXIST ? "; hmm-train --format formats "
			    "it" : "");
	s->t = calloc((size_t)s->nblocks * ST_KINDS, sizeof(*s->t));
	if (!s->t)
		return fail(-ENOMEM, "out of memory");
	for (int i = 0; i < s->nblocks; i++)
		for (int k = 0; k < ST_KINDS; k++) {
			int64_t shape = s->floats[i];
			char name[64];

			if (shares_grad(s, i, k)) {
				if (i > 0) {
					s->t[i * ST_KINDS + k] = s->t[k];
					continue;
				}
				shape = s->grad_floats;
				snprintf(name, sizeof(name), "layers.g");
			} else {
				snprintf(name, sizeof(name), "%s.%s",
					 cfg->names[i], kind_name(k));
			}
			err = array_open(s, name, shape, HMM_DTYPE_F32,
					 &s->t[i * ST_KINDS + k]);
			if (err)
				return err;
		}
	if (s->has_store)
		return array_open(s, TAG_NAME, TAG_BYTES, HMM_DTYPE_U8,
				  &s->tag);
	return 0;
}

int state_flush(struct state *s, uint64_t *flush_bytes)
{
	struct hmm_stats a, b;
	int err;

	if (!s->has_store)
		return fail(-ENODEV, "checkpoint: no store to flush");
	hmm_stats(s->h, &a);
	err = hmm_flush(s->h);
	if (err)
		return fail(err, "store %s: flush: %s: %s", s->store_path,
			    hmm_strerror(err), hmm_last_error());
	hmm_stats(s->h, &b);
	if (flush_bytes)
		*flush_bytes = b.tier[HMM_TIER_STORE].bytes_in -
			       a.tier[HMM_TIER_STORE].bytes_in;
	return 0;
}

int state_tag(struct state *s, uint64_t tag[4], int write)
{
	void *p;
	int err;

	if (!s->tag)
		return fail(-ENODEV, "checkpoint: no store");
	err = hmm_map(s->tag, 0, TAG_BYTES, HMM_TIER_HOST,
		      write ? HMM_WRITE | HMM_DISCARD : HMM_READ, &p);
	if (err)
		return fail(err, "store %s: map %s: %s", s->store_path,
			    TAG_NAME, hmm_last_error());
	if (write)
		memcpy(p, tag, TAG_BYTES);
	else
		memcpy(tag, p, TAG_BYTES);
	hmm_unmap(s->tag, p);
	return 0;
}

static void backend_close(struct state *s)
{
	char buf[8192];

	if (s->h && getenv("HMM_TRAIN_STATS") &&
	    hmm_stats_json(s->h, buf, sizeof(buf)) > 0)
		fprintf(stderr, "hmm-train: %.3f s in maps and AdamW; libhmm "
			"stats: %s\n", s->map_s, buf);
	if (s->h)
		hmm_close(s->h);	/* frees the tensors */
	free(s->t);
}

float *state_map_range(struct state *s, int blk, int kind, size_t off,
		       size_t n, unsigned access)
{
	struct hmm_tensor *t = s->t[blk * ST_KINDS + kind];
	double t0 = st_now();
	void *p = NULL;
	int err;

	err = hmm_map(t, off * 4, n * 4, HMM_TIER_HOST, access, &p);
	s->map_s += st_now() - t0;
	if (err) {
		fail(err, "map %s [%zu, %zu): %s: %s", hmm_tensor_name(t),
		     off * 4, (off + n) * 4, hmm_strerror(err),
		     hmm_last_error());
		return NULL;
	}
	return p;
}

void state_unmap(struct state *s, int blk, int kind, float *p)
{
	if (p)
		hmm_unmap(s->t[blk * ST_KINDS + kind], p);
}

void state_sample(struct state *s, struct state_sample *o)
{
	struct hmm_stats st;

	memset(o, 0, sizeof(*o));
	o->map_s = s->map_s;
	if (hmm_stats(s->h, &st))
		return;
	o->host_resident = st.tier[HMM_TIER_HOST].resident;
	o->host_peak = st.tier[HMM_TIER_HOST].peak;
	/* libhmm does not count store residency; every byte of the state
	 * not in DRAM has its only copy in the store */
	o->store_resident = st.tier[HMM_TIER_STORE].resident;
	if (!o->store_resident && s->offloaded && s->bytes > o->host_resident)
		o->store_resident = s->bytes - o->host_resident;
	o->store_read_bytes = st.tier[HMM_TIER_STORE].bytes_out;
	o->store_write_bytes = st.tier[HMM_TIER_STORE].bytes_in;
	o->stall_s = st.tier[HMM_TIER_HOST].stall_s;
}

/*
 * The budget holds the whole state: one in-memory AdamW over the mapped
 * arrays (the offloaded step would evict behind itself and, with a
 * checkpoint store, write the state back every step).  Same bits.
 */
static int adamw_resident(struct state *s, int blk, const struct optim_hp *hp,
			  double wd)
{
	static const unsigned acc[ST_KINDS] = {
		[ST_P] = SM_READ | SM_WRITE, [ST_G] = SM_READ,
		[ST_M] = SM_READ | SM_WRITE, [ST_V] = SM_READ | SM_WRITE,
	};
	float *a[ST_KINDS] = { 0 };
	int err = -EIO;

	for (int k = 0; k < ST_KINDS; k++)
		if (!(a[k] = state_map(s, blk, k, acc[k])))
			goto out;
	err = optim_adamw(hp, wd, a[ST_P], a[ST_G], a[ST_M], a[ST_V],
			  s->floats[blk], hmm_tensor_name(s->t[blk * ST_KINDS]));
	if (err)
		fail(err, "AdamW on %s: %s",
		     hmm_tensor_name(s->t[blk * ST_KINDS]), strerror(-err));
out:
	for (int k = ST_KINDS - 1; k >= 0; k--)
		state_unmap(s, blk, k, a[k]);
	return err;
}

/* Wait for the write-backs of block blk's p, m and v; 0 or the error. */
static int wait_block(struct state *s, int blk)
{
	for (int k = ST_P; k <= ST_V; k++) {
		struct hmm_tensor *t = s->t[blk * ST_KINDS + k];
		int err;

		if (k == ST_G)
			continue;
		err = hmm_wait(s->h, t);
		if (err)
			return fail(err, "store %s: write-back of %s: %s: %s",
				    s->store_path, hmm_tensor_name(t),
				    hmm_strerror(err), hmm_last_error());
	}
	return 0;
}

/*
 * The budget holds one layer's p, g, m and v at once (next to the
 * embeddings' p and g): AdamW over the whole mapped arrays, whose m and
 * v the model prefetched during the layer's backward (state_prefetch),
 * then evict m, v and p without waiting, so their write-back overlaps
 * the next layer's backward.  Write-back errors are collected two steps
 * later (by then the writes are done: the wait costs nothing) and by
 * the checkpoint's flush.  Layer 0's p stays: the next forward starts
 * with it (keeping more measured no better: they crowd out the reads).  Same kernel, same bits as in memory.
 */
static int adamw_async(struct state *s, int blk, const struct optim_hp *hp,
		       double wd)
{
	struct hmm_tensor **t = &s->t[blk * ST_KINDS];
	int err = 0;

	if (s->pending[1] >= 0)
		err = wait_block(s, s->pending[1]);
	s->pending[1] = s->pending[0];
	s->pending[0] = blk;
	if (err)
		return err;
	err = adamw_resident(s, blk, hp, wd);
	if (err)
		return err;
	hmm_evict(t[ST_M], 0, HMM_ALL, HMM_TIER_HOST);
	hmm_evict(t[ST_V], 0, HMM_ALL, HMM_TIER_HOST);
	if (blk >= s->keep_p && blk + 1 < s->nblocks)
		hmm_evict(t[ST_P], 0, HMM_ALL, HMM_TIER_HOST);
	return 0;
}

void state_prefetch(struct state *s, int blk, int kind)
{
	if (s->offloaded && !shares_grad(s, blk, kind))
		hmm_prefetch(s->t[blk * ST_KINDS + kind], 0, HMM_ALL,
			     HMM_TIER_HOST);
}

int state_adamw(struct state *s, int blk, const struct optim_hp *hp,
		double wd)
{
	struct hmm_tensor **t = &s->t[blk * ST_KINDS];
	struct hk_offload_adamw o = {
		.param = t[ST_P], .grad = t[ST_G], .exp_avg = t[ST_M],
		.exp_avg_sq = t[ST_V], .chunk_bytes = s->chunk,
		.depth = s->depth,
		.hp = { .lr = hp->lr, .beta1 = hp->beta1, .beta2 = hp->beta2,
			.eps = hp->eps, .weight_decay = wd, .step = hp->step,
			.grad_scale = hp->grad_scale,
			.name = hmm_tensor_name(t[ST_P]) },
	};
	double t0 = st_now();
	int err;

	if (!s->offloaded)
		return adamw_resident(s, blk, hp, wd);
	if (s->whole) {
		err = adamw_async(s, blk, hp, wd);
		s->map_s += st_now() - t0;
		return err;
	}
	err = hk_offload_adamw_step(s->h, &o);

	s->map_s += st_now() - t0;
	if (err < 0)
		return fail(err, "AdamW on %s: %s", hmm_tensor_name(t[ST_P]),
			    hk_offload_error());
	return 0;
}

void state_step(struct state *s, int begin)
{
	if (begin)
		hmm_step_begin(s->h);
	else
		hmm_step_end(s->h);
}
#else
static int backend_open(struct state *s, const struct state_config *cfg)
{
	s->mem = calloc((size_t)s->nblocks * ST_KINDS, sizeof(*s->mem));
	if (!s->mem)
		return fail(-ENOMEM, "out of memory");
	for (int i = 0; i < s->nblocks * ST_KINDS; i++) {
		if (shares_grad(s, i / ST_KINDS, i % ST_KINDS) && i >= ST_KINDS) {
			s->mem[i] = s->mem[i % ST_KINDS];
			continue;
		}
		s->mem[i] = calloc(shares_grad(s, i / ST_KINDS, i % ST_KINDS) ?
				   s->grad_floats : s->floats[i / ST_KINDS],
				   sizeof(float));
		if (!s->mem[i])
			return fail(-ENOMEM, "out of memory for %s.%s",
				    cfg->names[i / ST_KINDS],
				    kind_name(i % ST_KINDS));
	}
	return 0;
}

static void backend_close(struct state *s)
{
	if (s->mem)
		for (int i = 0; i < s->nblocks * ST_KINDS; i++)
			if (!(i >= ST_KINDS &&
			      shares_grad(s, i / ST_KINDS, i % ST_KINDS)))
				free(s->mem[i]);
	free(s->mem);
}

float *state_map_range(struct state *s, int blk, int kind, size_t off,
		       size_t n, unsigned access)
{
	return s->mem[blk * ST_KINDS + kind] + off;
}

void state_unmap(struct state *s, int blk, int kind, float *p)
{
}

void state_sample(struct state *s, struct state_sample *o)
{
	memset(o, 0, sizeof(*o));
	o->host_resident = o->host_peak = s->bytes;
}

int state_adamw(struct state *s, int blk, const struct optim_hp *hp,
		double wd)
{
	float **a = &s->mem[blk * ST_KINDS];

	return optim_adamw(hp, wd, a[ST_P], a[ST_G], a[ST_M], a[ST_V],
			   s->floats[blk], "block");
}

void state_step(struct state *s, int begin)
{
}

void state_prefetch(struct state *s, int blk, int kind)
{
}

int state_flush(struct state *s, uint64_t *flush_bytes)
{
	return fail(-ENOTSUP, "checkpoints need libhmm");
}

int state_tag(struct state *s, uint64_t tag[4], int write)
{
	return fail(-ENOTSUP, "checkpoints need libhmm");
}
#endif

int state_open(const struct state_config *cfg, struct state **out)
{
	struct state *s;
	size_t big = 0;
	int err;

	*out = NULL;
	if (cfg->nblocks < 2)
		return fail(-EINVAL, "state: need at least 2 blocks");
	s = calloc(1, sizeof(*s));
	if (!s)
		return fail(-ENOMEM, "out of memory");
	s->nblocks = cfg->nblocks;
	s->floats = calloc(cfg->nblocks, sizeof(*s->floats));
	if (!s->floats) {
		free(s);
		return fail(-ENOMEM, "out of memory");
	}
	for (int i = 0; i < cfg->nblocks; i++)
		big = cfg->floats[i] > big ? cfg->floats[i] : big;
	s->chunk = CHUNK_MAX;
	while (s->chunk > CHUNK_MIN && s->chunk * 4 > big * 4)
		s->chunk /= 2;
	/* 1 MiB -> 2 MiB: libhmm backs whole 2 MiB chunks with huge pages,
	 * smaller ones fault in 4 KiB at a time (default preset at a
	 * quarter budget, measured: 46k minor faults and about 0.1 s of
	 * system time fewer per step) */
	if (s->chunk == CHUNK_MAX / 2 && big * 4 >= 2 * CHUNK_MAX)
		s->chunk = CHUNK_MAX;
	s->shared_grad = cfg->shared_grad;
	for (int i = 0; i < cfg->nblocks; i++) {
		int arrays = ST_KINDS;

		s->floats[i] = cfg->floats[i];
		if (shares_grad(s, i, ST_G)) {
			arrays--;
			if (cfg->floats[i] > s->grad_floats)
				s->grad_floats = cfg->floats[i];
		}
		s->bytes += (uint64_t)cfg->floats[i] * 4 * arrays;
		s->store_size += ROUND(cfg->floats[i] * 4) * arrays;
	}
	s->bytes += (uint64_t)s->grad_floats * 4;
	s->store_size += ROUND(s->grad_floats * 4);
	s->store_size = s->store_size + s->store_size / 4 + (64ull << 20);
	s->budget = cfg->host_budget ? cfg->host_budget : s->bytes / 4;
	s->offloaded = s->budget < s->bytes;
	if (!s->offloaded)	/* everything fits: room for whole chunks */
		s->budget = s->store_size;
	if (s->offloaded && s->budget < min_budget(s)) {
		char b[32], m[32];

		human(b, sizeof(b), s->budget);
		human(m, sizeof(m), min_budget(s));
		err = fail(-EINVAL, "host budget %s is below the %s this model "
			   "needs mapped at once (one layer's p and g, the "
			   "embeddings' p and g, optimizer chunks)", b, m);
		goto out_free;
	}
	s->pending[0] = s->pending[1] = -1;
	if (s->offloaded)
		whole_plan(s);
	/* hmmd counts a client's pins in its own whole chunks against the
	 * quota and refuses (not waits) past it, so the whole-layer plan's
	 * pinned set does not fit there: stream the step instead */
	if (cfg->daemon)
		s->whole = 0;
	s->has_store = s->offloaded || cfg->persist || cfg->reopen;
	s->reopen = cfg->reopen;
	s->format = cfg->format;
	if ((cfg->persist || cfg->reopen) && !cfg->store_path) {
		err = fail(-EINVAL, "state: a kept store needs a path");
		goto out_free;
	}
	if (cfg->reopen && access(cfg->store_path, F_OK)) {
		err = fail(-errno, "store %s: %s (the checkpoint's state lives "
			   "there)", cfg->store_path, strerror(errno));
		goto out_free;
	}
	if (s->has_store) {
		if (cfg->store_path) {
			snprintf(s->store_path, sizeof(s->store_path), "%s",
				 cfg->store_path);
		} else {
			default_store(s->store_path, sizeof(s->store_path));
			s->unlink_store = 1;
		}
		err = store_preflight(s);
		if (err)
			goto out_free;
	}
	err = backend_open(s, cfg);
	if (err)
		goto out_close;
	*out = s;
	return 0;
out_close:
	backend_close(s);
	if (s->unlink_store)
		unlink(s->store_path);
out_free:
	free(s->floats);
	free(s);
	return err;
}

void state_close(struct state *s)
{
	if (!s)
		return;
	backend_close(s);
	if (s->unlink_store)
		unlink(s->store_path);
	free(s->floats);
	free(s);
}

uint64_t state_bytes(const struct state *s)
{
	return s->bytes;
}

uint64_t state_budget(const struct state *s)
{
	return s->budget;
}

int state_offloaded(const struct state *s)
{
	return s->offloaded;
}

int state_has_store(const struct state *s)
{
	return s->has_store;
}

const char *state_store_path(const struct state *s)
{
	return s->has_store ? s->store_path : "";
}
