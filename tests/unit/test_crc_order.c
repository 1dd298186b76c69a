// SPDX-License-Identifier: MIT
/*
 * test_crc_order — the checksum thread's order (crcthread.c): a read
 * that a map waits on is checked first, then the writes waiting to be
 * summed (the disk waits for them), then the other reads, oldest first.
 * Requests are queued while h->lock is held, so the thread sees them
 * all at once, as it does when a batch of reads lands together: the
 * reads are not real ones (hmm_store_check refuses them at once) and
 * the write is empty (the store refuses it), so only the order counts.
 * t: tsan
 */
#include <errno.h>
#include <string.h>

#include "t.h"
#include "ctx.h"

static struct hmm *h;
static struct hmm_ioreq rd[3], wr;
static char order[8];		/* done() calls: '0'-'2' reads, 'w' */
static int ndone, summed_first;

static void done(struct hmm_ioreq *r)
{
	pthread_mutex_lock(&h->lock);
	if (r == &rd[0])	/* the write was summed before this read */
		summed_first = !!(wr.io.flags & HMM_IOF_CRC_GIVEN);
	order[ndone++] = r == &wr ? 'w' : (char)('0' + (r - rd));
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
}

static void req(struct hmm_ioreq *r, int op)
{
	memset(r, 0, sizeof(*r));
	r->io.op = op;
	if (op == HMM_IO_READ)
		r->io.flags = HMM_IOF_CRC_LATER;
	r->h = h;
	r->done = done;
}

int main(void)
{
	static char path[4200];
	struct hmm_config cfg;

	snprintf(path, sizeof(path), "%s/store", t_tmpdir());
	hmm_config_default(&cfg);
	cfg.store_path = path;
	cfg.store_size = 16 << 20;
	cfg.host_budget = 4 << 20;
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());
	for (int i = 0; i < 3; i++)
		req(&rd[i], HMM_IO_READ);
	req(&wr, HMM_IO_WRITE);

	pthread_mutex_lock(&h->lock);
	hmm_crc_queue(h, &rd[0]);
	hmm_crc_queue(h, &rd[1]);
	hmm_crc_queue(h, &wr);
	hmm_crc_queue(h, &rd[2]);
	hmm_crc_hurry(h, &rd[2]);	/* a map waits on it */
	hmm_crc_hurry(h, &wr);		/* a write is never hurried */
	while (ndone < 4)
		pthread_cond_wait(&h->cond, &h->lock);
	pthread_mutex_unlock(&h->lock);

	t_ok(order[0] == '2', "the read a map waits on is checked first "
	     "(order %.4s)", order);
	t_ok(summed_first, "the write is summed before the older reads are "
	     "checked");
	t_ok(strchr(order, '0') < strchr(order, '1'), "the other reads in "
	     "the order they came (order %.4s)", order);
	t_ok(rd[0].io.result == -EINVAL && wr.io.result < 0,
	     "the fake requests were refused (%d, %d)", rd[0].io.result,
	     wr.io.result);
	hmm_close(h);
	return t_done();
}
