/* SPDX-License-Identifier: MIT */
/*
 * dev_t.h — helpers of the device-tier tests (test_tensor_cuda,
 * test_tensor_uvm): a tensor filled with a pattern at the host, its
 * bytes checked at the host, and a thread sampling the device tier's
 * resident bytes (and the fake driver's own count, through a callback)
 * against a budget, and the one way a device test opens its context or
 * skips.  Include after t.h and hmm.h.  Helpers fail the whole test
 * (t_fail_all) on a setup error.
 */
#ifndef HMM_DEV_T_H
#define HMM_DEV_T_H

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hmm.h"

/* A new n-byte tensor holding pattern seed, written at the host. */
static inline struct hmm_tensor *t_dev_filled(struct hmm *h,
					      const char *name, int64_t n,
					      uint64_t seed)
{
	struct hmm_tensor *t;
	void *p;

	if (hmm_tensor_new(h, name, HMM_DTYPE_U8, 1, &n, &t))
		t_fail_all("tensor %s: %s", name, hmm_last_error());
	if (hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_DISCARD, &p))
		t_fail_all("map %s: %s", name, hmm_last_error());
	t_fill(p, n, seed);
	hmm_unmap(t, p);
	return t;
}

/* Does t hold pattern seed (its last 4 KiB all `mark` when mark >= 0)?
 * Read at the host; the first wrong byte goes to the diagnostics. */
static inline int t_dev_exact(struct hmm_tensor *t, size_t n, uint64_t seed,
			      int mark)
{
	uint8_t *want = malloc(n);
	void *p;
	int ok;

	if (!want || hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &p)) {
		t_diag("check %s: map: %s", hmm_tensor_name(t),
		       hmm_last_error());
		free(want);
		return 0;
	}
	t_fill(want, n, seed);
	if (mark >= 0)
		memset(want + n - 4096, mark, 4096);
	ok = !memcmp(p, want, n);
	for (size_t i = 0; !ok && i < n; i++)
		if (((uint8_t *)p)[i] != want[i]) {
			t_diag("check %s: first wrong byte at offset %zu",
			       hmm_tensor_name(t), i);
			break;
		}
	hmm_unmap(t, p);
	free(want);
	return ok;
}

/* Samples h's device tier (and fake_bytes(), when set) every 200 us
 * between _start and _stop, counting samples over budget. */
struct t_dev_sampler {
	struct hmm *h;
	uint64_t budget;
	uint64_t (*fake_bytes)(void);	/* the driver's count, or NULL */
	int stop;			/* atomic */
	unsigned samples, over, fake_over;
	pthread_t thr;
};

static void *t_dev_sample_main_(void *arg)
{
	struct t_dev_sampler *s = arg;

	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
		struct hmm_stats st;

		hmm_stats(s->h, &st);
		s->over += st.tier[HMM_TIER_DEVICE].resident > s->budget;
		if (s->fake_bytes)
			s->fake_over += s->fake_bytes() > s->budget;
		s->samples++;
		usleep(200);
	}
	return NULL;
}

static inline void t_dev_sampler_start(struct t_dev_sampler *s)
{
	if (pthread_create(&s->thr, NULL, t_dev_sample_main_, s))
		t_fail_all("sampler thread");
}

static inline void t_dev_sampler_stop(struct t_dev_sampler *s)
{
	__atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
	pthread_join(s->thr, NULL);
}

/*
 * hmm_open's result r in a device test: returns on 0; skips (77) when
 * there is no device (-ENODEV; nothing_why says what is missing: "no
 * GPU", ...), the test's empty temporary folder removed first; any
 * other error fails the test.
 */
static inline void t_dev_opened(int r, const char *nothing_why)
{
	if (r == -ENODEV) {
		rmdir(t_tmpdir());
		t_skip_all("%s: %s", nothing_why, hmm_last_error());
	}
	if (r)
		t_fail_all("hmm_open: %d %s", r, hmm_last_error());
}

#endif /* HMM_DEV_T_H */
