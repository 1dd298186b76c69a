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
 * One thread: it sums at 5-9 GB/s (crc32c.c), faster than any one disk
 * this was measured on.  h->crc_pending counts what it holds, so that
 * the I/O thread does not stop while a write it will be given is here.
 */
#include <string.h>

#include "chunk.h"
#include "crc32c.h"
#include "err.h"

/* Take r (a chunk's write to sum, or a read to check); h->lock held. */
void hmm_crc_queue(struct hmm *h, struct hmm_ioreq *r)
{
	hmm_list_add_tail(&h->crcq, &r->link);
	h->crc_pending++;
	pthread_cond_signal(&h->crc_cond);
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

		while (hmm_list_empty(&h->crcq) && !h->crc_stop)
			pthread_cond_wait(&h->crc_cond, &h->lock);
		if (hmm_list_empty(&h->crcq))
			break;
		r = hmm_container_of(h->crcq.next, struct hmm_ioreq, link);
		hmm_list_del(&r->link);
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
