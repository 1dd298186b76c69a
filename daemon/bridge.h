/* SPDX-License-Identifier: MIT */
/*
 * bridge.h — hmmd as the daemon of the hmmk kernel module: it attaches to
 * /dev/hmmk (DAEMON_ATTACH) and serves the module's EVICT and FILL
 * requests from a store file of its own (libhmm/src/store/store.h, the tree's
 * one store implementation, opened a second time on a different file).
 *
 * Extents are keyed region << 32 | page (region handles are unique per
 * module load).  An EVICT is completed only after its extent is written
 * and the store flushed, so a restarted hmmd on the same store serves the
 * pages an earlier one took.  A FILL of a key the store lacks fails (the
 * fault gets SIGBUS) rather than reading zeros.  A FORGET (the module
 * freed a region) drops every extent of that region.
 */
#ifndef HMMD_BRIDGE_H
#define HMMD_BRIDGE_H

#include <stdint.h>

struct hmmd_bridge;		/* allocated by _open, freed by _close */

/*
 * Attach to the module at dev and serve it from the store at store_path
 * (created with store_size bytes, 0 = 1 GiB, when absent or empty) on a
 * thread of its own: the store's ring binds to that thread.  Returns 0
 * and *out, or -errno with a logged reason: -ENOENT (no such device),
 * -EBUSY (another daemon is attached), or the store's error.
 *
 * Test knob: $HMMD_BRIDGE_FILL_DELAY_MS delays every FILL by that many
 * milliseconds while the request is held (the VM test kills hmmd then).
 *
 * Threading: call from the main thread, once.
 */
int hmmd_bridge_open(const char *dev, const char *store_path,
		     uint64_t store_size, struct hmmd_bridge **out);

/* Counters since open; a snapshot. */
struct hmmd_bridge_stats {
	uint64_t evictions;	/* pages stored and completed */
	uint64_t fills;		/* pages read back and completed */
	uint64_t forgets;	/* regions whose pages were dropped */
	uint64_t failed;	/* requests completed with an error */
	uint64_t flushes;	/* store flushes (one per batch that evicted) */
	uint64_t batches;	/* wake-ups that fetched requests */
};

/* Threading: any thread, while b is open. */
void hmmd_bridge_stats(struct hmmd_bridge *b, struct hmmd_bridge_stats *st);

/*
 * Stop the thread after the batch it serves, flush and close the store,
 * close the device (the module fails whatever it still queued for us).
 * NULL is a no-op.
 */
void hmmd_bridge_close(struct hmmd_bridge *b);

#endif /* HMMD_BRIDGE_H */
