/* SPDX-License-Identifier: MIT */
/*
 * region_int.h — between region.c (the regions' list, userfaultfd
 * regions and their two backends) and region_hmmk.c (regions backed by
 * the hmmk kernel module, in shared mode, when hmmd is its daemon).
 */
#ifndef HMM_REGION_INT_H
#define HMM_REGION_INT_H

#include <stdint.h>

struct hmm;
struct hmm_stats;

#define RBLOCK		(64u << 10)	/* a userfaultfd region's block */

/* One module-backed region: allocated by _new, freed by _free. */
struct hmm_region_hmmk;

/*
 * A module region of bytes (a multiple of RBLOCK) mapped at *base, when
 * /dev/hmmk exists and the process attached to it as the module's daemon
 * is the hmmd that h is connected to.  All of h's module regions share
 * one space (a dup of another's fd, found with hmm_region_hmmk_any), held
 * to config.host_budget of CPU pages together (HMMK_F_SPACE_LIMIT; with
 * only HMMK_F_CPU_LIMIT, each region alone).  Returns 0, -ENODEV when the
 * module cannot back it (the caller falls back to userfaultfd; no detail
 * set), or another -errno with the detail set.  The caller serialises
 * calls for one h until the region is on h's list.
 */
int hmm_region_hmmk_new(struct hmm *h, uint64_t bytes,
			struct hmm_region_hmmk **out, char **base);

/*
 * Advice on [off, off + len) of the region at base: COLD = the module's
 * EVICT (pages go to hmmd), WILLNEED = touch every page (faults fill
 * them from hmmd), NORMAL = nothing.  0 or -errno.  Any thread.
 */
int hmm_region_hmmk_advise(struct hmm_region_hmmk *mk, char *base,
			   uint64_t off, uint64_t len, int advice);

/* The module's counters of the region: CPU faults and evicted pages. */
void hmm_region_hmmk_stats(struct hmm_region_hmmk *mk, uint64_t *faults,
			   uint64_t *evictions);

/* Unmap base, destroy the module's region, close.  No thread may touch
 * the region during or after. */
void hmm_region_hmmk_free(struct hmm_region_hmmk *mk, char *base,
			  uint64_t bytes);

/* region.c: one of h's module regions, or NULL (h->lock held). */
struct hmm_region_hmmk *hmm_region_hmmk_any(struct hmm *h);

/*
 * region.c, for hmm_stats in shared mode (where the rest of st is
 * hmmd's): set st's region_faults and region_evictions to this context's,
 * userfaultfd regions and module regions together.  Takes h->lock.
 */
void hmm_region_stats(struct hmm *h, struct hmm_stats *st);

#endif /* HMM_REGION_INT_H */
