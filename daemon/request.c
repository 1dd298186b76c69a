// SPDX-License-Identifier: MIT
/*
 * request.c — one client request (hmmd_request, hmmd.h): the dispatch by
 * message type to the request files (request.h), and the replies they
 * share (ERROR, OK, a tensor).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "request.h"

int hmmd_reply_err(struct hmmd_req *q, int err, const char *fmt, ...)
{
	struct hmm_proto_error pe;
	char d[HMM_PROTO_DETAIL_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(d, sizeof(d), fmt, ap);
	va_end(ap);
	hmm_proto_error_fill(&pe, err, "%s", d);
	if (q->e->cfg->verbose)
		hmmd_log("client %llu: %s: %s", (unsigned long long)q->cl->id,
			 hmm_proto_type_name(q->m->hdr.type), d);
	return hmm_proto_error_encode(q->out, q->cap, q->m->hdr.seq, &pe);
}

int hmmd_reply_ok(struct hmmd_req *q)
{
	return hmm_proto_ok_encode(q->out, q->cap, q->m->hdr.seq);
}

int hmmd_reply_tensor(struct hmmd_req *q, struct hmmd_tensor *dt)
{
	struct hmm_proto_tensor r;
	unsigned i, nd = hmm_tensor_ndim(dt->t);

	memset(&r, 0, sizeof(r));
	r.id = dt->id;
	r.bytes = hmm_tensor_bytes(dt->t);
	r.dtype = hmm_tensor_dtype(dt->t);
	r.ndim = nd;
	for (i = 0; i < nd; i++)
		r.shape[i] = hmm_tensor_shape(dt->t)[i];
	r.flags = dt->flags;
	memcpy(r.name, dt->name, sizeof(r.name));
	return hmm_proto_tensor_reply_encode(q->out, q->cap, q->m->hdr.seq,
					     &r);
}

int hmmd_open_locked(struct hmmd_req *q, int (*fn)(struct hmmd_req *q))
{
	int n;

	pthread_mutex_lock(&q->e->open_lock);
	n = fn(q);
	pthread_mutex_unlock(&q->e->open_lock);
	return n;
}

int hmmd_request(struct hmmd_engine *e, struct hmmd_client *cl,
		 const struct hmm_proto_msg *m, void *out, size_t cap,
		 int *fd)
{
	return hmmd_request_nowait(e, cl, m, out, cap, fd, 0);
}

int hmmd_request_nowait(struct hmmd_engine *e, struct hmmd_client *cl,
			const struct hmm_proto_msg *m, void *out, size_t cap,
			int *fd, int nowait)
{
	struct hmmd_req q = { e, cl, m, out, cap, fd, nowait };

	*fd = -1;
	switch (m->hdr.type) {
	case HMM_PROTO_TENSOR_NEW:	return hmmd_req_tensor_new(&q);
	case HMM_PROTO_TENSOR_FREE:	return hmmd_req_tensor_free(&q);
	case HMM_PROTO_MAP:		return hmmd_req_map(&q);
	case HMM_PROTO_UNMAP:
	case HMM_PROTO_UNMAP_EXACT:	return hmmd_req_unmap(&q);
	case HMM_PROTO_PREFETCH:
	case HMM_PROTO_EVICT:
	case HMM_PROTO_WRITEBACK:	return hmmd_req_move(&q);
	case HMM_PROTO_FLUSH:		return hmmd_req_flush(&q);
	case HMM_PROTO_STATS:
	case HMM_PROTO_STATS2:		return hmmd_req_stats(&q);
	case HMM_PROTO_SHARE:		return hmmd_req_share(&q);
	case HMM_PROTO_ATTACH:		return hmmd_req_attach(&q);
	case HMM_PROTO_QUOTA_SET:	return hmmd_req_quota_set(&q);
	case HMM_PROTO_LIST:		return hmmd_req_list(&q);
	case HMM_PROTO_WAIT:		return hmmd_req_wait(&q);
	case HMM_PROTO_SAVE:		return hmmd_req_save(&q);
	case HMM_PROTO_TENSOR_RM:	return hmmd_req_tensor_rm(&q);
	}
	return hmmd_reply_err(&q, -EPROTO, "%s: not a request",
			 hmm_proto_type_name(m->hdr.type));
}
