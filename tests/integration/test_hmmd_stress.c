// SPDX-License-Identifier: MIT
/*
 * test_hmmd_stress — many clients at once doing random work on one
 * hmmd while some are killed -9, checking invariants, not only that
 * nothing crashed.
 *
 * A private hmmd (a 3 MiB host budget of 64 KiB chunks, 1 MiB uid
 * quotas, 300 ms --wait-ms) serves NSLOT client processes through the
 * public hmm.h calls in shared mode: two as root, two as uid 65534 and
 * two as 65533 (so per-uid quotas are shared, and non-root maps are
 * copies once a uid's reach passes its quota), each two threads on one
 * context.  Each thread runs a random mix of tensor new/free (1 byte to
 * eight chunks, four dtypes, one or two dimensions), host maps READ /
 * WRITE / READ|WRITE / DISCARD of random ranges, "sim" device maps
 * (staged through hmmd), writes into live write maps, unmaps in random
 * order, frees with a map held (-EBUSY), prefetch, evict, writeback,
 * wait, residency and stats; and, holding the context alone, flush, or
 * close (with maps held) and reopen.  Tensors saved by a flush go from
 * client to client of one uid: a slot's successor opens its
 * predecessor's, and any client of a uid may claim the uid's shared
 * ones; each is opened with hmm_tensor_open and checked whole.
 *
 * The model.  Every tensor name is an object in memory shared by all
 * the test's processes: its state (none, temporary, saved, maybe saved),
 * the bytes it must hold (a pattern of client, object, offset and
 * generation) and which of them are known.  A write map makes its range
 * unknown until its unmap, so what a client killed mid-write leaves is
 * skipped, never guessed.  Every map is checked byte-exact at the map
 * and again at the unmap (and while held); a refusal hmm.h allows under
 * pressure (-ENOMEM of a map or of tensor_new, -EDQUOT of tensor_new,
 * -EBUSY of a free with a map held) must name the tensor in
 * hmm_last_error() and lose nothing; anything else fails, printing the
 * seed, the client, its seed and each thread's last operations.
 *
 * Meanwhile the parent kills a random client now and then (hmmd must
 * drop it within 10 s: the parent waits for that before it hands the
 * client's tensors on, since hmmd may still serve what the client sent
 * before it died) and starts another in its slot, runs hmmctl status,
 * clients and tensors (also as uid 65534, which must see only its own
 * uid's), and samples --metrics: host residency and pins within the
 * budget, each uid's pins within its quota.  At the end: hmmd alive, no
 * clients, nothing pinned, only the saved tensors the model expects
 * (persistent, no owner); SIGTERM exits 0; a restarted hmmd on the same
 * store gives each uid back every saved tensor byte-exact, and none
 * that the model says was freed or never saved; then it holds no tensor
 * and stops with 0 again, its log free of sanitizer reports.
 * Back-pressure waits, quota refusals and copy maps must have happened,
 * and no client that ran 3 s went without a map.
 *
 * HMM_STRESS_SEED=N repeats a run's choices (the seed is printed first;
 * the threads' interleaving still varies), HMM_STRESS_SECONDS=S runs
 * longer (default 20), HMM_STRESS_TRACE=FILE writes every operation of
 * every client there, HMM_STRESS_VERBOSE=1 has hmmd log every message.
 */
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "t.h"
#include "hmmd_t.h"
#include "prom.h"
#include "hmm.h"

#define CHUNK		(64u << 10)
#define BUDGET		(3u << 20)
#define QUOTA		(1u << 20)	/* --client-quota, and each hello's */
#define STORE_QUOTA	(1u << 20)	/* each client's store quota */
#define DEV_BUDGET	(256u << 10)
#define MAXSZ		(8 * CHUNK)	/* largest tensor */
#define MAXMAPS		6		/* live maps per client */

#define NSLOT		6		/* clients at once */
#define NGROUP		3		/* uids: 0, 65534, 65533 */
#define NPRIV		6		/* objects of a slot */
#define NSHARED		3		/* objects any client of a uid claims */
#define NOBJ		(NSLOT * NPRIV + NGROUP * NSHARED)

static const uid_t group_uid[NGROUP] = { 0, 65534, 65533 };

/* ---- the model, shared by every process of the test ------------------ */

enum { O_NONE, O_TEMP, O_SAVED, O_MAYBE };	/* MAYBE: saved or not */

/* One tensor name's expected contents.  Written by its holder only. */
struct obj {
	int state;		/* O_* */
	int holder;		/* pid whose context may hold it; 0 none */
	uint64_t size, gen;
	uint32_t dtype;
	unsigned ndim;
	int64_t shape[2];
	char name[24];
};

/* The calls a client made, by kind, for the report. */
enum { K_NEW, K_OPEN, K_FREE, K_HOSTMAP, K_DEVMAP, K_WRITE, K_UNMAP,
	K_MOVE, K_FLUSH, K_STATS, K_REOPEN, K_KINDS };
static const char *const kind_name[K_KINDS] = { "new", "open", "free",
	"host map", "device map", "write", "unmap", "prefetch/evict/"
	"writeback/wait", "flush", "stats", "reopen" };

/* What a client slot did, for the parent's report. */
struct slot_stat {
	long did[K_KINDS];
	long ops, refusals, enomem, edquot, ebusy, checked, adopted, mapped;
	long fails;		/* checks failed (the client then exits) */
};

struct model {
	volatile int stop;		/* set by the parent: finish now */
	struct obj obj[NOBJ];
	struct slot_stat st[NSLOT];
};

static struct model *m;
static uint8_t *shadow_base, *known_base;	/* NOBJ * MAXSZ each */

static uint8_t *shadow(int o) { return shadow_base + (size_t)o * MAXSZ; }
static uint8_t *known(int o) { return known_base + (size_t)o * MAXSZ; }
static int slot_group(int s) { return s / (NSLOT / NGROUP); }
static int obj_priv(int s, int i) { return s * NPRIV + i; }
static int obj_shared(int g, int j) { return NSLOT * NPRIV + g * NSHARED + j; }

static void model_init(void)
{
	size_t head = (sizeof(*m) + 4095) & ~4095ul;
	size_t n = head + 2 * (size_t)NOBJ * MAXSZ;
	uint8_t *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int s, i;

	if (p == MAP_FAILED)
		t_fail_all("mmap model: %s", strerror(errno));
	m = (struct model *)p;
	shadow_base = p + head;
	known_base = shadow_base + (size_t)NOBJ * MAXSZ;
	for (s = 0; s < NSLOT; s++)
		for (i = 0; i < NPRIV; i++)
			snprintf(m->obj[obj_priv(s, i)].name, 24, "st.s%d.%d",
				 s, i);
	for (s = 0; s < NGROUP; s++)
		for (i = 0; i < NSHARED; i++)
			snprintf(m->obj[obj_shared(s, i)].name, 24,
				 "st.g%d.%d", s, i);
}

/* The pattern of generation key at [off, off + len) into dst. */
static void pattern(uint8_t *dst, uint64_t key, uint64_t off, uint64_t len)
{
	uint64_t i = 0;

	while (i < len) {
		uint64_t a = off + i, v;
		uint64_t s = key ^ ((a >> 3) * 0xd6e8feb86659fd93ull);

		v = t_rand(&s);

		for (unsigned b = a & 7; b < 8 && i < len; b++, i++)
			dst[i] = (uint8_t)(v >> (8 * b));
	}
}

/* ---- a client: a process of NTHR threads on one context ---------------- */

#define NTHR		2

struct cmap {
	int obj, tier;
	uint64_t off, len;
	unsigned acc;
	uint8_t *ptr;
	uint8_t *kn;		/* write maps: known bytes of the range */
	uint64_t seq;
};

struct proc;

/* One thread of a client: the objects o with owns(w, o), its maps. */
struct worker {
	struct proc *p;
	int thr;
	uint64_t rng;
	struct cmap map[MAXMAPS];
	int nmap;
	uint64_t seq;
	long op;
	char log[16][112];	/* the latest operations, a ring */
};

/*
 * A client process.  lock: a worker holds it shared for each call, and
 * exclusively for what acts on the whole context (flush, close and
 * reopen), which also touches the other workers' maps.
 */
struct proc {
	int slot, group, serial;
	uint64_t seed;
	char sock[200];
	struct hmm *h;
	struct hmm_tensor *t[NOBJ];	/* what the context holds */
	pthread_rwlock_t lock;
	struct worker w[NTHR];
	struct slot_stat *st;
};

#define COUNT(w, f, n) __atomic_add_fetch(&(w)->p->st->f, (n), __ATOMIC_RELAXED)

static uint64_t rnd(struct worker *w, uint64_t n)
{
	return n ? t_rand(&w->rng) % n : 0;
}

static int trace_fd = -1;	/* $HMM_STRESS_TRACE: every operation */

static void __attribute__((format(printf, 2, 3)))
wlog(struct worker *w, const char *fmt, ...)
{
	char *line = w->log[w->op % 16];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(w->log[0]), fmt, ap);
	va_end(ap);
	if (trace_fd >= 0)
		dprintf(trace_fd, "#%d.%d %ld: %s\n", w->p->serial, w->thr,
			w->op, line);
}

/* A failed check: print it with what reproduces it, and stop. */
static void __attribute__((noreturn, format(printf, 2, 3)))
cfail(struct worker *w, const char *fmt, ...)
{
	struct proc *p = w->p;
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	COUNT(w, fails, 1);
	dprintf(1, "# FAIL client #%d (slot %d, uid %u, seed %#llx) thread %d "
		"op %ld: %s\n", p->serial, p->slot, group_uid[p->group],
		(unsigned long long)p->seed, w->thr, w->op, msg);
	for (int t = 0; t < NTHR; t++) {
		struct worker *x = &p->w[t];

		for (long i = x->op > 15 ? x->op - 15 : 0; i <= x->op; i++)
			if (x->log[i % 16][0])
				dprintf(1, "#   thread %d op %ld: %s\n", t, i,
					x->log[i % 16]);
	}
	_exit(1);
}

/* err is one hmm.h allows here: count it; its detail names obj. */
static void refused(struct worker *w, int o, int err, const char *call)
{
	const char *d = hmm_last_error();

	if (!d[0] || !strstr(d, m->obj[o].name))
		cfail(w, "%s of %s: %s, detail \"%s\" does not name it", call,
		      m->obj[o].name, hmm_strerror(err), d);
	COUNT(w, refusals, 1);
	if (err == -ENOMEM)
		COUNT(w, enomem, 1);
	else if (err == -EDQUOT)
		COUNT(w, edquot, 1);
	else if (err == -EBUSY)
		COUNT(w, ebusy, 1);
}

static void expect0(struct worker *w, int o, int err, const char *call)
{
	if (err)
		cfail(w, "%s of %s: %s (%s)", call, o < 0 ? "all" :
		      m->obj[o].name, hmm_strerror(err), hmm_last_error());
}

/* ptr holds obj o's bytes [off, off + len) wherever kn says known. */
static void check(struct worker *w, int o, const uint8_t *ptr, uint64_t off,
		  uint64_t len, const uint8_t *kn, const char *what)
{
	const uint8_t *want = shadow(o) + off;
	uint64_t i, bad = 0, first = 0;

	COUNT(w, checked, len);
	if (!memchr(kn, 0, len) && !memcmp(ptr, want, len))
		return;
	for (i = 0; i < len; i++)
		if (kn[i] && ptr[i] != want[i] && !bad++)
			first = i;
	if (!bad)
		return;
	cfail(w, "%s: %s [%llu, +%llu): %llu bytes differ, first at %llu: "
	      "got %02x want %02x (generation %llu)", what, m->obj[o].name,
	      (unsigned long long)off, (unsigned long long)len,
	      (unsigned long long)bad, (unsigned long long)(off + first),
	      ptr[first], want[first], (unsigned long long)m->obj[o].gen);
}

/* Write a new generation of obj o at [off, off + len) through ptr (the
 * map's pointer to byte off) and into the model. */
static void put(struct worker *w, int o, uint8_t *ptr, uint64_t off,
		uint64_t len)
{
	struct obj *ob = &m->obj[o];
	uint64_t key = ((uint64_t)w->p->serial << 40) ^ ((uint64_t)o << 32) ^
		       ++ob->gen;

	key = t_rand(&key);
	pattern(shadow(o) + off, key, off, len);
	memcpy(ptr, shadow(o) + off, len);
}

/* A random range of obj o: *len is the bytes, the return what to pass. */
static uint64_t range(struct worker *w, int o, uint64_t *off, uint64_t *len)
{
	uint64_t size = m->obj[o].size, max;

	switch (rnd(w, 6)) {
	case 0:
		*off = 0;
		break;
	case 1:
		*off = rnd(w, (size + CHUNK - 1) / CHUNK) * CHUNK;
		break;
	default:
		*off = rnd(w, size);
	}
	max = size - *off < 4 * CHUNK ? size - *off : 4 * CHUNK;
	switch (rnd(w, 5)) {
	case 0:
		if (size - *off <= 4 * CHUNK) {
			*len = size - *off;
			return HMM_ALL;
		}
		/* fall through */
	case 1:
		*len = 1 + rnd(w, max < 64 ? max : 64);
		break;
	default:
		*len = 1 + rnd(w, max);
	}
	return *len;
}

/* A write map's range overlaps no other map; a read map's no write map
 * (so what a range holds is one thing, copies or not). */
static int may_map(struct worker *w, int o, uint64_t off, uint64_t len,
		   unsigned acc)
{
	for (int i = 0; i < w->nmap; i++) {
		struct cmap *x = &w->map[i];

		if (x->obj == o && x->off < off + len &&
		    off < x->off + x->len &&
		    ((acc & ~HMM_READ) || (x->acc & ~HMM_READ)))
			return 0;
	}
	return 1;
}

static const char *acc_name(unsigned acc)
{
	return acc & HMM_DISCARD ? "DISCARD" : acc == HMM_READ ? "READ" :
	       acc == HMM_WRITE ? "WRITE" : "READ|WRITE";
}

/* Is obj o this worker's: of its slot or, shared, of its uid, and of
 * its thread? */
static int owns(struct worker *w, int o)
{
	struct proc *p = w->p;

	if (o < NSLOT * NPRIV)
		return o / NPRIV == p->slot && o % NPRIV % NTHR == w->thr;
	o -= NSLOT * NPRIV;
	return o / NSHARED == p->group && o % NSHARED % NTHR == w->thr;
}

/* A random tensor of this worker the context holds, or -1. */
static int held(struct worker *w)
{
	int o, n = 0, pick = -1;

	for (o = 0; o < NOBJ; o++)	/* another thread's are its own */
		if (owns(w, o) && w->p->t[o] && !rnd(w, ++n))
			pick = o;
	return pick;
}

static void op_map(struct worker *w)
{
	static const unsigned accs[] = { HMM_READ, HMM_READ, HMM_WRITE,
		HMM_READ | HMM_WRITE, HMM_DISCARD };
	int o = held(w), tier = rnd(w, 2) ? HMM_TIER_HOST : HMM_TIER_DEVICE;
	unsigned acc = accs[rnd(w, 5)];
	uint64_t off, len, arg;
	struct cmap *mp;
	uint8_t *kn = NULL;
	void *ptr;
	int r;

	if (o < 0 || w->nmap == MAXMAPS)
		return;
	arg = range(w, o, &off, &len);
	if (!may_map(w, o, off, len, acc))
		return;
	COUNT(w, did[tier ? K_HOSTMAP : K_DEVMAP], 1);
	wlog(w, "map %s [%llu, +%llu) %s %s", m->obj[o].name,
	     (unsigned long long)off, (unsigned long long)len, acc_name(acc),
	     tier ? "host" : "device");
	if (acc != HMM_READ) {	/* unknown until the unmap */
		kn = malloc(len);
		if (!kn)
			cfail(w, "out of memory");
		memcpy(kn, known(o) + off, len);
		memset(known(o) + off, 0, len);
	}
	r = hmm_map(w->p->t[o], off, arg, tier, acc, &ptr);
	if (r == -ENOMEM) {
		if (kn)
			memcpy(known(o) + off, kn, len);
		free(kn);
		refused(w, o, r, "map");
		return;
	}
	expect0(w, o, r, "map");
	COUNT(w, mapped, 1);
	mp = &w->map[w->nmap++];
	*mp = (struct cmap){ o, tier, off, len, acc, ptr, kn, ++w->seq };
	if (acc & HMM_DISCARD) {
		put(w, o, ptr, off, len);
		memset(kn, 1, len);
	} else {
		check(w, o, ptr, off, len, kn ? kn : known(o) + off, "map");
	}
}

/* Write a new generation into part of a live write map. */
static void op_write(struct worker *w)
{
	struct cmap *mp = w->nmap ? &w->map[rnd(w, w->nmap)] : NULL;
	uint64_t a, n;

	if (!mp || mp->acc == HMM_READ)
		return;
	a = rnd(w, mp->len);
	n = 1 + rnd(w, mp->len - a);
	COUNT(w, did[K_WRITE], 1);
	wlog(w, "write %s [%llu, +%llu) through the map at %llu",
	     m->obj[mp->obj].name, (unsigned long long)(mp->off + a),
	     (unsigned long long)n, (unsigned long long)mp->off);
	put(w, mp->obj, mp->ptr + a, mp->off + a, n);
	memset(mp->kn + a, 1, n);
}

/* End map i: hmm_unmap ends, of the maps at its pointer, the one that
 * pins least (hmm.h): the shortest, read-only first, the latest. */
static void unmap_at(struct worker *w, int i)
{
	struct cmap *mp = &w->map[i], *v = mp;
	int o = mp->obj, r;

	for (int j = 0; j < w->nmap; j++) {
		struct cmap *x = &w->map[j];
		int xr = x->acc == HMM_READ, vr = v->acc == HMM_READ;

		if (x->obj != o || x->tier != mp->tier || x->ptr != mp->ptr)
			continue;
		if (x->len < v->len || (x->len == v->len &&
		    (xr > vr || (xr == vr && x->seq > v->seq))))
			v = x;
	}
	COUNT(w, did[K_UNMAP], 1);
	wlog(w, "unmap %s [%llu, +%llu) %s %s", m->obj[o].name,
	     (unsigned long long)v->off, (unsigned long long)v->len,
	     acc_name(v->acc), v->tier ? "host" : "device");
	check(w, o, v->ptr, v->off, v->len, v->kn ? v->kn : known(o) + v->off,
	      "before unmap");
	r = hmm_unmap(w->p->t[o], v->ptr);
	expect0(w, o, r, "unmap");
	if (v->kn) {
		memcpy(known(o) + v->off, v->kn, v->len);
		free(v->kn);
	}
	*v = w->map[--w->nmap];
}

static void op_unmap(struct worker *w)
{
	if (w->nmap)
		unmap_at(w, rnd(w, w->nmap));
}

static void op_recheck(struct worker *w)
{
	struct cmap *mp = w->nmap ? &w->map[rnd(w, w->nmap)] : NULL;

	if (!mp)
		return;
	wlog(w, "recheck %s [%llu, +%llu)", m->obj[mp->obj].name,
	     (unsigned long long)mp->off, (unsigned long long)mp->len);
	check(w, mp->obj, mp->ptr, mp->off, mp->len,
	      mp->kn ? mp->kn : known(mp->obj) + mp->off, "held map");
}

static int maps_of(struct worker *w, int o)
{
	int n = 0;

	for (int i = 0; i < w->nmap; i++)
		n += w->map[i].obj == o;
	return n;
}

/* Free held obj o: with a map held (busy) it must be -EBUSY, nothing
 * freed; else its maps are ended first. */
static void free_obj(struct worker *w, int o, int busy)
{
	struct obj *ob = &m->obj[o];
	int r, i;

	if (maps_of(w, o) && busy) {
		wlog(w, "free %s with a map held", ob->name);
		r = hmm_tensor_free(w->p->t[o]);
		if (r != -EBUSY)
			cfail(w, "free of %s with a map held: %s, want EBUSY",
			      ob->name, hmm_strerror(r));
		refused(w, o, r, "free");
		return;
	}
	for (i = w->nmap - 1; i >= 0; i--)
		if (w->map[i].obj == o)
			unmap_at(w, i), i = w->nmap;
	COUNT(w, did[K_FREE], 1);
	wlog(w, "free %s (%s)", ob->name, ob->state == O_TEMP ? "temp" :
	     "saved");
	if (ob->state != O_TEMP)
		ob->state = O_MAYBE;	/* deleted, or not */
	r = hmm_tensor_free(w->p->t[o]);
	expect0(w, o, r, "free");
	w->p->t[o] = NULL;
	ob->state = O_NONE;
	if (o >= NSLOT * NPRIV)
		__atomic_store_n(&ob->holder, 0, __ATOMIC_SEQ_CST);
}

static void op_free(struct worker *w)
{
	int o = held(w);

	if (o >= 0)
		free_obj(w, o, rnd(w, 3) == 0);
}

/* A shared object of the uid is this process's to use once it claims
 * it: holder 0 -> its pid.  A slot's own are its client's. */
static int claim(int o)
{
	int zero = 0;

	if (m->obj[o].holder == getpid())
		return 1;
	return __atomic_compare_exchange_n(&m->obj[o].holder, &zero, getpid(),
					   0, __ATOMIC_SEQ_CST,
					   __ATOMIC_SEQ_CST);
}

static void unclaim(struct proc *p, int o)
{
	if (o >= NSLOT * NPRIV && !p->t[o] && m->obj[o].state == O_NONE)
		__atomic_store_n(&m->obj[o].holder, 0, __ATOMIC_SEQ_CST);
}

/* Check a held tensor's bytes against the model, two chunks at a time. */
static void check_all(struct worker *w, int o, const char *what)
{
	uint64_t off, n, size = m->obj[o].size;
	void *ptr;
	int r;

	for (off = 0; off < size; off += n) {
		n = size - off < 2 * CHUNK ? size - off : 2 * CHUNK;
		r = hmm_map(w->p->t[o], off, n, HMM_TIER_HOST, HMM_READ, &ptr);
		if (r == -ENOMEM) {	/* the uid's quota is full */
			refused(w, o, r, "map");
			return;
		}
		expect0(w, o, r, "map");
		check(w, o, ptr, off, n, known(o) + off, what);
		expect0(w, o, hmm_unmap(w->p->t[o], ptr), "unmap");
	}
}

/* Open saved obj o (or maybe saved): it must have its shape and bytes. */
static void adopt(struct worker *w, int o)
{
	struct obj *ob = &m->obj[o];
	struct hmm_tensor *t;
	int r;

	COUNT(w, did[K_OPEN], 1);
	wlog(w, "open %s (%s)", ob->name, ob->state == O_SAVED ? "saved" :
	     "maybe saved");
	r = hmm_tensor_open(w->p->h, ob->name, &t);
	if (r == -ENOENT && ob->state == O_MAYBE) {
		ob->state = O_NONE;
		unclaim(w->p, o);
		return;
	}
	expect0(w, o, r, "tensor_open");
	if (hmm_tensor_bytes(t) != ob->size ||
	    hmm_tensor_dtype(t) != ob->dtype ||
	    hmm_tensor_ndim(t) != ob->ndim ||
	    memcmp(hmm_tensor_shape(t), ob->shape, ob->ndim * 8))
		cfail(w, "opened %s: %llu bytes dtype %u, want %llu dtype %u "
		      "(or another shape)", ob->name,
		      (unsigned long long)hmm_tensor_bytes(t),
		      hmm_tensor_dtype(t), (unsigned long long)ob->size,
		      ob->dtype);
	w->p->t[o] = t;
	ob->state = O_SAVED;
	COUNT(w, adopted, 1);
	check_all(w, o, "saved tensor opened");
}

static void new_obj(struct worker *w, int o)
{
	static const uint32_t dts[] = { HMM_DTYPE_U8, HMM_DTYPE_F32,
		HMM_DTYPE_F64, HMM_DTYPE_BF16 };
	struct obj *ob = &m->obj[o];
	uint32_t dt = dts[rnd(w, 4)];
	uint64_t es = hmm_dtype_size(dt), bytes, n;
	int64_t shape[2];
	unsigned nd;
	int r;

	switch (rnd(w, 4)) {
	case 0:
		bytes = 1 + rnd(w, CHUNK);		/* sub-chunk */
		break;
	case 1:
		bytes = CHUNK * (1 + rnd(w, MAXSZ / CHUNK));	/* whole */
		break;
	default:
		bytes = 1 + rnd(w, MAXSZ);
	}
	n = bytes / es ? bytes / es : 1;
	nd = 1 + (n % 3 == 0 && rnd(w, 2));
	shape[0] = nd == 2 ? 3 : (int64_t)n;
	shape[1] = (int64_t)n / 3;
	COUNT(w, did[K_NEW], 1);
	wlog(w, "new %s %llu x %llu bytes", ob->name, (unsigned long long)n,
	     (unsigned long long)es);
	r = hmm_tensor_new(w->p->h, ob->name, dt, nd, shape, &w->p->t[o]);
	if (r == -EDQUOT || r == -ENOMEM) {
		w->p->t[o] = NULL;
		refused(w, o, r, "tensor_new");
		unclaim(w->p, o);
		return;
	}
	expect0(w, o, r, "tensor_new");
	ob->size = n * es;
	ob->dtype = dt;
	ob->ndim = nd;
	memcpy(ob->shape, shape, sizeof(shape));
	ob->state = O_TEMP;
	memset(shadow(o), 0, ob->size);		/* contents zero */
	memset(known(o), 1, ob->size);
}

/* Make or open one of this worker's objects: its slot's, or a shared
 * one of the uid it claims. */
static void op_new(struct worker *w)
{
	int o;

	do {
		o = rnd(w, 2) ? obj_priv(w->p->slot, rnd(w, NPRIV)) :
		    obj_shared(w->p->group, rnd(w, NSHARED));
	} while (!owns(w, o));
	if (w->p->t[o] || !claim(o))
		return;
	if (m->obj[o].state == O_NONE)
		new_obj(w, o);
	else
		adopt(w, o);
}

static void op_move(struct worker *w)
{
	static const char *const names[] = { "prefetch", "evict", "writeback",
		"wait" };
	int o = held(w), r, tier, what = rnd(w, 4);
	uint64_t off, len, arg;

	if (o < 0)
		return;
	arg = range(w, o, &off, &len);
	tier = rnd(w, 3) ? HMM_TIER_HOST : HMM_TIER_DEVICE;
	COUNT(w, did[K_MOVE], 1);
	wlog(w, "%s %s [%llu, +%llu) %s", names[what], m->obj[o].name,
	     (unsigned long long)off, (unsigned long long)len,
	     tier ? "host" : "device");
	switch (what) {
	case 0:
		r = hmm_prefetch(w->p->t[o], off, arg, tier);
		break;
	case 1:
		r = hmm_evict(w->p->t[o], off, arg, tier);
		break;
	case 2:
		r = hmm_writeback(w->p->t[o], off, arg);
		break;
	default:
		r = hmm_wait(w->p->h, rnd(w, 2) ? w->p->t[o] : NULL);
	}
	expect0(w, o, r, names[what]);
}

/* Every tensor the context holds becomes saved (lock held exclusively). */
static void op_flush(struct worker *w)
{
	struct proc *p = w->p;
	int o, r;

	COUNT(w, did[K_FLUSH], 1);
	wlog(w, "flush");
	for (o = 0; o < NOBJ; o++)
		if (p->t[o] && m->obj[o].state == O_TEMP)
			m->obj[o].state = O_MAYBE;
	r = hmm_flush(p->h);
	expect0(w, -1, r, "flush");
	for (o = 0; o < NOBJ; o++)
		if (p->t[o])
			m->obj[o].state = O_SAVED;
}

/* Residency of a tensor and the engine's stats within their bounds. */
static void op_stats(struct worker *w)
{
	struct hmm_tier_stats *ht;
	uint64_t res[HMM_TIERS], cap;
	struct hmm_stats st;
	int o = held(w), r;

	COUNT(w, did[K_STATS], 1);
	wlog(w, "stats%s%s", o < 0 ? "" : ", residency of ",
	     o < 0 ? "" : m->obj[o].name);
	expect0(w, -1, hmm_stats(w->p->h, &st), "stats");
	ht = &st.tier[HMM_TIER_HOST];
	if (ht->resident > ht->capacity || ht->pinned > ht->capacity ||
	    ht->capacity != BUDGET)
		cfail(w, "host tier: resident %llu pinned %llu capacity %llu "
		      "(budget %u)", (unsigned long long)ht->resident,
		      (unsigned long long)ht->pinned,
		      (unsigned long long)ht->capacity, BUDGET);
	if (o < 0)
		return;
	r = hmm_tensor_residency(w->p->t[o], res);
	expect0(w, o, r, "residency");
	cap = (m->obj[o].size + CHUNK - 1) / CHUNK * CHUNK;
	if (res[HMM_TIER_HOST] > cap || res[HMM_TIER_STORE] > cap ||
	    res[HMM_TIER_DEVICE] > cap)
		cfail(w, "residency of %s (%llu bytes): device %llu host %llu "
		      "store %llu", m->obj[o].name,
		      (unsigned long long)m->obj[o].size,
		      (unsigned long long)res[0], (unsigned long long)res[1],
		      (unsigned long long)res[2]);
}

/* Open the context and the slot's saved tensors (lock held exclusively,
 * or no other thread yet). */
static void ctx_open(struct worker *w)
{
	struct proc *p = w->p;
	struct hmm_config cfg;
	int o, r;

	if (t_hmmd_config(0, p->sock, QUOTA, CHUNK, &cfg))
		cfail(w, "config");
	cfg.store_size = STORE_QUOTA;
	cfg.device = "sim";
	cfg.device_budget = DEV_BUDGET;
	cfg.wait_ms = 200;
	r = hmm_open(&cfg, &p->h);
	if (r)
		cfail(w, "hmm_open: %s (%s)", hmm_strerror(r),
		      hmm_last_error());
	for (o = 0; o < NOBJ; o++)
		if (o < NSLOT * NPRIV && o / NPRIV == p->slot &&
		    (m->obj[o].state == O_SAVED || m->obj[o].state == O_MAYBE))
			adopt(w, o);
}

/*
 * Close the context with whatever is still mapped (lock held
 * exclusively).  What its maps wrote stays: a saved tensor has its bytes
 * as its last holder left them (libhmm(3)); a device map's are copied
 * back at the close, a host map's are the tensor's own pages, or a
 * copy's, copied back when hmmd ends the map at the hang-up.
 */
static void ctx_close(struct worker *w)
{
	struct proc *p = w->p;
	int o, held_maps = 0;

	for (int t = 0; t < NTHR; t++)
		held_maps += p->w[t].nmap;
	COUNT(w, did[K_REOPEN], 1);
	wlog(w, "close with %d maps held", held_maps);
	for (int t = 0; t < NTHR; t++) {
		struct worker *x = &p->w[t];

		while (x->nmap) {
			struct cmap *mp = &x->map[--x->nmap];

			if (mp->kn)
				memcpy(known(mp->obj) + mp->off, mp->kn,
				       mp->len);
			free(mp->kn);
		}
	}
	hmm_close(p->h);
	p->h = NULL;
	for (o = 0; o < NOBJ; o++) {
		if (!p->t[o])
			continue;
		p->t[o] = NULL;
		if (m->obj[o].state == O_TEMP)
			m->obj[o].state = O_NONE;
		if (o >= NSLOT * NPRIV)	/* nobody holds it now */
			__atomic_store_n(&m->obj[o].holder, 0,
					 __ATOMIC_SEQ_CST);
	}
}

static void op_reopen(struct worker *w)
{
	ctx_close(w);
	ctx_open(w);
}

/* The operations and their weights (per mille).  A device map is every
 * other map: a DISCARD one refused for want of device room wiped its
 * range in hmmd, found once they were this many. */
static void (*const ops[])(struct worker *) = { op_new, op_free, op_map,
	op_write, op_unmap, op_recheck, op_move, op_stats, op_flush,
	op_reopen };
static const unsigned weight[] = { 100, 60, 300, 110, 170, 50, 70, 40, 50,
	50 };

/* One operation, chosen by weight; flush and reopen act on the whole
 * context, so hold the lock exclusively. */
static void step(struct worker *w)
{
	unsigned r = rnd(w, 1000), k = 0;
	int whole;

	while (r >= weight[k])
		r -= weight[k++];
	whole = ops[k] == op_flush || ops[k] == op_reopen;
	COUNT(w, ops, 1);
	if (whole)
		pthread_rwlock_wrlock(&w->p->lock);
	else
		pthread_rwlock_rdlock(&w->p->lock);
	w->log[w->op % 16][0] = 0;
	ops[k](w);
	pthread_rwlock_unlock(&w->p->lock);
}

static void *worker_run(void *arg)
{
	struct worker *w = arg;

	for (w->op = 1; !m->stop; w->op++)
		step(w);
	return NULL;
}

static int client_main(int slot, int serial, uint64_t seed, const char *sock)
{
	struct proc *p = calloc(1, sizeof(*p));
	pthread_rwlockattr_t ra;
	pid_t parent = getppid();
	pthread_t th[NTHR];

	if (!p)
		return 2;
	p->slot = slot;
	p->group = slot_group(slot);
	p->serial = serial;
	p->seed = seed;
	p->st = &m->st[slot];
	snprintf(p->sock, sizeof(p->sock), "%s", sock);
	for (int t = 0; t < NTHR; t++) {
		p->w[t].p = p;
		p->w[t].thr = t;
		p->w[t].rng = seed + t;
	}
	pthread_rwlockattr_init(&ra);	/* a flush is not starved */
	pthread_rwlockattr_setkind_np(&ra,
		PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&p->lock, &ra);
	if (p->group && t_hmmd_become(group_uid[p->group], 65534, p->sock))
		return 2;
	/* after setuid, which clears it */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
		return 2;
	for (int i = 0; i < NPRIV; i++)
		m->obj[obj_priv(slot, i)].holder = getpid();
	ctx_open(&p->w[0]);
	for (int t = 1; t < NTHR; t++)
		if (pthread_create(&th[t], NULL, worker_run, &p->w[t]))
			return 2;
	worker_run(&p->w[0]);
	for (int t = 1; t < NTHR; t++)
		pthread_join(th[t], NULL);
	/* the end: unmap in random order, perhaps flush, close */
	for (int t = 0; t < NTHR; t++)
		while (p->w[t].nmap)
			op_unmap(&p->w[t]);
	if (rnd(&p->w[0], 2))
		op_flush(&p->w[0]);
	ctx_close(&p->w[0]);
	return 0;
}

/* ---- the parent ------------------------------------------------------- */

static char hmmd[4096], hmmctl[4096], dir[4096], sock[200], store[4200];
static char logf[4200], port[32];
static pid_t hmmd_pid, cl_pid[NSLOT], ctl_pid;
static int cl_serial[NSLOT];
static double cl_start[NSLOT];
static uint64_t base_seed;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Every exit path: no client, hmmctl or hmmd outlives the test. */
static void kill_all(void)
{
	for (int s = 0; s < NSLOT; s++)
		if (cl_pid[s] > 0)
			kill(cl_pid[s], SIGKILL);
	if (ctl_pid > 0)
		kill(ctl_pid, SIGKILL);
	if (hmmd_pid > 0)
		kill(hmmd_pid, SIGKILL);
}

static void cleanup(void)
{
	int st;

	kill_all();
	for (int s = 0; s < NSLOT; s++)
		if (cl_pid[s] > 0)
			waitpid(cl_pid[s], &st, 0);
	if (ctl_pid > 0)
		waitpid(ctl_pid, &st, 0);
	if (hmmd_pid > 0)
		waitpid(hmmd_pid, &st, 0);
}

static void watch_fired(int sig)
{
	kill_all();
	t_watch_fired_(sig);
}

/* SIGTERM, SIGINT, SIGHUP (tests/run's timeout): nothing left behind. */
static void stopped(int sig)
{
	kill_all();
	t_tmpdir_rm_();
	_exit(128 + sig);
}

static pid_t start_hmmd(void)
{
	char *argv[] = { hmmd, "--socket", sock, "--store", store,
			 "--store-size", "96M", "--host-budget", "3M",
			 "--client-quota", "1M", "--chunk", "64K",
			 "--wait-ms", "300", "--metrics", port, "--group",
			 "nogroup", "--module", "none", NULL, NULL };

	if (getenv("HMM_STRESS_VERBOSE"))	/* hmmd logs every message */
		argv[sizeof(argv) / sizeof(*argv) - 2] = "-v";

	t_free_port(port, sizeof(port));
	unlink(sock);
	hmmd_pid = t_hmmd_spawn(hmmd, argv, logf, 0, NULL);
	t_hmmd_wait_listen(hmmd_pid, sock, 20, logf);
	return hmmd_pid;
}

/* SIGTERM hmmd; its exit status (-1: still running after 30 s). */
static int stop_hmmd(void)
{
	double t0 = now();
	int st;

	kill(hmmd_pid, SIGTERM);
	while (now() - t0 < 30) {
		if (waitpid(hmmd_pid, &st, WNOHANG) == hmmd_pid) {
			hmmd_pid = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st) :
			       128 + WTERMSIG(st);
		}
		usleep(20000);
	}
	return -1;
}

static uint64_t client_seed(int serial)
{
	uint64_t s = base_seed ^ ((uint64_t)serial * 0x9e3779b97f4a7c15ull);

	return t_rand(&s);
}

static void start_client(int slot, int serial)
{
	pid_t pid;

	memset(&m->st[slot], 0, sizeof(m->st[slot]));
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		t_fail_all("fork: %s", strerror(errno));
	if (pid == 0) {
		signal(SIGTERM, SIG_DFL);	/* the parent's are its own */
		signal(SIGINT, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		_exit(client_main(slot, serial, client_seed(serial), sock));
	}
	cl_pid[slot] = pid;
	cl_serial[slot] = serial;
	cl_start[slot] = now();
}

/* hmmctl ARGS (as root) into out (lines kept): its exit status. */
static int ctl(const char *args, char *out, size_t n)
{
	char cmd[9000];
	size_t got = 0;
	FILE *f;
	int st;

	snprintf(cmd, sizeof(cmd), "%s --socket %s %s 2>&1", hmmctl, sock,
		 args);
	out[0] = 0;
	f = popen(cmd, "r");
	if (!f)
		return -1;
	got = fread(out, 1, n - 1, f);
	out[got] = 0;
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Does `hmmctl clients` list a client of pid? (-1: hmmctl failed) */
static int client_listed(pid_t pid)
{
	static char out[1 << 16];
	char *line;
	unsigned long id, p;

	if (ctl("clients", out, sizeof(out)))
		return -1;
	for (line = strtok(out, "\n"); line; line = strtok(NULL, "\n"))
		if (sscanf(line, "%lu %lu", &id, &p) == 2 && p == (unsigned)pid)
			return 1;
	return 0;
}

/* Totals over the run, for the report. */
static struct {
	int clients, kills, bad_clients, ctl_runs, ctl_bad, samples;
	int sample_bad, long_lived, starved;
	long ops, refusals, enomem, edquot, ebusy, adopted, did[K_KINDS];
	double checked;
	double drop_max;
	char ctl_why[512], sample_why[512];
} tot;

/*
 * A client of slot ended (st: its wait status; killed: by us).  Wait
 * until hmmd no longer lists it (it may still be serving requests the
 * client sent before it died), then free what it held in the model:
 * its temporaries are gone, its claims open.
 */
static void reaped(int slot, int st, int killed)
{
	struct slot_stat *ss = &m->st[slot];
	pid_t pid = cl_pid[slot];
	double t0 = now();
	int listed, ok;

	while ((listed = client_listed(pid)) == 1 && now() - t0 < 10)
		usleep(20000);
	if (now() - t0 > tot.drop_max)
		tot.drop_max = now() - t0;
	for (int o = 0; o < NOBJ; o++) {
		struct obj *ob = &m->obj[o];

		if (ob->holder != pid)
			continue;
		if (ob->state == O_TEMP)
			ob->state = O_NONE;
		ob->holder = 0;
	}
	cl_pid[slot] = 0;
	if (now() - cl_start[slot] >= 3) {	/* fairness: some maps got in */
		tot.long_lived++;
		if (!ss->mapped && !tot.starved++)
			t_diag("client #%d ran %.1f s without a map",
			       cl_serial[slot], now() - cl_start[slot]);
	}
	ok = !ss->fails && (killed ? WIFSIGNALED(st) && WTERMSIG(st) ==
			    SIGKILL : WIFEXITED(st) && !WEXITSTATUS(st));
	tot.clients++;
	tot.ops += ss->ops;
	tot.refusals += ss->refusals;
	tot.enomem += ss->enomem;
	tot.edquot += ss->edquot;
	tot.ebusy += ss->ebusy;
	tot.adopted += ss->adopted;
	tot.checked += ss->checked;
	for (int k = 0; k < K_KINDS; k++)
		tot.did[k] += ss->did[k];
	if (!ok || listed) {
		tot.bad_clients++;
		t_ok(0, "client #%d (slot %d, uid %u, seed %#llx): %s after "
		     "%ld ops, %ld failed checks; hmmd %s it",
		     cl_serial[slot], slot, group_uid[slot_group(slot)],
		     (unsigned long long)client_seed(cl_serial[slot]),
		     killed ? "killed" : WIFEXITED(st) ? "exited" : "died",
		     ss->ops, ss->fails, listed == 1 ? "still lists" :
		     listed < 0 ? "cannot list" : "dropped");
		if (!killed)
			t_diag("wait status %#x", st);
	}
}

/* hmmctl as uid 65534, beside the socket: output to dir/ctl.out. */
static pid_t ctl_async(const char *what, int as_nobody)
{
	char out[4200];
	pid_t pid;
	int fd;

	snprintf(out, sizeof(out), "%s/ctl.out", dir);
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		t_fail_all("fork: %s", strerror(errno));
	if (pid)
		return pid;
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
		_exit(126);
	if (as_nobody) {
		char s[200];

		snprintf(s, sizeof(s), "%s", sock);
		if (t_hmmd_become(65534, 65534, s))
			_exit(126);
		execl("./hmmctl", "hmmctl", "--socket", s, what, NULL);
	} else {
		execl(hmmctl, "hmmctl", "--socket", sock, what, NULL);
	}
	_exit(127);
}

/* An hmmctl run ended: exit 0, and as 65534 only uid 65534's rows. */
static void ctl_done(int st, const char *what, int as_nobody)
{
	char path[4200], line[512];
	unsigned long a, b, uid;
	FILE *f;
	int bad = !WIFEXITED(st) || WEXITSTATUS(st);

	snprintf(path, sizeof(path), "%s/ctl.out", dir);
	f = fopen(path, "r");
	while (f && !bad && fgets(line, sizeof(line), f)) {
		if (!as_nobody || !strcmp(what, "status") ||
		    sscanf(line, "%lu %lu %lu", &a, &b, &uid) != 3)
			continue;
		if (uid != 65534) {
			bad = 1;
			snprintf(tot.ctl_why, sizeof(tot.ctl_why), "hmmctl %s "
				 "as 65534 shows uid %lu: %.200s", what, uid,
				 line);
		}
	}
	if (f)
		fclose(f);
	tot.ctl_runs++;
	if (bad && !tot.ctl_bad++ && !tot.ctl_why[0])
		snprintf(tot.ctl_why, sizeof(tot.ctl_why), "hmmctl %s%s: "
			 "wait status %#x", what, as_nobody ? " as 65534" : "",
			 st);
}

static const char *metrics(void)
{
	static char text[1 << 17];
	const char *body = prom_fetch(atoi(strrchr(port, ':') + 1), text,
				      sizeof(text));

	return body ? body : "";
}

/* One sample of --metrics: residency and pins within the budget, each
 * uid's pins (root: each client's) within its quota.  0 or a reason. */
static const char *sample(char *why, size_t n)
{
	const char *t = metrics(), *p;
	double cap = prom_value(t, "hmm_tier_capacity_bytes{tier=\"host\"}");
	double res = prom_value(t, "hmm_tier_resident_bytes{tier=\"host\"}");
	double pin = prom_value(t, "hmmd_pinned_bytes");
	unsigned long long id, v, uq[NGROUP] = { 0 }, up[NGROUP] = { 0 };
	unsigned uid;

	if (cap != BUDGET || res < 0 || pin < 0)
		return snprintf(why, n, "no metrics (capacity %.0f)", cap), why;
	if (res > cap || pin > cap)
		return snprintf(why, n, "host resident %.0f pinned %.0f past "
				"the budget %.0f", res, pin, cap), why;
	for (p = t; (p = strstr(p, "\nhmmd_client_")); p++) {
		int g, q = !strncmp(p + 13, "quota", 5);

		if (sscanf(p, q ? "\nhmmd_client_quota_bytes{client=\"%llu\","
			   "uid=\"%u\"} %llu" :
			   "\nhmmd_client_pinned_bytes{client=\"%llu\","
			   "uid=\"%u\"} %llu", &id, &uid, &v) != 3)
			continue;
		for (g = 0; g < NGROUP && group_uid[g] != uid; g++)
			;
		if (g == NGROUP)
			continue;	/* hmmctl's */
		if (q) {
			uq[g] = v;
		} else if (g == 0 && v > QUOTA) {
			return snprintf(why, n, "root's client %llu pins %llu, "
					"quota %u", id, v, QUOTA), why;
		} else {
			up[g] += v;
		}
	}
	for (int g = 1; g < NGROUP; g++)
		if (up[g] > uq[g] || uq[g] > QUOTA)
			return snprintf(why, n, "uid %u pins %llu, quota %llu",
					group_uid[g], up[g], uq[g]), why;
	return NULL;
}

static void run(double secs, uint64_t *prng)
{
	static const char *const ctls[] = { "status", "clients", "tensors" };
	double t0 = now(), next_kill, next_ctl = t0, next_sample = t0;
	int serial = 0, st, ctl_what = 0, ctl_nobody = 0;
	char why[512];
	pid_t pid;

	for (int s = 0; s < NSLOT; s++)
		start_client(s, ++serial);
	next_kill = t0 + 0.5 + (double)(t_rand(prng) % 2000) / 1000;
	while (now() - t0 < secs) {
		while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
			if (pid == hmmd_pid) {
				hmmd_pid = 0;
				t_fail_all("hmmd died (wait status %#x, seed "
					   "%llu; log %s)", st,
					   (unsigned long long)base_seed, logf);
			}
			if (pid == ctl_pid) {
				ctl_pid = 0;
				ctl_done(st, ctls[ctl_what], ctl_nobody);
				continue;
			}
			for (int s = 0; s < NSLOT; s++)
				if (cl_pid[s] == pid) {
					reaped(s, st, 0);
					start_client(s, ++serial);
				}
		}
		if (now() >= next_kill) {
			int s = t_rand(prng) % NSLOT;

			if (cl_pid[s] > 0) {
				if (trace_fd >= 0)
					dprintf(trace_fd, "#%d killed\n",
						cl_serial[s]);
				kill(cl_pid[s], SIGKILL);
				waitpid(cl_pid[s], &st, 0);
				tot.kills++;
				reaped(s, st, 1);
				start_client(s, ++serial);
			}
			next_kill = now() + 0.3 + (double)(t_rand(prng) %
							    2000) / 1000;
		}
		if (!ctl_pid && now() >= next_ctl) {
			ctl_what = t_rand(prng) % 3;
			ctl_nobody = t_rand(prng) % 3 == 0;
			ctl_pid = ctl_async(ctls[ctl_what], ctl_nobody);
			next_ctl = now() + 0.2;
		}
		if (now() >= next_sample) {
			tot.samples++;
			if (sample(why, sizeof(why)) && !tot.sample_bad++)
				snprintf(tot.sample_why, sizeof(tot.sample_why),
					 "%s", why);
			next_sample = now() + 0.1;
		}
		usleep(20000);
	}
}

/* Every client told to finish, and each one's end checked. */
static void drain(void)
{
	double t0 = now();
	int st, left;
	pid_t pid;

	m->stop = 1;
	do {
		left = 0;
		for (int s = 0; s < NSLOT; s++) {
			if (cl_pid[s] <= 0)
				continue;
			pid = waitpid(cl_pid[s], &st, WNOHANG);
			if (pid == cl_pid[s])
				reaped(s, st, 0);
			else
				left++;
		}
		usleep(20000);
	} while (left && now() - t0 < 60);
	if (ctl_pid > 0 && waitpid(ctl_pid, &st, 0) == ctl_pid)
		ctl_pid = 0;
	t_ok(!left, "every client finished within 60 s of being told (%d "
	     "left)", left);
}

/* ---- the end: what hmmd holds, and a restart -------------------------- */

/* How many objects are saved for sure, and maybe. */
static void expected(int *saved, int *maybe)
{
	*saved = *maybe = 0;
	for (int o = 0; o < NOBJ; o++) {
		*saved += m->obj[o].state == O_SAVED;
		*maybe += m->obj[o].state == O_MAYBE;
	}
}

static int obj_named(const char *name)
{
	const char *slash = strchr(name, '/');

	if (slash)	/* "uUID/NAME" */
		name = slash + 1;
	for (int o = 0; o < NOBJ; o++)
		if (!strcmp(m->obj[o].name, name))
			return o;
	return -1;
}

/* hmmctl tensors: each one persistent, no owner, saved in the model. */
static void check_tensors(const char *when, int want_none)
{
	static char out[1 << 16];
	char name[64], flags[64], *line;
	unsigned long long id, owner, uid, bytes;
	int rows = 0, bad = 0, saved, maybe, o;

	expected(&saved, &maybe);
	t_eq(ctl("tensors", out, sizeof(out)), 0, "%s: hmmctl tensors", when);
	for (line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		if (sscanf(line, "%llu %llu %llu %63s %llu %*u %*u %*u %*u "
			   "%63s", &id, &owner, &uid, name, &bytes,
			   flags) != 6)
			continue;
		rows++;
		o = obj_named(name);
		if (owner || strncmp(flags, "persist", 7) || o < 0 ||
		    want_none || m->obj[o].state == O_NONE ||
		    m->obj[o].size != bytes) {
			if (!bad++)
				t_diag("unexpected: %s (model: %s)", line,
				       o < 0 ? "no such object" :
				       m->obj[o].state == O_NONE ? "not saved" :
				       "saved");
		}
	}
	t_ok(!bad && (want_none ? rows == 0 :
		      rows >= saved && rows <= saved + maybe),
	     "%s: %d tensors, all saved, none owned (model: %d saved, %d "
	     "maybe)", when, rows, want_none ? 0 : saved, want_none ? 0 :
	     maybe);
}

/* In a child as group g's uid: open every object of the uid by name;
 * saved ones must be there with their bytes, freed ones not; delete
 * them.  Writes "opened bytes | first failure". */
static int job_verify(int fd, void *arg)
{
	int g = *(int *)arg, opened = 0, r;
	struct proc p = { .slot = -1, .group = g };
	struct worker *w = &p.w[0];
	struct slot_stat ss = { 0 };
	struct hmm_config cfg;
	struct hmm_tensor *t;

	snprintf(p.sock, sizeof(p.sock), "%s", sock);
	p.st = &ss;
	w->p = &p;
	if (g && t_hmmd_become(group_uid[g], 65534, p.sock))
		return 2;
	if (t_hmmd_config(0, p.sock, QUOTA, CHUNK, &cfg) ||
	    hmm_open(&cfg, &p.h))
		return 3;
	for (int o = 0; o < NOBJ; o++) {
		struct obj *ob = &m->obj[o];

		if (o < NSLOT * NPRIV ? slot_group(o / NPRIV) != g :
		    (o - NSLOT * NPRIV) / NSHARED != g)
			continue;
		if (ob->state == O_NONE) {
			r = hmm_tensor_open(p.h, ob->name, &t);
			if (r != -ENOENT) {
				dprintf(fd, "%d | %s: open %d, want ENOENT "
					"(freed or never saved)\n", opened,
					ob->name, r);
				return 0;
			}
			continue;
		}
		adopt(w, o);	/* a failure prints and exits 1 */
		if (p.t[o]) {
			opened++;
			free_obj(w, o, 0);
		}
	}
	hmm_close(p.h);
	if (ss.refusals)
		dprintf(fd, "%d | %ld refusals on an idle hmmd\n", opened,
			ss.refusals);
	else
		dprintf(fd, "%d %.0f | ok\n", opened, (double)ss.checked);
	return 0;
}

static void verify_saved(void)
{
	char line[1024];
	int saved, maybe, sum = 0, n;

	expected(&saved, &maybe);
	for (int g = 0; g < NGROUP; g++) {
		int r = t_child(job_verify, &g, line, sizeof(line));

		t_ok(r == 0 && strstr(line, "| ok"), "uid %u: every saved "
		     "tensor back byte-exact after the restart, every freed "
		     "one gone, all deleted: %s (exit %d)", group_uid[g],
		     line, r);
		if (sscanf(line, "%d", &n) == 1)
			sum += n;
	}
	t_ok(sum >= saved && sum <= saved + maybe, "%d saved tensors opened "
	     "(model: %d saved, %d maybe)", sum, saved, maybe);
}

/* hmmd's log (both starts) holds no sanitizer report. */
static int log_clean(void)
{
	static char text[1 << 20];
	FILE *f = fopen(logf, "r");
	size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
	char *hit;

	if (f)
		fclose(f);
	text[n] = 0;
	hit = strstr(text, "Sanitizer");
	if (!hit)
		hit = strstr(text, "runtime error");
	if (hit)
		t_diag("hmmd's log: %.2000s", hit > text + 200 ? hit - 200 :
		       text);
	return !hit;
}

static void final_checks(void)
{
	const char *t = metrics();
	double cap = prom_value(t, "hmm_tier_capacity_bytes{tier=\"host\"}");
	double res = prom_value(t, "hmm_tier_resident_bytes{tier=\"host\"}");
	int st;

	t_ok(hmmd_pid > 0 && waitpid(hmmd_pid, &st, WNOHANG) == 0,
	     "hmmd alive after the run");
	t_eq(prom_value(t, "hmmd_clients"), 0, "no clients left");
	t_eq(prom_value(t, "hmmd_pinned_bytes"), 0, "no host bytes pinned");
	t_ok(cap == BUDGET && res >= 0 && res <= cap, "host resident %.0f "
	     "within the budget %.0f", res, cap);
	t_ok(prom_value(t, "hmmd_waits_total") > 0, "maps waited for the "
	     "budget (%.0f)", prom_value(t, "hmmd_waits_total"));
	t_ok(prom_value(t, "hmmd_copy_bytes_total") > 0, "copy maps made "
	     "(%.0f bytes copied)", prom_value(t, "hmmd_copy_bytes_total"));
	check_tensors("after the run", 0);
	t_eq(stop_hmmd(), 0, "hmmd stops on SIGTERM with 0");
	start_hmmd();
	check_tensors("after a restart", 0);
	verify_saved();
	t = metrics();
	t_eq(prom_value(t, "hmmd_tensors"), 0, "no tensor left in hmmd");
	check_tensors("at the end", 1);
	t_eq(stop_hmmd(), 0, "hmmd stops on SIGTERM with 0 again");
	t_ok(log_clean(), "no sanitizer report in hmmd's log");
}

int main(void)
{
	const char *e = getenv("HMM_STRESS_SEED");
	double secs = getenv("HMM_STRESS_SECONDS") ?
		      atof(getenv("HMM_STRESS_SECONDS")) : 20;
	double t0 = now();
	char cmd[9000];
	uint64_t prng;

	if (getuid() != 0 || !getpwuid(65534))
		t_skip_all("needs root and uid 65534 (nobody) for more uids");
	T_HMMD_PATHS(hmmd, dir, sock, store, logf, "stress");
	snprintf(hmmctl, sizeof(hmmctl), "%.*s/hmmctl",
		 (int)(strrchr(hmmd, '/') - hmmd), hmmd);
	if (access(hmmctl, X_OK))	/* B=build/asan builds no tools */
		snprintf(hmmctl, sizeof(hmmctl), "build/bin/hmmctl");
	if (access(hmmctl, X_OK))
		t_skip_all("%s not built", hmmctl);
	base_seed = e ? strtoull(e, NULL, 0) : (uint64_t)time(NULL) ^
		    ((uint64_t)getpid() << 32);
	printf("# seed %llu (HMM_STRESS_SEED=%llu repeats it), %.0f s, "
	       "hmmd %s\n", (unsigned long long)base_seed,
	       (unsigned long long)base_seed, secs, hmmd);
	prng = base_seed;
	if (getenv("HMM_STRESS_TRACE"))
		trace_fd = open(getenv("HMM_STRESS_TRACE"), O_WRONLY | O_CREAT |
				O_TRUNC | O_APPEND, 0644);
	atexit(cleanup);	/* runs before t_tmpdir's removal */
	t_watchdog(secs + 240, "test_hmmd_stress");
	signal(SIGALRM, watch_fired);
	signal(SIGTERM, stopped);
	signal(SIGINT, stopped);
	signal(SIGHUP, stopped);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s/hmmctl'", hmmctl, dir);
	if (system(cmd))
		t_fail_all("%s", cmd);
	model_init();
	start_hmmd();

	run(secs, &prng);
	drain();
	t_ok(!tot.bad_clients, "%d clients (%d killed -9), %ld operations, "
	     "%.1f MB checked byte-exact, saved tensors opened and checked %ld "
	     "times; none failed", tot.clients, tot.kills, tot.ops,
	     tot.checked / 1e6, tot.adopted);
	t_ok(tot.kills > 0 && tot.drop_max < 10, "hmmd dropped each killed "
	     "client within %.2f s", tot.drop_max);
	t_ok(!tot.starved, "no client starved: each of the %d that ran 3 s "
	     "or more mapped", tot.long_lived);
	t_ok(tot.enomem > 0 && tot.edquot > 0, "refusals under pressure, "
	     "each naming its tensor: %ld (ENOMEM %ld, EDQUOT %ld, EBUSY %ld)",
	     tot.refusals, tot.enomem, tot.edquot, tot.ebusy);
	t_ok(!tot.ctl_bad && tot.ctl_runs > 0, "%d hmmctl runs alongside, "
	     "all exit 0, uid 65534's showing only its own%s%s", tot.ctl_runs,
	     tot.ctl_bad ? ": " : "", tot.ctl_why);
	t_ok(!tot.sample_bad && tot.samples > 0, "%d metrics samples: host "
	     "within the budget, each uid's pins within its quota%s%s",
	     tot.samples, tot.sample_bad ? ": " : "", tot.sample_why);
	for (int k = 0; k < K_KINDS; k++)
		printf("# %-31s %ld\n", kind_name[k], tot.did[k]);
	final_checks();
	printf("# %.1f s in all, seed %llu\n", now() - t0,
	       (unsigned long long)base_seed);
	return t_done();
}
