// SPDX-License-Identifier: MIT
/* uring.c — io_uring setup, registration and SQE preparation (uring.h). */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "uring.h"

#define SI	IORING_SETUP_SINGLE_ISSUER
#define RD	IORING_SETUP_R_DISABLED

static const unsigned plain_flags[] = {
	SI | RD | IORING_SETUP_DEFER_TASKRUN,
	SI | RD | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
	IORING_SETUP_COOP_TASKRUN,
	0,
};

static const unsigned sqpoll_flags[] = {
	IORING_SETUP_SQPOLL | SI | RD,
	IORING_SETUP_SQPOLL,
};

static int try_setup(struct hmm_uring *u, unsigned depth, unsigned flags)
{
	struct io_uring_params p;

	memset(&p, 0, sizeof(p));
	p.flags = flags | IORING_SETUP_CQSIZE;
	p.cq_entries = depth * 2;
	if (flags & IORING_SETUP_SQPOLL)
		p.sq_thread_idle = 100;	/* ms */
	return io_uring_queue_init_params(depth, &u->ring, &p);
}

int hmm_uring_init(struct hmm_uring *u, unsigned depth, int fd, int sqpoll)
{
	int err = -EINVAL, skip;

	memset(u, 0, sizeof(*u));
	u->fd = fd;
	u->depth = depth;
	if (sqpoll) {
		for (unsigned i = 0; i < 2; i++) {
			err = try_setup(u, depth, sqpoll_flags[i]);
			if (!err) {
				u->flags = sqpoll_flags[i];
				goto registered;
			}
		}
	}
	/* HMM_URING_FALLBACK=N skips the first N flag sets (for tests) */
	skip = getenv("HMM_URING_FALLBACK") ? atoi(getenv("HMM_URING_FALLBACK")) : 0;
	if (skip >= (int)(sizeof(plain_flags) / sizeof(*plain_flags)))
		return -ENOSYS;		/* as if the kernel had none */
	for (unsigned i = skip < 0 ? 0 : skip;
	     i < sizeof(plain_flags) / sizeof(*plain_flags); i++) {
		err = try_setup(u, depth, plain_flags[i]);
		if (!err) {
			u->flags = plain_flags[i];
			goto registered;
		}
	}
	return err;

registered:
	u->enabled = !(u->flags & RD);
	if (io_uring_register_files(&u->ring, &fd, 1) == 0)
		u->fixed_file = 1;
	return 0;
}

void hmm_uring_fini(struct hmm_uring *u)
{
	io_uring_queue_exit(&u->ring);
	memset(u, 0, sizeof(*u));
}

int hmm_uring_register_buffers(struct hmm_uring *u, void *base, size_t len)
{
	struct iovec iov[64];
	unsigned n = 0;
	int err;

	for (size_t off = 0; off < len; off += HMM_URING_BUF_MAX) {
		if (n == 64)
			return -E2BIG;
		iov[n].iov_base = (char *)base + off;
		iov[n++].iov_len = len - off < HMM_URING_BUF_MAX ?
				   len - off : HMM_URING_BUF_MAX;
	}
	err = io_uring_register_buffers(&u->ring, iov, n);
	if (err)
		return err;
	u->nbufs = n;
	u->buf_base = (uintptr_t)base;
	u->buf_len = len;
	return 0;
}

int hmm_uring_claim(struct hmm_uring *u)
{
	pid_t me = gettid();
	int err;

	if (u->enabled)
		return u->owner && u->owner != me ? -EEXIST : 0;
	/* liburing 2.3 declares io_uring_enable_rings but does not export it */
	err = (int)syscall(__NR_io_uring_register, u->ring.ring_fd,
			   IORING_REGISTER_ENABLE_RINGS, NULL, 0);
	if (err < 0)
		return -errno;
	u->enabled = 1;
	u->owner = me;
	return 0;
}

/* Index of the registered iovec holding all of [buf, buf+len), or -1. */
static int fixed_index(struct hmm_uring *u, void *buf, unsigned len)
{
	uintptr_t d = (uintptr_t)buf - u->buf_base;

	if (!u->nbufs || (uintptr_t)buf < u->buf_base || d >= u->buf_len ||
	    len > u->buf_len - d)
		return -1;
	if (d / HMM_URING_BUF_MAX != (d + len - 1) / HMM_URING_BUF_MAX)
		return -1;
	return (int)(d / HMM_URING_BUF_MAX);
}

struct io_uring_sqe *hmm_uring_prep(struct hmm_uring *u, int write, void *buf,
				    unsigned len, uint64_t off, void *user)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	int fd = u->fixed_file ? 0 : u->fd;
	int idx = fixed_index(u, buf, len);

	if (!sqe)
		return NULL;
	if (idx >= 0 && write)
		io_uring_prep_write_fixed(sqe, fd, buf, len, off, idx);
	else if (idx >= 0)
		io_uring_prep_read_fixed(sqe, fd, buf, len, off, idx);
	else if (write)
		io_uring_prep_write(sqe, fd, buf, len, off);
	else
		io_uring_prep_read(sqe, fd, buf, len, off);
	if (u->fixed_file)
		io_uring_sqe_set_flags(sqe, IOSQE_FIXED_FILE);
	io_uring_sqe_set_data(sqe, user);
	return sqe;
}

int hmm_uring_arm_wake(struct hmm_uring *u)
{
	struct io_uring_sqe *sqe;

	if (!u->wake_on || u->wake_armed)
		return 0;
	sqe = io_uring_get_sqe(&u->ring);
	if (!sqe)
		return -EBUSY;
	io_uring_prep_poll_add(sqe, u->wake_fd, POLLIN);
	io_uring_sqe_set_data(sqe, HMM_URING_WAKE);
	u->wake_armed = 1;
	return 0;
}

int hmm_uring_submit(struct hmm_uring *u)
{
	return io_uring_submit(&u->ring);
}

int hmm_uring_get_events(struct hmm_uring *u)
{
	if (!(u->flags & (IORING_SETUP_DEFER_TASKRUN |
			  IORING_SETUP_TASKRUN_FLAG)))
		return 0;
	if ((u->flags & IORING_SETUP_TASKRUN_FLAG) &&
	    !(IO_URING_READ_ONCE(*u->ring.sq.kflags) & IORING_SQ_TASKRUN))
		return 0;
	return io_uring_get_events(&u->ring);
}

int hmm_uring_wait(struct hmm_uring *u, int timeout_ms)
{
	struct io_uring_cqe *cqe;
	struct __kernel_timespec ts;

	if (timeout_ms < 0)
		return io_uring_wait_cqe(&u->ring, &cqe);
	ts.tv_sec = timeout_ms / 1000;
	ts.tv_nsec = (long long)(timeout_ms % 1000) * 1000000;
	return io_uring_wait_cqe_timeout(&u->ring, &cqe, &ts);
}
