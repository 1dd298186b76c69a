// SPDX-License-Identifier: MIT
/*
 * proto_msg.c — the body of every hmmd message: how each is put on the
 * wire, read back, and checked (see proto.h for the layouts, proto.c for
 * the header and the public encode/decode).  Bytes are assembled one by
 * one in little-endian order: no struct is ever copied to or from the
 * wire, so host padding never leaks.
 */
#include <errno.h>

#include "proto_wire.h"

/* ---- field helpers --------------------------------------------------------- */

static int rzero32(struct rd *r, const char *msg, const char *field)
{
	uint32_t v = r32(r);

	if (v)
		return ferr(-EPROTO, msg, field, "0x%x, reserved: must be 0", v);
	return 0;
}

static int rzero64(struct rd *r, const char *msg, const char *field)
{
	uint64_t v = r64(r);

	if (v)
		return ferr(-EPROTO, msg, field, "0x%llx, reserved: must be 0",
			    (unsigned long long)v);
	return 0;
}

/* Read a string array: NUL-terminated within cap, zeros after the NUL. */
static int rstr(struct rd *r, char *dst, size_t cap, const char *msg,
		const char *field)
{
	const uint8_t *p = rtake(r, cap);
	const uint8_t *nul = memchr(p, 0, cap);
	size_t i;

	if (!nul)
		return ferr(-EINVAL, msg, field,
			    "not NUL-terminated within %zu bytes", cap);
	for (i = nul - p + 1; i < cap; i++)
		if (p[i])
			return ferr(-EINVAL, msg, field,
				    "byte %zu after the NUL is 0x%02x, not 0",
				    i, p[i]);
	memcpy(dst, p, cap);
	return 0;
}

/* Value check of a string in a host struct: fits, no control bytes. */
static int check_str(const char *s, size_t cap, int nonempty,
		     const char *msg, const char *field)
{
	size_t n = strnlen(s, cap), i;

	if (n == cap)
		return ferr(-EINVAL, msg, field,
			    "not NUL-terminated within %zu bytes", cap);
	if (nonempty && n == 0)
		return ferr(-EINVAL, msg, field, "empty");
	for (i = 0; i < n; i++) {
		unsigned char c = s[i];

		if (c < 0x20 || c == 0x7f)
			return ferr(-EINVAL, msg, field,
				    "control character 0x%02x at byte %zu",
				    c, i);
	}
	return 0;
}

static int check_id(uint64_t id, const char *msg)
{
	if (id == 0)
		return ferr(-EINVAL, msg, "id", "0 names no tensor");
	return 0;
}

static int check_uid(uint32_t uid, const char *msg, const char *field)
{
	if (uid == UINT32_MAX)
		return ferr(-EINVAL, msg, field, "-1 is not a uid");
	return 0;
}

/* map, unmap, prefetch and evict move the device and host tiers only. */
static int check_tier(uint32_t tier, const char *msg)
{
	if (tier != HMM_TIER_DEVICE && tier != HMM_TIER_HOST)
		return ferr(-EINVAL, msg, "tier",
			    "%u is not device (%d) or host (%d)", tier,
			    HMM_TIER_DEVICE, HMM_TIER_HOST);
	return 0;
}

static int check_span(uint64_t off, uint64_t len, int all_ok,
		      const char *msg, const char *field)
{
	if (len == 0)
		return ferr(-EINVAL, msg, "len", "0");
	if (all_ok && len == HMM_ALL)
		return 0;
	if (off + len < off)
		return ferr(-EINVAL, msg, field,
			    "%llu + len %llu overflows",
			    (unsigned long long)off, (unsigned long long)len);
	return 0;
}

/* ---- hello and hello_reply ----------------------------------------------- */

static void put_hello(struct wr *w, const void *v)
{
	const struct hmm_proto_hello *m = v;
	int i;

	w16(w, m->version_min);
	w16(w, m->version_max);
	w32(w, m->features);
	for (i = 0; i < HMM_TIERS; i++)
		w64(w, m->quota[i]);
	wstr(w, m->name, sizeof(m->name));
}

static int get_hello(struct rd *r, void *v, const char *msg)
{
	struct hmm_proto_hello *m = v;
	int i;

	m->version_min = r16(r);
	m->version_max = r16(r);
	m->features = r32(r);
	for (i = 0; i < HMM_TIERS; i++)
		m->quota[i] = r64(r);
	return rstr(r, m->name, sizeof(m->name), msg, "name");
}

static int check_hello(const void *v, const char *msg)
{
	const struct hmm_proto_hello *m = v;

	if (m->version_min < 1)
		return ferr(-EINVAL, msg, "version_min", "0: versions start at 1");
	if (m->version_min > m->version_max)
		return ferr(-EINVAL, msg, "version_max",
			    "%u is below version_min %u", m->version_max,
			    m->version_min);
	/* features: unknown bits are allowed, the reply drops them */
	return check_str(m->name, sizeof(m->name), 0, msg, "name");
}

static void put_hello_reply(struct wr *w, const void *v)
{
	const struct hmm_proto_hello_reply *m = v;
	int i;

	w16(w, m->version);
	w16(w, 0);
	w32(w, m->features);
	w64(w, m->client_id);
	for (i = 0; i < HMM_TIERS; i++)
		w64(w, m->quota[i]);
	w32(w, m->chunk_bytes);
	w32(w, 0);
}

static int get_hello_reply(struct rd *r, void *v, const char *msg)
{
	struct hmm_proto_hello_reply *m = v;
	uint16_t res;
	int i;

	m->version = r16(r);
	res = r16(r);
	if (res)
		return ferr(-EPROTO, msg, "reserved0",
			    "0x%x, reserved: must be 0", res);
	m->features = r32(r);
	m->client_id = r64(r);
	for (i = 0; i < HMM_TIERS; i++)
		m->quota[i] = r64(r);
	m->chunk_bytes = r32(r);
	return rzero32(r, msg, "reserved1");
}

static int check_hello_reply(const void *v, const char *msg)
{
	const struct hmm_proto_hello_reply *m = v;

	if (m->version < HMM_PROTO_VERSION_MIN ||
	    m->version > HMM_PROTO_VERSION_MAX)
		return ferr(-EPROTO, msg, "version", "%u not spoken (%d..%d)",
			    m->version, HMM_PROTO_VERSION_MIN,
			    HMM_PROTO_VERSION_MAX);
	if (m->features & ~HMM_PROTO_FEAT_ALL)
		return ferr(-EINVAL, msg, "features",
			    "unknown bits 0x%x granted",
			    m->features & ~HMM_PROTO_FEAT_ALL);
	if (m->client_id == 0)
		return ferr(-EINVAL, msg, "client_id", "0");
	if (m->chunk_bytes == 0 || m->chunk_bytes % 4096)
		return ferr(-EINVAL, msg, "chunk_bytes",
			    "%u is not a nonzero multiple of 4096",
			    m->chunk_bytes);
	return 0;
}

/* ---- error ----------------------------------------------------------------- */

static void put_error(struct wr *w, const void *v)
{
	const struct hmm_proto_error *m = v;

	w32(w, (uint32_t)m->err);
	w32(w, 0);
	wstr(w, m->detail, sizeof(m->detail));
}

static int get_error(struct rd *r, void *v, const char *msg)
{
	struct hmm_proto_error *m = v;
	int ret;

	m->err = (int32_t)r32(r);
	ret = rzero32(r, msg, "reserved");
	if (ret)
		return ret;
	return rstr(r, m->detail, sizeof(m->detail), msg, "detail");
}

static int check_error(const void *v, const char *msg)
{
	const struct hmm_proto_error *m = v;

	if (m->err >= 0 || m->err < -4095)
		return ferr(-EINVAL, msg, "err", "%d is not -4095..-1",
			    (int)m->err);
	return check_str(m->detail, sizeof(m->detail), 0, msg, "detail");
}

/* ---- tensor_new, tensor_reply, tensor_free --------------------------------- */

/* Element sizes of HMM_DTYPE_* (hmm.h), here so the codec links alone. */
static const uint8_t dtype_size[] = {
	[HMM_DTYPE_F32] = 4, [HMM_DTYPE_F64] = 8, [HMM_DTYPE_F16] = 2,
	[HMM_DTYPE_BF16] = 2, [HMM_DTYPE_I8] = 1, [HMM_DTYPE_U8] = 1,
	[HMM_DTYPE_I32] = 4, [HMM_DTYPE_I64] = 8,
};

static void put_tensor_new(struct wr *w, const void *v)
{
	const struct hmm_proto_tensor *m = v;
	int i;

	w32(w, m->dtype);
	w32(w, m->ndim);
	for (i = 0; i < HMM_MAX_DIMS; i++)
		w64(w, (uint64_t)m->shape[i]);
	w32(w, m->flags);
	w32(w, 0);
	wstr(w, m->name, sizeof(m->name));
}

static int get_tensor_new(struct rd *r, void *v, const char *msg)
{
	struct hmm_proto_tensor *m = v;
	int i, ret;

	m->id = 0;
	m->bytes = 0;
	m->dtype = r32(r);
	m->ndim = r32(r);
	for (i = 0; i < HMM_MAX_DIMS; i++)
		m->shape[i] = (int64_t)r64(r);
	m->flags = r32(r);
	ret = rzero32(r, msg, "reserved");
	if (ret)
		return ret;
	return rstr(r, m->name, sizeof(m->name), msg, "name");
}

/* Checks the tensor's description; *bytes gets its size. */
static int check_tensor_desc(const struct hmm_proto_tensor *m,
			     const char *msg, uint64_t *bytes)
{
	uint64_t n;
	unsigned i;

	if (m->dtype >= sizeof(dtype_size) || !dtype_size[m->dtype])
		return ferr(-EINVAL, msg, "dtype", "%u unknown", m->dtype);
	if (m->ndim < 1 || m->ndim > HMM_MAX_DIMS)
		return ferr(-EINVAL, msg, "ndim", "%u is not 1..%d", m->ndim,
			    HMM_MAX_DIMS);
	n = dtype_size[m->dtype];
	for (i = 0; i < HMM_MAX_DIMS; i++) {
		int64_t d = m->shape[i];

		if (i >= m->ndim) {
			if (d)
				return ferr(-EINVAL, msg, "shape",
					    "[%u] = %lld beyond ndim %u: must be 0",
					    i, (long long)d, m->ndim);
			continue;
		}
		if (d < 1)
			return ferr(-EINVAL, msg, "shape", "[%u] = %lld < 1",
				    i, (long long)d);
		if (__builtin_mul_overflow(n, (uint64_t)d, &n))
			return ferr(-EINVAL, msg, "shape",
				    "size overflows 64 bits at [%u]", i);
	}
	if (m->flags & ~HMM_PROTO_TENSOR_F_ALL)
		return ferr(-EINVAL, msg, "flags", "unknown bits 0x%x",
			    m->flags & ~HMM_PROTO_TENSOR_F_ALL);
	*bytes = n;
	return check_str(m->name, sizeof(m->name), 1, msg, "name");
}

static int check_tensor_new(const void *v, const char *msg)
{
	uint64_t bytes;

	return check_tensor_desc(v, msg, &bytes);
}

static void put_tensor_reply(struct wr *w, const void *v)
{
	const struct hmm_proto_tensor *m = v;

	w64(w, m->id);
	w64(w, m->bytes);
	put_tensor_new(w, v);
}

static int get_tensor_reply(struct rd *r, void *v, const char *msg)
{
	struct hmm_proto_tensor *m = v;
	uint64_t id = r64(r), bytes = r64(r);
	int ret = get_tensor_new(r, v, msg);

	m->id = id;
	m->bytes = bytes;
	return ret;
}

static int check_tensor_reply(const void *v, const char *msg)
{
	const struct hmm_proto_tensor *m = v;
	uint64_t bytes;
	int ret = check_id(m->id, msg);

	if (!ret)
		ret = check_tensor_desc(m, msg, &bytes);
	if (!ret && m->bytes != bytes)
		ret = ferr(-EINVAL, msg, "bytes",
			   "%llu but dtype and shape make %llu",
			   (unsigned long long)m->bytes,
			   (unsigned long long)bytes);
	return ret;
}

static void put_tensor_free(struct wr *w, const void *v)
{
	const struct hmm_proto_tensor_free *m = v;

	w64(w, m->id);
}

static int get_tensor_free(struct rd *r, void *v, const char *msg)
{
	struct hmm_proto_tensor_free *m = v;

	m->id = r64(r);
	return 0;
}

static int check_tensor_free(const void *v, const char *msg)
{
	const struct hmm_proto_tensor_free *m = v;

	return check_id(m->id, msg);
}

/* ---- map, unmap, prefetch, evict, map_reply -------------------------------- */

static void put_range(struct wr *w, const void *v)
{
	const struct hmm_proto_range *m = v;

	w64(w, m->id);
	w64(w, m->off);
	w64(w, m->len);
	w32(w, m->tier);
	w32(w, m->access);
}

static int get_range(struct rd *r, void *v, const char *msg)
{
	struct hmm_proto_range *m = v;

	m->id = r64(r);
	m->off = r64(r);
	m->len = r64(r);
	m->tier = r32(r);
	m->access = r32(r);
	return 0;
}

static int check_range(const struct hmm_proto_range *m, const char *msg)
{
	int ret = check_id(m->id, msg);

	if (!ret)
		ret = check_span(m->off, m->len, 1, msg, "off");
	if (!ret)
		ret = check_tier(m->tier, msg);
	return ret;
}

static int check_map(const void *v, const char *msg)
{
	const struct hmm_proto_range *m = v;
	const uint32_t all = HMM_READ | HMM_WRITE | HMM_DISCARD;
	int ret = check_range(m, msg);

	if (ret)
		return ret;
	if (m->access == 0 || (m->access & ~all))
		return ferr(-EINVAL, msg, "access",
			    "0x%x is not READ|WRITE|DISCARD (0x%x), nonzero",
			    m->access, all);
	return 0;
}

/* unmap, prefetch, evict: access is not theirs to say. */
static int check_range_noaccess(const void *v, const char *msg)
{
	const struct hmm_proto_range *m = v;
	int ret = check_range(m, msg);

	if (!ret && m->access)
		ret = ferr(-EINVAL, msg, "access", "0x%x: must be 0 here",
			   m->access);
	return ret;
}

static void put_map_reply(struct wr *w, const void *v)
{
	const struct hmm_proto_map_reply *m = v;

	w64(w, m->id);
	w64(w, m->off);
	w64(w, m->len);
	w64(w, m->addr);
	w32(w, m->tier);
	w32(w, m->flags);
}

static int get_map_reply(struct rd *r, void *v, const char *msg)
{
	struct hmm_proto_map_reply *m = v;

	m->id = r64(r);
	m->off = r64(r);
	m->len = r64(r);
	m->addr = r64(r);
	m->tier = r32(r);
	m->flags = r32(r);
	return 0;
}

static int check_map_reply(const void *v, const char *msg)
{
	const struct hmm_proto_map_reply *m = v;
	int ret = check_id(m->id, msg);

	if (!ret)
		ret = check_span(m->off, m->len, 0, msg, "off");
	if (!ret)
		ret = check_span(m->addr, m->len, 0, msg, "addr");
	if (!ret)
		ret = check_tier(m->tier, msg);
	if (!ret && (m->flags & ~HMM_PROTO_MAP_F_ALL))
		ret = ferr(-EPROTO, msg, "flags", "0x%x: unknown bits",
			   m->flags);
	return ret;
}

/* ---- stats_reply ------------------------------------------------------------ */

static void put_stats_reply(struct wr *w, const void *v)
{
	const struct hmm_proto_stats_reply *m = v;
	int i;

	for (i = 0; i < HMM_TIERS; i++) {
		const struct hmm_proto_tier_stats *t = &m->tier[i];

		w64(w, t->capacity);
		w64(w, t->resident);
		w64(w, t->peak);
		w64(w, t->pinned);
		w64(w, t->bytes_in);
		w64(w, t->bytes_out);
		w64(w, t->hits);
		w64(w, t->misses);
		w64(w, t->evictions);
		w64(w, t->io_ops);
		w64(w, t->stall_ns);
		w64(w, t->io_ns);
	}
	w64(w, m->tensors);
	w64(w, m->chunks);
	w64(w, m->clients);
	w64(w, m->io_errors);
	for (i = 0; i < HMM_TIERS; i++)
		w64(w, m->quota[i]);
	for (i = 0; i < HMM_TIERS; i++)
		w64(w, m->used[i]);
	for (i = 0; i < 4; i++)
		w64(w, 0);
}

static int get_stats_reply(struct rd *r, void *v, const char *msg)
{
	struct hmm_proto_stats_reply *m = v;
	int i, ret;

	for (i = 0; i < HMM_TIERS; i++) {
		struct hmm_proto_tier_stats *t = &m->tier[i];

		t->capacity = r64(r);
		t->resident = r64(r);
		t->peak = r64(r);
		t->pinned = r64(r);
		t->bytes_in = r64(r);
		t->bytes_out = r64(r);
		t->hits = r64(r);
		t->misses = r64(r);
		t->evictions = r64(r);
		t->io_ops = r64(r);
		t->stall_ns = r64(r);
		t->io_ns = r64(r);
	}
	m->tensors = r64(r);
	m->chunks = r64(r);
	m->clients = r64(r);
	m->io_errors = r64(r);
	for (i = 0; i < HMM_TIERS; i++)
		m->quota[i] = r64(r);
	for (i = 0; i < HMM_TIERS; i++)
		m->used[i] = r64(r);
	for (i = 0; i < 4; i++) {
		ret = rzero64(r, msg, "reserved");
		if (ret)
			return ret;
	}
	return 0;
}

/* Counters are whatever the daemon counted: nothing to check. */
static int check_none(const void *v, const char *msg)
{
	return 0;
}

/* ---- share, attach, quota_set ---------------------------------------------- */

static void put_share(struct wr *w, const void *v)
{
	const struct hmm_proto_share *m = v;

	w64(w, m->id);
	w32(w, m->uid);
	w32(w, m->access);
	wstr(w, m->name, sizeof(m->name));
}

static int get_share(struct rd *r, void *v, const char *msg)
{
	struct hmm_proto_share *m = v;

	m->id = r64(r);
	m->uid = r32(r);
	m->access = r32(r);
	return rstr(r, m->name, sizeof(m->name), msg, "name");
}

static int check_share(const void *v, const char *msg)
{
	const struct hmm_proto_share *m = v;
	int ret = check_id(m->id, msg);

	if (!ret)
		ret = check_uid(m->uid, msg, "uid");
	if (!ret && m->access != HMM_READ &&
	    m->access != (HMM_READ | HMM_WRITE))
		ret = ferr(-EINVAL, msg, "access",
			   "0x%x is not READ (0x%x) or READ|WRITE (0x%x)",
			   m->access, HMM_READ, HMM_READ | HMM_WRITE);
	if (!ret)
		ret = check_str(m->name, sizeof(m->name), 1, msg, "name");
	return ret;
}

static void put_attach(struct wr *w, const void *v)
{
	const struct hmm_proto_attach *m = v;

	w32(w, m->owner_uid);
	w32(w, 0);
	wstr(w, m->name, sizeof(m->name));
}

static int get_attach(struct rd *r, void *v, const char *msg)
{
	struct hmm_proto_attach *m = v;
	int ret;

	m->owner_uid = r32(r);
	ret = rzero32(r, msg, "reserved");
	if (ret)
		return ret;
	return rstr(r, m->name, sizeof(m->name), msg, "name");
}

static int check_attach(const void *v, const char *msg)
{
	const struct hmm_proto_attach *m = v;
	int ret = check_uid(m->owner_uid, msg, "owner_uid");

	if (!ret)
		ret = check_str(m->name, sizeof(m->name), 1, msg, "name");
	return ret;
}

static void put_quota_set(struct wr *w, const void *v)
{
	const struct hmm_proto_quota_set *m = v;
	int i;

	w64(w, m->client_id);
	for (i = 0; i < HMM_TIERS; i++)
		w64(w, m->quota[i]);
}

static int get_quota_set(struct rd *r, void *v, const char *msg)
{
	struct hmm_proto_quota_set *m = v;
	int i;

	m->client_id = r64(r);
	for (i = 0; i < HMM_TIERS; i++)
		m->quota[i] = r64(r);
	return 0;
}

/* ---- list and list_reply (hmmctl) ------------------------------------------ */

static void put_list(struct wr *w, const void *v)
{
	const struct hmm_proto_list *m = v;

	w32(w, m->what);
	w32(w, 0);
	w64(w, m->cursor);
}

static int get_list(struct rd *r, void *v, const char *msg)
{
	struct hmm_proto_list *m = v;
	int ret;

	m->what = r32(r);
	ret = rzero32(r, msg, "reserved");
	m->cursor = r64(r);
	return ret;
}

static int check_what(uint32_t what, const char *msg)
{
	if (what != HMM_PROTO_LIST_CLIENTS && what != HMM_PROTO_LIST_TENSORS)
		return ferr(-EINVAL, msg, "what",
			    "%u is not clients (%d) or tensors (%d)", what,
			    HMM_PROTO_LIST_CLIENTS, HMM_PROTO_LIST_TENSORS);
	return 0;
}

static int check_list(const void *v, const char *msg)
{
	return check_what(((const struct hmm_proto_list *)v)->what, msg);
}

static void put_list_reply(struct wr *w, const void *v)
{
	const struct hmm_proto_list_reply *m = v;
	int i;

	w64(w, m->id);
	w64(w, m->owner);
	w32(w, m->uid);
	w32(w, m->pid);
	for (i = 0; i < HMM_TIERS; i++)
		w64(w, m->a[i]);
	for (i = 0; i < HMM_TIERS; i++)
		w64(w, m->b[i]);
	w32(w, m->what);
	w32(w, m->flags);
	w64(w, m->bytes);
	wstr(w, m->name, sizeof(m->name));
}

static int get_list_reply(struct rd *r, void *v, const char *msg)
{
	struct hmm_proto_list_reply *m = v;
	int i;

	m->id = r64(r);
	m->owner = r64(r);
	m->uid = r32(r);
	m->pid = r32(r);
	for (i = 0; i < HMM_TIERS; i++)
		m->a[i] = r64(r);
	for (i = 0; i < HMM_TIERS; i++)
		m->b[i] = r64(r);
	m->what = r32(r);
	m->flags = r32(r);
	m->bytes = r64(r);
	return rstr(r, m->name, sizeof(m->name), msg, "name");
}

static int check_list_reply(const void *v, const char *msg)
{
	const struct hmm_proto_list_reply *m = v;
	int ret = check_what(m->what, msg);

	if (!ret)
		ret = check_str(m->name, sizeof(m->name), 0, msg, "name");
	return ret;
}

/* ---- stats2_reply (version 2) --------------------------------------------- */

static void put_stats2_reply(struct wr *w, const void *v)
{
	const struct hmm_proto_stats2_reply *m = v;

	put_stats_reply(w, &m->s);
	w64(w, m->discard_skips);
	w64(w, m->prefetches);
	w64(w, m->prefetch_hits);
	w64(w, m->recordings);
	w64(w, m->divergences);
	w64(w, m->region_faults);
	w64(w, m->region_evictions);
	w64(w, m->store_direct);
}

static int get_stats2_reply(struct rd *r, void *v, const char *msg)
{
	struct hmm_proto_stats2_reply *m = v;
	int ret = get_stats_reply(r, &m->s, msg);

	m->discard_skips = r64(r);
	m->prefetches = r64(r);
	m->prefetch_hits = r64(r);
	m->recordings = r64(r);
	m->divergences = r64(r);
	m->region_faults = r64(r);
	m->region_evictions = r64(r);
	m->store_direct = r64(r);
	return ret;
}

/* ---- wait (version 2) ----------------------------------------------------- */

static void put_wait(struct wr *w, const void *v)
{
	w64(w, ((const struct hmm_proto_wait *)v)->id);
}

static int get_wait(struct rd *r, void *v, const char *msg)
{
	((struct hmm_proto_wait *)v)->id = r64(r);
	return 0;
}

/* ---- writeback (version 3): EVICT's range, the host tier only ------------- */

static int check_writeback(const void *v, const char *msg)
{
	const struct hmm_proto_range *m = v;
	int ret = check_range_noaccess(v, msg);

	if (!ret && m->tier != HMM_TIER_HOST)
		ret = ferr(-EINVAL, msg, "tier", "%u is not host (%d)",
			   m->tier, HMM_TIER_HOST);
	return ret;
}

/* ---- save (version 4) ----------------------------------------------------- */

static void put_save(struct wr *w, const void *v)
{
	w64(w, ((const struct hmm_proto_save *)v)->id);
}

static int get_save(struct rd *r, void *v, const char *msg)
{
	((struct hmm_proto_save *)v)->id = r64(r);
	return 0;
}

static int check_save(const void *v, const char *msg)
{
	return check_id(((const struct hmm_proto_save *)v)->id, msg);
}

/* ---- the table (proto_wire.h) ------------------------------------------------ */

#define REQ(T, n, sz, p, g, c)						\
	[HMM_PROTO_##T] = { n, sz, 1, 1, 0, p, g, c }
#define REQ2(T, n, sz, p, g, c)						\
	[HMM_PROTO_##T] = { n, sz, 1, 2, 0, p, g, c }
#define REQ3(T, n, sz, p, g, c)						\
	[HMM_PROTO_##T] = { n, sz, 1, 3, 0, p, g, c }
#define REQ4(T, n, sz, p, g, c)						\
	[HMM_PROTO_##T] = { n, sz, 1, 4, 0, p, g, c }
#define REQ5(T, n, sz, p, g, c)						\
	[HMM_PROTO_##T] = { n, sz, 1, 5, 0, p, g, c }
#define REQ6(T, n, sz, p, g, c)						\
	[HMM_PROTO_##T] = { n, sz, 1, 6, 0, p, g, c }
#define REP(T, n, sz, f, p, g, c)					\
	[HMM_PROTO_##T] = { n, sz, 0, 1, f, p, g, c }
#define REP2(T, n, sz, f, p, g, c)					\
	[HMM_PROTO_##T] = { n, sz, 0, 2, f, p, g, c }

const struct hmm_proto_mtype hmm_proto_mtypes[] = {
	REQ(HELLO, "hello", 96, put_hello, get_hello, check_hello),
	REQ(TENSOR_NEW, "tensor_new", 144, put_tensor_new, get_tensor_new,
	    check_tensor_new),
	REQ(TENSOR_FREE, "tensor_free", 8, put_tensor_free, get_tensor_free,
	    check_tensor_free),
	REQ(MAP, "map", 32, put_range, get_range, check_map),
	REQ(UNMAP, "unmap", 32, put_range, get_range, check_range_noaccess),
	REQ(PREFETCH, "prefetch", 32, put_range, get_range,
	    check_range_noaccess),
	REQ(EVICT, "evict", 32, put_range, get_range, check_range_noaccess),
	REQ(FLUSH, "flush", 0, NULL, NULL, NULL),
	REQ(STATS, "stats", 0, NULL, NULL, NULL),
	REQ(SHARE, "share", 80, put_share, get_share, check_share),
	REQ(ATTACH, "attach", 72, put_attach, get_attach, check_attach),
	REQ(QUOTA_SET, "quota_set", 32, put_quota_set, get_quota_set,
	    check_none),
	REQ(LIST, "list", 16, put_list, get_list, check_list),
	REQ2(WAIT, "wait", 8, put_wait, get_wait, check_none),
	REQ2(STATS2, "stats2", 0, NULL, NULL, NULL),
	REQ3(WRITEBACK, "writeback", 32, put_range, get_range,
	     check_writeback),
	REQ4(SAVE, "save", 8, put_save, get_save, check_save),
	REQ5(TENSOR_RM, "tensor_rm", 8, put_tensor_free, get_tensor_free,
	     check_tensor_free),
	REQ6(UNMAP_EXACT, "unmap_exact", 32, put_range, get_range,
	     check_map),
	REP(HELLO_REPLY, "hello_reply", 48, HMM_PROTO_F_FDS, put_hello_reply,
	    get_hello_reply, check_hello_reply),
	REP(ERROR, "error", 264, 0, put_error, get_error, check_error),
	REP(OK, "ok", 0, 0, NULL, NULL, NULL),
	REP(TENSOR_REPLY, "tensor_reply", 160, 0, put_tensor_reply,
	    get_tensor_reply, check_tensor_reply),
	REP(MAP_REPLY, "map_reply", 40, HMM_PROTO_F_FDS, put_map_reply,
	    get_map_reply, check_map_reply),
	REP(STATS_REPLY, "stats_reply", 400, 0, put_stats_reply,
	    get_stats_reply, check_none),
	REP(LIST_REPLY, "list_reply", 152, 0, put_list_reply, get_list_reply,
	    check_list_reply),
	REP2(STATS2_REPLY, "stats2_reply", 464, 0, put_stats2_reply,
	     get_stats2_reply, check_none),
};

const unsigned hmm_proto_mtypes_n =
	sizeof(hmm_proto_mtypes) / sizeof(hmm_proto_mtypes[0]);
