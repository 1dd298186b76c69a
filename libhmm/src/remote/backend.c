// SPDX-License-Identifier: MIT
/*
 * backend.c — shared mode's backend table (engine/backend.h): a context
 * opened with hmm_config.daemon = "unix:PATH" is a connection to hmmd
 * (client.c) and the hmm.h calls api.c has checked are answered there
 * (rtensor.c).
 *
 * Differences from the embedded engine, as hmmd serves it:
 *  - hmmd serves the host tier; a device is this process's own
 *    (config.device): a device map is staged through a host map in
 *    hmmd (dev_stage.c), a prefetch at the device prefetches to hmmd's
 *    host, an evict at the device has nothing to do;
 *  - transparent regions live in this process (engine/region.c): backed
 *    by hmmk.ko when hmmd is the module's daemon (region_hmmk.c), else by
 *    userfaultfd here with evicted blocks kept in an hmmd tensor
 *    (region.c); their resident bytes count against config.host_budget
 *    in this process;
 *  - hmm_flush() copies held writable device maps back to hmmd
 *    (dev_stage.c), saves every tensor this context holds (SAVE, protocol
 *    4: its uid's persistent tensor in hmmd under its name, replacing
 *    one saved before under that name), then sends FLUSH; an hmmd older
 *    than 4 saves only tensors already persistent, and the flush returns
 *    -EOPNOTSUPP naming the first other one.  hmm_tensor_open()
 *    attaches the caller's uid's persistent tensor of that name.  A
 *    saved tensor is one live tensor in hmmd: after this context closes
 *    hmmd keeps it (its bytes as its last holder left them, in the store
 *    as of the latest flush), until a context of the uid opens and frees
 *    it (hmm_tensor_free deletes it);
 *  - hmm_wait() sends WAIT (protocol 2): hmmd answers once this client's
 *    prefetches and evictions are done, with the first error met by a
 *    tensor it holds of its own uid (never another client's), else
 *    (hmm_flush too) the first of this process's regions';
 *  - hmm_writeback() sends WRITEBACK (protocol 3), which hmmd answers
 *    once the writes are done, as it answers EVICT: their error comes
 *    from the call itself (-EOPNOTSUPP from an older hmmd);
 *  - step markers are counted here only (hmmd's policy is LRU);
 *  - hmm_stats() is hmmd's engine counters (all clients, STATS2), with
 *    this context's step count, device tier and region counters;
 *  - a map over this client's hmmd quota waits there, up to hmmd's
 *    wait_ms, for this client's own unmaps; one larger than the whole
 *    quota (-EDQUOT there) is -ENOMEM, as a map over the budget is in
 *    the embedded engine;
 *  - store_path, host_dir and device's store are ignored (hmmd has its
 *    own); the trace (trace_path, HMM_TRACE) shows this process's side:
 *    each map, evict, wait and flush as the time hmmd took to answer it,
 *    and its regions' faults and evictions.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "err.h"
#include "region_int.h"
#include "remote.h"

/*
 * What hmmd did for one call, as this process saw it: the call's whole
 * time in the trace, on lane tid; chunk indices in config.chunk_bytes
 * units.  Returns r.
 */
static int traced(struct hmm_tensor *t, const char *cat, const char *what,
		  uint64_t off, uint64_t len, int tid, double t0, int r)
{
	struct hmm *h = t->h;

	hmm_trace_event(h, cat, what, t->name, off / h->cfg.chunk_bytes, len,
			t0, hmm_now(), tid);
	return r;
}

static int remote_open(const struct hmm_config *cfg, struct hmm **out)
{
	struct hmm_remote_ctx *rc;
	struct hmm *h;
	int r;

	if (strncmp(cfg->daemon, "unix:", 5) || !cfg->daemon[5])
		return hmm_err(-EINVAL, "config.daemon '%s': not unix:PATH",
			       cfg->daemon);
	r = hmm_ctx_new(cfg, &h);
	if (r < 0)
		return r;
	rc = calloc(1, sizeof(*rc));
	if (!rc) {
		r = hmm_err(-ENOMEM, "hmm_open: no memory for the context");
		goto out_ctx;
	}
	hmm_list_init(&rc->sdev);
	pthread_mutex_init(&rc->open_lock, NULL);
	r = hmm_remote_open(cfg, &rc->c);
	if (r < 0)
		goto out_rc;
	h->be = &hmm_remote_backend;
	h->be_priv = rc;
	/* the chunks are hmmd's (its hello says), whatever config asked:
	 * what the stats report, and what staged device maps round to */
	h->chunk_bytes = hmm_client_chunk_bytes(rc->c);
	*out = h;
	return 0;

out_rc:
	pthread_mutex_destroy(&rc->open_lock);
	free(rc);
out_ctx:
	hmm_ctx_free(h);
	return r;
}

static void remote_close(struct hmm *h)
{
	struct hmm_remote_ctx *rc = hmm_remote_ctx(h);

	hmm_remote_dev_fini(h);	/* they name tensors: first */
	while (h->ntensors) {	/* hmmd frees its copies when c goes */
		struct hmm_tensor *t = h->tensors[h->ntensors - 1];
		struct hmm_remote_tensor *rt = hmm_remote_of(t);

		hmm_tensor_shell_free(t);
		free(rt);
	}
	hmm_region_fini(h);	/* their blocks are in hmmd: before c */
	hmm_client_close(rc->c);
	pthread_mutex_destroy(&rc->open_lock);
	free(rc);
	hmm_ctx_free(h);
}

/* An engine tensor shell carrying hmmd's tensor rt (taken: freed with
 * the shell, or when this fails released in hmmd if it is a temporary
 * (made), only forgotten here if it is a saved one (opened): a free by
 * its uid would delete it, and hmmd lets go of it at this client's
 * close). */
static int wrap(struct hmm *h, struct hmm_remote_tensor *rt, int made,
		struct hmm_tensor **out)
{
	/* rt is the shell's before it is listed: other threads read it */
	int r = hmm_tensor_shell(h, rt->t.name, rt->t.dtype, rt->t.ndim,
				 rt->t.shape, rt->t.bytes, rt, out);

	if (r < 0) {
		if (made)
			hmm_remote_tensor_free(rt);
		else
			free(rt);
	}
	return r;
}

/* Does h hold hmmd's tensor id already (with live: and is no free of it
 * under way)?  hmmd gives a client one handle a tensor. */
static int remote_holds(struct hmm *h, uint64_t id, int live)
{
	uint32_t i;
	int held = 0;

	pthread_mutex_lock(&h->lock);
	for (i = 0; i < h->ntensors && !held; i++) {
		struct hmm_remote_tensor *rt = hmm_remote_of(h->tensors[i]);

		held = rt->t.id == id && !(live && rt->freeing);
	}
	pthread_mutex_unlock(&h->lock);
	return held;
}

static int remote_tensor_new(struct hmm *h, const char *name, uint32_t dtype,
			     unsigned ndim, const int64_t *shape,
			     struct hmm_tensor **out)
{
	struct hmm_remote_tensor *rt;
	int r = hmm_remote_tensor_new(hmm_remote_client(h), name, dtype, ndim,
				      shape, 0, &rt);

	return r < 0 ? r : wrap(h, rt, 1, out);
}

/* hmmd's one saved tensor of the name; -ENOENT when this context holds
 * it already (opened, or saved by its flush), as the embedded engine
 * opens each saved tensor once: a second handle's hmm_tensor_free
 * deleted the tensor under the first.  The check and the shell's
 * listing under open_lock: two threads opening one name at once both
 * found it not held and both got it (seen once in test_tensor_threads,
 * under TSan). */
static int remote_tensor_open(struct hmm *h, const char *name,
			      struct hmm_tensor **out)
{
	struct hmm_remote_ctx *rc = hmm_remote_ctx(h);
	struct hmm_remote_tensor *rt;
	int r;

	/* name: checked by api.c as hmm_tensor_new's is */
	r = hmm_remote_tensor_open(rc->c, name, &rt);
	if (r < 0)
		return r;
	pthread_mutex_lock(&rc->open_lock);
	if (remote_holds(h, rt->t.id, 0)) {
		pthread_mutex_unlock(&rc->open_lock);
		free(rt);	/* hmmd's handle is the one held */
		return hmm_err(-ENOENT, "hmm_tensor_open: tensor '%s': "
			       "already open in this context", name);
	}
	r = wrap(h, rt, 0, out);
	pthread_mutex_unlock(&rc->open_lock);
	return r;
}

static void set_freeing(struct hmm *h, struct hmm_remote_tensor *rt, int on)
{
	pthread_mutex_lock(&h->lock);
	rt->freeing = on;
	pthread_mutex_unlock(&h->lock);
}

/*
 * hmmd's free, then the shell off h->tensors, and only then rt: another
 * thread's flush or open reads every listed shell's rt (under h->lock),
 * and once read it freed.  Marked freeing first, so that a flush that
 * listed t before and finds it gone in hmmd skips it (remote_flush).
 */
static int remote_tensor_free(struct hmm_tensor *t)
{
	struct hmm_remote_tensor *rt = hmm_remote_of(t);
	struct hmm *h = t->h;
	int r;

	set_freeing(h, rt, 1);
	r = hmm_client_tensor_free(rt->c, rt->t.id);
	if (r == -EBUSY) {	/* still mapped: nothing freed */
		set_freeing(h, rt, 0);
		return r;
	}
	hmm_tensor_shell_free(t);
	free(rt);
	return r;
}

static int remote_residency(struct hmm_tensor *t, uint64_t bytes[])
{
	int r = hmm_remote_residency(hmm_remote_of(t), bytes);

	if (r == 0)	/* hmmd's, and the device maps here */
		hmm_remote_dev_residency(t, &bytes[HMM_TIER_DEVICE]);
	return r;
}

static int remote_host_fd(struct hmm_tensor *t, int *fd, uint64_t *off)
{
	return hmm_err(-ENOTSUP, "tensor %s: shared mode: its memory is "
		       "hmmd's", t->name);
}

static int remote_map(struct hmm_tensor *t, uint64_t off, uint64_t len,
		      int tier, unsigned access, void **ptr)
{
	double t0 = hmm_now();	/* before the call (see evict) */
	int r;

	if (tier == HMM_TIER_DEVICE)	/* staged: dev_stage.c */
		r = hmm_remote_dev_map(t, off, len, access, ptr);
	else
		r = traced(t, "stall", "map wait hmmd", off, len, 0, t0,
			   hmm_remote_map(hmm_remote_of(t), off, len, tier,
					  access, ptr));
	/* over this client's quota = over its budget: hmm.h's -ENOMEM
	   (hmm_last_error() keeps hmmd's detail) */
	return r == -EDQUOT ? -ENOMEM : r;
}

static int remote_unmap(struct hmm_tensor *t, void *ptr)
{
	int r = hmm_remote_dev_unmap(t, ptr);

	return r != -ENOENT ? r : hmm_remote_unmap(hmm_remote_of(t), ptr);
}

static int remote_prefetch(struct hmm_tensor *t, uint64_t off, uint64_t len,
			   int tier)
{
	struct hmm_remote_tensor *rt = hmm_remote_of(t);

	/* at the device too: hmmd's host is what its map will copy from */
	return hmm_client_prefetch(rt->c, rt->t.id, off, len, HMM_TIER_HOST);
}

static int remote_evict(struct hmm_tensor *t, uint64_t off, uint64_t len,
			int tier)
{
	struct hmm_remote_tensor *rt = hmm_remote_of(t);
	double t0;

	if (tier == HMM_TIER_DEVICE)
		return 0;	/* nothing stays at the device (dev_stage.c) */
	t0 = hmm_now();	/* before the call: argument order is unspecified */
	return traced(t, "evict", "evict in hmmd", off, len, 3, t0,
		      hmm_client_evict(rt->c, rt->t.id, off, len, tier));
}

static int remote_writeback(struct hmm_tensor *t, uint64_t off, uint64_t len)
{
	struct hmm_remote_tensor *rt = hmm_remote_of(t);
	double t0 = hmm_now();	/* before the call (see evict) */

	return traced(t, "evict", "writeback in hmmd", off, len, 3, t0,
		      hmm_client_writeback(rt->c, rt->t.id, off, len));
}

/*
 * hmmd's answer r to a wait or flush, else this process's own first
 * asynchronous error since the last one (its regions', region_fault.c:
 * an access that got SIGBUS), taken with its detail.
 */
static int remote_async(struct hmm *h, int r)
{
	if (r)
		return r;
	pthread_mutex_lock(&h->lock);
	r = hmm_async_take(h);
	pthread_mutex_unlock(&h->lock);
	return r;
}

static int remote_wait(struct hmm *h, struct hmm_tensor *t)
{
	double t0 = hmm_now();
	int r = hmm_remote_wait(hmm_remote_client(h),
				t ? hmm_remote_of(t) : NULL);

	hmm_trace_event(h, "stall", "wait hmmd", t ? t->name : "", 0, 0, t0,
			hmm_now(), 0);
	return remote_async(h, r);
}

/*
 * What this context holds, each tensor's hmmd reply (id, flags, name)
 * copied under h->lock, but those being freed: *out (malloc) and the
 * count, or -ENOMEM.
 */
static int held(struct hmm *h, struct hmm_proto_tensor **out)
{
	struct hmm_proto_tensor *v;
	uint32_t i;
	int n = 0;

	pthread_mutex_lock(&h->lock);
	v = malloc((h->ntensors ? h->ntensors : 1) * sizeof(*v));
	for (i = 0; v && i < h->ntensors; i++)
		if (!hmm_remote_of(h->tensors[i])->freeing)
			v[n++] = hmm_remote_of(h->tensors[i])->t;
	pthread_mutex_unlock(&h->lock);
	if (!v)
		return hmm_err(-ENOMEM, "hmm_flush: no memory");
	*out = v;
	return n;
}

/*
 * As the embedded engine's: every tensor this context holds is saved
 * (SAVE: its uid's persistent tensor under its name, replacing one
 * saved before), then FLUSH makes hmmd's store durable.  A tensor that
 * cannot be saved (a name too long with hmmd's uid prefix, an hmmd
 * older than protocol 4) does not stop the others: the first such error
 * is returned after the flush.  One another thread frees meanwhile is
 * no error: it is not held any more (it failed the flush with -ENOENT).
 */
static int remote_flush(struct hmm *h)
{
	struct hmm_client *c = hmm_remote_client(h);
	struct hmm_proto_tensor *v = NULL;
	double t0 = hmm_now();
	char det[256] = "";
	int i, n, r, first = 0;

	/* a writable device map's bytes are this process's until copied
	   back: first, so that the saves hold them */
	first = h->dev ? hmm_remote_dev_sync(h) : 0;
	if (first)
		snprintf(det, sizeof(det), "%s", hmm_last_error());
	n = held(h, &v);
	if (n < 0)
		return n;
	for (i = 0; i < n; i++) {
		r = hmm_client_save(c, &v[i]);
		/* freed by another thread since held() listed it: hmmd has
		   it no more ("not yours"), and nothing is left to save */
		if (r == -ENOENT && !remote_holds(h, v[i].id, 1))
			continue;
		if (r && !first) {
			first = r;
			snprintf(det, sizeof(det), "%s", hmm_last_error());
		}
	}
	free(v);
	r = hmm_client_flush(c);
	hmm_trace_event(h, "io", "flush in hmmd", "", 0, 0, t0, hmm_now(), 1);
	if (!r && first)
		return hmm_err(first, "%s", det);
	return remote_async(h, r);
}

/* hmmd's engine; this context's steps, device and regions (they live in
 * this process). */
static int remote_stats(struct hmm *h, struct hmm_stats *st)
{
	int r = hmm_remote_stats(hmm_remote_client(h), st);

	if (r)
		return r;
	pthread_mutex_lock(&h->lock);
	st->steps = h->st.steps;
	st->kernel_threads = h->cfg.kernel_threads;	/* this process's */
	if (h->dev)	/* this process's (dev_stage.c) */
		hmm_stats_tier(h, HMM_TIER_DEVICE, &st->tier[HMM_TIER_DEVICE]);
	pthread_mutex_unlock(&h->lock);
	hmm_region_stats(h, st);
	return 0;
}

/* Designated, as hmm_engine_backend (ctx.c). */
const struct hmm_backend hmm_remote_backend = {
	.name = "shared", .open = remote_open, .close = remote_close,
	.tensor_new = remote_tensor_new, .tensor_open = remote_tensor_open,
	.tensor_free = remote_tensor_free,
	.residency = remote_residency, .host_fd = remote_host_fd,
	.map = remote_map, .unmap = remote_unmap,
	.prefetch = remote_prefetch, .evict = remote_evict,
	.writeback = remote_writeback,
	.wait = remote_wait, .flush = remote_flush, .stats = remote_stats,
	.region_whole = hmm_remote_region_whole,
	.region_back = hmm_remote_region_back,
};
