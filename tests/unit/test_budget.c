// SPDX-License-Identifier: MIT
/*
 * test_budget — the one admission function (libhmm/src/engine/budget.h)
 * on an embedded context: an owner past its quota (-EDQUOT) or past the
 * tier (-ENOMEM) fails at once; one that does not fit fails with -EAGAIN
 * when it may not wait and -ENOMEM after wait_s when it may; a waiter
 * gets in when another owner releases, and leaves when its owner is
 * gone; plain admissions take the tier's used bytes; the ledger
 * (admitted, owners' used, waits) counts all of it exactly.
 * t: tsan
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "t.h"
#include "ctx.h"

#define KIB	1024ull
#define BUDGET	(1024 * KIB)

static struct hmm *h;
static struct hmm_owner a, b;

struct waiter {
	struct hmm_admit ad;
	int ret;
};

static void *wait_main(void *arg)
{
	struct waiter *w = arg;

	w->ret = hmm_budget_admit_locked(h, &w->ad);
	return NULL;
}

static struct hmm_admit owner_admit(struct hmm_owner *o, uint64_t bytes,
				    double wait_s)
{
	struct hmm_admit ad = {
		.tier = HMM_TIER_HOST, .bytes = bytes, .wait_s = wait_s,
		.owner = o,
	};

	return ad;
}

static uint64_t admitted(uint64_t *waits)
{
	uint64_t now, peak;

	hmm_budget_owners(h, HMM_TIER_HOST, &now, &peak, waits);
	return now;
}

static void test_refusals(void)
{
	struct hmm_admit ad = owner_admit(&a, 2048 * KIB, 1);
	uint64_t waits;

	t_eq(hmm_budget_admit_locked(h, &ad), -EDQUOT, "more than the "
	     "owner's quota: -EDQUOT at once: %s", hmm_last_error());
	t_ok(strstr(hmm_last_error(), "quota") != NULL, "the detail names "
	     "the quota");
	hmm_budget_owner_quota(h, &a, HMM_TIER_HOST, 4096 * KIB);
	t_eq(hmm_budget_admit_locked(h, &ad), -ENOMEM, "within the quota, "
	     "more than the tier: -ENOMEM at once: %s", hmm_last_error());
	t_eq(ad.waited_s, 0, "... without waiting");
	t_eq(admitted(&waits), 0, "nothing admitted");
	t_eq(waits, 0, "no wait counted");
}

static void test_wait(void)
{
	struct hmm_admit ad = owner_admit(&a, 512 * KIB, 1);
	struct waiter w = { owner_admit(&b, 768 * KIB, 5), 1 };
	pthread_t thr;
	uint64_t waits;

	t_eq(hmm_budget_admit_locked(h, &ad), 0, "a: 512 KiB admitted");
	t_eq(hmm_budget_owner_used(h, &a, HMM_TIER_HOST), 512 * KIB,
	     "a's ledger holds 512 KiB");
	t_eq(admitted(&waits), 512 * KIB, "the tier's admitted is 512 KiB");

	ad = owner_admit(&b, 768 * KIB, 0);
	t_eq(hmm_budget_admit_locked(h, &ad), -EAGAIN, "b: 768 KiB does not "
	     "fit and may not wait: -EAGAIN");
	ad = owner_admit(&b, 768 * KIB, 0.1);
	t_eq(hmm_budget_admit_locked(h, &ad), -ENOMEM, "b: may wait 100 ms: "
	     "-ENOMEM once starved that long: %s", hmm_last_error());
	t_ok(ad.starved && ad.waited_s >= 0.1, "... starved, waited %.3f s",
	     ad.waited_s);
	t_eq(admitted(&waits), 512 * KIB, "... and took nothing");
	t_eq(waits, 1, "one owner's wait counted");

	if (pthread_create(&thr, NULL, wait_main, &w))
		t_fail_all("pthread_create");
	usleep(100000);
	hmm_budget_owner_release(h, &a, HMM_TIER_HOST, 512 * KIB);
	pthread_join(thr, NULL);
	t_eq(w.ret, 0, "b waits, and gets in once a releases");
	t_ok(w.ad.waited_s >= 0.05, "... after waiting %.3f s",
	     w.ad.waited_s);
	t_eq(hmm_budget_owner_used(h, &a, HMM_TIER_HOST), 0, "a holds 0");
	t_eq(hmm_budget_owner_used(h, &b, HMM_TIER_HOST), 768 * KIB,
	     "b holds 768 KiB");
	t_eq(admitted(&waits), 768 * KIB, "the tier's admitted is 768 KiB");
}

static void test_gone(void)
{
	struct waiter w = { owner_admit(&a, 512 * KIB, 5), 1 };
	pthread_t thr;

	if (pthread_create(&thr, NULL, wait_main, &w))
		t_fail_all("pthread_create");
	usleep(100000);
	hmm_budget_owner_gone(h, &a, -ECONNRESET);
	pthread_join(thr, NULL);
	t_eq(w.ret, -ECONNRESET, "a waits; its owner goes: the wait ends "
	     "with the owner's error");
	t_ok(w.ad.waited_s < 4, "... at once (%.3f s)", w.ad.waited_s);
	hmm_budget_owner_release(h, &b, HMM_TIER_HOST, 768 * KIB);
	t_eq(hmm_budget_owner_used(h, &b, HMM_TIER_HOST), 0, "b released");
}

static void test_plain(void)
{
	struct hmm_admit ad = {
		.tier = HMM_TIER_HOST, .bytes = 64 * KIB, .wait_s = 0,
	};
	struct hmm_stats st;

	t_eq(hmm_budget_admit_locked(h, &ad), 0, "no owner: 64 KiB of the "
	     "tier taken");
	t_eq(hmm_stats(h, &st), 0, "stats");
	t_eq(st.tier[HMM_TIER_HOST].resident, 64 * KIB, "the host tier's "
	     "used is 64 KiB");
	ad.bytes = BUDGET;
	t_eq(hmm_budget_admit_locked(h, &ad), -EAGAIN, "the whole budget "
	     "more does not fit now (nothing to reclaim): -EAGAIN");
	pthread_mutex_lock(&h->lock);
	hmm_budget_give(h, HMM_TIER_HOST, 64 * KIB);
	pthread_mutex_unlock(&h->lock);
	t_eq(hmm_budget_admit_locked(h, &ad), 0, "given back: the whole "
	     "budget is admitted");
	pthread_mutex_lock(&h->lock);
	hmm_budget_give(h, HMM_TIER_HOST, BUDGET);
	pthread_mutex_unlock(&h->lock);
}

int main(void)
{
	struct hmm_config cfg;

	hmm_config_default(&cfg);
	cfg.host_budget = BUDGET;
	cfg.wait_ms = 200;
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());
	hmm_budget_owner_quota(h, &a, HMM_TIER_HOST, 768 * KIB);
	hmm_budget_owner_quota(h, &b, HMM_TIER_HOST, 768 * KIB);
	test_refusals();
	test_wait();
	test_gone();
	test_plain();
	hmm_close(h);
	return t_done();
}
