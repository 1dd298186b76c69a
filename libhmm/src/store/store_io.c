// SPDX-License-Identifier: MIT
/*
 * store_io.c — the store's request engine: validate, queue, submit in
 * batches, reap, resubmit short transfers, verify crcs, commit writes.
 *
 * A request is queued in a FIFO backlog, turned into an SQE when the
 * ring has room (at most queue_depth in the kernel), and completes when
 * all its bytes moved or it failed.  A short transfer goes back to the
 * front of the backlog for the rest; a completion of 0 bytes is retried
 * three times, then fails with -EIO.  All of it runs on the ring's
 * owner thread (see store.h).
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "crc32c.h"
#include "err.h"
#include "fault_inject.h"
#include "store_int.h"
#include "stripe.h"

#define ZERO_RETRIES	3

static const char *op_name(uint32_t op)
{
	switch (op) {
	case HMM_IO_READ: return "read";
	case HMM_IO_WRITE: return "write";
	case HMM_IO_READ_RAW: return "raw read";
	case HMM_IO_WRITE_RAW: return "raw write";
	case OP_ABS_WRITE: return "table write";
	}
	return "?";
}

static int is_write(uint32_t op)
{
	return op == HMM_IO_WRITE || op == HMM_IO_WRITE_RAW ||
	       op == OP_ABS_WRITE;
}

/* Append io to the list head/tail (the backlog, or the sync results). */
static void list_append(struct hmm_io **head, struct hmm_io **tail,
			struct hmm_io *io)
{
	io->s_next = NULL;
	if (*tail)
		(*tail)->s_next = io;
	else
		*head = io;
	*tail = io;
}

static void push_back(struct hmm_store *s, struct hmm_io *io)
{
	io->s_state = ST_QUEUED;
	list_append(&s->bl_head, &s->bl_tail, io);
}

static void push_front(struct hmm_store *s, struct hmm_io *io)
{
	io->s_state = ST_QUEUED;
	io->s_next = s->bl_head;
	s->bl_head = io;
	if (!s->bl_tail)
		s->bl_tail = io;
}

/* No ring: carry the backlog out with pread/pwrite; reap() completes. */
static void pump_sync(struct hmm_store *s)
{
	while (s->bl_head) {
		struct hmm_io *io = s->bl_head;
		char *buf = (char *)io->buf + io->s_done;
		size_t len = io->len - io->s_done;
		off_t off = (off_t)(io->s_off + io->s_done);
		ssize_t r = is_write(io->op) ? pwrite(s->fd, buf, len, off)
					     : pread(s->fd, buf, len, off);

		s->bl_head = io->s_next;
		if (!s->bl_head)
			s->bl_tail = NULL;
		io->result = r < 0 ? -errno : (int)r;
		io->s_state = ST_RING;
		list_append(&s->sync_head, &s->sync_tail, io);
		s->in_ring++;
	}
}

/* Turn backlog into SQEs and submit them: 0 or -errno. */
static int pump(struct hmm_store *s)
{
	unsigned prepared = 0;
	int r;

	if (s->sync_io) {
		pump_sync(s);
		return 0;
	}

	while (s->bl_head && s->in_ring < s->u.depth) {
		struct hmm_io *io = s->bl_head;

		if (!hmm_uring_prep(&s->u, is_write(io->op),
				    (char *)io->buf + io->s_done,
				    io->len - io->s_done,
				    io->s_off + io->s_done, io))
			break;
		s->bl_head = io->s_next;
		if (!s->bl_head)
			s->bl_tail = NULL;
		io->s_state = ST_RING;
		s->in_ring++;
		prepared++;
	}
	if (!prepared && !io_uring_sq_ready(&s->u.ring))
		return 0;
	r = hmm_uring_submit(&s->u);
	if (r < 0 && r != -EAGAIN && r != -EBUSY && r != -EINTR)
		return hmm_err(r, "store %s: io_uring submit: %s", s->path,
			       strerrordesc_np(-r));
	return 0;
}

void store_release_place(struct hmm_store *s, const struct hmm_xent *e)
{
	uint64_t n = (e->len + s->sb.block_size - 1) / s->sb.block_size;

	if (e->on_disk)
		hmm_ext_defer(&s->ext, e->blk, n);	/* until next flush */
	else
		hmm_ext_free(&s->ext, e->blk, n);
}

static uint64_t blk_of(struct hmm_store *s, struct hmm_io *io)
{
	return (io->s_off - s->sb.data_off) / s->sb.block_size;
}

static int finish_read(struct hmm_store *s, const struct hmm_io *io)
{
	uint32_t crc = hmm_crc32c(0, io->buf, io->len);

	if (crc == io->s_crc)
		return 0;
	pthread_mutex_lock(&s->stat_lock);
	s->st.crc_errors++;
	pthread_mutex_unlock(&s->stat_lock);
	return hmm_err(-EIO, "store %s: extent %#llx at offset %llu: checksum "
		       "mismatch (crc32c %08x, table says %08x): data damaged",
		       s->path,
		       (unsigned long long)io->key,
		       (unsigned long long)io->s_off, crc, io->s_crc);
}

int hmm_store_check(const struct hmm_io *io)
{
	if (!io || !io->s_store || io->op != HMM_IO_READ ||
	    !(io->flags & HMM_IOF_CRC_LATER) || io->s_state != ST_DONE ||
	    io->result)
		return hmm_err(-EINVAL, "store: check: not a completed read "
			       "submitted with HMM_IOF_CRC_LATER");
	return finish_read(io->s_store, io);
}

static void finish_write(struct hmm_store *s, struct hmm_io *io, int res)
{
	struct hmm_xent e = { .key = io->key, .blk = blk_of(s, io),
			      .len = io->len, .crc = io->s_crc }, old;

	s->pending_writes--;
	if (res) {
		store_release_place(s, &e);
		return;
	}
	hmm_xmap_put(&s->map, &e, &old);	/* reserved at submit */
	if (old.used)
		store_release_place(s, &old);
}

static void account(struct hmm_store *s, struct hmm_io *io, int res,
		    int io_failed)
{
	pthread_mutex_lock(&s->stat_lock);
	if (res) {
		s->st.errors += io_failed;
	} else if (io->op == OP_ABS_WRITE) {
		s->st.flush_bytes += io->len;
	} else if (is_write(io->op)) {
		s->st.write_bytes += io->len;
		s->st.write_ops++;
	} else {
		s->st.read_bytes += io->len;
		s->st.read_ops++;
	}
	s->st.used_bytes = hmm_ext_used(&s->ext) * s->sb.block_size;
	s->st.quarantined_bytes = s->ext.quar_units * s->sb.block_size;
	s->st.extents = s->map.n;
	pthread_mutex_unlock(&s->stat_lock);
}

static void finish(struct hmm_store *s, struct hmm_io *io, int res)
{
	int io_failed = res < 0;

	if (res < 0)
		res = hmm_err(res, "store %s: %s of %u bytes at offset %llu "
			      "(extent %#llx): %s", s->path, op_name(io->op),
			      io->len, (unsigned long long)(io->s_off + io->s_done),
			      (unsigned long long)io->key, strerrordesc_np(-res));
	else if (io->op == HMM_IO_READ && !(io->flags & HMM_IOF_CRC_LATER))
		res = finish_read(s, io);
	if (io->op == HMM_IO_WRITE)
		finish_write(s, io, res);
	account(s, io, res, io_failed);
	io->result = res;
	io->s_state = ST_DONE;
	__atomic_sub_fetch(&s->inflight, 1, __ATOMIC_RELAXED);	/* stats reads it */
	s->ncompleted++;
	if (io->done && io->op != OP_ABS_WRITE)
		io->done(io);
}

static int apply_fault(struct hmm_io *io, int res)
{
	int kind = io->s_fault;

	io->s_fault = HMM_FAULT_NONE;
	if (kind == HMM_FAULT_EIO)
		return -EIO;
	if (kind == HMM_FAULT_ENOSPC)
		return -ENOSPC;
	if (kind == HMM_FAULT_SHORT && res > 0) {
		int half = (int)(((io->len - io->s_done) / 2) & ~4095u);

		return res < half ? res : half;
	}
	return res;
}

static void on_cqe(struct hmm_store *s, struct hmm_io *io, int res)
{
	s->in_ring--;
	if (io->s_fault)
		res = apply_fault(io, res);
	if (res == -EAGAIN || res == -EINTR) {
		push_front(s, io);
		return;
	}
	if (res < 0) {
		finish(s, io, res);
		return;
	}
	if (res == 0) {
		if (++io->s_zero > ZERO_RETRIES) {
			finish(s, io, -EIO);
			return;
		}
		push_front(s, io);
		return;
	}
	io->s_zero = 0;
	io->s_done += res;
	if (io->s_done < io->len) {
		pthread_mutex_lock(&s->stat_lock);
		s->st.short_resubmits++;
		pthread_mutex_unlock(&s->stat_lock);
		push_front(s, io);
		return;
	}
	finish(s, io, 0);
}

/* Process every completion the ring has now. */
static void reap(struct hmm_store *s)
{
	struct io_uring_cqe *cqes[64];
	struct { void *io; int res; } c[64];
	unsigned n;

	while (s->sync_head) {
		struct hmm_io *io = s->sync_head;

		s->sync_head = io->s_next;
		if (!s->sync_head)
			s->sync_tail = NULL;
		on_cqe(s, io, io->result);
	}
	if (s->sync_io)
		return;
	hmm_uring_get_events(&s->u);
	while ((n = io_uring_peek_batch_cqe(&s->u.ring, cqes, 64))) {
		for (unsigned i = 0; i < n; i++) {
			c[i].io = io_uring_cqe_get_data(cqes[i]);
			c[i].res = cqes[i]->res;
		}
		io_uring_cq_advance(&s->u.ring, n);
		for (unsigned i = 0; i < n; i++) {
			if (c[i].io == HMM_URING_WAKE) {	/* not an I/O */
				s->u.wake_armed = 0;
				s->u.woken = 1;
				continue;
			}
			on_cqe(s, c[i].io, c[i].res);
		}
	}
}

/* Validate one caller request and fill in its private fields; RAW
 * offsets count from base (a striped store's member: stripe.c). */
static int prepare(struct hmm_store *s, struct hmm_io *io, uint64_t base)
{
	struct hmm_xent *e;
	uint64_t nblk, blk;
	int err;

	if (io->s_state == ST_QUEUED || io->s_state == ST_RING)
		return hmm_err(-EBUSY, "store %s: request already in flight",
			       s->path);
	if (!io->buf || !io->len || (uintptr_t)io->buf % 4096 ||
	    io->len % 4096)
		return hmm_err(-EINVAL, "store %s: %s: buffer %p and length %u "
			       "must be 4096-aligned and non-zero", s->path,
			       op_name(io->op), io->buf, io->len);
	switch (io->op) {
	case HMM_IO_READ_RAW:
	case HMM_IO_WRITE_RAW:
		if (io->off % 4096 || io->off < base ||
		    io->off - base > s->sb.data_bytes ||
		    io->len > s->sb.data_bytes - (io->off - base))
			return hmm_err(-EINVAL, "store %s: %s at %llu+%u: outside "
				       "the data area (%llu bytes) or misaligned",
				       s->path, op_name(io->op),
				       (unsigned long long)io->off, io->len,
				       (unsigned long long)s->sb.data_bytes);
		io->s_off = s->sb.data_off + io->off - base;
		return 0;
	case HMM_IO_READ:
		e = hmm_xmap_get(&s->map, io->key);
		if (!e)
			return hmm_err(-ENOENT, "store %s: no extent %#llx",
				       s->path, (unsigned long long)io->key);
		if (e->len != io->len)
			return hmm_err(-EINVAL, "store %s: extent %#llx is %u "
				       "bytes, read asks %u", s->path,
				       (unsigned long long)io->key, e->len,
				       io->len);
		io->s_off = s->sb.data_off + e->blk * s->sb.block_size;
		io->s_crc = e->crc;
		return 0;
	case HMM_IO_WRITE:
		if (!hmm_xmap_get(&s->map, io->key) &&
		    s->map.n + s->pending_writes >= s->sb.max_extents)
			return hmm_err(-ENOSPC, "store %s: extent table full: "
				       "all %u extents in use (a store is "
				       "sized for its tensors by "
				       "hmm_store_required())", s->path,
				       s->sb.max_extents);
		if (hmm_xmap_reserve(&s->map, s->map.n + s->pending_writes + 1))
			return hmm_err(-ENOMEM, "store %s: out of memory",
				       s->path);
		nblk = (io->len + s->sb.block_size - 1) / s->sb.block_size;
		err = hmm_ext_alloc(&s->ext, nblk, &blk);
		if (err)
			return hmm_err(-ENOSPC, "store %s: no room for extent "
				       "%#llx (%u bytes): %llu of %llu bytes "
				       "used, %llu waiting for a flush", s->path,
				       (unsigned long long)io->key, io->len,
				       (unsigned long long)(hmm_ext_used(&s->ext) *
							    s->sb.block_size),
				       (unsigned long long)s->sb.data_bytes,
				       (unsigned long long)(s->ext.quar_units *
							    s->sb.block_size));
		io->s_off = s->sb.data_off + blk * s->sb.block_size;
		io->s_crc = io->flags & HMM_IOF_CRC_GIVEN ? io->crc :
			    hmm_crc32c(0, io->buf, io->len);
		s->pending_writes++;
		return 0;
	}
	return hmm_err(-EINVAL, "store %s: unknown op %u", s->path, io->op);
}

static void enqueue(struct hmm_store *s, struct hmm_io *io)
{
	io->s_done = 0;
	io->s_zero = 0;
	io->result = 0;
	io->s_fault = hmm_fault_next();
	__atomic_add_fetch(&s->inflight, 1, __ATOMIC_RELAXED);
	push_back(s, io);
}

int store_claim(struct hmm_store *s)
{
	int err = s->sync_io ? 0 : hmm_uring_claim(&s->u);

	if (err)
		return hmm_err(err, "store %s: used from a second thread (the "
			       "ring is single-issuer): %s", s->path,
			       strerrordesc_np(-err));
	return 0;
}

int hmm_store_submit(struct hmm_store *s, struct hmm_io **ios, unsigned n)
{
	unsigned i;
	int err = 0, perr;

	if (!s || (n && !ios))
		return hmm_err(-EINVAL, "store: submit: no store or requests");
	if (s->stripe)
		return stripe_submit(s, ios, n);
	err = store_claim(s);
	if (err)
		return err;
	for (i = 0; i < n; i++) {
		if (!ios[i]) {
			err = hmm_err(-EINVAL, "store %s: request %u is NULL",
				      s->path, i);
			break;
		}
		err = store_queue(s, ios[i], 0);
		if (err)
			break;
	}
	perr = pump(s);
	if (i == 0 && err)
		return err;
	if (i == 0 && perr)
		return perr;
	return (int)i;
}

int store_queue(struct hmm_store *s, struct hmm_io *io, uint64_t raw_base)
{
	int err = prepare(s, io, raw_base);

	if (!err) {
		io->s_store = s;
		enqueue(s, io);
	}
	return err;
}

int store_kick(struct hmm_store *s)
{
	return pump(s);
}

int store_queue_abs_write(struct hmm_store *s, struct hmm_io *io)
{
	int err = store_claim(s);

	if (err)
		return err;
	io->op = OP_ABS_WRITE;
	io->s_state = 0;
	enqueue(s, io);
	return pump(s);
}

static int remaining_ms(double deadline)
{
	struct timespec ts;
	double now;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
	return now >= deadline ? 0 : (int)(deadline - now + 0.999);
}

/* hmm_store_poll, and with wake_fd >= 0 hmm_store_poll_wake. */
static int store_poll(struct hmm_store *s, unsigned min_complete,
		      int timeout_ms, int wake_fd)
{
	uint64_t c0;
	double deadline = 0;
	struct timespec ts;
	int err;

	if (!s)
		return hmm_err(-EINVAL, "store: poll: no store");
	if (s->stripe)
		return stripe_poll(s, min_complete, timeout_ms, wake_fd);
	err = store_claim(s);
	if (err)
		return err;
	c0 = s->ncompleted;
	if (min_complete > s->inflight)
		min_complete = s->inflight;
	if (timeout_ms >= 0) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		deadline = ts.tv_sec * 1e3 + ts.tv_nsec / 1e6 + timeout_ms;
	}
	if (wake_fd >= 0 && !s->sync_io) {
		s->u.wake_on = 1;
		s->u.wake_fd = wake_fd;
		s->u.woken = 0;
	}
	for (;;) {
		int ms = timeout_ms < 0 ? -1 : remaining_ms(deadline);

		/* no room for the wake's SQE: wait in short slices */
		if (wake_fd >= 0 && !s->sync_io &&
		    hmm_uring_arm_wake(&s->u) < 0 && (ms < 0 || ms > 1))
			ms = 1;
		err = pump(s);
		reap(s);
		if (s->bl_head)		/* resubmissions from reap */
			err = pump(s);
		if (s->ncompleted - c0 >= min_complete)
			break;
		if (wake_fd >= 0 && s->u.woken) {
			s->u.woken = 0;
			break;
		}
		if (err && !s->in_ring)
			return err;
		if (!ms)
			break;
		if (s->sync_io) {	/* completions are immediate */
			if (!s->bl_head && !s->sync_head)
				break;
			continue;
		}
		err = hmm_uring_wait(&s->u, ms);
		if (err && err != -ETIME && err != -EINTR && err != -EAGAIN &&
		    err != -EBUSY)
			return hmm_err(err, "store %s: io_uring wait: %s",
				       s->path, strerrordesc_np(-err));
	}
	return (int)(s->ncompleted - c0);
}

int hmm_store_poll(struct hmm_store *s, unsigned min_complete, int timeout_ms)
{
	return store_poll(s, min_complete, timeout_ms, -1);
}

int hmm_store_poll_wake(struct hmm_store *s, unsigned min_complete,
			int timeout_ms, int wake_fd)
{
	if (wake_fd < 0)
		return hmm_err(-EINVAL, "store %s: poll: wake fd %d",
			       s ? s->path : "?", wake_fd);
	return store_poll(s, min_complete, timeout_ms, wake_fd);
}

int hmm_store_wait(struct hmm_store *s, struct hmm_io *io)
{
	while (io->s_state == ST_QUEUED || io->s_state == ST_RING) {
		int r = hmm_store_poll(s, 1, -1);

		if (r < 0)
			return r;
	}
	return io->result;
}

int store_drain(struct hmm_store *s)
{
	while (s->inflight) {
		int r = hmm_store_poll(s, s->inflight, -1);

		if (r < 0)
			return r;
	}
	return 0;
}

unsigned hmm_store_inflight(struct hmm_store *s)
{
	if (s->stripe)
		return stripe_inflight(s);
	return __atomic_load_n(&s->inflight, __ATOMIC_RELAXED);
}
