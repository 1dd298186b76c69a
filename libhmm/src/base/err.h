/* SPDX-License-Identifier: MIT */
/*
 * err.h — the per-thread error detail behind hmm_last_error().
 *
 * libhmm never prints, exits or sets errno.  A function that fails returns
 * -errno and, through hmm_err(), leaves a sentence naming the thing that
 * failed (path, offset, tensor, field) in a thread-local buffer that the
 * caller reads with hmm_last_error().  The detail of the latest failure
 * on this thread stays until the next failure on this thread.
 */
#ifndef HMM_ERR_H
#define HMM_ERR_H

/*
 * hmm_err(err, fmt, ...): record the detail, return err (a negative errno)
 * so that callers write `return hmm_err(-EINVAL, "tensor %s: ...", n);`.
 * The text is cut at 511 bytes.  Any thread, no lock.
 */
int hmm_err(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The current thread's detail string; "" when nothing failed yet. */
const char *hmm_last_error(void);

#endif /* HMM_ERR_H */
