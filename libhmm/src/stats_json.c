// SPDX-License-Identifier: MIT
/* stats_json.c — hmm_stats_json: hmm_stats (either backend) as one JSON
 * object. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ctx.h"
#include "err.h"
#include "hmm.h"

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

	if (!buf && cap)	/* as snprintf: NULL only with cap 0 */
		return hmm_err(-EINVAL, "hmm_stats_json: no buffer for cap "
			       "%zu (NULL takes cap 0: the length needed)",
			       cap);
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
	     "\"store_direct\":%llu,\"pool_bytes\":%llu,"
	     "\"queue_depth\":%llu,\"io_depth\":%llu,"
	     "\"io_inflight_peak\":%llu,\"kernel_threads\":%llu,"
	     "\"store_buffers_registered\":%llu,\"host_spare\":%llu,"
	     "\"chunk_bytes\":%llu}",
	     (unsigned long long)st.tensors, (unsigned long long)st.chunks,
	     (unsigned long long)st.discard_skips,
	     (unsigned long long)st.prefetches,
	     (unsigned long long)st.prefetch_hits,
	     (unsigned long long)st.steps, (unsigned long long)st.recordings,
	     (unsigned long long)st.divergences,
	     (unsigned long long)st.io_errors,
	     (unsigned long long)st.region_faults,
	     (unsigned long long)st.region_evictions,
	     (unsigned long long)st.store_direct,
	     (unsigned long long)st.pool_bytes,
	     (unsigned long long)st.queue_depth,
	     (unsigned long long)st.io_depth,
	     (unsigned long long)st.io_inflight_peak,
	     (unsigned long long)st.kernel_threads,
	     (unsigned long long)st.store_buffers_registered,
	     (unsigned long long)st.host_spare,
	     (unsigned long long)h->chunk_bytes);
	if (b.len > INT32_MAX)
		return hmm_err(-EOVERFLOW, "hmm_stats_json: too long");
	return (int)b.len;
}
