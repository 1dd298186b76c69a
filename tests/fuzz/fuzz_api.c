// SPDX-License-Identifier: MIT
/*
 * fuzz_api — libFuzzer target for sequences of hmm.h calls in embedded
 * mode (no hmmd), checked against a model kept here.  Built by `make
 * fuzz` with -fsanitize=fuzzer,address,undefined and linked with
 * libhmm's sources (so they are instrumented too); run by `make check`
 * for 20 s over the seed corpus tests/fuzz/corpus/fuzz_api/.
 *
 * An input is a config (the first bytes: store or none, device "sim",
 * at times a slow one, or none, policy, flags, budgets 64 KiB..1 MiB,
 * chunks 4..64 KiB) and then operations, one byte each plus their
 * arguments: tensors made and freed (bad dtypes, ndims, shapes and
 * names too), maps and unmaps of valid and invalid ranges, tiers and
 * access modes, writes through mapped pointers, prefetch, evict,
 * writeback, wait, flush, steps, stats, residency, host fds, DLPack
 * exports, regions, a close and reopen of the store with its saved
 * tensors, a second open of a store in use, bad configs,
 * hmm_config_set and hmm_size_parse.  Missing bytes read as zeros.
 * FUZZ_API_TRACE=1 prints each operation of an input on stderr.
 *
 * The model holds each tensor's and region's bytes as written through
 * the API, the live mappings in the order the engine keeps them, and
 * the tensors the last good hmm_flush saved.  Properties, beyond "no
 * crash, no sanitizer report, no hang":
 *   - a call with bad arguments fails with the errno hmm.h names; any
 *     failure returns a negative errno and leaves a detail;
 *   - a failed call changes no byte (the model still matches);
 *   - bytes read through a map, a host fd, a region, or from a tensor
 *     reopened from the store equal the model's;
 *   - a tier's pointer is stable (base + offset); stats count exactly
 *     the pinned bytes and live tensors the model holds;
 *   - with a store sized for everything ("ample"), a map whose pins fit
 *     the budget, a flush and a wait succeed.
 *   - a region access that may find no room (a store nearly full: its
 *     blocks' evictions end) completes with the model's bytes or gets
 *     SIGBUS after wait_ms (hmm.h), having written exactly the bytes
 *     before it; one with room never gets SIGBUS, unless an earlier
 *     access to that region did (its block stays poisoned until the
 *     fault thread sees room);
 * What hmm.h leaves to the caller is not done: two tiers writing one
 * chunk at once (hmm.h: the other copies become stale), reads through a
 * mapping that another tier's write made stale, tensors larger than a
 * few MiB (the engine would allocate their chunk tables).
 *
 * The store is one file, $HMM_TEST_DIR (else /tmp)/fuzz_api.PID.store,
 * made anew for each input and removed at its end, and however the run
 * ends (fz_janitor.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dlpack.h"
#include "err.h"
#include "fz_in.h"
#include "fz_janitor.h"
#include "hmm.h"

/*
 * The Makefile's fuzz rule lets UBSan recover (print and go on); a
 * finding must stop the run like an ASan one, so that it fails check.
 */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void)
{
	return "halt_on_error=1:print_stacktrace=1";
}

#define NT		6		/* tensor slots */
#define NM		24		/* live mappings */
#define ND		4		/* DLPack exports */
#define NR		2		/* regions */
#define NS		16		/* tensors saved in the store */
#define NOPS		200		/* operations per input, at most */
#define TENSOR_CAP	(1u << 20)	/* live + saved, in whole chunks */
#define REGION_CAP	(512u << 10)	/* live regions */
#define RBLOCK		(64u << 10)	/* a region's block (region_int.h) */
#define PAGE		4096u

/* ---- the input (fz_in.h) ------------------------------------------------ */

static uint32_t u32(struct in *in)
{
	return (uint32_t)un(in, 4);
}

/* 0..n-1 (n > 0), from as many bytes as n needs. */
static uint64_t pick(struct in *in, uint64_t n)
{
	uint64_t v = u8(in);

	if (n > 256)
		v |= (uint64_t)u8(in) << 8;
	if (n > 65536)
		v |= (uint64_t)u8(in) << 16;
	return v % n;
}

/* ---- the model --------------------------------------------------------- */

struct mtensor {
	struct hmm_tensor *t;	/* NULL: the slot is free */
	char name[64];
	uint32_t dtype;
	unsigned ndim;
	int64_t shape[HMM_MAX_DIMS];
	uint64_t bytes;
	uint8_t *data;		/* what its bytes must be */
	uintptr_t base[2];	/* DEVICE, HOST: the first map's ptr - off */
	int ndl;		/* its DLPack exports not yet deleted */
};

/* A live hmm_map (or DLPack export); maps[] is in the order made. */
struct mmap {
	int ti;
	uint8_t *ptr;
	uint64_t off, len;
	int tier;
	unsigned access;
	int stale;		/* another tier wrote its chunks meanwhile */
};

struct mdl {
	DLManagedTensor *dl;	/* NULL: the slot is free */
	int ti;
};

struct mregion {
	uint8_t *p;		/* NULL: the slot is free */
	uint64_t bytes;		/* rounded up to RBLOCK */
	uint8_t *data;
	int starved;		/* an access got SIGBUS: more may */
};

/*
 * A tensor as the last good hmm_flush saved it.  Those the context
 * loaded at its open (KEEP) and has not opened are its saved ones
 * (persist.c's h->saved): the ones hmm_tensor_open finds, and the next
 * flush keeps.
 */
struct msaved {
	struct mtensor m;	/* t unused */
	uint32_t chunk;		/* the chunk size it was saved with */
	int loaded;		/* read by this context's open */
	int opened;		/* and opened since: no longer saved */
};

struct fz {
	struct hmm *h;
	struct hmm_config cfg;
	int store, dev, ample;
	int host_shared;
	uint32_t chunk;
	uint64_t host_cap, dev_cap;
	struct mtensor t[NT];
	struct mmap m[NM];
	int nm;
	struct mdl dl[ND];
	struct mregion r[NR];
	struct msaved s[NS];
	int ns;
	int disk_known;		/* 0: a flush failed, what it left is open */
	int region_err;		/* a region access gave up since the last
				   wait or flush: they may say so */
	int in_step;
	unsigned names;
};

static char store_path[4096];
static char json[4096];
static int tracing;	/* $FUZZ_API_TRACE: each operation on stderr */

/* ---- checks ------------------------------------------------------------ */

static void die(int line, const char *cond, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));

static void die(int line, const char *cond, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fuzz_api.c:%d: check failed: %s: ", line, cond);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (last error: \"%s\")\n", hmm_last_error());
	unlink(store_path);
	abort();
}

#define must(cond, ...)							\
	do {								\
		if (!(cond))						\
			die(__LINE__, #cond, __VA_ARGS__);		\
	} while (0)

/* Each call starts from an empty detail, so a failure must set its own. */
static void clear_err(void)
{
	hmm_err(0, "%s", "");
}

/* r from call failed: a negative errno, a detail and a name for it. */
#define failed(r, call)							\
	must((r) < 0 && (r) > -4096 && hmm_last_error()[0] &&		\
	     hmm_strerror(r)[0], "%s returned %d", call, r)

/* r from call must be want (0, or an errno with a detail). */
#define expect(r, want, call)						\
	do {								\
		must((r) == (want), "%s returned %d, want %d", call, r,	\
		     want);						\
		if ((want) < 0)						\
			failed(r, call);				\
	} while (0)

static uint8_t pattern(uint32_t seed, uint64_t i)
{
	uint32_t x = seed ^ (uint32_t)(i * 2654435761u) ^ (uint32_t)(i >> 32);

	x ^= x >> 13;
	x *= 0x5bd1e995u;
	return (uint8_t)(x ^ x >> 15);
}

static void same_bytes(const uint8_t *got, const uint8_t *want, uint64_t len,
		       const char *what, const char *name, uint64_t off)
{
	uint64_t i;

	if (!memcmp(got, want, len))
		return;
	for (i = 0; got[i] == want[i]; i++)
		;
	must(0, "%s of %s: byte %" PRIu64 " is %#x, want %#x", what, name,
	     off + i, got[i], want[i]);
}

/* ---- chunks and pins ---------------------------------------------------- */

static uint64_t up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

/* Bytes t takes in whole chunks: what TENSOR_CAP counts. */
static uint64_t chunked(struct fz *f, uint64_t bytes)
{
	return up(bytes, f->chunk);
}

static int unopened(const struct msaved *s)
{
	return s->loaded && !s->opened;
}

static uint64_t held(struct fz *f)
{
	uint64_t n = 0;
	int i;

	for (i = 0; i < NT; i++)
		if (f->t[i].t)
			n += chunked(f, f->t[i].bytes);
	for (i = 0; i < f->ns; i++)
		if (unopened(&f->s[i]))
			n += chunked(f, f->s[i].m.bytes);
	return n;
}

/* What chunk c of tensor ti costs in a budget (chunk.h, 4 KiB pages). */
static uint64_t chunk_cost(struct fz *f, int ti, uint64_t c)
{
	uint64_t left = f->t[ti].bytes - c * f->chunk;

	return up(left < f->chunk ? left : f->chunk, PAGE);
}

static int overlaps(struct fz *f, const struct mmap *a, int ti, uint64_t off,
		    uint64_t len)
{
	return a->ti == ti && a->off / f->chunk <= (off + len - 1) / f->chunk &&
	       off / f->chunk <= (a->off + a->len - 1) / f->chunk;
}

/* Bytes pinned at tier, plus a map of [off, +len) of ti if len. */
static uint64_t pinned(struct fz *f, int tier, int ti, uint64_t off,
		       uint64_t len)
{
	static uint8_t pin[TENSOR_CAP / PAGE];
	uint64_t n = 0, c;
	int i, j;

	for (i = 0; i < NT; i++) {
		uint64_t nc = (f->t[i].bytes + f->chunk - 1) / f->chunk;

		if (!f->t[i].t)
			continue;
		memset(pin, 0, nc);
		for (j = 0; j < f->nm; j++)
			if (f->m[j].ti == i && f->m[j].tier == tier)
				memset(pin + f->m[j].off / f->chunk, 1,
				       (f->m[j].off + f->m[j].len - 1) /
				       f->chunk - f->m[j].off / f->chunk + 1);
		if (len && ti == i)
			memset(pin + off / f->chunk, 1,
			       (off + len - 1) / f->chunk - off / f->chunk + 1);
		for (c = 0; c < nc; c++)
			if (pin[c])
				n += chunk_cost(f, i, c);
	}
	return n;
}

/* ---- context ------------------------------------------------------------ */

static void model_tensor_drop(struct mtensor *m)
{
	free(m->data);
	memset(m, 0, sizeof(*m));
}

/* hmm_close: DLPack exports deleted first (their deleter unmaps, which
 * after the close would touch a freed tensor), then the model's state. */
static void ctx_close(struct fz *f)
{
	int i;

	for (i = 0; i < ND; i++)
		if (f->dl[i].dl)
			f->dl[i].dl->deleter(f->dl[i].dl);
	hmm_close(f->h);
	f->h = NULL;
	for (i = 0; i < NT; i++)
		model_tensor_drop(&f->t[i]);
	for (i = 0; i < NR; i++) {
		free(f->r[i].data);
		memset(&f->r[i], 0, sizeof(f->r[i]));
	}
	memset(f->dl, 0, sizeof(f->dl));
	f->nm = 0;
	f->in_step = 0;
	f->region_err = 0;
}

static void saved_drop(struct fz *f)
{
	int i;

	for (i = 0; i < f->ns; i++)
		free(f->s[i].m.data);
	f->ns = 0;
}

/* The config from the input's first bytes. */
static void config_of(struct fz *f, struct in *in)
{
	uint8_t b0 = u8(in), b1 = u8(in), b2 = u8(in), b3 = u8(in);
	uint64_t store_bytes;

	hmm_config_default(&f->cfg);
	f->store = (b0 & 3) != 0;
	f->ample = f->store && (b0 & 3) != 3;	/* 3: a store nearly full */
	f->dev = !!(b0 & 4);
	f->host_shared = !!(b0 & 8);
	f->host_cap = (64u << 10) << (b1 % 5);
	f->dev_cap = (64u << 10) << (b1 / 5 % 5);
	f->chunk = PAGE << (b2 % 5);
	f->cfg.host_budget = f->host_cap;
	f->cfg.chunk_bytes = f->chunk;
	f->cfg.policy = (b0 >> 4) & 1;
	f->cfg.prefetch_depth = b2 / 5 % 4;
	f->cfg.wait_ms = 1 + b3 % 16;
	f->cfg.pool_bytes = PAGE << (b3 / 16 % 6);
	f->cfg.io_depth = 1 + (b2 >> 6);
	f->cfg.queue_depth = b0 >> 6;		/* 0: the default */
	if (b0 & 0x20)
		f->cfg.flags |= HMM_CONFIG_STORE_BUFFERED;
	if (f->host_shared)
		f->cfg.flags |= HMM_CONFIG_HOST_SHARED;
	if (f->dev) {	/* a slow link: copies outlast wait_ms */
		f->cfg.device = "sim";
		f->cfg.device_budget = f->dev_cap;
		f->cfg.sim_bandwidth = (uint64_t[]){ 0, 64 << 20, 16 << 20,
						     0 }[b1 / 25 % 4];
	}
	if (!f->store)
		return;
	/* ample: room for the live and the flushed copy of everything,
	 * twice; nearly full: a few chunks */
	store_bytes = f->ample ? 4ull * (TENSOR_CAP + REGION_CAP) :
		      (uint64_t)f->chunk * (1 + b3 % 8);
	f->cfg.store_path = store_path;
	f->cfg.store_size = hmm_store_required(store_bytes, f->chunk);
}

static int ctx_open(struct fz *f, uint32_t flags)
{
	struct hmm_config c = f->cfg;
	int r;

	c.flags |= flags;
	clear_err();
	r = hmm_open(&c, &f->h);
	if (tracing)
		fprintf(stderr, "fuzz_api: open flags %#x chunk %u: %d %s\n",
			c.flags, c.chunk_bytes, r, r ? hmm_last_error() : "");
	return r;
}

/* ---- tensors ------------------------------------------------------------ */

static const uint32_t dtypes[] = {
	HMM_DTYPE_F32, HMM_DTYPE_F64, HMM_DTYPE_F16, HMM_DTYPE_BF16,
	HMM_DTYPE_I8, HMM_DTYPE_U8, HMM_DTYPE_I32, HMM_DTYPE_I64,
	0, 9, UINT32_MAX, HMM_DTYPE_U8, HMM_DTYPE_F32,
};

static int64_t dim_of(struct in *in)
{
	uint8_t b = u8(in);

	switch (b >> 5) {
	case 0: case 1: case 2:
		return 1 + (b & 31);
	case 3:
		return 1 + (int64_t)(b & 31) * 509;
	case 4:
		return (b & 3) == 0 ? 0 : (b & 3) == 1 ? -1 :
		       (b & 3) == 2 ? INT64_MIN : -(int64_t)(b & 31);
	case 5:
		return (int64_t)1 << (20 + (b & 31) % 43);
	case 6:
		return (b & 1) ? INT64_MAX : ((int64_t)1 << 46) + (b & 31);
	default:
		return 4096 * (1 + (b & 7)) + (b & 0x18);
	}
}

static size_t dtype_size(uint32_t d)
{
	return d >= 1 && d <= 8 ? (size_t[]){ 0, 4, 8, 2, 2, 1, 1, 4, 8 }[d] :
	       0;
}

/* What hmm_tensor_new must return (tensor.c's order of checks). */
/* All the context can hold: the store's data area and the budgets (a
 * new tensor past it is refused, hmm.h). */
static uint64_t capacity(struct fz *f)
{
	struct hmm_stats st;
	uint64_t c = 0;

	hmm_stats(f->h, &st);
	for (int i = 0; i < HMM_TIERS; i++)
		c += st.tier[i].capacity;
	return c;
}

static int tensor_new_want(struct fz *f, const char *name, uint32_t dtype,
			   unsigned ndim, const int64_t *shape,
			   uint64_t *bytes)
{
	uint64_t n = dtype_size(dtype);
	unsigned i;

	if (!name || !*name || strlen(name) > 63 || !n)
		return -EINVAL;
	if (!ndim || ndim > HMM_MAX_DIMS)
		return -EINVAL;
	for (i = 0; i < ndim; i++) {
		if (shape[i] <= 0)
			return -EINVAL;
		if (__builtin_mul_overflow(n, (uint64_t)shape[i], &n) ||
		    n > (1ull << 46))
			return -EOVERFLOW;
	}
	if ((n + f->chunk - 1) / f->chunk > UINT32_MAX)
		return -EOVERFLOW;
	*bytes = n;
	return n > capacity(f) ? -ENOMEM : 0;
}

/* A free slot, while a flush could still save every tensor (NS). */
static int free_slot(struct fz *f)
{
	int i, n = 0, s = -1;

	for (i = 0; i < NT; i++)
		if (f->t[i].t)
			n++;
		else if (s < 0)
			s = i;
	for (i = 0; i < f->ns; i++)
		n += unopened(&f->s[i]);
	return n < NS ? s : -1;
}

/* The accessors say what the model says. */
static void tensor_is(const struct mtensor *m)
{
	unsigned i;

	must(!strcmp(hmm_tensor_name(m->t), m->name), "name %s",
	     hmm_tensor_name(m->t));
	must(hmm_tensor_bytes(m->t) == m->bytes && hmm_tensor_dtype(m->t) ==
	     m->dtype && hmm_tensor_ndim(m->t) == m->ndim, "tensor %s: "
	     "bytes, dtype or ndim", m->name);
	for (i = 0; i < m->ndim; i++)
		must(hmm_tensor_shape(m->t)[i] == m->shape[i], "tensor %s: "
		     "shape[%u]", m->name, i);
}

static void op_tensor_new(struct fz *f, struct in *in)
{
	int64_t shape[HMM_MAX_DIMS + 2];
	struct hmm_tensor *t = NULL;
	uint32_t dtype = dtypes[u8(in) % 13];
	unsigned i, ndim = u8(in) % 11;
	uint8_t how = u8(in);
	char name[80];
	const char *np = name;
	uint64_t bytes = 0;
	int want, r, s;

	for (i = 0; i < HMM_MAX_DIMS + 2; i++)
		shape[i] = i < ndim ? dim_of(in) : 1;
	if (how % 16 == 0)
		np = NULL;
	else if (how % 16 == 1)
		name[0] = 0;
	else if (how % 16 == 2)
		snprintf(name, sizeof(name), "%064u", f->names);
	else if (how % 16 == 3)
		snprintf(name, sizeof(name), "%063u", f->names++);
	else
		snprintf(name, sizeof(name), "t%u", f->names++);
	want = tensor_new_want(f, np, dtype, ndim, shape, &bytes);
	s = free_slot(f);
	/* a valid tensor past what the model keeps is not made: its chunk
	 * table alone could be gigabytes */
	if (!want && (s < 0 || held(f) + chunked(f, bytes) > TENSOR_CAP))
		return;
	clear_err();
	r = hmm_tensor_new(f->h, np, dtype, ndim, shape, (how & 16) &&
			   !want ? NULL : &t);
	if ((how & 16) && !want) {
		expect(r, -EINVAL, "hmm_tensor_new(out NULL)");
		return;
	}
	expect(r, want, "hmm_tensor_new");
	if (r)
		return;
	f->t[s] = (struct mtensor){ .t = t, .dtype = dtype, .ndim = ndim,
				    .bytes = bytes };
	snprintf(f->t[s].name, sizeof(f->t[s].name), "%s", name);
	memcpy(f->t[s].shape, shape, ndim * sizeof(*shape));
	f->t[s].data = calloc(1, bytes);
	must(f->t[s].data, "no memory for %" PRIu64 " bytes", bytes);
	tensor_is(&f->t[s]);
}

static int nmaps_of(struct fz *f, int ti)
{
	int i, n = 0;

	for (i = 0; i < f->nm; i++)
		n += f->m[i].ti == ti;
	return n;
}

static void op_tensor_free(struct fz *f, struct in *in)
{
	int ti = u8(in) % (NT + 1), r;

	clear_err();
	if (ti == NT) {
		r = hmm_tensor_free(NULL);
		expect(r, -EINVAL, "hmm_tensor_free(NULL)");
		return;
	}
	/* an export's deleter unmaps t: no free while one is out */
	if (!f->t[ti].t || f->t[ti].ndl)
		return;
	r = hmm_tensor_free(f->t[ti].t);
	if (nmaps_of(f, ti)) {
		expect(r, -EBUSY, "hmm_tensor_free(mapped)");
		return;
	}
	expect(r, 0, "hmm_tensor_free");
	model_tensor_drop(&f->t[ti]);
}

/* ---- ranges, tiers, access ---------------------------------------------- */

struct range {
	uint64_t off, len;	/* as passed */
	uint64_t rlen;		/* HMM_ALL resolved */
	int ok;			/* api.c's range_check passes */
};

static struct range range_of(struct fz *f, struct in *in, uint64_t bytes)
{
	struct range g;

	g.off = pick(in, bytes);
	switch (u8(in) % 12) {
	case 0:
		g.off = 0;
		g.len = HMM_ALL;
		break;
	case 1: case 2: case 3:
		g.len = 1 + pick(in, bytes - g.off);
		break;
	case 4:	/* whole chunks, maybe past the end */
		g.off = g.off / f->chunk * f->chunk;
		g.len = f->chunk * (1 + u8(in) % 3);
		break;
	case 5:
		g.len = HMM_ALL;
		break;
	case 6:
		g.off = bytes + pick(in, 2 * f->chunk);
		g.len = 1 + u8(in);
		break;
	case 7:
		g.len = 0;
		break;
	case 8:
		g.len = bytes - g.off + 1 + u8(in);
		break;
	case 9:
		g.len = UINT64_MAX - 1 - u8(in);
		break;
	case 10:
		g.off = bytes - 1;
		g.len = 1;
		break;
	default:
		g.off = UINT64_MAX - u8(in);
		g.len = 1;
		break;
	}
	g.rlen = g.len == HMM_ALL && g.off < bytes ? bytes - g.off : g.len;
	g.ok = g.off < bytes && g.rlen && g.rlen <= bytes - g.off;
	return g;
}

static int tier_of(struct in *in)
{
	static const int tiers[] = {
		HMM_TIER_HOST, HMM_TIER_HOST, HMM_TIER_HOST, HMM_TIER_DEVICE,
		HMM_TIER_DEVICE, HMM_TIER_STORE, -1, 3, INT_MAX,
	};

	return tiers[u8(in) % 9];
}

static int tier_ok(struct fz *f, int tier)
{
	return tier == HMM_TIER_HOST || (tier == HMM_TIER_DEVICE && f->dev);
}

static unsigned access_of(struct in *in)
{
	static const unsigned acc[] = {
		HMM_READ, HMM_READ, HMM_WRITE, HMM_READ | HMM_WRITE,
		HMM_READ | HMM_WRITE, HMM_DISCARD, HMM_DISCARD | HMM_READ,
		HMM_DISCARD | HMM_WRITE, 0, 8, HMM_READ | 0x80, ~0u,
	};

	return acc[u8(in) % 12];
}

static int access_ok(unsigned a)
{
	return a && !(a & ~(HMM_READ | HMM_WRITE | HMM_DISCARD));
}

#define WRITES(a)	((a) & (HMM_WRITE | HMM_DISCARD))

/* ---- map and unmap ------------------------------------------------------ */

/* A live map at the other tier that writes the chunks of [off, +len). */
static int other_writer(struct fz *f, int ti, uint64_t off, uint64_t len,
			int tier)
{
	int i;

	for (i = 0; i < f->nm; i++)
		if (f->m[i].tier != tier && WRITES(f->m[i].access) &&
		    overlaps(f, &f->m[i], ti, off, len))
			return 1;
	return 0;
}

/* What host pins must leave to live regions (map.c, region.c): two
 * blocks, one access may touch two. */
static uint64_t region_keep(struct fz *f)
{
	int i;

	for (i = 0; i < NR; i++)
		if (f->r[i].p)
			return 2 * RBLOCK;
	return 0;
}

/*
 * Must this map succeed?  With an ample store nothing unpinned stays:
 * clean chunks drop, dirty ones are written.  A device map also stages
 * its chunks at the host, one at a time at least.  Chunks another call
 * is copying (a prefetch, evict or writeback) are no victims while the
 * copy runs, but the map waits for them (map.c's map_step for its own
 * chunks, budget.c's room_to_come for others'), so they do not matter;
 * the schedule policy's own prefetches, which may evict only what is
 * used later, do.
 */
static int map_fits(struct fz *f, int ti, uint64_t off, uint64_t len,
		    int tier)
{
	uint64_t staged = f->chunk;

	if (!f->ample || f->cfg.policy != HMM_POLICY_LRU)
		return 0;
	if (tier == HMM_TIER_HOST)
		return pinned(f, HMM_TIER_HOST, ti, off, len) +
		       region_keep(f) <= f->host_cap;
	return pinned(f, HMM_TIER_DEVICE, ti, off, len) <= f->dev_cap &&
	       pinned(f, HMM_TIER_HOST, -1, 0, 0) + staged <= f->host_cap;
}

static void fill(struct fz *f, struct mmap *m, uint64_t off, uint64_t len,
		 uint32_t seed)
{
	uint8_t *d = f->t[m->ti].data + m->off + off;
	uint64_t i;

	for (i = 0; i < len; i++)
		d[i] = pattern(seed, i);
	memcpy(m->ptr + off, d, len);
}

/* A new map (or export) made: pointer, model, its first read. */
static void map_made(struct fz *f, int ti, void *p, uint64_t off,
		     uint64_t len, int tier, unsigned access, int stale,
		     uint32_t seed)
{
	struct mtensor *t = &f->t[ti];
	struct mmap *m = &f->m[f->nm++];
	int i;

	if (!t->base[tier])
		t->base[tier] = (uintptr_t)p - off;
	must((uintptr_t)p == t->base[tier] + off, "tensor %s: map at tier "
	     "%d offset %" PRIu64 ": %p, not base + offset", t->name, tier,
	     off, p);
	*m = (struct mmap){ ti, p, off, len, tier, access, stale };
	if (WRITES(access))	/* what other tiers hold is stale now */
		for (i = 0; i < f->nm - 1; i++)
			if (f->m[i].tier != tier &&
			    overlaps(f, &f->m[i], ti, off, len))
				f->m[i].stale = 1;
	if (access & HMM_DISCARD)	/* unspecified bytes: write them */
		fill(f, m, 0, len, seed);
	else if (!stale)
		same_bytes(m->ptr, t->data + off, len, "a new map", t->name,
			   off);
}

static void op_map(struct fz *f, struct in *in)
{
	int ti = u8(in) % NT, tier, stale, fits, r;
	struct range g;
	unsigned access;
	uint8_t how;
	void *p = NULL;

	if (!f->t[ti].t)
		return;
	g = range_of(f, in, f->t[ti].bytes);
	tier = tier_of(in);
	access = access_of(in);
	how = u8(in);
	clear_err();
	if (!g.ok || !tier_ok(f, tier) || !access_ok(access) || how == 0xff) {
		r = hmm_map(f->t[ti].t, g.off, g.len, tier, access,
			    how == 0xff ? NULL : &p);
		expect(r, -EINVAL, "hmm_map(bad)");
		return;
	}
	/* two tiers writing a chunk at once lose one's bytes (hmm.h) */
	stale = other_writer(f, ti, g.off, g.rlen, tier);
	if (f->nm == NM || (WRITES(access) && stale))
		return;
	fits = map_fits(f, ti, g.off, g.rlen, tier);
	r = hmm_map(f->t[ti].t, g.off, g.len, tier, access, &p);
	if (r < 0) {
		failed(r, "hmm_map");
		must(!fits, "tensor %s: map [%" PRIu64 ", +%" PRIu64 ") at %d "
		     "failed though its pins fit", f->t[ti].name, g.off,
		     g.rlen, tier);
		return;
	}
	map_made(f, ti, p, g.off, g.rlen, tier, access, stale, how);
}

/* The engine unmaps the latest map of t with ptr: so does the model. */
static void model_unmap(struct fz *f, int ti, const void *ptr)
{
	int i;

	for (i = f->nm - 1; i >= 0; i--)
		if (f->m[i].ti == ti && f->m[i].ptr == ptr)
			break;
	if (i < 0)
		return;
	memmove(&f->m[i], &f->m[i + 1], (f->nm - i - 1) * sizeof(f->m[0]));
	f->nm--;
}

static int is_mapped(struct fz *f, int ti, const void *ptr)
{
	int i;

	for (i = 0; i < f->nm; i++)
		if (f->m[i].ti == ti && f->m[i].ptr == ptr)
			return 1;
	return 0;
}

static void op_unmap(struct fz *f, struct in *in)
{
	uint8_t how = u8(in);
	struct mmap *m;
	uint8_t *bad;
	int ti, r;

	clear_err();
	if (!f->nm || how % 8 == 0) {	/* not a mapped pointer */
		ti = how / 8 % NT;
		if (!f->t[ti].t) {
			r = hmm_unmap(NULL, NULL);
			expect(r, -EINVAL, "hmm_unmap(NULL)");
			return;
		}
		bad = f->nm ? f->m[how / 64 % f->nm].ptr + how % 3 : NULL;
		if (is_mapped(f, ti, bad))
			return;
		r = hmm_unmap(f->t[ti].t, bad);
		expect(r, -EINVAL, "hmm_unmap(not mapped)");
		return;
	}
	m = &f->m[pick(in, f->nm)];
	ti = m->ti;
	r = hmm_unmap(f->t[ti].t, m->ptr);
	expect(r, 0, "hmm_unmap");
	model_unmap(f, ti, m->ptr);
}

/* Write a pattern through a writing map, in the model too. */
static void op_write(struct fz *f, struct in *in)
{
	struct mmap *m;
	uint64_t off, len;

	if (!f->nm)
		return;
	m = &f->m[pick(in, f->nm)];
	off = pick(in, m->len);
	len = 1 + pick(in, m->len - off);
	if (!WRITES(m->access))
		return;
	fill(f, m, off, len, u32(in));
}

/* Read through a map: its bytes are the model's unless made stale. */
static void op_check(struct fz *f, struct in *in)
{
	struct mmap *m;

	if (!f->nm)
		return;
	m = &f->m[pick(in, f->nm)];
	if (!m->stale)
		same_bytes(m->ptr, f->t[m->ti].data + m->off, m->len,
			   "a mapped range", f->t[m->ti].name, m->off);
}

/* ---- asynchronous movement ---------------------------------------------- */

/* prefetch, evict or writeback (which: 0, 1, 2) of a range. */
static void op_move(struct fz *f, struct in *in, int which)
{
	static const char *const names[] = {
		"hmm_prefetch", "hmm_evict", "hmm_writeback",
	};
	int ti = u8(in) % NT, tier, want, r;
	struct range g;

	if (!f->t[ti].t)
		return;
	g = range_of(f, in, f->t[ti].bytes);
	tier = which == 2 ? HMM_TIER_HOST : tier_of(in);
	want = !g.ok || !tier_ok(f, tier) ? -EINVAL : 0;
	if (!want && which == 1 && tier == HMM_TIER_HOST && !f->store)
		want = -EINVAL;		/* no lower tier */
	if (!want && which == 2 && !f->store)
		want = -ENODEV;
	clear_err();
	r = which == 0 ? hmm_prefetch(f->t[ti].t, g.off, g.len, tier) :
	    which == 1 ? hmm_evict(f->t[ti].t, g.off, g.len, tier) :
	    hmm_writeback(f->t[ti].t, g.off, g.len);
	expect(r, want, names[which]);
}

/* r, a wait's or flush's error, is a region access's that gave up. */
static int region_said(struct fz *f, int r)
{
	return f->region_err && r == -ENOMEM &&
	       strstr(hmm_last_error(), "region");
}

static void op_wait(struct fz *f, struct in *in)
{
	int ti = u8(in) % (NT + 1), r;

	clear_err();
	r = hmm_wait(f->h, ti < NT ? f->t[ti].t : NULL);
	if (r)
		failed(r, "hmm_wait");
	must(!r || !f->ample || region_said(f, r), "hmm_wait with an ample "
	     "store: %d", r);
	f->region_err = 0;
}

/* A good flush saved every live tensor and the unopened saved ones. */
static void flush_saved(struct fz *f)
{
	struct msaved s[NS];
	int i, n = 0;

	for (i = 0; i < NT; i++) {
		if (!f->t[i].t)
			continue;
		must(n < NS, "%d tensors saved", n);
		s[n].m = f->t[i];
		s[n].m.t = NULL;
		s[n].m.data = malloc(f->t[i].bytes);
		must(s[n].m.data, "no memory");
		memcpy(s[n].m.data, f->t[i].data, f->t[i].bytes);
		s[n].chunk = f->chunk;
		s[n].loaded = s[n].opened = 0;
		n++;
	}
	for (i = 0; i < f->ns; i++) {
		if (!unopened(&f->s[i])) {
			free(f->s[i].m.data);
			continue;
		}
		must(n < NS, "%d tensors saved", n);
		s[n++] = f->s[i];
	}
	memcpy(f->s, s, n * sizeof(s[0]));
	f->ns = n;
}

static void op_flush(struct fz *f)
{
	int r;

	clear_err();
	r = hmm_flush(f->h);
	if (!f->store) {
		expect(r, -ENODEV, "hmm_flush(no store)");
		return;
	}
	if (r) {
		failed(r, "hmm_flush");
		/* a chunk only at the device is staged through the host:
		   with host pins leaving less than a chunk it cannot be */
		must(!f->ample || region_said(f, r) ||
		     (r == -ENOMEM && f->dev &&
				   pinned(f, HMM_TIER_HOST, -1, 0, 0) +
				   f->chunk > f->host_cap &&
				   strstr(hmm_last_error(), "only at the "
					  "device")),
		     "hmm_flush with an ample store: %d", r);
		f->disk_known = 0;
		f->region_err = 0;
		return;
	}
	f->region_err = 0;
	flush_saved(f);
}

static void op_step(struct fz *f, struct in *in)
{
	int begin = u8(in) & 1, r;

	clear_err();
	r = begin ? hmm_step_begin(f->h) : hmm_step_end(f->h);
	expect(r, begin == f->in_step ? -EINVAL : 0, "hmm_step");
	if (!r)
		f->in_step = begin;
}

/* ---- stats and residency ------------------------------------------------ */

static void op_stats(struct fz *f, struct in *in)
{
	uint64_t live = 0, chunks = 0, cap = pick(in, sizeof(json) + 1);
	struct hmm_stats st;
	int i, r, n;

	clear_err();
	r = hmm_stats(f->h, &st);
	expect(r, 0, "hmm_stats");
	for (i = 0; i < NT; i++)
		if (f->t[i].t) {
			live++;
			chunks += (f->t[i].bytes + f->chunk - 1) / f->chunk;
		}
	must(st.tensors == live && st.chunks == chunks, "stats: %" PRIu64
	     " tensors, %" PRIu64 " chunks; the model has %" PRIu64 ", %"
	     PRIu64, st.tensors, st.chunks, live, chunks);
	for (i = 0; i < 2; i++) {
		struct hmm_tier_stats *s = &st.tier[i];

		if (i == HMM_TIER_DEVICE && !f->dev)
			continue;
		must(s->pinned == pinned(f, i, -1, 0, 0), "stats: tier %d "
		     "pinned %" PRIu64 ", the model's %" PRIu64, i, s->pinned,
		     pinned(f, i, -1, 0, 0));
		must(s->capacity == (i ? f->host_cap : f->dev_cap) &&
		     s->resident + (i ? st.host_spare : 0) <= s->capacity &&
		     s->peak <= s->capacity && s->pinned <= s->resident,
		     "stats: tier %d capacity %" PRIu64 " resident %" PRIu64
		     " peak %" PRIu64 " pinned %" PRIu64, i, s->capacity,
		     s->resident, s->peak, s->pinned);
	}
	n = hmm_stats_json(f->h, json, cap);
	must(n > 0 && (!cap || strlen(json) == ((size_t)n < cap ? (size_t)n :
						  cap - 1)),
	     "hmm_stats_json: %d for cap %" PRIu64, n, cap);
}

static void op_residency(struct fz *f, struct in *in)
{
	uint64_t b[HMM_TIERS], host = 0, c, nc, cb;
	int ti = u8(in) % NT, i, r;

	if (!f->t[ti].t)
		return;
	clear_err();
	r = hmm_tensor_residency(f->t[ti].t, NULL);
	expect(r, -EINVAL, "hmm_tensor_residency(NULL)");
	r = hmm_tensor_residency(f->t[ti].t, b);
	expect(r, 0, "hmm_tensor_residency");
	/* a pinned chunk is resident; nothing is more than the tensor */
	nc = (f->t[ti].bytes + f->chunk - 1) / f->chunk;
	for (c = 0; c < nc; c++) {
		cb = f->t[ti].bytes - c * f->chunk;
		for (i = 0; i < f->nm; i++)
			if (f->m[i].tier == HMM_TIER_HOST &&
			    overlaps(f, &f->m[i], ti, c * f->chunk, 1)) {
				host += cb < f->chunk ? cb : f->chunk;
				break;
			}
	}
	must(b[HMM_TIER_HOST] >= host && b[0] <= f->t[ti].bytes &&
	     b[1] <= f->t[ti].bytes && b[2] <= f->t[ti].bytes,
	     "tensor %s: residency %" PRIu64 " %" PRIu64 " %" PRIu64
	     " of %" PRIu64 " bytes, %" PRIu64 " pinned at the host",
	     f->t[ti].name, b[0], b[1], b[2], f->t[ti].bytes, host);
}

/* The host fd's bytes of a mapped host range are the model's. */
static void op_host_fd(struct fz *f, struct in *in)
{
	int ti = u8(in) % NT, fd = -1, r, i;
	uint64_t off = 0;
	uint8_t *buf;

	if (!f->t[ti].t)
		return;
	clear_err();
	r = hmm_tensor_host_fd(f->t[ti].t, &fd, &off);
	if (!f->host_shared) {
		expect(r, -ENOTSUP, "hmm_tensor_host_fd(anonymous)");
		return;
	}
	expect(r, 0, "hmm_tensor_host_fd");
	for (i = 0; i < f->nm; i++) {
		struct mmap *m = &f->m[i];

		if (m->ti != ti || m->tier != HMM_TIER_HOST || m->stale)
			continue;
		buf = malloc(m->len);
		must(buf, "no memory");
		must(pread(fd, buf, m->len, off + m->off) == (ssize_t)m->len,
		     "tensor %s: pread of its host fd", f->t[ti].name);
		same_bytes(buf, f->t[ti].data + m->off, m->len, "the host fd",
			   f->t[ti].name, m->off);
		free(buf);
		return;
	}
}

/* ---- DLPack ------------------------------------------------------------- */

static void op_dlpack(struct fz *f, struct in *in)
{
	int ti = u8(in) % NT, tier = tier_of(in), i, d, stale, r;
	unsigned access = access_of(in);
	uint8_t seed = u8(in);
	DLManagedTensor *dl = NULL;
	struct mtensor *t = &f->t[ti];

	if (!t->t)
		return;
	clear_err();
	if (!tier_ok(f, tier) || !access_ok(access)) {
		r = hmm_dlpack_export(t->t, tier, access, &dl);
		expect(r, -EINVAL, "hmm_dlpack_export(bad)");
		return;
	}
	for (d = 0; d < ND && f->dl[d].dl; d++)
		;
	stale = other_writer(f, ti, 0, t->bytes, tier);
	if (d == ND || f->nm == NM || (WRITES(access) && stale))
		return;
	r = hmm_dlpack_export(t->t, tier, access, &dl);
	if (r < 0) {
		failed(r, "hmm_dlpack_export");
		must(!map_fits(f, ti, 0, t->bytes, tier), "tensor %s: export "
		     "failed though its pins fit", t->name);
		return;
	}
	must(dl->dl_tensor.ndim == (int)t->ndim && dl->dl_tensor.dtype.bits ==
	     8 * dtype_size(t->dtype) && dl->dl_tensor.dtype.lanes == 1 &&
	     dl->dl_tensor.device.device_type == kDLCPU &&
	     !dl->dl_tensor.strides && !dl->dl_tensor.byte_offset,
	     "tensor %s: its DLPack description", t->name);
	for (i = 0; i < (int)t->ndim; i++)
		must(dl->dl_tensor.shape[i] == t->shape[i], "tensor %s: DLPack "
		     "shape[%d]", t->name, i);
	f->dl[d] = (struct mdl){ dl, ti };
	t->ndl++;
	map_made(f, ti, dl->dl_tensor.data, 0, t->bytes, tier, access, stale,
		 seed);
}

static void op_dlpack_delete(struct fz *f, struct in *in)
{
	int d = u8(in) % ND, ti = f->dl[d].ti;
	void *ptr;

	if (!f->dl[d].dl)
		return;
	ptr = f->dl[d].dl->dl_tensor.data;
	f->dl[d].dl->deleter(f->dl[d].dl);	/* hmm_unmap(t, ptr) */
	f->dl[d].dl = NULL;
	f->t[ti].ndl--;
	model_unmap(f, ti, ptr);
}

/* ---- regions ------------------------------------------------------------ */

/*
 * Must a region access be served now?  It needs an ample store to evict
 * blocks to, and room for two blocks besides the pinned chunks (one
 * access may straddle two blocks, and one block's room would evict the
 * other in turn).  Otherwise a fault may find no room: after wait_ms
 * its access gets SIGBUS (region_fault.c), never waiting for ever.
 */
static int region_room(struct fz *f)
{
	return f->ample && pinned(f, HMM_TIER_HOST, -1, 0, 0) + 2 * RBLOCK <=
	       f->host_cap;
}

static void op_region_new(struct fz *f, struct in *in)
{
	uint8_t how = u8(in);
	int huge = how % 8 == 2;	/* more than any context here holds */
	uint64_t bytes, live = 0;
	void *p = NULL;
	int i, s = -1, want, r;

	bytes = how % 8 == 0 ? 0 : how % 8 == 1 ? (1ull << 46) + 1 :
		1 + pick(in, REGION_CAP / 2);
	if (huge)
		bytes += 1ull << 45;
	for (i = 0; i < NR; i++)
		if (f->r[i].p)
			live += f->r[i].bytes;
		else
			s = i;
	/* api.c's checks, then region.c's (two blocks: one access may
	 * straddle two), then the store to evict to and its capacity
	 * (hmm_fits), then the pins */
	want = !bytes || bytes > (1ull << 46) ? -EINVAL :
	       f->host_cap < 2 * RBLOCK ? -EINVAL : !f->store ? -ENODEV :
	       huge ? -ENOMEM :
	       pinned(f, HMM_TIER_HOST, -1, 0, 0) + 2 * RBLOCK >
	       f->host_cap ? -ENOMEM : 0;
	clear_err();
	if (want) {
		r = hmm_region_new(f->h, bytes, &p);
		if (want == -ENOMEM && !huge && (r == -ENOSYS || r == -EPERM))
			want = r;	/* no userfaultfd here */
		expect(r, want, "hmm_region_new(bad)");
		must(!huge || want != -ENOMEM ||
		     strstr(hmm_last_error(), "can ever hold"),
		     "a region of %" PRIu64 " bytes: refused for its size",
		     bytes);
		return;
	}
	/* a store nearly full may hold less than the region: regions
	 * there starve (region_room) */
	if (s < 0 || live + up(bytes, RBLOCK) > REGION_CAP)
		return;
	r = hmm_region_new(f->h, bytes, &p);
	if (r == -ENOSYS || r == -EPERM ||	/* no userfaultfd here */
	    (r == -ENOMEM && !f->ample &&
	     strstr(hmm_last_error(), "can ever hold"))) {
		failed(r, "hmm_region_new");
		return;
	}
	expect(r, 0, "hmm_region_new");
	f->r[s].p = p;
	f->r[s].bytes = up(bytes, RBLOCK);
	f->r[s].data = calloc(1, f->r[s].bytes);	/* zeros first */
	must(f->r[s].data, "no memory");
}

static struct mregion *region_of(struct fz *f, struct in *in)
{
	struct mregion *g = &f->r[u8(in) % NR];

	return g->p ? g : NULL;
}

static sigjmp_buf bus_jmp;
static volatile uint64_t bus_at;	/* bytes done before the SIGBUS */

static void on_bus(int sig)
{
	siglongjmp(bus_jmp, 1);
}

/*
 * Copy len bytes from src to dst a byte at a time (one of them in a
 * region), stopping at a SIGBUS: the bytes done, the faulting one not
 * among them.  libFuzzer's and the sanitizers' handler is back after.
 */
static uint64_t region_copy(volatile uint8_t *dst, const volatile uint8_t *src,
			    uint64_t len)
{
	struct sigaction sa = { .sa_handler = on_bus }, old;

	bus_at = 0;
	sigaction(SIGBUS, &sa, &old);
	if (!sigsetjmp(bus_jmp, 1))
		for (; bus_at < len; bus_at++)
			dst[bus_at] = src[bus_at];
	sigaction(SIGBUS, &old, NULL);
	return bus_at;
}

/* Write a pattern in a region (write: 1), or check its bytes. */
static void op_region_rw(struct fz *f, struct in *in, int write)
{
	struct mregion *g = region_of(f, in);
	uint64_t off, len, i, done;
	uint8_t *buf;
	uint32_t seed;

	if (!g)
		return;
	off = pick(in, g->bytes);
	len = 1 + pick(in, g->bytes - off);
	seed = u32(in);
	buf = malloc(len);
	must(buf, "no memory");
	if (write) {
		for (i = 0; i < len; i++)
			buf[i] = pattern(seed, i);
		done = region_copy(g->p + off, buf, len);
		memcpy(g->data + off, buf, done);	/* what landed */
	} else {
		done = region_copy(buf, g->p + off, len);
		same_bytes(buf, g->data + off, done, "a region",
			   "its region", off);
	}
	free(buf);
	if (done == len)
		return;
	if (tracing)
		fprintf(stderr, "fuzz_api: SIGBUS at byte %" PRIu64 " of "
			"%" PRIu64 "\n", done, len);
	must(!region_room(f) || g->starved, "a region %s with room got "
	     "SIGBUS at byte %" PRIu64, write ? "write" : "read", off + done);
	g->starved = 1;
	f->region_err = 1;
}

/* Is [p, p + len) inside one region (region.c's region_find)? */
static int in_region(struct fz *f, uintptr_t p, uint64_t len)
{
	int i;

	for (i = 0; i < NR; i++) {
		uintptr_t b = (uintptr_t)f->r[i].p;

		if (b && p >= b && p - b < f->r[i].bytes &&
		    len <= f->r[i].bytes - (p - b))
			return 1;
	}
	return 0;
}

static void op_region_advise(struct fz *f, struct in *in)
{
	static const int advice[] = {
		HMM_ADVISE_WILLNEED, HMM_ADVISE_COLD, HMM_ADVISE_NORMAL,
		HMM_ADVISE_COLD, 0, 4, -1,
	};
	struct mregion *g = region_of(f, in);
	int a = advice[u8(in) % 7], want, r;
	uint64_t off, len;
	uint8_t how = u8(in);
	uintptr_t p;

	if (!g)
		return;
	off = pick(in, g->bytes);
	len = 1 + pick(in, g->bytes - off);
	p = (uintptr_t)g->p + off;
	if (how % 8 == 0)
		len = 0;
	else if (how % 8 == 1)
		len = g->bytes - off + 1 + how;
	else if (how % 8 == 2)
		p = (uintptr_t)g->p - 1 - how;
	want = !len || a < HMM_ADVISE_WILLNEED || a > HMM_ADVISE_NORMAL ||
	       !in_region(f, p, len) ? -EINVAL : 0;
	clear_err();
	r = hmm_region_advise(f->h, (void *)p, len, a);
	/* without room WILLNEED fails as an access would (never with
	 * SIGBUS), COLD's writes as the nearly full store refuses them */
	if (!want && !region_room(f) && r) {
		failed(r, "hmm_region_advise");
		must(a == HMM_ADVISE_COLD || r == -ENOMEM || r == -ENOSPC,
		     "hmm_region_advise(WILLNEED) with no room: %d", r);
		return;
	}
	expect(r, want, "hmm_region_advise");
}

static void op_region_free(struct fz *f, struct in *in)
{
	struct mregion *g = region_of(f, in);
	uint8_t how = u8(in);
	int r;

	if (!g)
		return;
	clear_err();
	if (how & 1) {	/* inside, not its start */
		r = hmm_region_free(f->h, g->p + 1 + how % (g->bytes - 1));
		expect(r, -EINVAL, "hmm_region_free(not a region)");
		return;
	}
	r = hmm_region_free(f->h, g->p);
	expect(r, 0, "hmm_region_free");
	free(g->data);
	memset(g, 0, sizeof(*g));
}

/* ---- the store across contexts ------------------------------------------ */

/*
 * Close and reopen the store: KEEP (its saved tensors), none (refused
 * while it names tensors, formatted when it names none) or FORMAT.
 */
static void op_reopen(struct fz *f, struct in *in)
{
	uint8_t how = u8(in);
	uint32_t flags = how % 4 == 1 ? 0 : how % 4 == 2 ?
			 HMM_CONFIG_STORE_FORMAT : HMM_CONFIG_STORE_KEEP;
	int r, i;

	if (!f->store)
		return;
	if (!f->disk_known)
		flags = HMM_CONFIG_STORE_FORMAT;
	ctx_close(f);
	if (how & 0x10) {	/* another chunk size: saved ones refuse */
		f->chunk = PAGE << ((how >> 5) % 5);
		f->cfg.chunk_bytes = f->chunk;
	}
	r = ctx_open(f, flags);
	if (!flags && f->ns) {
		expect(r, -EEXIST, "hmm_open(a store with named tensors)");
		flags = HMM_CONFIG_STORE_KEEP;
		r = ctx_open(f, flags);
	}
	expect(r, 0, "hmm_open(again)");
	if (flags != HMM_CONFIG_STORE_KEEP) {
		saved_drop(f);
		f->disk_known = 1;
	}
	for (i = 0; i < f->ns; i++) {
		f->s[i].loaded = 1;
		f->s[i].opened = 0;
	}
}

static void op_tensor_open(struct fz *f, struct in *in)
{
	uint8_t how = u8(in);
	struct hmm_tensor *t = NULL;
	struct msaved *s = NULL;
	const char *name = "nosuch";
	int want = -ENOENT, ti, r;

	if (how % 8 == 0)
		name = NULL;
	else if (f->ns && how % 8 != 1)
		s = &f->s[how / 8 % f->ns];
	if (s)
		name = s->m.name;
	if (!name)
		want = -EINVAL;
	else if (s && unopened(s))	/* the same chunks, or refused */
		want = s->chunk == f->chunk ? 0 : -EINVAL;
	ti = free_slot(f);
	if (!want && ti < 0)
		return;
	clear_err();
	r = hmm_tensor_open(f->h, name, &t);
	expect(r, want, "hmm_tensor_open");
	if (r)
		return;
	s->opened = 1;
	f->t[ti] = s->m;
	f->t[ti].t = t;
	f->t[ti].base[0] = f->t[ti].base[1] = 0;
	f->t[ti].ndl = 0;
	f->t[ti].data = malloc(s->m.bytes);
	must(f->t[ti].data, "no memory");
	memcpy(f->t[ti].data, s->m.data, s->m.bytes);
	tensor_is(&f->t[ti]);
}

/* A second context on a store in use is refused. */
static void op_open_busy(struct fz *f)
{
	struct hmm_config c = f->cfg;
	struct hmm *h2 = NULL;
	int r;

	if (!f->store)
		return;
	c.flags |= HMM_CONFIG_STORE_KEEP;
	clear_err();
	r = hmm_open(&c, &h2);
	expect(r, -EBUSY, "hmm_open(a store in use)");
}

/* A config with one bad field is refused before anything is opened. */
static void op_open_bad(struct fz *f, struct in *in)
{
	struct hmm_config c = f->cfg;
	struct hmm *h2 = NULL;
	uint8_t how = u8(in);
	int r;

	switch (how % 10) {
	case 0: c.host_budget = 0; break;
	case 1: c.chunk_bytes = PAGE + 1 + how; break;
	case 2: c.policy = 2 + how; break;
	case 3: c.device = "gpu"; break;
	case 4: c.flags |= 0x100u << (how % 20); break;
	case 5: c.flags |= HMM_CONFIG_STORE_KEEP | HMM_CONFIG_STORE_FORMAT;
		break;
	case 6: c.pool_bytes = PAGE + how + 1; break;
	case 7: c.io_depth = HMM_CONFIG_DEPTH_MAX + 1 + how; break;
	case 8: c.reserved[0] = 1 + how; break;
	default: c.store_path = ""; break;
	}
	if ((how & 0x80) && how % 10 != 9)
		c.store_path = NULL;
	clear_err();
	r = hmm_open(&c, &h2);
	expect(r, -EINVAL, "hmm_open(bad config)");
	r = hmm_open(NULL, &h2);
	expect(r, -EINVAL, "hmm_open(NULL)");
}

/* ---- calls without a context -------------------------------------------- */

/* A NUL-terminated string of up to 15 input bytes. */
static void str_of(struct in *in, char *s)
{
	unsigned i, n = u8(in) % 16;

	for (i = 0; i < n; i++)
		s[i] = (char)u8(in);
	s[n] = 0;
}

static int is_string_key(const char *k)
{
	return !strcmp(k, "store_path") || !strcmp(k, "device") ||
	       !strcmp(k, "daemon") || !strcmp(k, "trace_path") ||
	       !strcmp(k, "host_dir");
}

/* hmm_config_set: 0, or -EINVAL with nothing changed; what it set reads
 * back with hmm_config_get and sets the same again. */
static void op_config_set(struct in *in)
{
	struct hmm_config *c = hmm_config_new(), before, again;
	unsigned nkeys = 0, k = u8(in);
	char val[16], buf[64];
	const char *key;
	int r, n;

	must(c, "hmm_config_new");
	while (hmm_config_key(nkeys))
		nkeys++;
	key = k % (nkeys + 1) < nkeys ? hmm_config_key(k % (nkeys + 1)) :
	      "no_such_key";
	str_of(in, val);
	memcpy(&before, c, sizeof(before));
	clear_err();
	r = hmm_config_set(c, key, val);
	if (r) {
		expect(r, -EINVAL, "hmm_config_set");
		must(!memcmp(&before, c, sizeof(*c)), "hmm_config_set(%s, %s) "
		     "failed and changed the config", key, val);
		goto out;
	}
	n = hmm_config_get(c, key, buf, sizeof(buf));
	must(n >= 0 && (size_t)n < sizeof(buf) && strlen(buf) == (size_t)n,
	     "hmm_config_get(%s): %d", key, n);
	if (is_string_key(key))
		goto out;
	memcpy(&again, &before, sizeof(again));
	r = hmm_config_set(&again, key, buf);
	must(!r && !memcmp(&again, c, sizeof(*c)), "hmm_config_set(%s): "
	     "\"%s\" and its read-back \"%s\" differ", key, val, buf);
out:
	hmm_config_free(c);
}

static void op_size_parse(struct in *in)
{
	uint64_t v = 12345, w;
	char s[16], buf[32];
	int r;

	str_of(in, s);
	r = hmm_size_parse(s, &v);
	must(r == 0 || r == -EINVAL || r == -ERANGE, "hmm_size_parse(\"%s\"): "
	     "%d", s, r);
	if (r == -EINVAL)
		must(v == 12345, "hmm_size_parse(\"%s\") failed and wrote", s);
	if (r)
		return;
	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	must(!hmm_size_parse(buf, &w) && w == v, "hmm_size_parse(\"%s\") = %"
	     PRIu64 " does not read back", s, v);
}

/* ---- one input ---------------------------------------------------------- */

/* Every live tensor read whole at the host equals the model. */
static void check_all(struct fz *f)
{
	void *p;
	int i, r;

	while (f->nm) {
		int ti = f->m[f->nm - 1].ti;
		int d;

		for (d = 0; d < ND; d++)
			if (f->dl[d].dl && f->dl[d].ti == ti &&
			    f->dl[d].dl->dl_tensor.data == f->m[f->nm - 1].ptr)
				break;
		if (d < ND) {
			op_dlpack_delete(f, &(struct in){ (uint8_t[]){ d },
							  1 });
			continue;
		}
		r = hmm_unmap(f->t[ti].t, f->m[f->nm - 1].ptr);
		expect(r, 0, "hmm_unmap(at the end)");
		model_unmap(f, ti, f->m[f->nm - 1].ptr);
	}
	for (i = 0; i < NT; i++) {
		if (!f->t[i].t)
			continue;
		clear_err();
		r = hmm_map(f->t[i].t, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &p);
		if (r) {	/* no room: a small budget, no store to evict to */
			failed(r, "hmm_map(at the end)");
			must(!map_fits(f, i, 0, f->t[i].bytes, HMM_TIER_HOST),
			     "tensor %s: map at the end failed though it fits",
			     f->t[i].name);
			continue;
		}
		same_bytes(p, f->t[i].data, f->t[i].bytes, "the end",
			   f->t[i].name, 0);
		r = hmm_unmap(f->t[i].t, p);
		expect(r, 0, "hmm_unmap(at the end)");
	}
}

/* What the last flush saved reads back after a reopen. */
static void check_saved(struct fz *f)
{
	int i, n = f->ns;

	if (!f->store || !f->disk_known || !n)
		return;
	op_reopen(f, &(struct in){ (uint8_t[]){ 0 }, 1 });	/* KEEP */
	for (i = 0; i < n && i < NT; i++)
		op_tensor_open(f, &(struct in){ (uint8_t[]){ 8 * i + 2 }, 1 });
	check_all(f);
}

static const char *const op_names[32] = {
	"tensor_new", "tensor_new", "tensor_free", "map", "map", "map",
	"unmap", "unmap", "write", "write", "check", "prefetch", "evict",
	"writeback", "wait", "flush", "step", "stats", "residency", "host_fd",
	"dlpack", "dlpack_delete", "region_new", "region_write",
	"region_check", "region_advise", "region_free", "reopen",
	"tensor_open", "open_bad", "config_set", "open_busy",
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void run(struct fz *f, struct in *in)
{
	double t0 = now();
	int n, op;

	for (n = 0; in->n && n < NOPS; n++) {
		op = u8(in) % 32;
		if (tracing)
			fprintf(stderr, "fuzz_api: %.3f s: %d %s (%d maps)\n",
				now() - t0, n, op_names[op], f->nm);
		switch (op) {
		case 0: case 1: op_tensor_new(f, in); break;
		case 2: op_tensor_free(f, in); break;
		case 3: case 4: case 5: op_map(f, in); break;
		case 6: case 7: op_unmap(f, in); break;
		case 8: case 9: op_write(f, in); break;
		case 10: op_check(f, in); break;
		case 11: op_move(f, in, 0); break;
		case 12: op_move(f, in, 1); break;
		case 13: op_move(f, in, 2); break;
		case 14: op_wait(f, in); break;
		case 15: op_flush(f); break;
		case 16: op_step(f, in); break;
		case 17: op_stats(f, in); break;
		case 18: op_residency(f, in); break;
		case 19: op_host_fd(f, in); break;
		case 20: op_dlpack(f, in); break;
		case 21: op_dlpack_delete(f, in); break;
		case 22: op_region_new(f, in); break;
		case 23: op_region_rw(f, in, 1); break;
		case 24: op_region_rw(f, in, 0); break;
		case 25: op_region_advise(f, in); break;
		case 26: op_region_free(f, in); break;
		case 27: op_reopen(f, in); break;
		case 28: op_tensor_open(f, in); break;
		case 29: op_open_bad(f, in); break;
		case 30: op_config_set(in); op_size_parse(in); break;
		default: op_open_busy(f); break;
		}
	}
}

static void store_remove(void)
{
	unlink(store_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("HMM_TEST_DIR");

	snprintf(store_path, sizeof(store_path), "%s/fuzz_api.%d.store",
		 dir && *dir ? dir : "/tmp", (int)getpid());
	tracing = getenv("FUZZ_API_TRACE") != NULL;
	atexit(store_remove);
	fz_janitor(store_remove);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fz f;
	struct in in = { data, size };
	int r;

	memset(&f, 0, sizeof(f));
	f.disk_known = 1;
	config_of(&f, &in);
	unlink(store_path);
	r = ctx_open(&f, 0);
	/* a store of a few chunks may be too small to format */
	if (r < 0 && f.store && !f.ample) {
		failed(r, "hmm_open(a small store)");
		goto out;
	}
	expect(r, 0, "hmm_open");
	run(&f, &in);
	check_all(&f);
	check_saved(&f);
	ctx_close(&f);
out:
	saved_drop(&f);
	unlink(store_path);
	return 0;
}
