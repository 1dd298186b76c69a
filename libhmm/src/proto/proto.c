// SPDX-License-Identifier: MIT
/*
 * proto.c — the hmmd wire codec (see proto.h): the header, the public
 * encode/decode, the typed pairs and the helpers.  The bodies of the
 * message types, and the table that describes each, are in proto_msg.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "proto_wire.h"

static const struct hmm_proto_mtype *mtype(unsigned type)
{
	if (type >= hmm_proto_mtypes_n || !hmm_proto_mtypes[type].name)
		return NULL;
	return &hmm_proto_mtypes[type];
}

const char *hmm_proto_type_name(unsigned type)
{
	const struct hmm_proto_mtype *t = mtype(type);

	return t ? t->name : "unknown";
}

int hmm_proto_body_size(unsigned type)
{
	const struct hmm_proto_mtype *t = mtype(type);

	if (!t)
		return hmm_err(-EPROTO, "message type %u unknown", type);
	return t->size;
}

int hmm_proto_type_version(unsigned type)
{
	const struct hmm_proto_mtype *t = mtype(type);

	if (!t)
		return hmm_err(-EPROTO, "message type %u unknown", type);
	return t->version;
}

int hmm_proto_is_request(unsigned type)
{
	const struct hmm_proto_mtype *t = mtype(type);

	return t ? t->request : 0;
}

/* ---- encode --------------------------------------------------------------- */

static void put_hdr(struct wr *w, unsigned type, uint32_t flags,
		    uint32_t length, uint64_t seq)
{
	w32(w, HMM_PROTO_MAGIC);
	w16(w, mtype(type)->version);	/* the type's own (proto.h) */
	w16(w, type);
	w32(w, flags);
	w32(w, length);
	w64(w, seq);
	w64(w, 0);
}

int hmm_proto_encode(void *buf, size_t cap, unsigned type, uint32_t flags,
		     uint64_t seq, const void *body)
{
	const struct hmm_proto_mtype *t = mtype(type);
	struct wr w = { .p = buf };
	size_t total;
	int ret;

	if (!t)
		return ferr(-EPROTO, "header", "type", "%u unknown", type);
	if (flags & ~t->flags_ok)
		return ferr(-EPROTO, t->name, "flags",
			    "0x%x not allowed (0x%x)", flags, t->flags_ok);
	if (t->size && !body)
		return hmm_err(-EINVAL, "message %s: no body given", t->name);
	if (t->check) {
		ret = t->check(body, t->name);
		if (ret)
			return ret;
	}
	total = HMM_PROTO_HDR_SIZE + t->size;
	if (cap < total)
		return hmm_err(-EMSGSIZE,
			       "message %s: %zu bytes do not fit in %zu",
			       t->name, total, cap);
	put_hdr(&w, type, flags, t->size, seq);
	if (t->put)
		t->put(&w, body);
	return (int)w.off;
}

/* ---- decode --------------------------------------------------------------- */

int hmm_proto_hdr_decode(const void *buf, size_t len,
			 struct hmm_proto_hdr *h)
{
	struct rd r = { .p = buf, .n = len };
	const struct hmm_proto_mtype *t;

	if (len < HMM_PROTO_HDR_SIZE)
		return hmm_err(-EMSGSIZE,
			       "message: %zu bytes, shorter than the %d-byte header",
			       len, HMM_PROTO_HDR_SIZE);
	if (len > HMM_PROTO_MSG_MAX)
		return hmm_err(-EMSGSIZE,
			       "message: %zu bytes or more, longer than %d",
			       len, HMM_PROTO_MSG_MAX);
	h->magic = r32(&r);
	h->version = r16(&r);
	h->type = r16(&r);
	h->flags = r32(&r);
	h->length = r32(&r);
	h->seq = r64(&r);
	h->reserved = r64(&r);
	if (h->magic != HMM_PROTO_MAGIC)
		return ferr(-EPROTO, "header", "magic", "0x%08x is not 0x%08x",
			    h->magic, HMM_PROTO_MAGIC);
	if (h->version < HMM_PROTO_VERSION_MIN ||
	    h->version > HMM_PROTO_VERSION_MAX)
		return ferr(-EPROTO, "header", "version",
			    "%u not spoken (%d..%d)", h->version,
			    HMM_PROTO_VERSION_MIN, HMM_PROTO_VERSION_MAX);
	t = mtype(h->type);
	if (!t)
		return ferr(-EPROTO, "header", "type", "%u unknown", h->type);
	if (h->version != t->version)
		return ferr(-EPROTO, t->name, "version",
			    "%u, but %s is a message of version %u",
			    h->version, t->name, t->version);
	if (h->flags & ~t->flags_ok)
		return ferr(-EPROTO, t->name, "flags",
			    "0x%x not allowed (0x%x)", h->flags, t->flags_ok);
	if (h->reserved)
		return ferr(-EPROTO, t->name, "reserved",
			    "0x%llx in the header: must be 0",
			    (unsigned long long)h->reserved);
	if (h->length != len - HMM_PROTO_HDR_SIZE)
		return ferr(-EMSGSIZE, t->name, "length",
			    "%u but the datagram carries %zu body bytes",
			    h->length, len - HMM_PROTO_HDR_SIZE);
	if (h->length != t->size)
		return ferr(-EMSGSIZE, t->name, "length",
			    "%u, the body of %s is %u bytes", h->length,
			    t->name, t->size);
	return 0;
}

int hmm_proto_decode(const void *buf, size_t len, struct hmm_proto_msg *msg)
{
	const struct hmm_proto_mtype *t;
	struct rd r;
	int ret;

	ret = hmm_proto_hdr_decode(buf, len, &msg->hdr);
	if (ret)
		return ret;
	t = mtype(msg->hdr.type);
	memset(&msg->u, 0, sizeof(msg->u));
	if (!t->get)
		return msg->hdr.type;
	r = (struct rd){ .p = (const uint8_t *)buf + HMM_PROTO_HDR_SIZE,
			 .n = t->size };
	ret = t->get(&r, &msg->u, t->name);
	if (!ret && (r.past || r.off != t->size))
		ret = hmm_err(-EFAULT, "message %s: codec read %zu of %u bytes",
			      t->name, r.off, t->size);
	if (!ret)
		ret = t->check(&msg->u, t->name);
	return ret ? ret : msg->hdr.type;
}

/* Decode a datagram that must be of type want. */
static int decode_as(const void *buf, size_t len, unsigned want,
		     struct hmm_proto_msg *msg)
{
	int ret = hmm_proto_hdr_decode(buf, len, &msg->hdr);

	if (ret)
		return ret;
	if (msg->hdr.type != want)
		return hmm_err(-EPROTO, "message: expected %s, got %s",
			       hmm_proto_type_name(want),
			       hmm_proto_type_name(msg->hdr.type));
	ret = hmm_proto_decode(buf, len, msg);
	return ret < 0 ? ret : 0;
}

/* ---- the typed pairs -------------------------------------------------------- */

#define PAIR(name, TYPE, T, member)					\
	int hmm_proto_##name##_encode(void *buf, size_t cap, uint64_t seq, \
				      const T *m)			\
	{								\
		return hmm_proto_encode(buf, cap, TYPE, 0, seq, m);	\
	}								\
	int hmm_proto_##name##_decode(const void *buf, size_t len,	\
				      struct hmm_proto_hdr *hdr, T *m)	\
	{								\
		struct hmm_proto_msg msg;				\
		int ret = decode_as(buf, len, TYPE, &msg);		\
									\
		if (ret)						\
			return ret;					\
		if (hdr)						\
			*hdr = msg.hdr;					\
		*m = msg.u.member;					\
		return 0;						\
	}

#define PAIR0(name, TYPE)						\
	int hmm_proto_##name##_encode(void *buf, size_t cap, uint64_t seq) \
	{								\
		return hmm_proto_encode(buf, cap, TYPE, 0, seq, NULL);	\
	}								\
	int hmm_proto_##name##_decode(const void *buf, size_t len,	\
				      struct hmm_proto_hdr *hdr)	\
	{								\
		struct hmm_proto_msg msg;				\
		int ret = decode_as(buf, len, TYPE, &msg);		\
									\
		if (!ret && hdr)					\
			*hdr = msg.hdr;					\
		return ret;						\
	}

PAIR(hello, HMM_PROTO_HELLO, struct hmm_proto_hello, hello)
PAIR(hello_reply, HMM_PROTO_HELLO_REPLY, struct hmm_proto_hello_reply,
     hello_reply)
PAIR(error, HMM_PROTO_ERROR, struct hmm_proto_error, error)
PAIR0(ok, HMM_PROTO_OK)
PAIR(tensor_new, HMM_PROTO_TENSOR_NEW, struct hmm_proto_tensor, tensor)
PAIR(tensor_reply, HMM_PROTO_TENSOR_REPLY, struct hmm_proto_tensor, tensor)
PAIR(tensor_free, HMM_PROTO_TENSOR_FREE, struct hmm_proto_tensor_free,
     tensor_free)
PAIR(map, HMM_PROTO_MAP, struct hmm_proto_range, range)
PAIR(map_reply, HMM_PROTO_MAP_REPLY, struct hmm_proto_map_reply, map_reply)
PAIR(unmap, HMM_PROTO_UNMAP, struct hmm_proto_range, range)
PAIR(unmap_exact, HMM_PROTO_UNMAP_EXACT, struct hmm_proto_range, range)
PAIR(prefetch, HMM_PROTO_PREFETCH, struct hmm_proto_range, range)
PAIR(evict, HMM_PROTO_EVICT, struct hmm_proto_range, range)
PAIR0(flush, HMM_PROTO_FLUSH)
PAIR0(stats, HMM_PROTO_STATS)
PAIR(stats_reply, HMM_PROTO_STATS_REPLY, struct hmm_proto_stats_reply,
     stats_reply)
PAIR(share, HMM_PROTO_SHARE, struct hmm_proto_share, share)
PAIR(attach, HMM_PROTO_ATTACH, struct hmm_proto_attach, attach)
PAIR(quota_set, HMM_PROTO_QUOTA_SET, struct hmm_proto_quota_set, quota_set)
PAIR(list, HMM_PROTO_LIST, struct hmm_proto_list, list)
PAIR(list_reply, HMM_PROTO_LIST_REPLY, struct hmm_proto_list_reply, list_reply)
PAIR(wait, HMM_PROTO_WAIT, struct hmm_proto_wait, wait)
PAIR0(stats2, HMM_PROTO_STATS2)
PAIR(stats2_reply, HMM_PROTO_STATS2_REPLY, struct hmm_proto_stats2_reply,
     stats2_reply)
PAIR(writeback, HMM_PROTO_WRITEBACK, struct hmm_proto_range, range)
PAIR(save, HMM_PROTO_SAVE, struct hmm_proto_save, save)
PAIR(tensor_rm, HMM_PROTO_TENSOR_RM, struct hmm_proto_tensor_free,
     tensor_free)

/* ---- helpers ---------------------------------------------------------------- */

int hmm_proto_negotiate(const struct hmm_proto_hello *hello)
{
	unsigned lo = hello->version_min, hi = hello->version_max;

	if (hi > HMM_PROTO_VERSION_MAX)
		hi = HMM_PROTO_VERSION_MAX;
	if (lo < HMM_PROTO_VERSION_MIN)
		lo = HMM_PROTO_VERSION_MIN;
	if (lo > hi)
		return hmm_err(-EPROTO,
			       "hello: client speaks versions %u..%u, daemon %d..%d",
			       hello->version_min, hello->version_max,
			       HMM_PROTO_VERSION_MIN, HMM_PROTO_VERSION_MAX);
	return (int)hi;
}

void hmm_proto_error_fill(struct hmm_proto_error *e, int err,
			  const char *fmt, ...)
{
	va_list ap;
	size_t i;

	memset(e, 0, sizeof(*e));
	e->err = (err < 0 && err >= -4095) ? err : -EIO;
	va_start(ap, fmt);
	vsnprintf(e->detail, sizeof(e->detail), fmt, ap);
	va_end(ap);
	for (i = 0; e->detail[i]; i++)
		if ((unsigned char)e->detail[i] < 0x20 ||
		    e->detail[i] == 0x7f)
			e->detail[i] = '?';
}
