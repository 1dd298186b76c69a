// SPDX-License-Identifier: MIT
/*
 * ctx.c — the context both backends start from (hmm_ctx_new/free), the
 * embedded engine's open and close and its backend table, steps.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "chunk.h"
#include "dev.h"
#include "err.h"
#include "knobs.h"
#include "node.h"

double hmm_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void hmm_cond_wait_until(struct hmm *h, double until)
{
	struct timespec ts;
	double now = hmm_now();

	if (until - now > 0.05)
		until = now + 0.05;
	ts.tv_sec = (time_t)until;
	ts.tv_nsec = (long)((until - ts.tv_sec) * 1e9);
	pthread_cond_timedwait(&h->cond, &h->lock, &ts);
}

/* Keep the first asynchronous error for hmm_wait (h->lock held). */
void hmm_async_error(struct hmm *h, int err, const char *fmt, ...)
{
	va_list ap;

	if (h->async_err)
		return;
	h->async_err = err;
	va_start(ap, fmt);
	vsnprintf(h->async_detail, sizeof(h->async_detail), fmt, ap);
	va_end(ap);
}

int hmm_async_take(struct hmm *h)
{
	int r = h->async_err;

	if (r)
		hmm_err(r, "%s", h->async_detail);
	h->async_err = 0;
	return r;
}

static int config_check(const struct hmm_config *c)
{
	unsigned i;
	int r;

	if (!c->host_budget)
		return hmm_err(-EINVAL, "config.host_budget: must be > 0");
	if (c->chunk_bytes % HMM_PAGE || c->chunk_bytes > (1u << 30))
		return hmm_err(-EINVAL, "config.chunk_bytes %u: must be a "
			       "multiple of 4096, at most 1 GiB",
			       c->chunk_bytes);
	if (c->policy > HMM_POLICY_SCHEDULE)
		return hmm_err(-EINVAL, "config.policy %u: unknown",
			       c->policy);
	if (c->device && strcmp(c->device, "none") &&
	    strcmp(c->device, "sim") && strcmp(c->device, "cuda") &&
	    strcmp(c->device, "uvm"))
		return hmm_err(-EINVAL, "config.device '%s': not none, sim, "
			       "cuda or uvm", c->device);
	if (c->flags & ~(HMM_CONFIG_STORE_BUFFERED | HMM_CONFIG_STORE_KEEP |
			 HMM_CONFIG_HOST_SHARED | HMM_CONFIG_STORE_FORMAT))
		return hmm_err(-EINVAL, "config.flags %#x: unknown bits",
			       c->flags);
	if ((c->flags & HMM_CONFIG_STORE_KEEP) &&
	    (c->flags & HMM_CONFIG_STORE_FORMAT))
		return hmm_err(-EINVAL, "config.flags: STORE_KEEP and "
			       "STORE_FORMAT exclude each other");
	r = hmm_node_check(c->numa_node, "config.numa_node");
	if (r)
		return r;
	if (c->store_path && !*c->store_path)
		return hmm_err(-EINVAL, "config.store_path: empty");
	if (c->host_dir && !(c->flags & HMM_CONFIG_HOST_SHARED))
		return hmm_err(-EINVAL, "config.host_dir '%s': needs flag "
			       "HMM_CONFIG_HOST_SHARED", c->host_dir);
	r = hmm_knobs_check(c);
	if (r < 0)
		return r;
	for (i = 0; i < sizeof(c->reserved) / sizeof(c->reserved[0]); i++)
		if (c->reserved[i])
			return hmm_err(-EINVAL, "config.reserved[%u]: must "
				       "be zero", i);
	return 0;
}

/*
 * Without KEEP or FORMAT: the store just opened (a new or empty one was
 * formatted, foreign data refused) must hold no named tensors; a used
 * one is formatted anew.  I/O thread running; 0 or -errno.
 */
static int ctx_store_fresh(struct hmm *h, const struct hmm_config *cfg)
{
	struct hmm_store_stats st;
	struct hmm_config fmt;
	char why[512];
	uint32_t n;
	int r;

	r = hmm_persist_load(h, cfg->store_path);
	n = h->nsaved;
	hmm_persist_fini(h);
	h->next_id = 0;
	if (r < 0) {	/* the detail names the store: keep it, a copy */
		snprintf(why, sizeof(why), "%s", hmm_last_error());
		return hmm_err(r == -EINVAL ? -EEXIST : r, "%s", why);
	}
	if (n)
		return hmm_err(-EEXIST, "store %s: hmm store with %u named "
			       "tensor%s (HMM_CONFIG_STORE_KEEP keeps them, "
			       "HMM_CONFIG_STORE_FORMAT formats it)",
			       cfg->store_path, n, n == 1 ? "" : "s");
	hmm_store_stats(h->store, &st);
	if (st.generation <= 1)
		return 0;	/* as formatted: never flushed */
	hmm_iot_stop(h);
	fmt = *cfg;
	fmt.flags |= HMM_CONFIG_STORE_FORMAT;
	return hmm_iot_start(h, &fmt);
}

static int ctx_dev_open(struct hmm *h, const struct hmm_config *cfg)
{
	uint64_t cap = 0, gran = HMM_PAGE;
	int r;

	if (!cfg->device || !strcmp(cfg->device, "none"))
		return 0;
	h->dev = !strcmp(cfg->device, "sim") ? &hmm_dev_sim :
		 !strcmp(cfg->device, "uvm") ? &hmm_dev_uvm : &hmm_dev_cuda;
	r = h->dev->open(cfg, &h->dev_priv, &cap, &gran);
	if (r < 0) {
		h->dev = NULL;
		return r;
	}
	h->tier[HMM_TIER_DEVICE].cap = cap;
	h->dev_gran = gran > HMM_PAGE ? gran : HMM_PAGE;
	return 0;
}

/*
 * The host tier's directory: a tmpfs (shmem pages, shareable like a
 * memfd's, and huge when mounted with huge=), opened once so that every
 * tensor's file is an O_TMPFILE in it (tensor.c).
 */
static int ctx_host_dir_open(struct hmm *h, const char *dir)
{
	struct statfs sf;
	int fd;

	fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return hmm_err(-errno, "config.host_dir '%s': %s", dir,
			       strerror(errno));
	if (fstatfs(fd, &sf) < 0 || sf.f_type != TMPFS_MAGIC) {
		close(fd);
		return hmm_err(-EINVAL, "config.host_dir '%s': not a tmpfs "
			       "(host memory there would be a disk file)",
			       dir);
	}
	h->host_dirfd = fd;
	return 0;
}

static void ctx_init(struct hmm *h, const struct hmm_config *cfg)
{
	pthread_condattr_t ca;
	int i;

	pthread_mutex_init(&h->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->cond, &ca);
	pthread_cond_init(&h->io_cond, &ca);
	pthread_cond_init(&h->crc_cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&h->trace_lock, NULL);
	pthread_mutex_init(&h->dl_lock, NULL);
	h->cfg = *cfg;
	h->cfg.store_path = h->cfg.device = h->cfg.daemon = NULL;
	h->cfg.trace_path = h->cfg.host_dir = NULL;
	h->host_dirfd = -1;
	if (!h->cfg.chunk_bytes)
		h->cfg.chunk_bytes = 2u << 20;
	if (!h->cfg.prefetch_depth)
		h->cfg.prefetch_depth = 16;
	if (!h->cfg.wait_ms)
		h->cfg.wait_ms = 10000;
	hmm_knobs_resolve(&h->cfg);
	h->chunk_bytes = h->cfg.chunk_bytes;
	for (i = 0; i < HMM_TIERS; i++)
		hmm_list_init(&h->tier[i].lru);
	h->tier[HMM_TIER_HOST].cap = cfg->host_budget;
	h->tier[HMM_TIER_STORE].cap = cfg->store_size;
	hmm_list_init(&h->ioq);
	hmm_list_init(&h->wantq);
	hmm_list_init(&h->regions);
	h->t_open = hmm_now();
}

int hmm_ctx_new(const struct hmm_config *cfg, struct hmm **out)
{
	const char *trace;
	struct hmm *h;
	int r;

	r = config_check(cfg);
	if (r < 0)
		return r;
	h = calloc(1, sizeof(*h));
	if (!h)
		return hmm_err(-ENOMEM, "hmm_open: no memory for the context");
	ctx_init(h, cfg);
	hmm_budget_register(h, &hmm_spare_reclaimer);	/* first: free */
	hmm_budget_register(h, &hmm_policy_reclaimer);
	hmm_budget_register(h, &hmm_region_reclaimer);
	trace = cfg->trace_path ? cfg->trace_path : getenv("HMM_TRACE");
	if (trace && *trace) {
		r = hmm_trace_open(h, trace);
		if (r < 0)
			goto out_free;
	}
	/* both backends: a device is this process's */
	r = ctx_dev_open(h, cfg);
	if (r < 0)
		goto out_trace;
	if (h->dev && cfg->device_budget &&
	    cfg->device_budget < h->tier[HMM_TIER_DEVICE].cap)
		h->tier[HMM_TIER_DEVICE].cap = cfg->device_budget;
	*out = h;
	return 0;

out_trace:
	hmm_trace_close(h);
out_free:
	free(h);
	return r;
}

void hmm_ctx_free(struct hmm *h)
{
	if (h->dev)
		h->dev->close(h->dev_priv);
	hmm_policy_fini(h);
	hmm_spare_fini(h);
	hmm_trace_close(h);
	free(h->tensors);
	pthread_cond_destroy(&h->io_cond);
	pthread_cond_destroy(&h->crc_cond);
	pthread_cond_destroy(&h->cond);
	pthread_mutex_destroy(&h->lock);
	pthread_mutex_destroy(&h->trace_lock);
	pthread_mutex_destroy(&h->dl_lock);
	free(h);
}

int hmm_engine_open(const struct hmm_config *cfg, struct hmm **out)
{
	struct hmm *h;
	int r;

	r = hmm_ctx_new(cfg, &h);
	if (r < 0)
		return r;
	h->be = &hmm_engine_backend;
	if (cfg->host_dir) {
		r = ctx_host_dir_open(h, cfg->host_dir);
		if (r < 0)
			goto out_ctx;
	}
	if (cfg->store_path) {
		r = hmm_iot_start(h, cfg);
		if (r < 0)
			goto out_ctx;
		if (cfg->flags & HMM_CONFIG_STORE_KEEP)
			r = hmm_persist_load(h, cfg->store_path);
		else if (!(cfg->flags & HMM_CONFIG_STORE_FORMAT))
			r = ctx_store_fresh(h, cfg);
		if (r < 0)
			goto out_iot;
	}
	*out = h;
	return 0;

out_iot:
	hmm_iot_stop(h);
	hmm_persist_fini(h);	/* what a tensor table that failed had */
out_ctx:
	if (h->host_dirfd >= 0)
		close(h->host_dirfd);
	hmm_ctx_free(h);
	return r;
}

static void engine_close(struct hmm *h)
{
	hmm_region_fini(h);
	while (h->ntensors)	/* each takes itself out */
		hmm_tensor_destroy(h->tensors[h->ntensors - 1], 0);
	hmm_iot_stop(h);
	hmm_persist_fini(h);
	if (h->host_dirfd >= 0)
		close(h->host_dirfd);
	hmm_ctx_free(h);
}

int hmm_ctx_step(struct hmm *h, int begin)
{
	int r;

	pthread_mutex_lock(&h->lock);
	r = begin ? hmm_policy_step_begin(h) : hmm_policy_step_end(h);
	pthread_mutex_unlock(&h->lock);
	return r;
}

/* Designated: prefetch and evict (and others) share a signature, so a
 * positional table could swap them silently. */
const struct hmm_backend hmm_engine_backend = {
	.name = "embedded", .open = hmm_engine_open, .close = engine_close,
	.tensor_new = hmm_engine_tensor_new,
	.tensor_open = hmm_engine_tensor_open,
	.tensor_free = hmm_engine_tensor_free,
	.residency = hmm_engine_residency, .host_fd = hmm_engine_host_fd,
	.map = hmm_engine_map, .unmap = hmm_engine_unmap,
	.prefetch = hmm_engine_prefetch, .evict = hmm_engine_evict,
	.writeback = hmm_engine_writeback,
	.wait = hmm_engine_wait, .flush = hmm_engine_flush,
	.stats = hmm_engine_stats,
	.region_whole = hmm_region_uvm_whole,	/* uvm: managed memory */
	.region_back = hmm_region_store_back,
};
