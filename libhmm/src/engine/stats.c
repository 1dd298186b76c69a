// SPDX-License-Identifier: MIT
/* stats.c — hmm_stats as a struct and as one JSON object. */
#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "client.h"
#include "ctx.h"
#include "err.h"
#include "region_int.h"
#include "store.h"

/* This context's own counters of tier i; h->lock held. */
static void tier_stats(struct hmm *h, int i, struct hmm_tier_stats *ts)
{
	struct hmm_tier *T = &h->tier[i];

	*ts = T->st;
	ts->capacity = T->cap;
	ts->resident = T->used;
	ts->peak = T->peak;
	ts->pinned = T->pinned;
}

int hmm_stats(struct hmm *h, struct hmm_stats *st)
{
	int i;

	if (!h || !st)
		return hmm_err(-EINVAL, "hmm_stats: context and st required");
	if (h->remote) {	/* hmmd's engine; this context's steps and
				   regions (they live in this process) */
		int r = hmm_remote_stats(h->remote, st);

		if (r == 0) {
			pthread_mutex_lock(&h->lock);
			st->steps = h->st.steps;
			if (h->dev)	/* this process's (shared_dev.c) */
				tier_stats(h, HMM_TIER_DEVICE,
					   &st->tier[HMM_TIER_DEVICE]);
			pthread_mutex_unlock(&h->lock);
			hmm_region_stats(h, st);
		}
		return r;
	}
	pthread_mutex_lock(&h->lock);
	*st = h->st;
	for (i = 0; i < HMM_TIERS; i++)
		tier_stats(h, i, &st->tier[i]);
	st->tensors = h->live_tensors;
	st->chunks = h->live_chunks;
	pthread_mutex_unlock(&h->lock);
	if (h->store) {	/* store stats may be read from any thread */
		struct hmm_store_stats ss;

		hmm_store_stats(h->store, &ss);
		st->tier[HMM_TIER_STORE].capacity = ss.capacity_bytes;
		st->tier[HMM_TIER_STORE].resident = ss.used_bytes;
		st->tier[HMM_TIER_STORE].peak = ss.used_bytes;
		st->store_direct = ss.direct;
	}
	return 0;
}

struct jbuf {
	char *p;
	size_t cap, len;
};

static void jput(struct jbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void jput(struct jbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(b->len < b->cap ? b->p + b->len : NULL,
		      b->len < b->cap ? b->cap - b->len : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		b->len += n;
}

static void jtier(struct jbuf *b, const char *name,
		  const struct hmm_tier_stats *t)
{
	jput(b, "\"%s\":{\"capacity\":%llu,\"resident\":%llu,\"peak\":%llu,"
	     "\"pinned\":%llu,\"bytes_in\":%llu,\"bytes_out\":%llu,"
	     "\"hits\":%llu,\"misses\":%llu,\"evictions\":%llu,"
	     "\"io_ops\":%llu,\"stall_s\":%.6f,\"io_s\":%.6f,"
	     "\"bandwidth_Bps\":%.0f}", name,
	     (unsigned long long)t->capacity, (unsigned long long)t->resident,
	     (unsigned long long)t->peak, (unsigned long long)t->pinned,
	     (unsigned long long)t->bytes_in, (unsigned long long)t->bytes_out,
	     (unsigned long long)t->hits, (unsigned long long)t->misses,
	     (unsigned long long)t->evictions, (unsigned long long)t->io_ops,
	     t->stall_s, t->io_s,
	     t->io_s > 0 ? (t->bytes_in + t->bytes_out) / t->io_s : 0.0);
}

int hmm_stats_json(struct hmm *h, char *buf, size_t cap)
{
	struct jbuf b = { buf, cap, 0 };
	struct hmm_stats st;
	int r;

	r = hmm_stats(h, &st);
	if (r < 0)
		return r;
	if (cap)
		buf[0] = 0;
	jput(&b, "{");
	jtier(&b, "device", &st.tier[HMM_TIER_DEVICE]);
	jput(&b, ",");
	jtier(&b, "host", &st.tier[HMM_TIER_HOST]);
	jput(&b, ",");
	jtier(&b, "store", &st.tier[HMM_TIER_STORE]);
	jput(&b, ",\"tensors\":%llu,\"chunks\":%llu,\"discard_skips\":%llu,"
	     "\"prefetches\":%llu,\"prefetch_hits\":%llu,\"steps\":%llu,"
	     "\"recordings\":%llu,\"divergences\":%llu,\"io_errors\":%llu,"
	     "\"region_faults\":%llu,\"region_evictions\":%llu,"
	     "\"store_direct\":%llu}",
	     (unsigned long long)st.tensors, (unsigned long long)st.chunks,
	     (unsigned long long)st.discard_skips,
	     (unsigned long long)st.prefetches,
	     (unsigned long long)st.prefetch_hits,
	     (unsigned long long)st.steps, (unsigned long long)st.recordings,
	     (unsigned long long)st.divergences,
	     (unsigned long long)st.io_errors,
	     (unsigned long long)st.region_faults,
	     (unsigned long long)st.region_evictions,
	     (unsigned long long)st.store_direct);
	if (b.len > INT32_MAX)
		return hmm_err(-EOVERFLOW, "hmm_stats_json: too long");
	return (int)b.len;
}
