/* SPDX-License-Identifier: MIT */
/*
 * uring.h — the store's io_uring: setup with feature probing, one
 * registered file, registered buffers, and SQE preparation.
 *
 * Setup tries, in order, SINGLE_ISSUER|DEFER_TASKRUN, then
 * SINGLE_ISSUER|COOP_TASKRUN|TASKRUN_FLAG, then COOP_TASKRUN, then none
 * (with SQPOLL: SQPOLL|SINGLE_ISSUER, then SQPOLL, then the list above):
 * the first flags the kernel accepts stay in u->flags.  SINGLE_ISSUER
 * rings are created disabled and enabled by the first submitting thread,
 * so the ring may be set up on one thread and driven from another; from
 * then on only that thread may submit or wait (u->owner).
 * HMM_URING_FALLBACK=N in the environment skips the first N of the
 * plain flag sets, so tests can run the fallbacks on a new kernel;
 * N >= 4 makes init fail with -ENOSYS, as a kernel without io_uring.
 *
 * Ownership: the caller embeds struct hmm_uring; hmm_uring_init sets it
 * up, hmm_uring_fini tears it down (any thread, once no I/O is pending).
 * Threading: everything else from the owner thread only.
 */
#ifndef HMM_URING_H
#define HMM_URING_H

#include <liburing.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HMM_URING_BUF_MAX	(1ul << 30)	/* one registered iovec */

struct hmm_uring {
	struct io_uring ring;
	unsigned flags;		/* IORING_SETUP_* in use */
	unsigned depth;		/* SQ entries */
	int fd;			/* the file, as passed to init */
	int fixed_file;		/* 1: registered, index 0 */
	unsigned nbufs;		/* registered iovecs of HMM_URING_BUF_MAX */
	uintptr_t buf_base;	/* start of the registered area */
	size_t buf_len;
	int enabled;		/* 0 until the first submit (R_DISABLED) */
	pid_t owner;		/* tid that enabled the ring, or 0 */
	/* the wake fd (hmm_store_poll_wake): a one-shot POLL_ADD on it */
	int wake_on;		/* 1: wake_fd is set */
	int wake_fd;		/* the caller's eventfd, valid when wake_on */
	int wake_armed;		/* its POLL_ADD is in the ring */
	int woken;		/* its CQE was reaped (cleared by the store) */
};

/* user_data of the wake fd's POLL_ADD completions */
#define HMM_URING_WAKE	((void *)~(uintptr_t)0)

/* 0, or -errno from io_uring_setup (after every fallback failed). */
int hmm_uring_init(struct hmm_uring *u, unsigned depth, int fd, int sqpoll);
void hmm_uring_fini(struct hmm_uring *u);

/* Register [base, base+len) as fixed buffers: 0 or -errno (-ENOMEM
 * when RLIMIT_MEMLOCK refuses); on failure nothing is registered. */
int hmm_uring_register_buffers(struct hmm_uring *u, void *base, size_t len);

/* -EEXIST when the ring is bound to another thread, else 0 (binding
 * the calling thread on first use). */
int hmm_uring_claim(struct hmm_uring *u);

/* Prepare a read or write of len bytes at off into/from buf; user is
 * the CQE's user_data.  Uses the fixed file and a fixed buffer when it
 * can.  NULL when the SQ ring is full. */
struct io_uring_sqe *hmm_uring_prep(struct hmm_uring *u, int write, void *buf,
				    unsigned len, uint64_t off, void *user);

/* Prepare a one-shot POLL_ADD (POLLIN) on u->wake_fd whose CQE carries
 * HMM_URING_WAKE, unless one is armed already or no wake fd is set:
 * 0, or -EBUSY when the SQ ring is full.  The caller submits it. */
int hmm_uring_arm_wake(struct hmm_uring *u);

/* Submit what was prepared: >= 0 SQEs submitted, or -errno. */
int hmm_uring_submit(struct hmm_uring *u);

/* Make completions visible without waiting (DEFER_TASKRUN needs an
 * enter); 0 or -errno. */
int hmm_uring_get_events(struct hmm_uring *u);

/* Wait for at least one CQE, up to timeout_ms (-1: forever).
 * 0, -ETIME, -EINTR or -errno. */
int hmm_uring_wait(struct hmm_uring *u, int timeout_ms);

#endif /* HMM_URING_H */
