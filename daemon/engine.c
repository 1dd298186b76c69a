// SPDX-License-Identifier: MIT
/*
 * engine.c — libhmm's engine inside hmmd: one context on the configured
 * store and budgets (the tree's only store, pool and policy), and on top
 * of it per-uid quotas of pinned host bytes under the global host
 * budget, with back-pressure: each uid is an owner in the engine's host
 * ledger, admitted by its one admission function (budget.h).
 *
 * Quotas and fairness.  A uid's host quota (the most its open
 * connections' hellos asked, each capped by client_quota, until a
 * QUOTA_SET fixes it: client.c) bounds the host bytes the maps of all
 * its connections pin, counted in whole chunks; the sum of all pins
 * never passes the host budget, so the engine can always evict an
 * unpinned chunk for a new map.  A map that would take the uid past its
 * quota waits (up to wait_ms) for the uid's own unmaps, as a map in the
 * embedded engine waits for pins to drop; only a map larger than the
 * whole quota fails at once.  Quotas may add up to more than the budget
 * (oversubscription): then a map that does not fit waits.  Waiters are
 * ordered by the fraction of its quota their uid has pinned, all its
 * connections together (smallest first: shares follow the quota
 * weights), then by arrival.  Ranked per connection, a uid that opened a
 * fresh connection for each map counted as 0% of its share every time
 * and went ahead of every other uid.  A map goes when it fits and no
 * waiter ahead of it fits; a waiter ahead that does not fit is passed
 * (the budget is not left idle) until it has waited a quarter of
 * wait_ms, after which the budget is kept for it (a large map is not
 * starved by small ones).  A waiter fails with -ENOMEM only after
 * wait_ms.  A connection's own count of what it pins (cl->used) is
 * hmmd's, for the lists and metrics; its waits end with it (cl->cancel).
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend.h"
#include "bridge.h"
#include "engine.h"

#define STORE_SIZE_NEW	(1ull << 30)	/* a new store file, unless set */

/* "u<uid>/...": a uid's saved tensor (tensor.c's store_name). */
static int uid_saved(const char *name)
{
	const char *p = name + 1;

	if (name[0] != 'u' || *p < '0' || *p > '9')
		return 0;
	while (*p >= '0' && *p <= '9')
		p++;
	return *p == '/';
}

/*
 * The store's tensors, before any client.  A uid's saved tensor ("uU/")
 * is opened and kept as that uid's persistent tensor that nobody holds
 * (hmmd_tensor_adopt), so that hmmctl lists it and rm can delete it
 * after a restart, not only once a job opened it again.  The rest is
 * what an earlier hmmd left that no client can open: the engine's flush
 * saves every tensor it holds, so one run while a client's temporary
 * ("c<id>/") or a replaced tensor ("x<id>/") lived keeps it in the
 * store's table, and after a kill -9 (no flush at the stop) nothing ever
 * opened or freed it: its extents held store space for good.  They are
 * freed here (the next flush gives the space back).
 */
static void sweep(struct hmmd_engine *e)
{
	char name[HMM_PROTO_NAME_MAX];
	struct hmm_tensor *t;
	unsigned n = 0, kept = 0;
	uint32_t i = 0;

	/* an opened or freed tensor's record leaves the list: i stays */
	while (!hmm_persist_saved_name(e->h, i, name, sizeof(name))) {
		if (hmm_tensor_open(e->h, name, &t)) {
			hmmd_log("engine: saved tensor %s: cannot open, left in "
				 "the store: %s", name, hmm_last_error());
			i++;
		} else if (!uid_saved(name)) {
			hmm_tensor_free(t);
			n++;
		} else if (hmmd_tensor_adopt(e, t)) {
			/* open in the engine, so still saved; not listed */
			hmmd_log("engine: saved tensor %s: kept, but not "
				 "listed: not a uid's name, or no memory",
				 name);
		} else {
			kept++;
		}
	}
	if (kept)
		hmmd_log("engine: %u saved tensor(s) of their uids found",
			 kept);
	if (n)
		hmmd_log("engine: freed %u tensor(s) no client can open "
			 "(temporaries an earlier hmmd left in the store)", n);
}

static void made_free(struct hmmd_made *m, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		free(m[i].path);
	free(m);
}

/*
 * The store files (each member of a striped "a,b") that do not exist
 * yet, which this start will create, into e->made; their dev and ino
 * are taken once the engine has made them (made_seen).  0 or -ENOMEM.
 */
static int made_note(struct hmmd_engine *e, const char *paths)
{
	const char *p = paths;
	struct stat st;

	while (p && *p) {
		size_t len = strcspn(p, ",");
		char *one = strndup(p, len);
		struct hmmd_made *m;

		if (!one)
			return -ENOMEM;
		if (!len || lstat(one, &st) == 0 || errno != ENOENT) {
			free(one);	/* there already (or not ours) */
		} else {
			m = realloc(e->made, (e->nmade + 1) * sizeof(*m));
			if (!m) {
				free(one);
				return -ENOMEM;
			}
			e->made = m;
			e->made[e->nmade++] = (struct hmmd_made){ .path = one };
		}
		p += len + (p[len] == ',');
	}
	return 0;
}

/* The engine is open: what made_note expected is there; keep its
 * identity, so that a discard removes that file and no other. */
static void made_seen(struct hmmd_engine *e)
{
	struct stat st;
	unsigned i, n = 0;

	for (i = 0; i < e->nmade; i++) {
		struct hmmd_made *m = &e->made[i];

		if (lstat(m->path, &st) == 0 && S_ISREG(st.st_mode)) {
			m->dev = st.st_dev;
			m->ino = st.st_ino;
			e->made[n++] = *m;
		} else {
			free(m->path);
		}
	}
	e->nmade = n;
}

int hmmd_engine_open(const struct hmmd_config *cfg, struct hmmd_engine **out)
{
	struct hmmd_engine *e = calloc(1, sizeof(*e));
	struct hmm_config hc;
	struct stat st;
	int ret;

	if (!e)
		return -ENOMEM;
	hmm_config_default(&hc);
	hc.host_budget = cfg->host_budget ? cfg->host_budget :
			 HMMD_HOST_BUDGET_DEF;
	hc.device_budget = cfg->device_budget;
	hc.chunk_bytes = cfg->chunk_bytes;
	hc.wait_ms = cfg->wait_ms;
	hc.pool_bytes = cfg->pool_bytes;
	hc.io_depth = cfg->io_depth;
	hc.queue_depth = cfg->queue_depth;
	hc.store_path = cfg->store_path;
	hc.store_size = cfg->store_size;
	hc.host_dir = cfg->host_dir;	/* a huge-page tmpfs, or memfds */
	/* keep what an earlier hmmd flushed: restart recovery (unless
	   --format); memfd host memory: maps hand clients the engine's
	   own pages */
	hc.flags = (cfg->format ? HMM_CONFIG_STORE_FORMAT :
		    HMM_CONFIG_STORE_KEEP) | HMM_CONFIG_HOST_SHARED;
	if (cfg->store_path && !hc.store_size &&
	    (stat(cfg->store_path, &st) < 0 ||
	     (S_ISREG(st.st_mode) && st.st_size == 0)))
		hc.store_size = STORE_SIZE_NEW;
	ret = made_note(e, cfg->store_path);
	if (ret) {
		hmmd_log("engine: out of memory");
		made_free(e->made, e->nmade);
		free(e);
		return ret;
	}
	ret = hmm_engine_open(&hc, &e->h);
	if (ret) {	/* libhmm removes a store it made, not opened */
		hmmd_log("engine: cannot open (store %s): %s",
			 cfg->store_path ? cfg->store_path : "none",
			 hmm_last_error());
		made_free(e->made, e->nmade);
		free(e);
		return ret;
	}
	made_seen(e);
	/* one context, many clients: a tensor's asynchronous errors are
	   its own, for its client alone (move.c) */
	hmm_engine_async_by_tensor(e->h);
	e->cfg = cfg;
	e->chunk = cfg->chunk_bytes ? cfg->chunk_bytes : HMMD_CHUNK_DEF;
	e->budget = hc.host_budget;
	e->wait_ms = cfg->wait_ms ? cfg->wait_ms : 10000;
	e->next_tid = 1;
	pthread_mutex_init(&e->open_lock, NULL);
	pthread_mutex_init(&e->lock, NULL);
	sweep(e);
	hmmd_log("engine: store %s, host budget %llu bytes, chunk %u bytes",
		 cfg->store_path ? cfg->store_path : "none (host only)",
		 (unsigned long long)e->budget, e->chunk);
	if (cfg->store_path) {	/* the I/O knobs in force */
		struct hmm_stats hs;

		hmm_stats(e->h, &hs);
		hmmd_log("engine: store pool %llu bytes%s, %llu I/Os in "
			 "flight, queue depth %llu",
			 (unsigned long long)hs.pool_bytes,
			 hs.store_buffers_registered ? " (registered)" : "",
			 (unsigned long long)hs.io_depth,
			 (unsigned long long)hs.queue_depth);
	}
	*out = e;
	return 0;
}

void hmmd_engine_stop(struct hmmd_engine *e)
{
	struct hmmd_client *cl;

	pthread_mutex_lock(&e->lock);
	e->stopping = 1;
	for (cl = e->clients; cl; cl = cl->next)	/* waits end */
		hmm_budget_cancel(e->h, &cl->cancel, -ESHUTDOWN);
	pthread_mutex_unlock(&e->lock);
}

int hmmd_engine_close(struct hmmd_engine *e)
{
	struct hmmd_tensor *dt, *next;
	unsigned kept = 0;
	int ret = 0;

	/* no client is left: temporaries go, persistent ones stay */
	for (dt = e->tensors; dt; dt = next) {
		next = dt->next;
		if (dt->flags & HMM_PROTO_TENSOR_PERSIST && !dt->freed) {
			kept++;
			continue;
		}
		hmm_tensor_free(dt->t);
	}
	if (e->cfg->store_path) {
		ret = hmm_flush(e->h);
		if (ret)
			hmmd_log("engine: flush at stop: %s", hmm_last_error());
		else
			hmmd_log("engine: flushed %u persistent tensors", kept);
	}
	hmm_close(e->h);
	for (dt = e->tensors; dt; dt = next) {
		next = dt->next;
		free(dt);
	}
	while (e->uids) {		/* kept for their reach */
		struct hmmd_uid *u = e->uids;

		e->uids = u->next;
		free(u);
	}
	pthread_mutex_destroy(&e->lock);
	pthread_mutex_destroy(&e->open_lock);
	made_free(e->made, e->nmade);
	free(e);
	return ret;
}

void hmmd_engine_discard(struct hmmd_engine *e)
{
	struct hmmd_made *made = e->made;
	unsigned n = e->nmade, i;
	struct stat st;

	e->made = NULL;
	e->nmade = 0;
	hmmd_engine_close(e);
	for (i = 0; i < n; i++) {
		const char *path = made[i].path;

		if (lstat(path, &st) || st.st_dev != made[i].dev ||
		    st.st_ino != made[i].ino)
			hmmd_log("engine: store %s: not the file this start "
				 "made any more; left", path);
		else if (unlink(path))
			hmmd_log("engine: store %s: made by this start, cannot "
				 "remove it: %s", path, strerror(errno));
		else
			hmmd_log("engine: removed the store %s (new, made by "
				 "this failed start)", path);
	}
	made_free(made, n);
}

/* ---- quotas and back-pressure ------------------------------------------- */

int eng_admit(struct hmmd_engine *e, struct hmmd_client *cl, uint64_t charge,
	      int nowait)
{
	struct hmm_admit a = {
		.tier = HMM_TIER_HOST, .bytes = charge, .owner = &cl->u->own,
		.cancel = &cl->cancel,
		.wait_s = nowait ? 0 : e->wait_ms / 1000.0,
	};
	int ret;

	if (e->stopping)
		return -ESHUTDOWN;
	if (cl->gone)
		return -ECONNRESET;
	pthread_mutex_unlock(&e->lock);	/* unmaps make the room */
	ret = hmm_budget_admit_locked(e->h, &a);
	pthread_mutex_lock(&e->lock);
	if (a.waited_s > 0) {
		cl->waits++;
		e->wait_ns += (uint64_t)(a.waited_s * 1e9);
	}
	if (ret)
		return ret;
	cl->used[HMM_TIER_HOST] += charge;
	if (e->stopping || cl->gone) {
		eng_release(e, cl, charge);
		return e->stopping ? -ESHUTDOWN : -ECONNRESET;
	}
	return 0;
}

void eng_client_gone(struct hmmd_engine *e, struct hmmd_client *cl)
{
	pthread_mutex_lock(&e->lock);
	cl->gone = 1;
	pthread_mutex_unlock(&e->lock);
	hmm_budget_cancel(e->h, &cl->cancel, -ECONNRESET);
}

void eng_release(struct hmmd_engine *e, struct hmmd_client *cl,
		 uint64_t charge)
{
	hmm_budget_owner_release(e->h, &cl->u->own, HMM_TIER_HOST, charge);
	cl->used[HMM_TIER_HOST] -= charge;
}

void eng_quota_sync(struct hmmd_engine *e, struct hmmd_uid *u)
{
	struct hmmd_client *cl;

	for (cl = e->clients; cl; cl = cl->next)
		if (cl->u == u)
			cl->quota[HMM_TIER_HOST] = u->quota;
	hmm_budget_owner_quota(e->h, &u->own, HMM_TIER_HOST, u->quota);
}

uint64_t eng_pinned(struct hmmd_engine *e)
{
	uint64_t now, peak, waits;

	hmm_budget_owners(e->h, HMM_TIER_HOST, &now, &peak, &waits);
	return now;
}

uint64_t eng_uid_pinned(struct hmmd_engine *e, struct hmmd_uid *u)
{
	return hmm_budget_owner_used(e->h, &u->own, HMM_TIER_HOST);
}

/* ---- metrics ---------------------------------------------------------------- */

/* A series read from a uint64_t field of a struct. */
struct u64_metric {
	const char *name, *type, *help;
	size_t off;
};

/* The per-tier series, each a field of struct hmm_tier_stats. */
static const struct u64_metric tier_metrics[] = {
	{ "hmm_tier_capacity_bytes", "gauge", "Budget of a tier.",
	  offsetof(struct hmm_tier_stats, capacity) },
	{ "hmm_tier_resident_bytes", "gauge", "Bytes allocated to chunks.",
	  offsetof(struct hmm_tier_stats, resident) },
	{ "hmm_tier_bytes_in_total", "counter", "Bytes copied into a tier.",
	  offsetof(struct hmm_tier_stats, bytes_in) },
	{ "hmm_tier_evictions_total", "counter", "Chunks dropped from a tier.",
	  offsetof(struct hmm_tier_stats, evictions) },
};

/* The store's I/O knobs in force and what they allowed (struct hmm_stats). */
static const struct u64_metric store_metrics[] = {
	{ "hmm_store_pool_bytes", "gauge",
	  "The store's pinned I/O pool (config pool_bytes).",
	  offsetof(struct hmm_stats, pool_bytes) },
	{ "hmm_store_queue_depth", "gauge",
	  "The store's io_uring entries (config queue_depth).",
	  offsetof(struct hmm_stats, queue_depth) },
	{ "hmm_store_io_depth", "gauge",
	  "Store I/Os kept in flight at most (config io_depth).",
	  offsetof(struct hmm_stats, io_depth) },
	{ "hmm_store_io_inflight_peak", "gauge",
	  "Most store I/Os seen in flight at once.",
	  offsetof(struct hmm_stats, io_inflight_peak) },
	{ "hmm_store_buffers_registered", "gauge",
	  "1: the pool is registered with io_uring (fixed buffers).",
	  offsetof(struct hmm_stats, store_buffers_registered) },
};

/* The module bridge's counters (struct hmmd_bridge_stats), when attached. */
static const struct u64_metric bridge_metrics[] = {
	{ "hmmd_bridge_evictions_total", "counter",
	  "Module pages stored for the module and completed.",
	  offsetof(struct hmmd_bridge_stats, evictions) },
	{ "hmmd_bridge_fills_total", "counter",
	  "Module pages read back for faults and completed.",
	  offsetof(struct hmmd_bridge_stats, fills) },
	{ "hmmd_bridge_forgets_total", "counter",
	  "Module regions whose stored pages were dropped.",
	  offsetof(struct hmmd_bridge_stats, forgets) },
	{ "hmmd_bridge_failed_total", "counter",
	  "Module requests completed with an error.",
	  offsetof(struct hmmd_bridge_stats, failed) },
	{ "hmmd_bridge_flushes_total", "counter",
	  "Flushes of the module's store.",
	  offsetof(struct hmmd_bridge_stats, flushes) },
};

/* Append to buf at *n; past cap, *n still counts what was not written. */
static void __attribute__((format(printf, 4, 5)))
put(char *buf, size_t cap, size_t *n, const char *fmt, ...)
{
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(buf + *n, *n < cap ? cap - *n : 0, fmt, ap);
	va_end(ap);
	if (k > 0)
		*n += k;
}

/*
 * Append each series of tab (ntab) in Prometheus text: one sample per
 * struct of base[0..count) (stride bytes apart), labelled
 * label="labels[i]", or, with labels NULL, one unlabelled sample of base.
 */
static void put_series(char *buf, size_t cap, size_t *n,
		       const struct u64_metric *tab, size_t ntab,
		       const void *base, size_t stride, const char *label,
		       const char *const *labels, unsigned count)
{
	for (size_t m = 0; m < ntab; m++) {
		put(buf, cap, n, "# HELP %s %s\n# TYPE %s %s\n", tab[m].name,
		    tab[m].help, tab[m].name, tab[m].type);
		for (unsigned i = 0; i < (labels ? count : 1); i++) {
			unsigned long long v = *(const uint64_t *)
				((const char *)base + i * stride + tab[m].off);

			if (labels)
				put(buf, cap, n, "%s{%s=\"%s\"} %llu\n",
				    tab[m].name, label, labels[i], v);
			else
				put(buf, cap, n, "%s %llu\n", tab[m].name, v);
		}
	}
}

void hmmd_engine_set_bridge(struct hmmd_engine *e, struct hmmd_bridge *b)
{
	e->bridge = b;
}

size_t hmmd_engine_metrics(struct hmmd_engine *e, char *buf, size_t cap)
{
	static const char *const tn[HMM_TIERS] = { "device", "host", "store" };
	uint64_t pinned, peak, waits;	/* the engine's host ledger */
	struct hmm_stats st;
	struct hmmd_client *cl;
	size_t n = 0;

#define P(...)	put(buf, cap, &n, __VA_ARGS__)
	hmm_stats(e->h, &st);
	hmm_budget_owners(e->h, HMM_TIER_HOST, &pinned, &peak, &waits);
	put_series(buf, cap, &n, tier_metrics, sizeof(tier_metrics) /
		   sizeof(*tier_metrics), st.tier, sizeof(st.tier[0]), "tier",
		   tn, HMM_TIERS);
	if (e->cfg->store_path)
		put_series(buf, cap, &n, store_metrics, sizeof(store_metrics) /
			   sizeof(*store_metrics), &st, 0, NULL, NULL, 1);
	if (e->bridge) {
		struct hmmd_bridge_stats bs;

		hmmd_bridge_stats(e->bridge, &bs);
		put_series(buf, cap, &n, bridge_metrics,
			   sizeof(bridge_metrics) / sizeof(*bridge_metrics),
			   &bs, 0, NULL, NULL, 1);
	}
	pthread_mutex_lock(&e->lock);
	P("# HELP hmmd_clients Clients connected.\n"
	  "# TYPE hmmd_clients gauge\nhmmd_clients %llu\n",
	  (unsigned long long)e->nclients);
	P("# HELP hmmd_tensors Tensors held.\n"
	  "# TYPE hmmd_tensors gauge\nhmmd_tensors %llu\n",
	  (unsigned long long)st.tensors);
	P("# HELP hmmd_pinned_bytes Host bytes pinned by clients' maps.\n"
	  "# TYPE hmmd_pinned_bytes gauge\nhmmd_pinned_bytes %llu\n",
	  (unsigned long long)pinned);
	P("# HELP hmmd_maps_total Maps served.\n"
	  "# TYPE hmmd_maps_total counter\nhmmd_maps_total %llu\n",
	  (unsigned long long)e->maps);
	P("# HELP hmmd_waits_total Maps that waited for the budget.\n"
	  "# TYPE hmmd_waits_total counter\nhmmd_waits_total %llu\n",
	  (unsigned long long)waits);
	P("# HELP hmmd_wait_seconds_total Time maps waited for the budget.\n"
	  "# TYPE hmmd_wait_seconds_total counter\n"
	  "hmmd_wait_seconds_total %.6f\n", e->wait_ns / 1e9);
	P("# HELP hmmd_copy_bytes_total Bytes copied between the engine "
	  "and clients: into a copy map's memfd at the map, back at the "
	  "unmap of a write map (maps of a tensor's own memfd copy "
	  "nothing).\n# TYPE hmmd_copy_bytes_total counter\n"
	  "hmmd_copy_bytes_total %llu\n", (unsigned long long)e->copy_bytes);
	P("# HELP hmmd_client_quota_bytes Host quota of a client.\n"
	  "# TYPE hmmd_client_quota_bytes gauge\n");
	for (cl = e->clients; cl; cl = cl->next)
		P("hmmd_client_quota_bytes{client=\"%llu\",uid=\"%u\"} %llu\n",
		  (unsigned long long)cl->id, (unsigned)cl->uid,
		  (unsigned long long)cl->quota[HMM_TIER_HOST]);
	P("# HELP hmmd_client_pinned_bytes Host bytes a client pins.\n"
	  "# TYPE hmmd_client_pinned_bytes gauge\n");
	for (cl = e->clients; cl; cl = cl->next)
		P("hmmd_client_pinned_bytes{client=\"%llu\",uid=\"%u\"} %llu\n",
		  (unsigned long long)cl->id, (unsigned)cl->uid,
		  (unsigned long long)cl->used[HMM_TIER_HOST]);
	pthread_mutex_unlock(&e->lock);
#undef P
	return n < cap ? n : cap ? cap - 1 : 0;
}
