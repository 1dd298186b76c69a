/* SPDX-License-Identifier: MIT */
/*
 * fault_inject.h — fault injection for the store's I/O path.
 *
 * A spec is a comma-separated list of KIND@N: the Nth I/O operation the
 * store hands to its ring (counting from 1 since the spec was set; a
 * resubmission of a short transfer is not a new operation) is altered:
 *	eio@N     completes with -EIO
 *	enospc@N  completes with -ENOSPC
 *	short@N   reports half the bytes, rounded down to 4096 (possibly 0),
 *	          so that the store must resubmit the rest
 * The operation itself is carried out; only its result is changed, as a
 * device that fails after writing would.  The environment variable
 * HMM_FAULT is read by the first hmm_store_open unless hmm_fault_set ran
 * before.  Only the store's ring I/O counts (extent and RAW reads and
 * writes, and flush's table and superblock writes), never the
 * synchronous reads of hmm_store_open.
 *
 * Threading: the counter is process-wide and atomic; set from one thread
 * while no store I/O is running.
 */
#ifndef HMM_FAULT_INJECT_H
#define HMM_FAULT_INJECT_H

#include <stdint.h>

#define HMM_FAULT_NONE	0
#define HMM_FAULT_EIO	1
#define HMM_FAULT_ENOSPC 2
#define HMM_FAULT_SHORT	3

/* Replace the spec (NULL or "" clears) and restart the count.
 * Returns 0, or -EINVAL on a malformed spec (the old one is kept). */
int hmm_fault_set(const char *spec);

/* Read HMM_FAULT once, unless hmm_fault_set ran before: 0, or -EINVAL
 * when it is malformed (then no fault is armed). */
int hmm_fault_init_env(void);

/* Count one operation; return the HMM_FAULT_* to apply to it. */
int hmm_fault_next(void);

/* Operations counted since the spec was set, and faults fired. */
uint64_t hmm_fault_ops(void);
uint64_t hmm_fault_fired(void);

#endif /* HMM_FAULT_INJECT_H */
