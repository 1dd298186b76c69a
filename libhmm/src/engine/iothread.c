// SPDX-License-Identifier: MIT
/*
 * iothread.c — the one thread that owns the store.
 *
 * The store is single-threaded (its ring is SINGLE_ISSUER), so every
 * store call of the tensor layer goes through this thread: it opens the
 * store, takes requests from h->ioq (queued under h->lock), submits them
 * in batches, reaps completions (calling each request's done() without
 * h->lock), and closes the store when told to stop.  HMM_IOREQ_* (free,
 * flush, meta) are carried out synchronously on this thread.
 *
 * Waking it: with nothing in flight it sleeps on h->io_cond; with I/O in
 * flight it sleeps in hmm_store_poll_wake on h->io_efd (an eventfd), so
 * that a completion or a new request, whichever comes first, wakes it at
 * once.  It says so in h->io_sleeping (under h->lock); hmm_iot_queue
 * writes the eventfd only then, once (h->io_kicked), and the thread
 * drains it under h->lock before it takes the queue, so no request
 * queued after the drain can be missed.  When what is queued must wait
 * for room in the store (below), only a completion can help: it sleeps
 * in plain hmm_store_poll.
 *
 * Depth: at most h->cfg.io_depth (config.io_depth, default 4) extent
 * reads and writes are handed to the store at a time; the rest wait on
 * h->ioq in order.  The store behind a virtual disk serves what it is
 * given in parallel, so a burst of 16 reads completes all together, 16
 * reads' time after it was submitted, while 2 to 4 in flight already
 * reach its full bandwidth (measured on the build machine: 2.3-2.8 GB/s
 * at 1-4 reads of 2 MiB, 2.0-2.3 at 16; the first of a burst of 16
 * completes after 12 ms, one alone after 0.7 ms).  Keeping the ring
 * shallow makes reads complete in the order they were queued: the order
 * in which the policy needs them.
 *
 * Room: a rewrite takes a new place in the store while its old one is
 * still named (copy-on-write), and the store's slack is only E/16
 * chunks within [8, 64], often less than io_depth.  A write the store
 * refuses with -ENOSPC while other I/O is in flight goes back to the
 * head of h->ioq (h->io_no_room) and extent I/O waits for the next
 * completion, which frees the old place of a rewrite; it is retried
 * then.  Only a store with nothing in flight that still has no room is
 * full: that write fails with the store's -ENOSPC detail.  So io_depth
 * never needs slack of its own, and the wait is bounded by the I/O in
 * flight.
 *
 * Checksums: none here for a chunk.  Its write reaches h->ioq only once
 * the checksum thread has summed it (crcthread.c: HMM_IOF_CRC_GIVEN),
 * and its read, submitted with HMM_IOF_CRC_LATER, goes back there from
 * iot_io_done, after the refill, to be checked before its done().  So
 * the thread does not stop (io_stop) while that thread holds a write it
 * will be given (crc_pending), and it stops that thread after itself.
 */
#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "chunk.h"
#include "err.h"

#define IOT_BATCH	64
#define IOT_NAP_MS	100	/* a wake-up lost anyway costs this */

struct iot_start {
	struct hmm *h;
	struct hmm_store_config scfg;
	int result;
	int done;
	char detail[512];
};

void hmm_iot_queue(struct hmm *h, struct hmm_ioreq *r)
{
	r->io.result = 0;
	r->complete = 0;
	r->t0 = hmm_now();
	hmm_list_add_tail(&h->ioq, &r->link);
	h->io_inflight++;
	if (h->io_sleeping && !h->io_kicked) {
		uint64_t one = 1;

		h->io_kicked = 1;	/* EAGAIN: the counter is full: awake */
		(void)!write(h->io_efd, &one, sizeof(one));
	}
	pthread_cond_signal(&h->io_cond);
}

/* The eventfd was written: read it back to 0 (h->lock held). */
static void iot_drain(struct hmm *h)
{
	uint64_t v;

	if (!h->io_kicked)
		return;
	h->io_kicked = 0;
	(void)!read(h->io_efd, &v, sizeof(v));	/* EAGAIN: already 0 */
}

static void iot_sync_done(struct hmm_ioreq *r)
{
	pthread_mutex_lock(&r->h->lock);
	r->complete = 1;
	pthread_cond_broadcast(&r->h->cond);
	pthread_mutex_unlock(&r->h->lock);
}

int hmm_iot_sync(struct hmm *h, struct hmm_ioreq *r)
{
	r->h = h;
	r->done = iot_sync_done;
	hmm_iot_queue(h, r);
	while (!r->complete)
		pthread_cond_wait(&h->cond, &h->lock);
	return r->io.result;
}

static unsigned iot_take(struct hmm *h, struct hmm_io **ios, int async_only);
static void iot_submit(struct hmm *h, struct hmm_io **ios, unsigned n);
static __thread int iot_in_sync;	/* running a synchronous store op */

/*
 * The store's done() hook: refill the store from the queue, then hand
 * over to the request's own done (a chunk's read: to the checksum
 * thread, which checks it first).  The refill is here, not back in
 * iot_loop, because the store calls done() from its reap, one request
 * after another (and, for a read without HMM_IOF_CRC_LATER, after its
 * crc32c check, 0.2-0.5 ms of CPU for 2 MiB): a layer's four reads
 * complete together, and the next four used to be submitted only after
 * all four checks, the disk idle meanwhile (a fifth of the time in a
 * Chrome trace of hmm-bench tensors).  Only extent I/Os are taken
 * here (a synchronous op, a flush, runs from iot_loop), and none from
 * within a synchronous op (a flush waits for its writes in its own
 * poll).  hmm_store_submit from done() queues into the store's backlog
 * and its ring; the reap that called us picks up what it completes.
 */
static void iot_io_done(struct hmm_io *io)
{
	struct hmm_ioreq *r = hmm_container_of(io, struct hmm_ioreq, io);
	struct hmm *h = r->h;
	struct hmm_io *next[IOT_BATCH];
	unsigned n = 0;
	int later;

	pthread_mutex_lock(&h->lock);
	h->io_inflight--;
	h->io_no_room = 0;	/* it may have freed some: try again */
	if (!iot_in_sync && io->op < HMM_IOREQ_FREE)
		n = iot_take(h, next, 1);
	later = io->op == HMM_IO_READ && (io->flags & HMM_IOF_CRC_LATER) &&
		!io->result;
	if (later)
		hmm_crc_queue(h, r);	/* checked there, then done() */
	pthread_mutex_unlock(&h->lock);
	if (n)
		iot_submit(h, next, n);
	if (!later)
		r->done(r);
}

static void iot_sync_op(struct hmm *h, struct hmm_ioreq *r)
{
	iot_in_sync = 1;
	if (r->io.op == HMM_IOREQ_FREE)
		r->io.result = hmm_store_extent_free(h->store, r->io.key);
	else if (r->io.op == HMM_IOREQ_META_SET)
		r->io.result = hmm_store_meta_set(h->store, r->io.buf,
						  r->io.len);
	else if (r->io.op == HMM_IOREQ_META_GET)
		r->io.result = hmm_store_meta_get(h->store, r->io.buf,
						  r->io.len);
	else
		r->io.result = hmm_store_flush(h->store);
	iot_in_sync = 0;
	if (r->io.result < 0 && r->io.op == HMM_IOREQ_FLUSH)
		hmm_async_error(h, r->io.result, "store flush: %s",
				hmm_last_error());
	iot_io_done(&r->io);
}

/* The store has no room for ios[0] yet: put ios[0..n) back at the head
 * of h->ioq, in order, until a completion (no lock held). */
static void iot_hold(struct hmm *h, struct hmm_io **ios, unsigned n)
{
	pthread_mutex_lock(&h->lock);
	while (n--) {
		struct hmm_ioreq *r = hmm_container_of(ios[n],
					struct hmm_ioreq, io);

		hmm_list_add_tail(h->ioq.next, &r->link);	/* at the head */
	}
	h->io_no_room = 1;
	pthread_mutex_unlock(&h->lock);
}

static void iot_submit(struct hmm *h, struct hmm_io **ios, unsigned n)
{
	unsigned done = 0, i;

	for (i = 0; i < n; i++)
		ios[i]->done = iot_io_done;

	while (done < n) {
		int r = hmm_store_submit(h->store, ios + done, n - done);

		if (r > 0) {
			done += r;
			continue;
		}
		if ((r == 0 || r == -EBUSY || r == -EAGAIN) &&
		    hmm_store_poll(h->store, 1, 100) >= 0)
			continue;	/* ring full: made room by reaping */
		if (r == -ENOSPC && hmm_store_inflight(h->store)) {
			iot_hold(h, ios + done, n - done);
			return;		/* room comes back with a completion */
		}
		/* the first one was refused: fail it alone, go on */
		ios[done]->result = r < 0 ? r : -EIO;
		iot_io_done(ios[done]);
		done++;
	}
}

/* Can the head of h->ioq be taken now?  h->lock held. */
static int iot_ready(struct hmm *h)
{
	struct hmm_ioreq *r;

	if (hmm_list_empty(&h->ioq))
		return 0;
	r = hmm_container_of(h->ioq.next, struct hmm_ioreq, link);
	return r->io.op >= HMM_IOREQ_FREE ||
	       (!h->io_no_room &&
		hmm_store_inflight(h->store) < h->cfg.io_depth);
}

/*
 * Take requests from the head of h->ioq, in order: the synchronous ones
 * (unless async_only), extent I/Os while fewer than io_depth are in the
 * store and it has not said it has no room; stop at the first that must
 * wait.  Counts the most extent I/Os
 * the store held at once (stats.io_inflight_peak).  h->lock held.
 */
static unsigned iot_take(struct hmm *h, struct hmm_io **ios, int async_only)
{
	unsigned n = 0, busy = hmm_store_inflight(h->store);

	while (!hmm_list_empty(&h->ioq) && n < IOT_BATCH) {
		struct hmm_ioreq *r = hmm_container_of(h->ioq.next,
						struct hmm_ioreq, link);

		if (r->io.op >= HMM_IOREQ_FREE && async_only)
			break;
		if (r->io.op < HMM_IOREQ_FREE &&
		    (busy >= h->cfg.io_depth || h->io_no_room))
			break;
		if (r->io.op < HMM_IOREQ_FREE && ++busy > h->st.io_inflight_peak)
			h->st.io_inflight_peak = busy;
		hmm_list_del(&r->link);
		ios[n++] = &r->io;
	}
	return n;
}

/* Carry out what iot_take took: synchronous ones here, the rest async. */
static void iot_run(struct hmm *h, struct hmm_io **ios, unsigned n)
{
	struct hmm_io *async[IOT_BATCH];
	unsigned i, na = 0;

	for (i = 0; i < n; i++) {
		struct hmm_ioreq *r = hmm_container_of(ios[i],
					struct hmm_ioreq, io);

		if (ios[i]->op >= HMM_IOREQ_FREE) {
			iot_sync_op(h, r);
			continue;
		}
		async[na++] = ios[i];
	}
	if (na)
		iot_submit(h, async, na);
}

static void iot_loop(struct hmm *h)
{
	struct hmm_io *ios[IOT_BATCH];

	for (;;) {
		unsigned n, pending;
		int idle;

		pthread_mutex_lock(&h->lock);
		iot_drain(h);
		pending = hmm_store_inflight(h->store);
		/* stopping waits for the writes the checksum thread holds */
		while (hmm_list_empty(&h->ioq) && !pending &&
		       (!h->io_stop || h->crc_pending))
			pthread_cond_wait(&h->io_cond, &h->lock);
		if (h->io_stop && hmm_list_empty(&h->ioq) && !pending) {
			pthread_mutex_unlock(&h->lock);
			return;
		}
		n = iot_take(h, ios, 0);
		pthread_mutex_unlock(&h->lock);

		if (n)
			iot_run(h, ios, n);
		if (n == IOT_BATCH || !hmm_store_inflight(h->store))
			continue;
		/*
		 * Sleep until a completion; with nothing left queued, also
		 * until a new request (the eventfd).  What stays queued
		 * waits for room in the store: only a completion helps.
		 */
		pthread_mutex_lock(&h->lock);
		if (iot_ready(h)) {	/* queued meanwhile, with room */
			pthread_mutex_unlock(&h->lock);
			continue;
		}
		idle = hmm_list_empty(&h->ioq) && !h->io_stop;
		h->io_sleeping = idle;
		pthread_mutex_unlock(&h->lock);
		if (!idle) {
			hmm_store_poll(h->store, 1, IOT_NAP_MS);
			continue;
		}
		hmm_store_poll_wake(h->store, 1, IOT_NAP_MS, h->io_efd);
		pthread_mutex_lock(&h->lock);
		h->io_sleeping = 0;
		pthread_mutex_unlock(&h->lock);
	}
}

static void *iot_main(void *arg)
{
	struct iot_start *st = arg;
	struct hmm *h = st->h;
	int r;

	r = hmm_store_open(&st->scfg, &h->store);
	pthread_mutex_lock(&h->lock);
	st->result = r;
	if (r < 0)
		snprintf(st->detail, sizeof(st->detail), "%s",
			 hmm_last_error());
	st->done = 1;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
	if (r < 0)
		return NULL;
	iot_loop(h);
	hmm_store_close(h->store);
	return NULL;
}

/* Open the store on a new I/O thread.  Returns 0 or the store's error. */
int hmm_iot_start(struct hmm *h, const struct hmm_config *cfg)
{
	struct iot_start st;
	int r;

	memset(&st, 0, sizeof(st));
	st.h = h;
	st.scfg.path = cfg->store_path;
	st.scfg.size = cfg->store_size;
	st.scfg.extent_bytes = h->chunk_bytes;	/* tables sized by chunks */
	st.scfg.flags = HMM_STORE_CREATE;	/* new or empty: format */
	if (cfg->flags & HMM_CONFIG_STORE_FORMAT)
		st.scfg.flags |= HMM_STORE_TRUNCATE;
	if (cfg->flags & HMM_CONFIG_STORE_BUFFERED)
		st.scfg.flags |= HMM_STORE_BUFFERED;
	st.scfg.queue_depth = h->cfg.queue_depth;	/* resolved */
	st.scfg.pool_bytes = h->cfg.pool_bytes;
	st.scfg.numa_node = cfg->numa_node;
	h->io_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (h->io_efd < 0)
		return hmm_err(-errno, "store %s: eventfd for the I/O thread: "
			       "%s", cfg->store_path, strerror(errno));
	h->io_sleeping = h->io_kicked = h->io_stop = h->io_no_room = 0;
	r = hmm_crc_start(h);
	if (r) {
		close(h->io_efd);
		h->io_efd = -1;
		return r;
	}
	r = pthread_create(&h->io_thread, NULL, iot_main, &st);
	if (r) {
		hmm_crc_stop(h);
		close(h->io_efd);
		h->io_efd = -1;
		return hmm_err(-r, "store %s: cannot start the I/O thread",
			       cfg->store_path);
	}
	pthread_mutex_lock(&h->lock);
	while (!st.done)
		pthread_cond_wait(&h->cond, &h->lock);
	pthread_mutex_unlock(&h->lock);
	if (st.result < 0) {
		pthread_join(h->io_thread, NULL);
		hmm_crc_stop(h);
		close(h->io_efd);
		h->io_efd = -1;
		h->store = NULL;
		return hmm_err(st.result, "%s", st.detail);
	}
	h->io_started = 1;
	return 0;
}

/* Finish every queued request, close the store, join the thread. */
void hmm_iot_stop(struct hmm *h)
{
	if (!h->io_started)
		return;
	pthread_mutex_lock(&h->lock);
	h->io_stop = 1;
	if (h->io_sleeping && !h->io_kicked) {
		uint64_t one = 1;

		h->io_kicked = 1;
		(void)!write(h->io_efd, &one, sizeof(one));
	}
	pthread_cond_signal(&h->io_cond);
	pthread_mutex_unlock(&h->lock);
	pthread_join(h->io_thread, NULL);
	hmm_crc_stop(h);	/* it holds nothing now */
	close(h->io_efd);
	h->io_efd = -1;
	h->io_started = 0;
	h->store = NULL;
}
