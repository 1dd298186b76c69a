// SPDX-License-Identifier: MIT
/*
 * offload.c — AdamW over libhmm tensors, streamed piece by piece through
 * host memory with k pieces read ahead (hk_offload.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "hk_offload.h"

enum { P, PB, G, M, V, NARR };

static const char *const arr_name[NARR] = {
	"param", "param_bf16", "grad", "exp_avg", "exp_avg_sq",
};

/* One step's view of its five arrays; on the caller's stack. */
struct pipe {
	struct hmm *h;
	struct hk_offload_adamw *o;
	struct hmm_tensor *t[NARR];	/* NULL: absent (param_bf16) */
	size_t es[NARR];		/* element size */
	void *ptr[NARR];		/* the mapped piece, or NULL */
	char *host[NARR];		/* caller's memory in place of t (P, G) */
	uint64_t n, pe;			/* elements; per piece */
	uint64_t np;			/* pieces */
	uint32_t chunk;			/* bytes of a piece of a tensor */
	unsigned depth, io_depth;	/* read ahead; config.io_depth */
};

static __thread char detail[512];

const char *hk_offload_error(void)
{
	return detail;
}

/* Record the detail; with lib set, append libhmm's. Returns err. */
static int fail(const struct pipe *p, int err, int lib, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(const struct pipe *p, int err, int lib, const char *fmt, ...)
{
	const char *name = p && p->o->hp.name ? p->o->hp.name : "?";
	va_list ap;
	int n;

	n = snprintf(detail, sizeof(detail), "offload '%s': ", name);
	va_start(ap, fmt);
	n += vsnprintf(detail + n, sizeof(detail) - n, fmt, ap);
	va_end(ap);
	if (lib && n < (int)sizeof(detail))
		snprintf(detail + n, sizeof(detail) - n, ": %s",
			 hmm_last_error());
	return err;
}

static int dtype_of(uint32_t hmm_dtype)
{
	return hmm_dtype == HMM_DTYPE_BF16 ? HK_ADAMW_BF16 : HK_ADAMW_F32;
}

/*
 * Pieces read ahead.  By default (want 0) enough that their reads fill
 * the context's io_depth (config.io_depth: extent I/Os handed to the
 * store at once), at least 2: the step is store-bound, and a disk's
 * throughput grows with the I/O in flight (the build machine's virtual
 * disk: fio at queue depth 64 moved the step's bytes in 0.35-0.75 of the
 * time it took at 16; 2 pieces, 8 reads, kept ~11 reads and ~10 writes
 * outstanding at io_depth 64, 16 pieces ~118: 1.4x the bytes a second).
 * At libhmm's default io_depth of 4 that is 2.  At most what lets k + 2
 * pieces (those read ahead, the one stepped, the one written back) fit
 * in the host budget: more would make prefetches evict each other
 * (measured: depth 8 with 8 MiB pieces in a 64 MiB budget ran 2.6x the
 * I/O floor).
 */
static unsigned pick_depth(const struct pipe *p, unsigned want,
			   uint64_t piece, uint64_t capacity)
{
	unsigned reads = 0;
	uint64_t fit;

	for (int k = 0; k < NARR; k++)
		reads += p->t[k] && k != PB;	/* PB is mapped DISCARD */
	if (!want) {
		uint64_t fill = (p->io_depth + reads - 1) / reads;

		want = fill < 2 ? 2 : fill > 1024 ? 1024 : (unsigned)fill;
	}
	if (!capacity || !piece)
		return want;
	fit = capacity / piece;
	fit = fit > 3 ? fit - 2 : 1;
	return want < fit ? want : (unsigned)fit;
}

/*
 * The host bytes one piece maps at once: all its arrays' tensors, all or
 * none.  A budget smaller than that can never hold a piece, and a map
 * would wait config.wait_ms for room before failing, so say it at once.
 */
static int check_piece(struct pipe *p)
{
	uint64_t piece = 0, pe = p->pe < p->n ? p->pe : p->n;
	struct hmm_stats st;
	int err;

	for (int k = 0; k < NARR; k++)
		if (p->t[k])
			piece += pe * p->es[k];
	if ((err = hmm_stats(p->h, &st)))
		return fail(p, err, 1, "stats");
	p->io_depth = st.io_depth;
	if (st.tier[HMM_TIER_HOST].capacity &&
	    piece > st.tier[HMM_TIER_HOST].capacity)
		return fail(p, -ENOMEM, 0, "a piece maps %llu bytes of "
			    "tensors at once (chunk_bytes %u a tensor), more "
			    "than the host budget of %llu bytes: lower "
			    "chunk_bytes or raise config.host_budget",
			    (unsigned long long)piece, p->chunk,
			    (unsigned long long)st.tier[HMM_TIER_HOST].capacity);
	p->depth = pick_depth(p, p->o->depth, piece,
			      st.tier[HMM_TIER_HOST].capacity);
	return 0;
}

static int setup(struct pipe *p, struct hmm *h, struct hk_offload_adamw *o)
{
	struct hk_adamw_args hp;
	uint32_t chunk = o->chunk_bytes ? o->chunk_bytes : 2u << 20;
	int any_bf16 = 0, err;

	memset(p, 0, sizeof(*p));
	p->h = h;
	p->o = o;
	p->t[P] = o->param;
	p->t[PB] = o->param_bf16;
	p->t[G] = o->grad;
	p->t[M] = o->exp_avg;
	p->t[V] = o->exp_avg_sq;
	p->host[P] = (char *)o->param_host;
	p->host[G] = (char *)o->grad_host;
	if (!h || !(!o->param ^ !o->param_host) ||
	    !(!o->grad ^ !o->grad_host) || !o->exp_avg || !o->exp_avg_sq)
		return fail(p, -EINVAL, 0, "context, exp_avg or exp_avg_sq is "
			    "NULL, or not one of param / param_host and of "
			    "grad / grad_host");
	if (o->param && hmm_tensor_dtype(o->param) != HMM_DTYPE_F32)
		return fail(p, -EINVAL, 0, "param %s is not F32",
			    hmm_tensor_name(o->param));
	p->n = o->param ? hmm_tensor_bytes(o->param) / 4 : o->host_n;
	p->es[P] = p->es[G] = 4;	/* the host arrays' (fp32) */
	for (int k = 0; k < NARR; k++) {
		uint64_t bytes;
		uint32_t dt;

		if (!p->t[k])
			continue;
		dt = hmm_tensor_dtype(p->t[k]);
		if (dt != HMM_DTYPE_F32 && dt != HMM_DTYPE_BF16)
			return fail(p, -EINVAL, 0, "%s %s is not F32 or BF16",
				    arr_name[k], hmm_tensor_name(p->t[k]));
		if ((k == PB && dt != HMM_DTYPE_BF16) ||
		    (k == V && dt != hmm_tensor_dtype(o->exp_avg)))
			return fail(p, -EINVAL, 0, "%s %s has the wrong dtype",
				    arr_name[k], hmm_tensor_name(p->t[k]));
		p->es[k] = dt == HMM_DTYPE_BF16 ? 2 : 4;
		any_bf16 |= dt == HMM_DTYPE_BF16;
		bytes = hmm_tensor_bytes(p->t[k]);
		if (bytes != p->n * p->es[k])
			return fail(p, -EINVAL, 0, "%s %s: %llu bytes, not "
				    "%llu elements", arr_name[k],
				    hmm_tensor_name(p->t[k]),
				    (unsigned long long)bytes,
				    (unsigned long long)p->n);
	}
	if (chunk % 4096)
		return fail(p, -EINVAL, 0, "chunk_bytes %u not a multiple of "
			    "4096", chunk);
	p->pe = chunk / (any_bf16 ? 2 : 4);
	p->np = (p->n + p->pe - 1) / p->pe;
	p->chunk = chunk;
	if (o->start > p->n || (o->start % p->pe && o->start != p->n))
		return fail(p, -EINVAL, 0, "start %llu is not a piece boundary "
			    "(pieces of %llu elements)",
			    (unsigned long long)o->start,
			    (unsigned long long)p->pe);
	/* an empty step validates the hyperparameters and does nothing */
	hp = (struct hk_adamw_args){
		.lr = o->hp.lr, .beta1 = o->hp.beta1, .beta2 = o->hp.beta2,
		.eps = o->hp.eps, .weight_decay = o->hp.weight_decay,
		.step = o->hp.step, .grad_scale = o->hp.grad_scale,
		.flags = o->hp.flags, .name = o->hp.name,
	};
	if ((err = hk_adamw_step(&hp)) < 0)
		return fail(p, err, 0, "%s", hk_adamw_error());
	return check_piece(p);
}

static void piece_range(const struct pipe *p, uint64_t i, uint64_t *lo,
			uint64_t *hi)
{
	*lo = i * p->pe;
	*hi = *lo + p->pe < p->n ? *lo + p->pe : p->n;
}

/* Start reading piece i of the arrays in mask (those that are read). */
static void prefetch(struct pipe *p, uint64_t i, unsigned mask)
{
	uint64_t lo, hi;

	if (i >= p->np)
		return;
	piece_range(p, i, &lo, &hi);
	for (int k = 0; k < NARR; k++)
		if (p->t[k] && (mask & 1u << k))
			hmm_prefetch(p->t[k], lo * p->es[k],
				     (hi - lo) * p->es[k], HMM_TIER_HOST);
}

/* Write back (or drop, if clean) piece i of the arrays in mask. */
static void evict(struct pipe *p, uint64_t i, unsigned mask)
{
	uint64_t lo, hi;

	piece_range(p, i, &lo, &hi);
	for (int k = 0; k < NARR; k++)
		if (p->t[k] && (mask & 1u << k))
			hmm_evict(p->t[k], lo * p->es[k], (hi - lo) * p->es[k],
				  HMM_TIER_HOST);
}

static void unmap_all(struct pipe *p)
{
	for (int k = NARR - 1; k >= 0; k--) {
		if (p->ptr[k] && p->t[k])
			hmm_unmap(p->t[k], p->ptr[k]);
		p->ptr[k] = NULL;
	}
}

/* Map piece i of the arrays in mask with their access; all or none. */
static int map_piece(struct pipe *p, uint64_t i, unsigned mask)
{
	static const unsigned access[NARR] = {
		[P] = HMM_READ | HMM_WRITE, [PB] = HMM_DISCARD,
		[G] = HMM_READ, [M] = HMM_READ | HMM_WRITE,
		[V] = HMM_READ | HMM_WRITE,
	};
	uint64_t lo, hi;

	piece_range(p, i, &lo, &hi);
	for (int k = 0; k < NARR; k++) {
		int err;

		if (p->host[k] && (mask & 1u << k))
			p->ptr[k] = p->host[k] + lo * p->es[k];
		if (!p->t[k] || !(mask & 1u << k))
			continue;
		err = hmm_map(p->t[k], lo * p->es[k], (hi - lo) * p->es[k],
			      HMM_TIER_HOST, access[k], &p->ptr[k]);
		if (err) {
			p->ptr[k] = NULL;
			unmap_all(p);
			return fail(p, err, 1, "map %s %s at element %llu",
				    arr_name[k], hmm_tensor_name(p->t[k]),
				    (unsigned long long)lo);
		}
	}
	return 0;
}

/* The CHECK_FINITE pass: 1 if a grad is inf/NaN, 0, or an error. */
static int check_grads(struct pipe *p)
{
	const unsigned mask = 1u << G;
	int dt = p->t[G] ? dtype_of(hmm_tensor_dtype(p->t[G])) : HK_ADAMW_F32;

	for (uint64_t i = 0; i < p->depth; i++)
		prefetch(p, i, mask);
	for (uint64_t i = 0; i < p->np; i++) {
		uint64_t lo, hi;
		int bad, err;

		prefetch(p, i + p->depth, mask);
		if ((err = map_piece(p, i, mask)))
			return err;
		piece_range(p, i, &lo, &hi);
		bad = hk_adamw_nonfinite(p->ptr[G], dt, hi - lo);
		unmap_all(p);
		evict(p, i, mask);
		if (bad)
			return 1;
	}
	return 0;
}

/* The step: read i + k, step i, write back i (while i + 1 is stepped). */
static int run(struct pipe *p)
{
	const unsigned rd = 1u << P | 1u << G | 1u << M | 1u << V;
	const unsigned all = rd | 1u << PB;
	uint64_t first = p->o->start / p->pe;
	struct hk_adamw_args a = p->o->hp;

	a.flags &= ~HK_ADAMW_CHECK_FINITE;
	a.grad_dtype = p->t[G] ? dtype_of(hmm_tensor_dtype(p->t[G])) :
		       HK_ADAMW_F32;
	a.state_dtype = dtype_of(hmm_tensor_dtype(p->t[M]));
	for (uint64_t i = first; i < first + p->depth; i++)
		prefetch(p, i, rd);
	for (uint64_t i = first; i < p->np; i++) {
		uint64_t lo, hi;
		int err;

		prefetch(p, i + p->depth, rd);
		if ((err = map_piece(p, i, all)))
			return err;
		piece_range(p, i, &lo, &hi);
		a.n = hi - lo;
		a.param = p->ptr[P];
		a.param_bf16 = p->ptr[PB];
		a.grad = p->ptr[G];
		a.exp_avg = p->ptr[M];
		a.exp_avg_sq = p->ptr[V];
		err = hk_adamw_step(&a);	/* validated: cannot fail */
		unmap_all(p);
		if (err)
			return fail(p, err < 0 ? err : -EIO, 0, "step: %s",
				    hk_adamw_error());
		p->o->done = hi;
		evict(p, i, all);
	}
	return 0;
}

/* Wait for the write-backs; the first error, with its detail unless
 * the step already failed (its detail is the one to keep). */
static int drain(struct pipe *p, int failed)
{
	int first = 0;

	for (int k = 0; k < NARR; k++) {
		int err;

		if (!p->t[k] || k == G)
			continue;
		err = hmm_wait(p->h, p->t[k]);
		if (err && !first)
			first = failed ? err :
				fail(p, err, 1, "write-back of %s %s",
				     arr_name[k], hmm_tensor_name(p->t[k]));
	}
	return first;
}

int hk_offload_adamw_step(struct hmm *h, struct hk_offload_adamw *o)
{
	struct pipe p;
	int err, w;

	if (!o)
		return fail(NULL, -EINVAL, 0, "args is NULL");
	if ((err = setup(&p, h, o)))
		return err;
	o->done = o->start;
	if (o->hp.found_inf)
		return HK_ADAMW_SKIPPED;
	if (o->hp.flags & HK_ADAMW_CHECK_FINITE) {
		err = check_grads(&p);
		if (err)
			return err;	/* 1 is HK_ADAMW_SKIPPED */
	}
	err = run(&p);
	w = drain(&p, err != 0);
	return err ? err : w;
}
