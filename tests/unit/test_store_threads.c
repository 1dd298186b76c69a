// SPDX-License-Identifier: MIT
/* test_store_threads — hmm_store_stats from another thread while the I/O
 * thread writes, reads and flushes; the pool shared with a third thread.
 * Run under TSan by make check.  t: tsan */
#include "store_t.h"

static struct hmm_store *s;
static int stop, io_ok;

static void *io_thread(void *arg)
{
	uint8_t *b = hmm_pool_alloc(hmm_store_pool(s), 65536);
	uint8_t *c = hmm_pool_alloc(hmm_store_pool(s), 65536);
	int ok = b && c;

	for (int r = 0; r < 40 && ok; r++) {
		struct hmm_io io[8], *p[8];

		for (int k = 0; k < 8; k++) {
			io[k] = (struct hmm_io){ .op = HMM_IO_WRITE, .key = k,
						 .len = 8192, .buf = b + 8192 * k };
			t_fill(b + 8192 * k, 8192, r * 8 + k);
			p[k] = &io[k];
		}
		ok &= hmm_store_submit(s, p, 8) == 8;
		for (int k = 0; k < 8; k++)
			ok &= hmm_store_wait(s, &io[k]) == 0;
		ok &= st_io(s, HMM_IO_READ, r % 8, 0, c, 8192) == 0 &&
		      !memcmp(c, b + 8192 * (r % 8), 8192);
		if (r % 10 == 9)
			ok &= hmm_store_flush(s) == 0;
	}
	io_ok = ok;
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *pool_thread(void *arg)
{
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		void *x = hmm_pool_alloc(hmm_store_pool(s), 4096);

		if (x)
			hmm_pool_free(hmm_store_pool(s), x);
	}
	return NULL;
}

int main(void)
{
	pthread_t io, pt;
	struct hmm_store_stats st;
	uint64_t last = 0, snaps = 0;
	int monotonic = 1;

	s = st_open(st_path("threads.store"), 16 << 20, HMM_STORE_CREATE, 8);
	pthread_create(&io, NULL, io_thread, NULL);
	pthread_create(&pt, NULL, pool_thread, NULL);
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		hmm_store_stats(s, &st);
		monotonic &= st.write_ops >= last;
		last = st.write_ops;
		snaps++;
	}
	pthread_join(io, NULL);
	pthread_join(pt, NULL);
	t_ok(io_ok, "the I/O thread's writes, reads and flushes all worked");
	t_ok(monotonic, "write_ops never went backwards (%llu snapshots)",
	     (unsigned long long)snaps);
	hmm_store_stats(s, &st);
	t_eq(st.write_ops, 320, "320 writes counted");
	t_eq(st.flushes, 4, "4 flushes counted");
	t_eq(st.inflight, 0, "nothing in flight");
	hmm_store_close(s);
	return t_done();
}
