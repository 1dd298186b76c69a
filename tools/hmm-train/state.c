// SPDX-License-Identifier: MIT
/*
 * state.c — the training state (state.h): its sizes, the chunk and budget
 * it runs with, open and close, and the error text.  The other parts are
 * listed in state_priv.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "state_priv.h"

static __thread char errbuf[1024];
static __thread int errcode;

const char *state_error(void)
{
	return errbuf;
}

int state_errno(void)
{
	return errcode;
}

int st_fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(errbuf, sizeof(errbuf), fmt, ap);
	va_end(ap);
	errcode = err;
	return err;
}

void st_human(char *buf, size_t cap, uint64_t b)
{
	if (b >= 10ull << 30)
		snprintf(buf, cap, "%.1f GiB", b / 1073741824.0);
	else if (b && !(b & ((1 << 20) - 1)))
		snprintf(buf, cap, "%llu MiB", (unsigned long long)b >> 20);
	else if (b >= 10ull << 20)
		snprintf(buf, cap, "%.1f MiB", b / 1048576.0);
	else if (b && !(b & 1023))
		snprintf(buf, cap, "%llu KiB", (unsigned long long)b >> 10);
	else if (b >= 10ull << 10)
		snprintf(buf, cap, "%.1f KiB", b / 1024.0);
	else			/* exact: 1 byte is not "0.0 KiB" */
		snprintf(buf, cap, "%llu bytes", (unsigned long long)b);
}

#define UP(x, c)	(((x) + (c) - 1) / (c) * (c))

uint64_t st_min_budget_in(const struct state *s, uint64_t c)
{
	uint64_t big = 0;

	for (int i = 0; i + 1 < s->nblocks; i++)
		if (s->floats[i] * 4 > big)
			big = s->floats[i] * 4;
	/* mapped at once: the embeddings' p and g, one layer's p and g,
	 * and the optimizer's m and v chunks, each pinned in whole c */
	return 2 * UP(s->floats[s->nblocks - 1] * 4, c) + 2 * UP(big, c) +
	       4 * UP(s->chunk, c);
}

uint64_t st_min_budget(const struct state *s)
{
	return st_min_budget_in(s, s->chunk);
}

uint64_t st_all_in(const struct state *s, uint64_t c)
{
	uint64_t b = UP((uint64_t)s->grad_floats * 4, c) +
		     UP((uint64_t)s->act_floats * 4, c) * s->act_count;

	for (int i = 0; i < s->nblocks; i++)
		for (int k = 0; k < ST_KINDS; k++)
			if (!st_shares_grad(s, i, k))
				b += UP((uint64_t)s->floats[i] * 4, c);
	return b;
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

float *state_map(struct state *s, int blk, int kind, unsigned access)
{
	return state_map_range(s, blk, kind, 0, s->floats[blk], access);
}

size_t state_chunk_floats(const struct state *s)
{
	return s->chunk / 4;
}

int state_open(const struct state_config *cfg, struct state **out)
{
	struct state *s;
	size_t big = 0;
	int err;

	*out = NULL;
	if (cfg->nblocks < 2)
		return st_fail(-EINVAL, "state: need at least 2 blocks");
	s = calloc(1, sizeof(*s));
	if (!s)
		return st_fail(-ENOMEM, "out of memory");
	s->nblocks = cfg->nblocks;
	s->floats = calloc(cfg->nblocks, sizeof(*s->floats));
	if (!s->floats) {
		free(s);
		return st_fail(-ENOMEM, "out of memory");
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
		if (st_shares_grad(s, i, ST_G)) {
			arrays--;
			if (cfg->floats[i] > s->grad_floats)
				s->grad_floats = cfg->floats[i];
		}
		s->bytes += (uint64_t)cfg->floats[i] * 4 * arrays;
		s->store_size += ROUND(cfg->floats[i] * 4) * arrays;
	}
	s->bytes += (uint64_t)s->grad_floats * 4;
	s->store_size += ROUND(s->grad_floats * 4);
	s->act_count = cfg->act_count;
	s->act_floats = cfg->act_floats;
	s->store_size += ROUND(s->act_floats * 4) * s->act_count;
	/* with checkpoints, twice the state: after a flush every chunk
	 * may be rewritten while its flushed copy stays until the next */
	s->store_size = hmm_store_required(s->store_size *
					   (cfg->persist || cfg->reopen ? 2 : 1),
					   (uint32_t)s->chunk);
	s->budget = cfg->host_budget ? cfg->host_budget :
		    s->bytes / (cfg->budget_div > 0 ? cfg->budget_div : 4);
	s->offloaded = s->budget < s->bytes;
	if (!s->offloaded)	/* everything fits: room for whole chunks */
		s->budget = s->store_size;
	/* hmmd's chunks may be larger than ours: then the budget given is
	 * what this run may ask hmmd for (st_arrays_open checks it) */
	if (!s->offloaded && cfg->daemon && cfg->host_budget > s->budget)
		s->budget = cfg->host_budget;
	if (s->offloaded && s->budget < st_min_budget(s)) {
		char b[32], m[32];

		st_human(b, sizeof(b), s->budget);
		st_human(m, sizeof(m), st_min_budget(s));
		err = st_fail(-EINVAL, "host budget %s is below the %s this model "
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
	s->has_store = s->offloaded || cfg->persist || cfg->reopen ||
		       s->act_count;
	s->reopen = cfg->reopen;
	s->format = cfg->format;
	if ((cfg->persist || cfg->reopen) && !cfg->store_path) {
		err = st_fail(-EINVAL, "state: a kept store needs a path");
		goto out_free;
	}
	if (cfg->reopen && access(cfg->store_path, F_OK)) {
		err = st_fail(-errno, "store %s: %s (the checkpoint's state lives "
			   "there)", cfg->store_path, strerror(errno));
		goto out_free;
	}
	/* with a daemon the store is hmmd's: no file of ours to make */
	if (s->has_store && !cfg->daemon) {
		if (cfg->store_path) {
			snprintf(s->store_path, sizeof(s->store_path), "%s",
				 cfg->store_path);
		} else {
			st_default_store(s->store_path, sizeof(s->store_path));
			s->unlink_store = 1;
		}
		err = st_store_preflight(s);
		if (err)
			goto out_free;
	}
	err = st_arrays_open(s, cfg);
	if (err)
		goto out_close;
	*out = s;
	return 0;
out_close:
	st_arrays_close(s);
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
	st_arrays_close(s);	/* a temporary store was unlinked at open */
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
