/* SPDX-License-Identifier: MIT */
/*
 * fakecuda.h — what a test may ask the fake CUDA driver
 * (build/tests/fakecuda/libcuda.so.1) besides the driver API itself.
 *
 * A test that finds the fake loaded (dlopen("libcuda.so.1",
 * RTLD_NOLOAD) then dlsym "fakecuda_stats") can check what the driver
 * saw: contract violations, leaks, the device bytes allocated
 * (cuMemCreate) at most at once, and where managed memory was moved.
 * Append only: the integration scripts read it through ctypes.  With the real driver the symbol is
 * absent and those checks are skipped.
 *
 * Threading: fakecuda_stats may be called from any thread at any time.
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <stdint.h>

struct fakecuda_stats {
	uint64_t calls;		/* driver entry points called */
	uint64_t violations;	/* calls that broke a documented contract */
	uint64_t leaks;		/* objects left at context destroy or exit */
	uint64_t injected;	/* failures made by FAKECUDA_FAIL */
	uint64_t dev_total;	/* FAKECUDA_MEM */
	uint64_t dev_used;	/* bytes of live cuMemCreate allocations */
	uint64_t dev_peak;	/* the most dev_used ever was */
	uint64_t async_copies;	/* copies run on a stream's worker */
	uint64_t sync_copies;	/* copies from pageable memory, done inline */
	uint64_t ctx_current;	/* contexts current (stacked) on the calling
				   thread: what a library left behind */
	/* managed memory (cuMemAllocManaged) */
	uint64_t managed_bytes;	/* live managed allocations */
	uint64_t managed_dev;	/* of them resident at the device (moved
				   there by cuMemPrefetchAsync) */
	uint64_t managed_dev_peak; /* the most managed_dev ever was */
	uint64_t prefetch_dev;	/* bytes prefetched to the device */
	uint64_t prefetch_host;	/* bytes prefetched to the host */
	uint64_t driver_evicted; /* bytes the "driver" moved back to the
				   host itself to make room for a prefetch:
				   the caller oversubscribed the device */
	uint64_t advises;	/* cuMemAdvise calls that applied */
	uint64_t discarded;	/* bytes asked discarded (CUDA 13's
				   cuMemDiscard*BatchAsync) */
};

typedef void (*fakecuda_stats_fn)(struct fakecuda_stats *st);
void fakecuda_stats(struct fakecuda_stats *st);

#endif /* FAKECUDA_H */
