/* SPDX-License-Identifier: MIT */
/*
 * stripe.h — a store striped over several files or block devices.
 *
 * hmm_store_open with a path "a,b,..." opens each named file as a
 * member: a complete store (store.c) whose superblock records the set
 * (uuid, index, count), so that a missing, added, reordered or foreign
 * member is refused with an error naming its path, and a member is
 * never opened alone.  The caller gets a front, a struct hmm_store whose
 * ->stripe is set; every store.h call on it lands here (store.c and
 * store_io.c forward at their first line) and goes to the members:
 *
 *   placement  extent key k lives on member ((k >> 32) + (uint32_t)k) % n:
 *              the tensor layer's keys (tensor id << 32 | chunk) go
 *              round-robin over a tensor's chunks, and tensors start
 *              on different members; no lookup, nothing recorded but
 *              the members' own tables.  RAW offsets address the
 *              members' data areas one after the other.
 *   I/O        each member keeps its ring (and file); requests are
 *              queued on their members in order, then each member's
 *              ring is submitted once.  Every ring signals one eventfd,
 *              so a wait sleeps on all rings at once (and on the
 *              caller's wake fd); reaping starts at a rotating member.
 *   pool       one pinned pool, the set's, registered with every ring.
 *   meta blob  member 0's.
 *   size       a new set of size bytes gives each member room for
 *              ceil(E / n) extents of cfg->extent_bytes, E being the
 *              extents one store of size bytes holds (a little more
 *              than size in all: each member has its own tables and
 *              slack); without extent_bytes, size / n each.
 *   flush      every member commits generation G + 1 (table, then
 *              superblock, durable) before any member settles (frees
 *              the places generation G still named); one that fails
 *              leaves all members' G intact, and the next flush writes
 *              G + 1 again over the same slots.
 *   open       members' generations may differ by one (a flush that
 *              did not reach every member): those at G + 1 are opened
 *              at G, their G + 1 superblock zeroed durably first.
 *   stats      summed over the members; members = n.
 *
 * Ownership: stripe_open allocates the front, the members, the pool and
 * the eventfd; stripe_close (from hmm_store_close) frees them.
 * Threading: as a store (store.h): one thread drives all members.
 */
#ifndef HMM_STRIPE_H
#define HMM_STRIPE_H

#include <stdint.h>

#include "store.h"

#define HMM_STRIPE_MAX	64	/* members */

int stripe_open(const struct hmm_store_config *cfg, struct hmm_store **out);
void stripe_close(struct hmm_store *f);

/* Member i; the member extent key lives on. */
struct hmm_store *stripe_member(struct hmm_store *f, unsigned i);
struct hmm_store *stripe_member_of(struct hmm_store *f, uint64_t key);

int stripe_submit(struct hmm_store *f, struct hmm_io **ios, unsigned n);
int stripe_poll(struct hmm_store *f, unsigned min_complete, int timeout_ms,
		int wake_fd);
unsigned stripe_inflight(struct hmm_store *f);
int stripe_flush(struct hmm_store *f);
int stripe_each(struct hmm_store *f,
		int (*fn)(void *arg, uint64_t key, uint32_t len), void *arg);
void stripe_stats(struct hmm_store *f, struct hmm_store_stats *st);
const char *stripe_note(struct hmm_store *f);
struct hmm_pool *stripe_pool(struct hmm_store *f);

#endif /* HMM_STRIPE_H */
