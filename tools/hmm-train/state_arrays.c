// SPDX-License-Identifier: MIT
/*
 * state_arrays.c — the state's arrays as hmm tensors in one libhmm
 * context per run ("layer3.m", "embed.p", the shared "layers.g", and
 * "train.ckpt" with a store): opened, mapped, prefetched, counted, and
 * flushed and tagged for checkpoints.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "state_priv.h"

#define TAG_NAME	"train.ckpt"
#define TAG_BYTES	32

static const char *kind_name(int k)
{
	static const char *const n[] = { "p", "g", "m", "v" };

	return n[k];
}

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
			return st_fail(err, "tensor %s: %s", name,
				    hmm_last_error());
		return 0;
	}
	err = hmm_tensor_open(s->h, name, out);
	if (err)
		return st_fail(err, "store %s: tensor %s: %s: %s", s->store_path,
			    name, hmm_strerror(err), hmm_last_error());
	if (hmm_tensor_bytes(*out) != want || hmm_tensor_dtype(*out) != dtype)
		return st_fail(-EINVAL, "store %s: tensor %s holds %llu bytes, "
			    "this model's needs %llu (another --preset?)",
			    s->store_path, name,
			    (unsigned long long)hmm_tensor_bytes(*out),
			    (unsigned long long)want);
	return 0;
}

/*
 * hmmd pins a client's maps in its own whole chunks, which may be larger
 * than ours (state.c picks ours by the model), against the quota this
 * run asks for (its budget): the minimum in hmmd's chunks, checked
 * before the first map, so that a budget too small is refused with the
 * number to give, as it is embedded, not found at step 0.  A budget
 * that holds the state keeps it all mapped, so the number to give is
 * the streamed minimum only where that is below the state.
 */
static int daemon_check(struct state *s)
{
	char js[8192], b[32], m[32], c[32];
	uint64_t hc, min, all, need, give;
	const char *p;

	if (hmm_stats_json(s->h, js, sizeof(js)) <= 0 ||
	    !(p = strstr(js, "\"chunk_bytes\":")))
		return 0;	/* hmmd's chunk unknown: it will say */
	hc = strtoull(p + 14, NULL, 10);
	if (!hc || hc <= s->chunk)
		return 0;	/* ours are as large: state.c checked */
	min = st_min_budget_in(s, hc);
	all = st_all_in(s, hc);
	need = s->offloaded ? min : all;
	if (s->budget >= need)
		return 0;
	give = min < s->bytes ? min : all;
	st_human(b, sizeof(b), s->budget);
	st_human(m, sizeof(m), need);
	st_human(c, sizeof(c), hc);
	return st_fail(-EINVAL, "host budget %s is below the %s this run "
		       "needs mapped at once in hmmd's %s chunks (%s): give "
		       "--host-budget %lluM or more, or run hmmd with a smaller "
		       "--chunk", b, m, c, s->offloaded ? "one layer's p and g, "
		       "the embeddings' p and g, optimizer chunks" :
		       "all of the state, kept in memory",
		       (unsigned long long)(give + (1 << 20) - 1) >> 20);
}

int st_arrays_open(struct state *s, const struct state_config *cfg)
{
	struct hmm_config hc;
	int err;

	hmm_config_default(&hc);
	hc.host_budget = s->budget + st_act_room(s);
	hc.chunk_bytes = s->chunk;
	/* look ahead as far as the budget left over by the pinned working
	 * set allows: the sequence counts every chunk access (p, m, v of
	 * each optimizer piece), so three entries per chunk of room */
	if (s->offloaded) {
		uint64_t room = (s->budget - st_min_budget(s)) / s->chunk;

		hc.prefetch_depth = room * 3 < 8 ? 8 : room * 3 > 256 ? 256 :
				    room * 3;
		s->depth = room / 3 < 2 ? 2 : room / 3 > 16 ? 16 : room / 3;
	}
	hc.daemon = cfg->daemon;
	hc.pool_bytes = cfg->pool_bytes;
	hc.io_depth = cfg->io_depth;
	hc.queue_depth = cfg->queue_depth;
	hc.kernel_threads = cfg->kernel_threads;
	hc.policy = getenv("HMM_TRAIN_LRU") ? HMM_POLICY_LRU :
		    HMM_POLICY_SCHEDULE;
	if (s->has_store && !cfg->daemon) {
		hc.store_path = s->store_path;
		hc.store_size = s->store_size;
	}
	if (s->reopen)
		hc.flags |= HMM_CONFIG_STORE_KEEP;
	else if (s->format)
		hc.flags |= HMM_CONFIG_STORE_FORMAT;
	err = hmm_open(&hc, &s->h);
	if (err)
		return st_fail(err, "libhmm: %s%s%s%s", hmm_strerror(err),
			    *hmm_last_error() ? ": " : "", hmm_last_error(),
			    err == -EEXIST ? "; hmm-train --format formats "
			    "it" : "");
	if (cfg->daemon) {
		struct hmm_stats st;

		err = daemon_check(s);
		if (err)
			return err;
		if (!hmm_stats(s->h, &st)) {
			s->base_rd = st.tier[HMM_TIER_STORE].bytes_out;
			s->base_wr = st.tier[HMM_TIER_STORE].bytes_in;
			s->base_stall = st.tier[HMM_TIER_HOST].stall_s;
		}
	}
	/* a temporary store: libhmm holds it open by its one descriptor,
	 * so its name can go now, and its space with the process however
	 * that ends (SIGINT, SIGTERM, SIGKILL), not only at state_close */
	if (s->unlink_store)
		unlink(s->store_path);
	s->t = calloc((size_t)s->nblocks * ST_KINDS, sizeof(*s->t));
	if (!s->t)
		return st_fail(-ENOMEM, "out of memory");
	for (int i = 0; i < s->nblocks; i++)
		for (int k = 0; k < ST_KINDS; k++) {
			int64_t shape = s->floats[i];
			char name[64];

			if (st_shares_grad(s, i, k)) {
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
	if (s->has_store) {
		err = array_open(s, TAG_NAME, TAG_BYTES, HMM_DTYPE_U8, &s->tag);
		if (err)
			return err;
	}
	return st_acts_open(s);
}

void st_arrays_close(struct state *s)
{
	char buf[8192];

	if (s->h && getenv("HMM_TRAIN_STATS") &&
	    hmm_stats_json(s->h, buf, sizeof(buf)) > 0)
		fprintf(stderr, "hmm-train: %.3f s in maps and AdamW; libhmm "
			"stats: %s\n", s->map_s, buf);
	if (s->h)
		hmm_close(s->h);	/* frees the tensors */
	free(s->t);
	free(s->act);
}

int state_flush(struct state *s, uint64_t *flush_bytes)
{
	struct hmm_stats a, b;
	int err;

	if (!s->has_store)
		return st_fail(-ENODEV, "checkpoint: no store to flush");
	hmm_stats(s->h, &a);
	err = hmm_flush(s->h);
	if (err)
		return st_fail(err, "store %s: flush: %s: %s", s->store_path,
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
		return st_fail(-ENODEV, "checkpoint: no store");
	err = hmm_map(s->tag, 0, TAG_BYTES, HMM_TIER_HOST,
		      write ? HMM_WRITE | HMM_DISCARD : HMM_READ, &p);
	if (err)
		return st_fail(err, "store %s: map %s: %s", s->store_path,
			    TAG_NAME, hmm_last_error());
	if (write)
		memcpy(p, tag, TAG_BYTES);
	else
		memcpy(tag, p, TAG_BYTES);
	hmm_unmap(s->tag, p);
	return 0;
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
		st_fail(err, "map %s [%zu, %zu): %s: %s", hmm_tensor_name(t),
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

void state_prefetch(struct state *s, int blk, int kind)
{
	if (s->offloaded && !st_shares_grad(s, blk, kind))
		hmm_prefetch(s->t[blk * ST_KINDS + kind], 0, HMM_ALL,
			     HMM_TIER_HOST);
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
	o->store_read_bytes = st.tier[HMM_TIER_STORE].bytes_out - s->base_rd;
	o->store_write_bytes = st.tier[HMM_TIER_STORE].bytes_in - s->base_wr;
	o->stall_s = st.tier[HMM_TIER_HOST].stall_s - s->base_stall;
	o->kernel_threads = (uint32_t)st.kernel_threads;
	o->pool_bytes = st.pool_bytes;
	o->queue_depth = (uint32_t)st.queue_depth;
	o->io_depth = st.pool_bytes ? (uint32_t)st.io_depth : 0;
}

void state_step(struct state *s, int begin)
{
	if (begin)
		hmm_step_begin(s->h);
	else
		hmm_step_end(s->h);
}
