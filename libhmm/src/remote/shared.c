// SPDX-License-Identifier: MIT
/*
 * shared.c — shared mode: a context opened with hmm_config.daemon =
 * "unix:PATH" is a connection to hmmd (client.c) and the same hmm.h API
 * forwards to it.  One struct hmm and one struct hmm_tensor serve both
 * modes: h->remote / t->remote say which.  The forwarding of tensors,
 * map/unmap, prefetch/evict, wait/flush and stats sits at the top of
 * those calls (tensor.c, map.c, stats.c); this file opens and closes the
 * connection and holds hmm_tensor_open's remote half (see ctx.h).
 *
 * Differences from the embedded engine, as hmmd serves it:
 *  - hmmd serves the host tier; a device is this process's own
 *    (config.device): a device map is staged through a host map in
 *    hmmd (shared_dev.c), a prefetch at the device prefetches to hmmd's
 *    host, an evict at the device has nothing to do;
 *  - transparent regions live in this process (region.c): backed by
 *    hmmk.ko when hmmd is the module's daemon (region_hmmk.c), else by
 *    userfaultfd here with evicted blocks kept in an hmmd tensor; their
 *    resident bytes count against config.host_budget in this process;
 *  - hmm_tensor_open() attaches the caller's uid's persistent tensor of
 *    that name in hmmd; hmm_tensor_new() tensors are not kept by a flush
 *    (hmmd keeps only tensors made persistent through its protocol);
 *  - hmm_wait() sends WAIT (protocol 2): hmmd answers once this client's
 *    prefetches and evictions are done, with the first error they met;
 *  - step markers are counted here only (hmmd's policy is LRU);
 *  - hmm_stats() is hmmd's engine counters (all clients, STATS2), with
 *    this context's step count and region counters;
 *  - a map over this client's hmmd quota waits there, up to hmmd's
 *    wait_ms, for this client's own unmaps; one larger than the whole
 *    quota (-EDQUOT there) is -ENOMEM, as a map over the budget is in
 *    the embedded engine;
 *  - store_path and device are ignored (hmmd has its own); the trace
 *    (trace_path, HMM_TRACE) shows this process's side: each map, evict,
 *    wait and flush as the time hmmd took to answer it, and its regions'
 *    faults and evictions.
 */
#include <errno.h>
#include <string.h>

#include "chunk.h"
#include "client.h"
#include "err.h"

#undef hmm_tensor_open

int hmm_shared_open(struct hmm *h, const struct hmm_config *cfg)
{
	if (strncmp(cfg->daemon, "unix:", 5) || !cfg->daemon[5])
		return hmm_err(-EINVAL, "config.daemon '%s': not unix:PATH",
			       cfg->daemon);
	return hmm_remote_open(cfg, &h->remote);
}

void hmm_shared_close(struct hmm *h)
{
	hmm_region_fini(h);	/* their blocks are in hmmd: first */
	hmm_client_close(h->remote);
	h->remote = NULL;
}

int hmm_shared_tensor_open(struct hmm *h, const char *name,
			   struct hmm_tensor **out)
{
	struct hmm_remote_tensor *rt;
	int r;

	if (!name || !*name || strlen(name) > 63 || !out)
		return hmm_err(-EINVAL, "hmm_tensor_open: a name of 1..63 "
			       "bytes and out are required");
	r = hmm_remote_tensor_open(h->remote, name, &rt);
	if (r < 0)
		return r;
	return hmm_tensor_wrap_remote(h, rt, out);
}
