// SPDX-License-Identifier: MIT
/*
 * fuzz_api — libFuzzer target for sequences of hmm.h calls in embedded
 * mode (no hmmd), or with HMM_FUZZ_MODE=shared in shared mode, checked
 * against a model kept here.  Built by `make fuzz` with
 * -fsanitize=fuzzer,address,undefined and linked with libhmm's sources
 * (so they are instrumented too; hmmd is the plain build's); run by
 * `make check` for 20 s in each mode over the seed corpus
 * tests/fuzz/corpus/fuzz_api/.
 *
 * Shared mode starts $HMM_BUILD/bin/hmmd (build/ by default) once per
 * process, and every context of every input connects to it.  The model
 * then follows libhmm.3's shared mode where the modes differ: hmmd's
 * chunk (HMMD_CHUNK, $HMM_FUZZ_CHUNK) and store whatever the config
 * says (a "nearly full" store is a small store quota: -EDQUOT), host
 * maps charging whole chunks of the quota each, device maps staged as
 * copies of their own (no stable device address, whole chunks of the
 * device budget each), a flush that makes each tensor held the saved
 * one of its name (the live tensor, not a snapshot; -ENAMETOOLONG past
 * hmmd's "u<uid>/" prefix), saved tensors that stay in hmmd across
 * contexts as their last holder left them, -ENOTSUP host fds, regions
 * whose evictions need room in the quota, no -EBUSY for a second
 * context, and after a region access got SIGBUS another may for 0.5 s
 * (an eviction hmmd refused keeps its region out of reclaim 0.1 s).  An
 * input's end frees all it left in hmmd, and hmmd must then hold no
 * tensor and no pin.  (Once not done: opening a saved tensor this
 * context holds, which attached it again; and a device map with a host
 * map at its offset, whose staging host map in hmmd has that pointer,
 * which an unmap of it once ended.)
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
 * ends (fz_janitor.h); shared mode's hmmd runs in a folder
 * fuzz_api.XXXXXX there, with PR_SET_PDEATHSIG, and is stopped at exit
 * (SIGTERM) or killed by the janitor, which removes the folder.
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
#include <dirent.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dlpack.h"
#include "err.h"
#include "fz_in.h"
#include "fz_janitor.h"
#include "fz_must.h"
#include "hmm.h"

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
	int made;		/* by hmm_tensor_new in this context:
				   shared mode counts it in the store quota */
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
	int ti;			/* shared mode: the slot holding it, -1
				   none (m.data then its bytes) */
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
	uint64_t squota;	/* shared mode: the store quota, 0 none */
	double bus_at;		/* shared mode: the last region SIGBUS */
};

static char store_path[4096];
static char json[4096];
static int tracing;	/* $FUZZ_API_TRACE: each operation on stderr */

/*
 * Shared mode ($HMM_FUZZ_MODE=shared): every context is a connection to
 * an hmmd of this process's own, started once at LLVMFuzzerInitialize
 * with its socket, store and log in a scratch folder (hmmd_dir), and
 * stopped and removed at exit, or by the janitor however the run ends.
 * Its chunk (HMMD_CHUNK, or $HMM_FUZZ_CHUNK) is every input's, its
 * budget and client quota larger than any input's host budget, so that
 * the quota is what the input's config asks (libhmm.3).
 */
#define HMMD_BUDGET	(8u << 20)
#define HMMD_STORE	"64M"
#define HMMD_CHUNK	16384u
#define HMMD_WAIT_MS	"20"

static int shared;
static pid_t hmmd_pid;
static uint32_t hmmd_chunk = HMMD_CHUNK;
static char hmmd_dir[200], hmmd_sock[240], hmmd_addr[256], hmmd_log[240];
static unsigned uid_prefix;	/* strlen("u<uid>/"): hmmd's saved names */

/* ---- checks ------------------------------------------------------------ */

/* The end of hmmd's log on stderr, with a finding. */
static void hmmd_log_show(void)
{
	static char buf[4096];
	FILE *l = fopen(hmmd_log, "r");
	long end;
	size_t n;

	if (!l)
		return;
	fseek(l, 0, SEEK_END);
	end = ftell(l) - (long)sizeof(buf) + 1;
	fseek(l, end > 0 ? end : 0, SEEK_SET);
	n = fread(buf, 1, sizeof(buf) - 1, l);
	buf[n] = 0;
	fclose(l);
	fprintf(stderr, "fuzz_api: hmmd's log ends:\n%s\n", buf);
}

static void fz_finding(void)
{
	if (shared)
		hmmd_log_show();
	unlink(store_path);
}

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

/* Saved and not held: embedded, loaded at the open and not opened;
 * shared mode, held by no slot (hmmd keeps it). */
static int unopened(const struct msaved *s)
{
	return shared ? s->ti < 0 : s->loaded && !s->opened;
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

	/* shared mode's device maps are copies of their own, each in
	   whole chunks of hmmd's (remote/dev_stage.c) */
	if (shared && tier == HMM_TIER_DEVICE) {
		for (j = 0; j < f->nm; j++)
			if (f->m[j].tier == tier)
				n += ((f->m[j].off + f->m[j].len - 1) /
				      f->chunk - f->m[j].off / f->chunk + 1) *
				     f->chunk;
		if (len)
			n += ((off + len - 1) / f->chunk - off / f->chunk +
			      1) * f->chunk;
		return n;
	}

	for (i = 0; i < NT; i++) {
		uint64_t nc = (f->t[i].bytes + f->chunk - 1) / f->chunk;

		if (!f->t[i].t)
			continue;
		memset(pin, 0, nc);
		/* shared mode: a device map is staged through a host
		   map in hmmd, pinned there as long */
		for (j = 0; j < f->nm; j++)
			if (f->m[j].ti == i && (f->m[j].tier == tier ||
			    (shared && tier == HMM_TIER_HOST)))
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

/*
 * Shared mode: the host quota hmmd charges this client's maps, host and
 * staged device ones, plus a map of [off, +len) if len: whole chunks of
 * hmmd's a map (daemon/map.c), each map on its own.
 */
static uint64_t charged(struct fz *f, uint64_t off, uint64_t len)
{
	uint64_t n = 0;
	int j;

	for (j = 0; j < f->nm; j++)
		n += ((f->m[j].off + f->m[j].len - 1) / f->chunk -
		      f->m[j].off / f->chunk + 1) * f->chunk;
	if (len)
		n += ((off + len - 1) / f->chunk - off / f->chunk + 1) *
		     f->chunk;
	return n;
}

/* Shared mode: the host quota one block's eviction maps in hmmd
 * (libhmm.3: whole chunks of hmmd's; remote/region.c's block_charge). */
static uint64_t block_charge(uint64_t chunk)
{
	uint64_t g = chunk, b = RBLOCK;

	while (b) {
		uint64_t t = g % b;

		g = b;
		b = t;
	}
	return ((chunk - g + RBLOCK - 1) / chunk + 1) * chunk;
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
	/* shared mode: hmmd keeps a saved tensor as its last holder left
	 * it (libhmm.3), not as flushed */
	for (i = 0; i < f->ns; i++) {
		struct msaved *sv = &f->s[i];

		if (!shared || sv->ti < 0)
			continue;
		free(sv->m.data);
		sv->m = f->t[sv->ti];
		sv->m.t = NULL;
		sv->m.data = malloc(sv->m.bytes);
		must(sv->m.data, "no memory");
		memcpy(sv->m.data, f->t[sv->ti].data, sv->m.bytes);
		sv->ti = -1;
	}
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
	if (shared) {
		/* hmmd's store and chunks, whatever the config says; a
		 * "nearly full" store is a small store quota there */
		f->cfg.daemon = hmmd_addr;
		f->chunk = hmmd_chunk;
		f->store = f->ample = 1;
		if ((b0 & 3) == 3) {
			f->squota = (uint64_t)(1 + b3 % 8) << 15;
			f->cfg.store_size = f->squota;
		}
		if ((b0 & 3) == 0)	/* no store_path: hmmd's default */
			return;
		f->cfg.store_path = store_path;	/* ignored */
		if ((b0 & 3) != 3)
			f->cfg.store_size = hmm_store_required(
				4ull * (TENSOR_CAP + REGION_CAP), f->chunk);
		return;
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

/* Shared mode: what this client's tensors take of its store quota. */
static uint64_t owned(struct fz *f)
{
	uint64_t n = 0;
	int i;

	for (i = 0; i < NT; i++)
		if (f->t[i].t && f->t[i].made)
			n += f->t[i].bytes;
	for (i = 0; i < NR; i++)
		n += f->r[i].bytes;
	return n;
}

/* What hmm_tensor_new must return (tensor.c's order of checks). */
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
	for (i = 0; i < ndim; i++)	/* every dimension before the size */
		if (shape[i] <= 0)
			return -EINVAL;
	for (i = 0; i < ndim; i++)
		if (__builtin_mul_overflow(n, (uint64_t)shape[i], &n) ||
		    n > (1ull << 46))
			return -EOVERFLOW;
	if ((n + f->chunk - 1) / f->chunk > UINT32_MAX)
		return -EOVERFLOW;
	*bytes = n;
	if (n > capacity(f))
		return -ENOMEM;
	/* shared mode: the bytes of the tensors this client made (its
	 * regions' too), within its store quota (libhmm.3) */
	return f->squota && owned(f) + n > f->squota ? -EDQUOT : 0;
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
				    .bytes = bytes, .made = 1 };
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

/* Shared mode: freeing a saved tensor deletes it (libhmm.3). */
static void saved_forget(struct fz *f, int ti)
{
	int i;

	for (i = 0; shared && i < f->ns; i++)
		if (f->s[i].ti == ti) {
			free(f->s[i].m.data);
			memmove(&f->s[i], &f->s[i + 1],
				(f->ns - i - 1) * sizeof(f->s[0]));
			memset(&f->s[--f->ns], 0, sizeof(f->s[0]));
			return;
		}
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
	saved_forget(f, ti);
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

/*
 * Do maps at tiers a and b hold copies of their own?  Maps at one tier
 * share its memory, but in shared mode each device map is a copy of its
 * own, made at the map and copied back at its unmap (libhmm.3): two
 * device maps of one chunk are as two tiers.
 */
static int apart(int a, int b)
{
	return a != b || (shared && a == HMM_TIER_DEVICE);
}

/* A live map at the other tier that writes the chunks of [off, +len). */
static int other_writer(struct fz *f, int ti, uint64_t off, uint64_t len,
			int tier)
{
	int i;

	for (i = 0; i < f->nm; i++)
		if (apart(f->m[i].tier, tier) && WRITES(f->m[i].access) &&
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
/* (shared mode: regions live in this process's budget, pins in hmmd) */

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

	/* shared mode: hmmd's store is ample and its policy LRU; a map
	 * waits for nothing but this client's quota (hmmd.8), and a device
	 * one pins at this process's device and at hmmd's host */
	if (shared)
		return charged(f, off, len) <= f->host_cap &&
		       (tier == HMM_TIER_HOST ||
			pinned(f, HMM_TIER_DEVICE, ti, off, len) <= f->dev_cap);
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
	/* (shared mode: nothing stays at the device between maps) */
	must((uintptr_t)p == t->base[tier] + off || (shared &&
	     tier == HMM_TIER_DEVICE), "tensor %s: map at tier %d offset %"
	     PRIu64 ": %p, not base + offset", t->name, tier, off, p);
	*m = (struct mmap){ ti, p, off, len, tier, access, stale };
	if (WRITES(access))	/* what other tiers hold is stale now */
		for (i = 0; i < f->nm - 1; i++)
			if (apart(f->m[i].tier, tier) &&
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
	if (tracing)
		fprintf(stderr, "fuzz_api: map %s [%" PRIu64 ", +%" PRIu64
			") of %" PRIu64 " at %d access %#x: %d\n",
			f->t[ti].name, g.off, g.rlen, f->t[ti].bytes, tier,
			access, r);
	if (r < 0) {
		failed(r, "hmm_map");
		must(!fits, "tensor %s: map [%" PRIu64 ", +%" PRIu64 ") at %d "
		     "failed though its pins fit", f->t[ti].name, g.off,
		     g.rlen, tier);
		return;
	}
	map_made(f, ti, p, g.off, g.rlen, tier, access, stale, how);
}

/* An unmap of t's ptr ends the map that pins least: the shortest, a
 * read before a write, the latest of equals (map.c's map_find): so does
 * the model. */
static void model_unmap(struct fz *f, int ti, const void *ptr)
{
	int i, k = -1;

	for (i = f->nm - 1; i >= 0; i--)
		if (f->m[i].ti == ti && f->m[i].ptr == ptr &&
		    (k < 0 || f->m[i].len < f->m[k].len ||
		     (f->m[i].len == f->m[k].len && WRITES(f->m[k].access) &&
		      !WRITES(f->m[i].access))))
			k = i;
	i = k;
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
	if (tracing)
		fprintf(stderr, "fuzz_api: unmap %s %p (tier %d [%" PRIu64
			", +%" PRIu64 ")): %d\n", f->t[ti].name, m->ptr,
			m->tier, m->off, m->len, r);
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

/* Can hmmd save t (its name with the "u<uid>/" prefix in 63 bytes)? */
static int savable(const struct mtensor *t)
{
	return strlen(t->name) + uid_prefix <= 63;
}

/*
 * Shared mode's good flush (libhmm.3): each tensor held whose name fits
 * becomes the saved one of its name, replacing the one before; it is
 * the live tensor, not a copy (ti: its bytes follow the slot's).
 */
static void flush_saved_shared(struct fz *f)
{
	int i, j;

	for (i = 0; i < NT; i++) {
		if (!f->t[i].t || !savable(&f->t[i]))
			continue;
		for (j = 0; j < f->ns; j++)
			if (!strcmp(f->s[j].m.name, f->t[i].name))
				break;
		if (j == f->ns) {
			must(f->ns < NS, "%d tensors saved", f->ns);
			memset(&f->s[j], 0, sizeof(f->s[j]));
			f->ns++;
		} else if (f->s[j].ti == i) {
			continue;
		}
		free(f->s[j].m.data);
		memset(&f->s[j], 0, sizeof(f->s[j]));
		snprintf(f->s[j].m.name, sizeof(f->s[j].m.name), "%s",
			 f->t[i].name);
		f->s[j].chunk = f->chunk;
		f->s[j].ti = i;
	}
}

static void op_flush_shared(struct fz *f)
{
	int r, i, toolong = 0, named = 0;

	for (i = 0; i < NT; i++)
		toolong |= f->t[i].t && !savable(&f->t[i]);
	clear_err();
	r = hmm_flush(f->h);
	if (toolong) {	/* the first it tried, in an order of its own */
		expect(r, -ENAMETOOLONG, "hmm_flush(a name too long)");
		for (i = 0; i < NT; i++)
			named |= f->t[i].t && !savable(&f->t[i]) &&
				 strstr(hmm_last_error(), f->t[i].name);
		must(named, "hmm_flush: the detail names no tensor too long");
	} else if (r) {
		failed(r, "hmm_flush");
		must(region_said(f, r), "hmm_flush in shared mode: %d", r);
	}
	f->region_err = 0;
	flush_saved_shared(f);
}

static void op_flush(struct fz *f)
{
	int r;

	if (shared) {
		op_flush_shared(f);
		return;
	}
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

/*
 * Shared mode: hmmd's tensors are this context's, the saved ones nobody
 * holds and its regions' (remote/region.c); what a closed connection
 * held goes when hmmd sees it close, a moment later: wait for that.
 */
static void stats_shared(struct fz *f, struct hmm_stats *st, uint64_t *lp,
			 uint64_t *cp)
{
	uint64_t live = *lp, chunks = *cp;
	int i, r, tries;

	for (i = 0; i < f->ns; i++)
		if (unopened(&f->s[i])) {
			live++;
			chunks += (f->s[i].m.bytes + f->chunk - 1) / f->chunk;
		}
	for (i = 0; i < NR; i++)
		if (f->r[i].p) {
			live++;
			chunks += (f->r[i].bytes + f->chunk - 1) / f->chunk;
		}
	*lp = live;
	*cp = chunks;
	for (tries = 0; tries < 200; tries++) {
		if (st->tensors == live && st->chunks == chunks &&
		    st->tier[HMM_TIER_HOST].pinned ==
		    pinned(f, HMM_TIER_HOST, -1, 0, 0))
			return;
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
		r = hmm_stats(f->h, st);
		expect(r, 0, "hmm_stats");
	}
}

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
	if (shared)
		stats_shared(f, &st, &live, &chunks);
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
		must(s->capacity == (!i ? f->dev_cap : shared ? HMMD_BUDGET :
				     f->host_cap) &&
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
	if (!f->host_shared || shared) {	/* hmm.h */
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
	if (tracing)
		fprintf(stderr, "fuzz_api: dlpack %s at %d access %#x: %p\n",
			t->name, tier, access, dl->dl_tensor.data);
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
	/* shared mode: a block's eviction maps it in hmmd, within the
	 * quota this client's maps leave (libhmm.3) */
	if (shared)
		return charged(f, 0, 0) + block_charge(f->chunk) <=
		       f->host_cap;
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
	       huge ? -ENOMEM : shared ? 0 :
	       pinned(f, HMM_TIER_HOST, -1, 0, 0) + 2 * RBLOCK >
	       f->host_cap ? -ENOMEM : 0;
	/* shared mode: one block's map must fit the host quota, the
	 * region's tensor in hmmd the store quota (libhmm.3) */
	if (shared && !want)
		want = block_charge(f->chunk) > f->host_cap ? -EINVAL :
		       f->squota && owned(f) + up(bytes, RBLOCK) >
		       f->squota ? -EDQUOT : 0;
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

static double now(void);

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
	/* shared mode: an eviction hmmd refused keeps its region out of
	 * reclaim for 0.1 s (room "looked for every 0.1 s", libhmm.3),
	 * so another region's access may starve meanwhile */
	must(!region_room(f) || g->starved || (shared &&
	     now() - f->bus_at < 0.5), "a region %s with room got SIGBUS at "
	     "byte %" PRIu64, write ? "write" : "read", off + done);
	if (shared)
		f->bus_at = now();
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
	if (shared) {	/* hmmd's store: the flags and chunk are not ours */
		ctx_close(f);
		if (how & 0x10)
			f->cfg.chunk_bytes = PAGE << ((how >> 5) % 5);
		r = ctx_open(f, flags);
		expect(r, 0, "hmm_open(again)");
		return;
	}
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
	/* one this context holds: -ENOENT, in shared mode too (it once
	 * attached it again, a second handle to one tensor) */
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
	s->ti = ti;
	f->t[ti] = s->m;
	f->t[ti].t = t;
	f->t[ti].made = 0;
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
	if (shared) {	/* another connection: hmmd holds the store */
		expect(r, 0, "hmm_open(a second connection)");
		hmm_close(h2);
		return;
	}
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

/*
 * Shared mode, at an input's end: free what it left in hmmd (its
 * tensors, the saved ones: each must open by its name, regions), and
 * hmmd must then hold no tensor and no pin, once it has seen this
 * input's closed connections go; so the next input starts as this did.
 */
static void shared_clean(struct fz *f)
{
	struct hmm_tensor *t;
	struct hmm_stats st;
	int i, r, tries;

	/* an export whose map an hmm_unmap of its pointer dropped: its
	 * deleter before the tensor goes */
	for (i = 0; i < ND; i++)
		if (f->dl[i].dl) {
			f->dl[i].dl->deleter(f->dl[i].dl);
			f->t[f->dl[i].ti].ndl--;
			f->dl[i].dl = NULL;
		}
	for (i = 0; i < NT; i++) {
		if (!f->t[i].t)
			continue;
		clear_err();
		r = hmm_tensor_free(f->t[i].t);
		expect(r, 0, "hmm_tensor_free(at the end)");
		model_tensor_drop(&f->t[i]);
		saved_forget(f, i);
	}
	for (i = 0; i < f->ns; i++) {
		clear_err();
		r = hmm_tensor_open(f->h, f->s[i].m.name, &t);
		expect(r, 0, "hmm_tensor_open(a saved one, at the end)");
		must(hmm_tensor_bytes(t) == f->s[i].m.bytes, "saved %s: %"
		     PRIu64 " bytes", f->s[i].m.name, hmm_tensor_bytes(t));
		r = hmm_tensor_free(t);
		expect(r, 0, "hmm_tensor_free(a saved one, at the end)");
	}
	saved_drop(f);
	for (i = 0; i < NR; i++)
		if (f->r[i].p) {
			r = hmm_region_free(f->h, f->r[i].p);
			expect(r, 0, "hmm_region_free(at the end)");
			free(f->r[i].data);
			memset(&f->r[i], 0, sizeof(f->r[i]));
		}
	for (tries = 0; tries < 200; tries++) {
		r = hmm_stats(f->h, &st);
		expect(r, 0, "hmm_stats(at the end)");
		if (!st.tensors && !st.tier[HMM_TIER_HOST].pinned)
			return;
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	}
	must(0, "hmmd keeps %" PRIu64 " tensors, %" PRIu64 " bytes pinned, "
	     "after this input freed all it made and saved", st.tensors,
	     st.tier[HMM_TIER_HOST].pinned);
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

/* ---- shared mode's hmmd -------------------------------------------------- */

/* Is pid our hmmd, alive (a zombie's cmdline is empty)? */
static int hmmd_alive(pid_t pid)
{
	char path[64], buf[4096];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	return n > 0 && memmem(buf, n, hmmd_sock, strlen(hmmd_sock));
}

/* Kill hmmd (if it still runs: the pid may be another's by now) and
 * remove its folder.  At exit, and in the janitor however we ended. */
static void hmmd_remove(void)
{
	struct dirent *e;
	char path[512];
	DIR *d;
	int i;

	if (hmmd_pid > 0 && hmmd_alive(hmmd_pid)) {
		kill(hmmd_pid, SIGKILL);
		for (i = 0; i < 200 && hmmd_alive(hmmd_pid); i++)
			nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	}
	d = opendir(hmmd_dir);
	if (!d)
		return;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    snprintf(path, sizeof(path), "%s/%s", hmmd_dir,
			     e->d_name) < (int)sizeof(path))
			unlink(path);
	closedir(d);
	rmdir(hmmd_dir);
}

/* At a normal exit: hmmd stops as it would (SIGTERM), then goes. */
static void hmmd_stop(void)
{
	int st, i;

	if (hmmd_pid <= 0)
		return;
	kill(hmmd_pid, SIGTERM);
	for (i = 0; i < 500 && !waitpid(hmmd_pid, &st, WNOHANG); i++)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	if (i == 500) {
		kill(hmmd_pid, SIGKILL);
		waitpid(hmmd_pid, &st, 0);
	}
	hmmd_pid = 0;
	hmmd_remove();
}

static void all_remove(void)
{
	store_remove();
	if (shared)
		hmmd_remove();
}

/*
 * Start hmmd ($HMM_BUILD, else build/, bin/hmmd) in a new folder under
 * base, with PR_SET_PDEATHSIG so that it dies with this process, and
 * wait for its socket.
 */
static void hmmd_start(const char *base)
{
	static char *envp[256];
	extern char **environ;
	const char *b = getenv("HMM_BUILD"), *c = getenv("HMM_FUZZ_CHUNK");
	char bin[4096], chunk[32], budget[32], store[300];
	pid_t parent = getpid();
	int i, n = 0, st, fd;

	if (c && *c)
		hmmd_chunk = (uint32_t)strtoul(c, NULL, 0);
	snprintf(bin, sizeof(bin), "%s/bin/hmmd", b && *b ? b : "build");
	snprintf(chunk, sizeof(chunk), "%u", hmmd_chunk);
	snprintf(budget, sizeof(budget), "%u", HMMD_BUDGET);
	if (access(bin, X_OK)) {
		fprintf(stderr, "fuzz_api: shared mode runs %s: not built "
			"(make all, or set $HMM_BUILD)\n", bin);
		exit(1);
	}
	/* a socket path has 108 bytes */
	if (snprintf(hmmd_dir, sizeof(hmmd_dir), "%s/fuzz_api.XXXXXX",
		     base) >= 80 || !mkdtemp(hmmd_dir)) {
		snprintf(hmmd_dir, sizeof(hmmd_dir), "/tmp/fuzz_api.XXXXXX");
		if (!mkdtemp(hmmd_dir)) {
			perror("fuzz_api: mkdtemp");
			exit(1);
		}
	}
	snprintf(hmmd_sock, sizeof(hmmd_sock), "%s/hmmd.sock", hmmd_dir);
	snprintf(hmmd_addr, sizeof(hmmd_addr), "unix:%s", hmmd_sock);
	snprintf(hmmd_log, sizeof(hmmd_log), "%s/hmmd.log", hmmd_dir);
	snprintf(store, sizeof(store), "%s/hmmd.store", hmmd_dir);
	for (i = 0; environ[i] && n < 255; i++)
		if (strncmp(environ[i], "NOTIFY_SOCKET=", 14))
			envp[n++] = environ[i];
	envp[n] = NULL;
	hmmd_pid = fork();
	if (hmmd_pid < 0) {
		perror("fuzz_api: fork");
		exit(1);
	}
	if (hmmd_pid == 0) {
		char *argv[] = { bin, "--socket", hmmd_sock, "--store", store,
				 "--store-size", HMMD_STORE, "--format",
				 "--host-budget", budget, "--client-quota",
				 budget, "--chunk", chunk, "--wait-ms",
				 HMMD_WAIT_MS, "--module", "none", NULL };

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		fd = open(hmmd_log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		execve(bin, argv, envp);
		_exit(127);
	}
	atexit(hmmd_stop);
	for (i = 0; i < 1000; i++) {
		struct stat sb;

		if (!stat(hmmd_sock, &sb))
			return;
		if (waitpid(hmmd_pid, &st, WNOHANG) == hmmd_pid) {
			hmmd_pid = 0;
			break;
		}
		nanosleep(&(struct timespec){ 0, 20000000 }, NULL);
	}
	fprintf(stderr, "fuzz_api: hmmd did not listen on %s\n", hmmd_sock);
	hmmd_log_show();
	exit(1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("HMM_TEST_DIR");
	const char *mode = getenv("HMM_FUZZ_MODE");

	dir = dir && *dir ? dir : "/tmp";
	snprintf(store_path, sizeof(store_path), "%s/fuzz_api.%d.store",
		 dir, (int)getpid());
	tracing = getenv("FUZZ_API_TRACE") != NULL;
	atexit(store_remove);
	shared = mode && !strcmp(mode, "shared");
	if (shared) {
		uid_prefix = snprintf(NULL, 0, "u%u/", (unsigned)getuid());
		hmmd_start(dir);
	} else if (mode && *mode && strcmp(mode, "embedded")) {
		fprintf(stderr, "fuzz_api: HMM_FUZZ_MODE=%s: embedded or "
			"shared\n", mode);
		exit(1);
	}
	fz_janitor(all_remove);	/* after hmmd_start: it kills hmmd too */
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
	if (shared)
		shared_clean(&f);
	ctx_close(&f);
out:
	saved_drop(&f);
	unlink(store_path);
	return 0;
}
