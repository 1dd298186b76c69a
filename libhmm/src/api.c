// SPDX-License-Identifier: MIT
/*
 * api.c — the front door: every hmm.h call on a context checks its
 * arguments here, once, and then calls the context's backend (h->be,
 * engine/backend.h), which hmm_open picked (open.c).  Nothing here knows
 * which backend it is.  Also the calls that need no context:
 * hmm_config_default, hmm_strerror (sizes: base/size.c; errors:
 * base/err.c; JSON stats: stats_json.c; DLPack: dlpack.c).
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "chunk.h"
#include "err.h"

/* Validate a range call at a mappable tier; resolves HMM_ALL. */
static int range_check(const char *fn, struct hmm_tensor *t, uint64_t off,
		       uint64_t *len, int tier)
{
	if (!t)
		return hmm_err(-EINVAL, "%s: no tensor", fn);
	if (tier != HMM_TIER_HOST && tier != HMM_TIER_DEVICE)
		return hmm_err(-EINVAL, "%s: tensor %s: tier %d is not device "
			       "or host", fn, t->name, tier);
	if (tier == HMM_TIER_DEVICE && !t->h->dev)
		return hmm_err(-EINVAL, "%s: tensor %s: the device tier has no "
			       "backend (config.device is \"none\")", fn,
			       t->name);
	if (off >= t->bytes)
		return hmm_err(-EINVAL, "%s: tensor %s: offset %llu past the "
			       "end (%llu bytes)", fn, t->name,
			       (unsigned long long)off,
			       (unsigned long long)t->bytes);
	if (*len == HMM_ALL)
		*len = t->bytes - off;
	if (!*len || *len > t->bytes - off)
		return hmm_err(-EINVAL, "%s: tensor %s: range [%llu, +%llu) "
			       "outside [0, %llu)", fn, t->name,
			       (unsigned long long)off,
			       (unsigned long long)*len,
			       (unsigned long long)t->bytes);
	return 0;
}

void hmm_config_default(struct hmm_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->host_budget = 1ull << 30;
	cfg->device = "none";
	cfg->chunk_bytes = 2u << 20;
	cfg->policy = HMM_POLICY_LRU;
	cfg->prefetch_depth = 16;
	cfg->wait_ms = 10000;
	cfg->numa_node = -1;
}

uint64_t hmm_store_required(uint64_t bytes, uint32_t chunk_bytes)
{
	uint32_t c = chunk_bytes ? chunk_bytes : 2u << 20;

	return hmm_store_size_for(bytes / c + !!(bytes % c), c);
}

void hmm_close(struct hmm *h)
{
	/* with DLPack exports alive the last deleter closes it (dlpack.c) */
	if (h && hmm_dlpack_close(h))
		h->be->close(h);
}

/* ---- tensors ------------------------------------------------------------ */

int hmm_tensor_new(struct hmm *h, const char *name, uint32_t dtype,
		   unsigned ndim, const int64_t *shape,
		   struct hmm_tensor **out)
{
	uint64_t bytes;
	int r = hmm_tensor_check(h, name, dtype, ndim, shape, &bytes);

	if (r < 0)
		return r;
	if (!out)
		return hmm_err(-EINVAL, "tensor %s: out is NULL", name);
	return h->be->tensor_new(h, name, dtype, ndim, shape, out);
}

int hmm_tensor_open(struct hmm *h, const char *name, struct hmm_tensor **out)
{
	int r;

	if (!h || !name || !out)
		return hmm_err(-EINVAL, "hmm_tensor_open: context, name and "
			       "out are required");
	/* the rule of hmm_tensor_new: no such name is ever saved */
	r = hmm_tensor_name_check("hmm_tensor_open", name);
	return r < 0 ? r : h->be->tensor_open(h, name, out);
}

int hmm_tensor_free(struct hmm_tensor *t)
{
	if (!t)
		return hmm_err(-EINVAL, "hmm_tensor_free: no tensor");
	return t->h->be->tensor_free(t);
}

const char *hmm_tensor_name(const struct hmm_tensor *t) { return t->name; }
uint64_t hmm_tensor_bytes(const struct hmm_tensor *t) { return t->bytes; }
uint32_t hmm_tensor_dtype(const struct hmm_tensor *t) { return t->dtype; }
unsigned hmm_tensor_ndim(const struct hmm_tensor *t) { return t->ndim; }
const int64_t *hmm_tensor_shape(const struct hmm_tensor *t)
{
	return t->shape;
}

int hmm_tensor_residency(struct hmm_tensor *t, uint64_t bytes[])
{
	if (!t || !bytes)
		return hmm_err(-EINVAL, "hmm_tensor_residency: tensor and "
			       "bytes are required");
	return t->h->be->residency(t, bytes);
}

int hmm_tensor_host_fd(struct hmm_tensor *t, int *fd, uint64_t *off)
{
	if (!t || !fd || !off)
		return hmm_err(-EINVAL, "hmm_tensor_host_fd: tensor, fd and "
			       "off are required");
	return t->h->be->host_fd(t, fd, off);
}

/* ---- maps and moves ------------------------------------------------------ */

int hmm_map(struct hmm_tensor *t, uint64_t off, uint64_t len, int tier,
	    unsigned access, void **ptr)
{
	int r = range_check("hmm_map", t, off, &len, tier);

	if (r < 0)
		return r;
	if (!access || (access & ~(HMM_READ | HMM_WRITE | HMM_DISCARD)))
		return hmm_err(-EINVAL, "hmm_map: tensor %s: access %#x: not "
			       "READ, WRITE, DISCARD", t->name, access);
	if (!ptr)
		return hmm_err(-EINVAL, "hmm_map: tensor %s: ptr is NULL",
			       t->name);
	return t->h->be->map(t, off, len, tier, access, ptr);
}

int hmm_unmap(struct hmm_tensor *t, void *ptr)
{
	if (!t)
		return hmm_err(-EINVAL, "hmm_unmap: no tensor");
	return t->h->be->unmap(t, ptr);
}

int hmm_prefetch(struct hmm_tensor *t, uint64_t off, uint64_t len, int tier)
{
	int r = range_check("hmm_prefetch", t, off, &len, tier);

	return r < 0 ? r : t->h->be->prefetch(t, off, len, tier);
}

int hmm_evict(struct hmm_tensor *t, uint64_t off, uint64_t len, int tier)
{
	int r = range_check("hmm_evict", t, off, &len, tier);

	return r < 0 ? r : t->h->be->evict(t, off, len, tier);
}

int hmm_writeback(struct hmm_tensor *t, uint64_t off, uint64_t len)
{
	/* a host range: the chunks it writes are the host's */
	int r = range_check("hmm_writeback", t, off, &len,
			    HMM_TIER_HOST);

	return r < 0 ? r : t->h->be->writeback(t, off, len);
}

int hmm_wait(struct hmm *h, struct hmm_tensor *t)
{
	if (!h)
		return hmm_err(-EINVAL, "hmm_wait: no context");
	return h->be->wait(h, t);
}

int hmm_flush(struct hmm *h)
{
	if (!h)
		return hmm_err(-EINVAL, "hmm_flush: no context");
	return h->be->flush(h);
}

/* ---- steps and stats ------------------------------------------------------ */

int hmm_step_begin(struct hmm *h)
{
	if (!h)
		return hmm_err(-EINVAL, "hmm_step_begin: no context");
	return hmm_ctx_step(h, 1);
}

int hmm_step_end(struct hmm *h)
{
	if (!h)
		return hmm_err(-EINVAL, "hmm_step_end: no context");
	return hmm_ctx_step(h, 0);
}

int hmm_stats(struct hmm *h, struct hmm_stats *st)
{
	if (!h || !st)
		return hmm_err(-EINVAL, "hmm_stats: context and st required");
	return h->be->stats(h, st);
}

/* ---- regions ------------------------------------------------------------- */

int hmm_region_new(struct hmm *h, uint64_t bytes, void **ptr)
{
	if (!h || !ptr || !bytes || bytes > (1ull << 46))
		return hmm_err(-EINVAL, "hmm_region_new: bytes %llu: must be "
			       "1..2^46 with a context and ptr",
			       (unsigned long long)bytes);
	return hmm_region_create(h, bytes, ptr);
}

int hmm_region_advise(struct hmm *h, void *ptr, uint64_t len, int advice)
{
	if (!h || !len)
		return hmm_err(-EINVAL, "hmm_region_advise: no context or "
			       "zero length");
	if (advice < HMM_ADVISE_WILLNEED || advice > HMM_ADVISE_NORMAL)
		return hmm_err(-EINVAL, "hmm_region_advise: %p +%llu: unknown "
			       "advice %d", ptr, (unsigned long long)len,
			       advice);
	return hmm_region_advise_range(h, ptr, len, advice);
}

int hmm_region_free(struct hmm *h, void *ptr)
{
	if (!h)
		return hmm_err(-EINVAL, "hmm_region_free: no context");
	return hmm_region_destroy_at(h, ptr);
}

const char *hmm_strerror(int err)
{
	if (err == INT_MIN)	/* no negation in an int, and no errno */
		return "unknown error";
	switch (-err) {
	case 0: return "success";
	case EINVAL: return "invalid argument";
	case ENOMEM: return "out of memory (tier full of pinned chunks)";
	case ENOTSUP: return "not supported";
	case ENODEV: return "no such device or tier";
	case EBUSY: return "busy (still mapped)";
	case EIO: return "I/O error";
	case EUCLEAN: return "store damaged (its structures fail their checks)";
	case ENOSPC: return "no space left in the store";
	case EOVERFLOW: return "size overflows";
	case ENOENT: return "not found";
	case ENOSYS: return "not implemented by the kernel";
	case EPERM: return "not permitted";
	default: return strerror(-err);
	}
}
