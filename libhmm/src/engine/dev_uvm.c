// SPDX-License-Identifier: MIT
/*
 * dev_uvm.c — the "uvm" device: a tensor's device range is CUDA managed
 * memory (cuMemAllocManaged), and hmm's policy, not the driver's fault
 * heuristics, decides where it lives.
 *
 * Memory: reserve allocates the whole range managed and advises it
 * preferred on the host and accessed by the GPU: the driver then
 * migrates nothing on a fault (a kernel touching a page hmm did not
 * bring reads it over the link), so pages move only when hmm says.
 * populate is cuMemPrefetchAsync to the GPU (the chunk becomes resident
 * there; budgeted per chunk as on "cuda"), depopulate cuMemPrefetchAsync
 * back to the host (the eviction; its device pages are free again).
 * Both are queued on the copy stream and never waited for under
 * h->lock; stream order puts a chunk's copy after its prefetch.  The
 * schedule policy's prefetch (prefetch_depth ahead) is what calls
 * populate ahead of use, as on every device.
 *
 * Copies: "cuda"'s staged cuMemcpyHtoDAsync/DtoHAsync (dev_cuda.c,
 * dev_cu.h), which on managed memory resident at the GPU are device-side
 * writes and reads.  The host side of an evicted chunk is the tensor's
 * own host chunk, which goes on to the store as any other.
 *
 * A tensor chunk's managed pages never need their contents moved: the
 * engine makes a chunk resident at the device only to overwrite it (an
 * H2D copy, or a DISCARD map), and drops it there only once the host
 * holds it, or nobody wants it.  So, where the driver has them (CUDA
 * 13), populate_blank is cuMemDiscardAndPrefetchBatchAsync to the GPU
 * (pages placed there, nothing migrated) and discard is
 * cuMemDiscardBatchAsync (the pages need not go back: the driver frees
 * them without a copy): each chunk crosses the link once a load and
 * once an eviction, by hmm's copies.  Without them both fall back to
 * the prefetches above, and a chunk moves twice each way (its stale
 * pages, then the copy), its evicted pages kept in host memory that
 * config.host_budget does not count.  Regions (region_uvm.c) keep
 * populate and depopulate: their managed range is the only copy.
 *
 * Device pointers are host-valid addresses: a map at the device gives a
 * pointer a kernel may touch, and the host too (coherent, but slow).
 * Tested without a GPU on tests/fakecuda (test_uvm_fake.sh), whose
 * range attributes say where each chunk was last moved.
 */
#include <errno.h>

#include "ctx.h"
#include "dev_cu.h"
#include "err.h"

#define UVM_DISCARD_UNIT	(2ull << 20)	/* the driver's large page */

static int uvm_open(const struct hmm_config *cfg, void **priv,
		    uint64_t *capacity, uint64_t *granularity)
{
	return hmm_cu_open(cfg, 1, priv, capacity, granularity);
}

static CUmemLocation uvm_loc(struct cu *c, int host)
{
	CUmemLocation l = { host ? CU_MEM_LOCATION_TYPE_HOST :
			    CU_MEM_LOCATION_TYPE_DEVICE, host ? 0 : c->dev };

	return l;
}

static int uvm_reserve(void *priv, uint64_t bytes, uint64_t *addr)
{
	struct cu *c = priv;
	const char *what = "cuMemAllocManaged";
	CUdeviceptr p = 0;
	CUresult r;

	if (hmm_cu_in(c))
		return -EIO;
	r = c->api.MemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL);
	if (!r) {
		what = "cuMemAdvise preferred location host";
		r = c->api.MemAdvise(p, bytes,
				     CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
				     uvm_loc(c, 1));
	}
	if (!r) {
		what = "cuMemAdvise accessed by the GPU";
		r = c->api.MemAdvise(p, bytes, CU_MEM_ADVISE_SET_ACCESSED_BY,
				     uvm_loc(c, 0));
	}
	if (r && p)
		c->api.MemFree(p);
	hmm_cu_out(c);
	if (r)
		return hmm_err(hmm_cu_errno(r), "device uvm: %s, %llu bytes: "
			       "%s (%d)", what, (unsigned long long)bytes,
			       hmm_cu_str(c, r), r);
	*addr = p;
	return 0;
}

static void uvm_release(void *priv, uint64_t addr, uint64_t bytes)
{
	struct cu *c = priv;

	if (hmm_cu_in(c))
		return;
	/* its depopulate may still be queued: cuMemFree only "may" wait
	 * for work on the range (cuda.h), so the stream is drained first */
	c->api.StreamSynchronize(c->stream);
	c->api.MemFree(addr);
	hmm_cu_out(c);
}

/* Queues the move of [addr, addr + bytes) to the GPU or the host. */
static int uvm_move(struct cu *c, uint64_t addr, uint64_t bytes, int host)
{
	CUresult r;

	if (hmm_cu_in(c))
		return -EIO;
	r = c->api.MemPrefetchAsync(addr, bytes, uvm_loc(c, host), 0,
				    c->stream);
	hmm_cu_out(c);
	if (r)
		return hmm_err(hmm_cu_errno(r), "device uvm: "
			       "cuMemPrefetchAsync %#llx + %llu to the %s: "
			       "%s (%d)", (unsigned long long)addr,
			       (unsigned long long)bytes, host ? "host" :
			       "GPU", hmm_cu_str(c, r), r);
	return 0;
}

/*
 * A populate whose range its caller may touch at once (a DISCARD map's
 * pointer, a region's block): a discard still queued on the stream
 * (this range's, evicted a moment ago, or any) must have run first, or a
 * write racing it could be lost, so it is waited for here.  The stream
 * holds at most one copy and the prefetches queued with it: a short wait
 * under the caller's lock, and none when no discard was queued since.
 */
static int uvm_populate(void *priv, uint64_t addr, uint64_t bytes)
{
	struct cu *c = priv;
	int r = uvm_move(c, addr, bytes, 0);

	if (!r && c->discard_queued) {
		CUresult e;

		if (hmm_cu_in(c))
			return -EIO;
		e = c->api.EventSynchronize(c->discarded);
		hmm_cu_out(c);
		if (e)
			return hmm_err(hmm_cu_errno(e), "device uvm: waiting "
				       "for a discard: %s (%d)",
				       hmm_cu_str(c, e), e);
		c->discard_queued = 0;
	}
	return r;
}

/*
 * Queues the discard of [addr, addr + bytes), then (to_gpu) its
 * placement at the GPU; or, where the driver has no discards, or says it
 * does not support them (the first such answer turns them off), or for a
 * range that is not whole 2 MiB pages (how finely the driver discards is
 * not documented, and a neighbour's bytes must not go with it), the
 * prefetch that moves the contents instead.
 */
static int uvm_discard_as(struct cu *c, uint64_t addr, uint64_t bytes,
			  int to_gpu)
{
	CUdeviceptr p = addr;
	size_t n = bytes, first = 0;
	CUmemLocation gpu = uvm_loc(c, 0);
	CUresult r;

	if (!c->api.MemDiscardBatchAsync || c->no_discard ||
	    ((addr | bytes) & (UVM_DISCARD_UNIT - 1)))
		return uvm_move(c, addr, bytes, !to_gpu);
	if (hmm_cu_in(c))
		return -EIO;
	r = to_gpu ? c->api.MemDiscardAndPrefetchBatchAsync(&p, &n, 1, &gpu,
							    &first, 1, 0,
							    c->stream) :
		     c->api.MemDiscardBatchAsync(&p, &n, 1, 0, c->stream);
	if (!r && !to_gpu) {	/* uvm_populate waits for it */
		r = c->api.EventRecord(c->discarded, c->stream);
		c->discard_queued = !r;
	}
	hmm_cu_out(c);
	if (r == CUDA_ERROR_NOT_SUPPORTED) {
		c->no_discard = 1;
		return uvm_move(c, addr, bytes, !to_gpu);
	}
	if (r)
		return hmm_err(hmm_cu_errno(r), "device uvm: %s %#llx + %llu: "
			       "%s (%d)", to_gpu ?
			       "cuMemDiscardAndPrefetchBatchAsync to the GPU" :
			       "cuMemDiscardBatchAsync",
			       (unsigned long long)addr,
			       (unsigned long long)bytes, hmm_cu_str(c, r), r);
	return 0;
}

static int uvm_populate_blank(void *priv, uint64_t addr, uint64_t bytes)
{
	return uvm_discard_as(priv, addr, bytes, 1);
}

/* A failed move back leaves the pages where they are: the driver may
 * still migrate them itself under pressure; nothing is lost. */
static void uvm_depopulate(void *priv, uint64_t addr, uint64_t bytes)
{
	uvm_move(priv, addr, bytes, 1);
}

/* A failed discard leaves the pages where they are, as above. */
static void uvm_discard(void *priv, uint64_t addr, uint64_t bytes)
{
	uvm_discard_as(priv, addr, bytes, 0);
}

/* Designated: release and depopulate share a signature. */
const struct hmm_dev_ops hmm_dev_uvm = {
	.name = "uvm", .open = uvm_open, .close = hmm_cu_close,
	.reserve = uvm_reserve, .release = uvm_release,
	.populate = uvm_populate, .depopulate = uvm_depopulate,
	.populate_blank = uvm_populate_blank, .discard = uvm_discard,
	.copy = hmm_dev_queue_copy,
};
