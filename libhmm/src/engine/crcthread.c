// SPDX-License-Identifier: MIT
/*
 * crcthread.c — the checksum thread: the crc32c of the chunks' extents,
 * off the I/O thread.
 *
 * Why: the I/O thread is the only one that may submit and reap, and a
 * 2 MiB crc32c is 0.2-0.4 ms of CPU.  When it checked every read in its
 * reap and summed every write before submitting it, a piece of the
 * offloaded AdamW step (4 reads, 3 writes) cost it about 4 ms, and the
 * disk, which completes what it was given in batches, waited for it:
 * after a batch of 48 reads landed at once, the step got its pieces one
 * every 3-4 ms, with one or two requests at the disk (block trace,
 * architecture.md).  With the checks skipped altogether the 64M step
 * took 0.62-0.67 s instead of 0.80-0.89 s.  Here they cost the I/O
 * thread nothing:
 *	a chunk's write comes here first (hmm_crc_queue, from
 *	chunk_copy_start): this thread sums the bytes (the chunk is busy:
 *	nobody maps it until the copy ends), marks the request
 *	HMM_IOF_CRC_GIVEN and queues it to the I/O thread;
 *	a chunk's read goes to the store with HMM_IOF_CRC_LATER: the I/O
 *	thread refills the disk and hands the completed read here
 *	(iothread.c), this thread checks it (hmm_store_check) and only
 *	then calls its done(): the chunk is valid on the host only once
 *	checked, so no map ever sees unchecked bytes.
 * One thread: it sums at 5-9 GB/s (crc32c.c; 30 on a Zen 4 with
 * VPCLMULQDQ), faster than any one disk this was measured on.
 *
 * Order.  A batch of reads lands at once (48-56 MiB on the build
 * machine's virtual disk), and checking it takes the thread 2-6 ms, in
 * the order the reads completed.  The step that waits for one piece
 * waited for all of them (about 5 ms a step of 16M parameters, traced),
 * and its write-backs, summed behind the reads, reached the idle disk
 * that much later.  So the thread takes, in turn: a read that a map
 * waits on (hmm_crc_hurry, from the map's step), the writes, oldest
 * first, then the other reads, oldest first (test_crc_order).  h->crc_pending counts what it holds, so that
 * the I/O thread does not stop while a write it will be given is here.
 */
#include <string.h>

#include "chunk.h"
#include "crc32c.h"
#include "err.h"

enum { CRC_NONE, CRC_QUEUED, CRC_HURRIED };

/* Take r (a chunk's write to sum, or a read to check); h->lock held. */
void hmm_crc_queue(struct hmm *h, struct hmm_ioreq *r)
{
	hmm_list_add_tail(r->io.op == HMM_IO_WRITE ? &h->crcw : &h->crcq,
			  &r->link);
	r->crc_state = CRC_QUEUED;
	h->crc_pending++;
	pthread_cond_signal(&h->crc_cond);
}

/* A map waits on r's chunk: check it next.  h->lock held. */
void hmm_crc_hurry(struct hmm *h, struct hmm_ioreq *r)
{
	if (r->crc_state != CRC_QUEUED || r->io.op == HMM_IO_WRITE)
		return;
	hmm_list_del(&r->link);
	hmm_list_add_tail(h->crcq.next, &r->link);	/* at the head */
	r->crc_state = CRC_HURRIED;
}

/* What to do next: a read a map waits on, else a write (the disk
 * waits for it), else the oldest read.  h->lock held. */
static struct hmm_ioreq *crc_next(struct hmm *h)
{
	struct hmm_list *q = &h->crcq;
	struct hmm_ioreq *r;

	if (!hmm_list_empty(&h->crcw) &&
	    (hmm_list_empty(q) ||
	     hmm_container_of(q->next, struct hmm_ioreq, link)->crc_state !=
	     CRC_HURRIED))
		q = &h->crcw;
	r = hmm_container_of(q->next, struct hmm_ioreq, link);
	hmm_list_del(&r->link);
	r->crc_state = CRC_NONE;
	return r;
}

static void crc_one(struct hmm *h, struct hmm_ioreq *r)
{
	struct hmm_io *io = &r->io;

	if (io->op == HMM_IO_WRITE) {
		io->crc = hmm_crc32c(0, io->buf, io->len);
		io->flags |= HMM_IOF_CRC_GIVEN;
		pthread_mutex_lock(&h->lock);
		hmm_iot_queue(h, r);
		h->crc_pending--;
		pthread_mutex_unlock(&h->lock);
		return;
	}
	io->result = hmm_store_check(io);	/* detail: this thread's */
	r->done(r);
	pthread_mutex_lock(&h->lock);
	h->crc_pending--;
	pthread_cond_signal(&h->io_cond);	/* it may wait to stop */
	pthread_mutex_unlock(&h->lock);
}

static void *crc_main(void *arg)
{
	struct hmm *h = arg;

	pthread_mutex_lock(&h->lock);
	for (;;) {
		struct hmm_ioreq *r;

		while (hmm_list_empty(&h->crcq) && hmm_list_empty(&h->crcw) &&
		       !h->crc_stop)
			pthread_cond_wait(&h->crc_cond, &h->lock);
		if (hmm_list_empty(&h->crcq) && hmm_list_empty(&h->crcw))
			break;
		r = crc_next(h);
		pthread_mutex_unlock(&h->lock);
		crc_one(h, r);
		pthread_mutex_lock(&h->lock);
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

int hmm_crc_start(struct hmm *h)
{
	int r;

	hmm_list_init(&h->crcq);
	hmm_list_init(&h->crcw);
	h->crc_pending = 0;
	h->crc_stop = 0;
	r = pthread_create(&h->crc_thread, NULL, crc_main, h);
	if (r)
		return hmm_err(-r, "cannot start the checksum thread: %s",
			       strerror(r));
	h->crc_started = 1;
	return 0;
}

/* After the I/O thread has stopped: nothing is left here to do. */
void hmm_crc_stop(struct hmm *h)
{
	if (!h->crc_started)
		return;
	pthread_mutex_lock(&h->lock);
	h->crc_stop = 1;
	pthread_cond_signal(&h->crc_cond);
	pthread_mutex_unlock(&h->lock);
	pthread_join(h->crc_thread, NULL);
	h->crc_started = 0;
}
