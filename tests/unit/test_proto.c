// SPDX-License-Identifier: MIT
/*
 * test_proto — the hmmd wire codec (libhmm/src/proto/proto.c): every message
 * type round-trips byte-exact at its documented offsets; truncated,
 * oversized, wrong-magic, wrong-version, unknown-type and bad-flag
 * datagrams, each bad field of each type, and random garbage all fail
 * with the right error and a detail naming the field, never a crash.
 *
 * `test_proto --write-corpus DIR` writes one valid datagram of each type
 * into DIR (the seed corpus of tests/fuzz/fuzz_proto) and exits.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "t.h"
#include "err.h"
#include "proto.h"

static uint8_t buf[HMM_PROTO_MSG_MAX + 64];

/* ---- one valid body of each type (union hmm_proto_body, proto.h) ---------- */

static const unsigned types[] = {
	HMM_PROTO_HELLO, HMM_PROTO_TENSOR_NEW, HMM_PROTO_TENSOR_FREE,
	HMM_PROTO_MAP, HMM_PROTO_UNMAP, HMM_PROTO_PREFETCH, HMM_PROTO_EVICT,
	HMM_PROTO_FLUSH, HMM_PROTO_STATS, HMM_PROTO_SHARE, HMM_PROTO_ATTACH,
	HMM_PROTO_QUOTA_SET, HMM_PROTO_HELLO_REPLY, HMM_PROTO_ERROR,
	HMM_PROTO_OK, HMM_PROTO_TENSOR_REPLY, HMM_PROTO_MAP_REPLY,
	HMM_PROTO_STATS_REPLY, HMM_PROTO_LIST, HMM_PROTO_LIST_REPLY,
	HMM_PROTO_WAIT, HMM_PROTO_STATS2, HMM_PROTO_STATS2_REPLY,
	HMM_PROTO_WRITEBACK, HMM_PROTO_SAVE, HMM_PROTO_TENSOR_RM,
	HMM_PROTO_UNMAP_EXACT,
};
#define NTYPES (sizeof(types) / sizeof(types[0]))

static void sample(unsigned type, union hmm_proto_body *b)
{
	int i;

	memset(b, 0, sizeof(*b));
	switch (type) {
	case HMM_PROTO_HELLO:
		b->hello = (struct hmm_proto_hello){ 1, 1,
			HMM_PROTO_FEAT_MEMFD | (1u << 30),
			{ 1ull << 30, 3ull << 30, 1ull << 40 }, "rank0" };
		break;
	case HMM_PROTO_HELLO_REPLY:
		b->hello_reply = (struct hmm_proto_hello_reply){ 1,
			HMM_PROTO_FEAT_MEMFD, 7,
			{ 1ull << 30, 2ull << 30, 1ull << 40 }, 2u << 20 };
		break;
	case HMM_PROTO_ERROR:
		b->error.err = -ENOSYS;
		strcpy(b->error.detail, "map: not built yet");
		break;
	case HMM_PROTO_TENSOR_REPLY:
		b->tensor.id = 42;
		b->tensor.bytes = 3 * 5 * 2;
		/* fall through */
	case HMM_PROTO_TENSOR_NEW:
		b->tensor.dtype = HMM_DTYPE_BF16;
		b->tensor.ndim = 2;
		b->tensor.shape[0] = 3;
		b->tensor.shape[1] = 5;
		b->tensor.flags = HMM_PROTO_TENSOR_PERSIST;
		strcpy(b->tensor.name, "layer0.w");
		break;
	case HMM_PROTO_TENSOR_FREE:
	case HMM_PROTO_TENSOR_RM:
		b->tensor_free.id = 42;
		break;
	case HMM_PROTO_MAP:
	case HMM_PROTO_UNMAP_EXACT:
		b->range.access = HMM_READ | HMM_WRITE;
		/* fall through */
	case HMM_PROTO_UNMAP:
	case HMM_PROTO_PREFETCH:
	case HMM_PROTO_EVICT:
	case HMM_PROTO_WRITEBACK:
		b->range.id = 42;
		b->range.off = 0x123456789aull;
		b->range.len = 4096;
		b->range.tier = HMM_TIER_HOST;
		break;
	case HMM_PROTO_MAP_REPLY:
		b->map_reply = (struct hmm_proto_map_reply){ 42, 8192, 4096,
			1ull << 21, HMM_TIER_HOST };
		break;
	case HMM_PROTO_STATS_REPLY:
		for (i = 0; i < HMM_TIERS; i++) {
			b->stats_reply.tier[i].capacity = 1000 + i;
			b->stats_reply.tier[i].io_ns = 0xfedcba9876543210ull + i;
			b->stats_reply.quota[i] = 10 + i;
			b->stats_reply.used[i] = 20 + i;
		}
		b->stats_reply.tensors = 3;
		b->stats_reply.clients = 2;
		break;
	case HMM_PROTO_SHARE:
		b->share = (struct hmm_proto_share){ 42, 1000, HMM_READ,
			"ckpt/emb" };
		break;
	case HMM_PROTO_ATTACH:
		b->attach = (struct hmm_proto_attach){ 0, "ckpt/emb" };
		break;
	case HMM_PROTO_QUOTA_SET:
		b->quota_set = (struct hmm_proto_quota_set){ 0,
			{ 0, 1ull << 31, 0 } };
		break;
	case HMM_PROTO_LIST:
		b->list = (struct hmm_proto_list){ HMM_PROTO_LIST_TENSORS, 5 };
		break;
	case HMM_PROTO_LIST_REPLY:
		b->list_reply = (struct hmm_proto_list_reply){ 5, 2, 1000, 77,
			{ 1, 2, 3 }, { 4, 5, 6 }, HMM_PROTO_LIST_TENSORS,
			HMM_PROTO_TENSOR_PERSIST, 4096, "layer0.w" };
		break;
	case HMM_PROTO_WAIT:
		b->wait.id = 0x0102030405060708ull;
		break;
	case HMM_PROTO_SAVE:
		b->save.id = 0x0807060504030201ull;
		break;
	case HMM_PROTO_STATS2_REPLY:
		sample(HMM_PROTO_STATS_REPLY, b);
		b->stats2_reply.discard_skips = 11;
		b->stats2_reply.prefetch_hits = 0x8000000000000001ull;
		b->stats2_reply.store_direct = 1;
		break;
	}
}

static int enc(unsigned type, const union hmm_proto_body *b, uint64_t seq)
{
	return hmm_proto_encode(buf, sizeof(buf), type, 0, seq,
				hmm_proto_body_size(type) ? b : NULL);
}

static uint64_t le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | p[n];
	return v;
}

/* ---- round trips ----------------------------------------------------------- */

static void test_round_trip(void)
{
	struct hmm_proto_msg msg;
	uint8_t again[HMM_PROTO_MSG_MAX];
	union hmm_proto_body b;
	size_t i;
	int n, r;

	for (i = 0; i < NTYPES; i++) {
		unsigned type = types[i];
		const char *name = hmm_proto_type_name(type);

		sample(type, &b);
		n = enc(type, &b, 0x1122334455667788ull + i);
		if (!t_eq(n, HMM_PROTO_HDR_SIZE + hmm_proto_body_size(type),
			  "%s: encodes to header + %d body bytes", name,
			  hmm_proto_body_size(type))) {
			t_diag("%s", hmm_last_error());
			continue;
		}
		t_ok(!memcmp(buf, "HMMP", 4) &&
		     le(buf + 4, 2) == (type == HMM_PROTO_UNMAP_EXACT ? 6 :
					type == HMM_PROTO_TENSOR_RM ? 5 :
					type == HMM_PROTO_SAVE ? 4 :
					type == HMM_PROTO_WRITEBACK ? 3 :
					type == HMM_PROTO_WAIT ||
					type == HMM_PROTO_STATS2 ||
					type == HMM_PROTO_STATS2_REPLY ? 2 : 1) &&
		     le(buf + 6, 2) == type && le(buf + 8, 4) == 0 &&
		     le(buf + 12, 4) == (uint64_t)n - HMM_PROTO_HDR_SIZE &&
		     le(buf + 16, 8) == 0x1122334455667788ull + i &&
		     le(buf + 24, 8) == 0,
		     "%s: header fields at their offsets (version %d)", name,
		     hmm_proto_type_version(type));
		memset(&msg, 0xa5, sizeof(msg));
		r = hmm_proto_decode(buf, n, &msg);
		t_eq(r, type, "%s: decodes to its type", name);
		t_ok(msg.hdr.seq == 0x1122334455667788ull + i &&
		     msg.hdr.length == (uint32_t)n - HMM_PROTO_HDR_SIZE,
		     "%s: seq and length decoded", name);
		t_ok(!memcmp(&msg.u, &b, hmm_proto_body_size(type) ?
			     sizeof(b) : 0),
		     "%s: body decodes equal to the one encoded", name);
		memcpy(again, buf, n);
		memset(buf, 0xee, n);
		r = enc(type, (union hmm_proto_body *)&msg.u, msg.hdr.seq);
		t_ok(r == n && !memcmp(again, buf, n),
		     "%s: re-encodes to the same bytes", name);
	}
}

/* The typed pairs, and the wire offsets of a few fields. */
static void test_typed(void)
{
	struct hmm_proto_hdr h;
	struct hmm_proto_range rg, rg2;
	struct hmm_proto_tensor tn, tn2;
	struct hmm_proto_share sh;
	union hmm_proto_body b;
	int n;

	sample(HMM_PROTO_MAP, &b);
	rg = b.range;
	n = hmm_proto_map_encode(buf, sizeof(buf), 9, &rg);
	t_eq(n, 64, "map_encode: 64 bytes");
	t_ok(le(buf + 32, 8) == 42 && le(buf + 40, 8) == 0x123456789aull &&
	     le(buf + 48, 8) == 4096 && le(buf + 56, 4) == HMM_TIER_HOST &&
	     le(buf + 60, 4) == (HMM_READ | HMM_WRITE),
	     "map: id, off, len, tier, access at 0, 8, 16, 24, 28");
	memset(&rg2, 0, sizeof(rg2));
	t_eq(hmm_proto_map_decode(buf, n, &h, &rg2), 0, "map_decode");
	t_ok(h.seq == 9 && h.type == HMM_PROTO_MAP &&
	     !memcmp(&rg, &rg2, sizeof(rg)), "map_decode: same header, body");
	t_eq(hmm_proto_unmap_decode(buf, n, NULL, &rg2), -EPROTO,
	     "unmap_decode of a map: -EPROTO");
	t_ok(strstr(hmm_last_error(), "expected unmap, got map") != NULL,
	     "detail: %s", hmm_last_error());

	sample(HMM_PROTO_TENSOR_REPLY, &b);
	tn = b.tensor;
	n = hmm_proto_tensor_reply_encode(buf, sizeof(buf), 1, &tn);
	t_ok(n == 192 && le(buf + 32, 8) == 42 && le(buf + 40, 8) == 30 &&
	     le(buf + 48, 4) == HMM_DTYPE_BF16 && le(buf + 52, 4) == 2 &&
	     le(buf + 56, 8) == 3 && le(buf + 64, 8) == 5 &&
	     le(buf + 120, 4) == HMM_PROTO_TENSOR_PERSIST &&
	     !memcmp(buf + 128, "layer0.w", 9),
	     "tensor_reply: id, bytes, dtype, ndim, shape, flags, name");
	t_eq(hmm_proto_tensor_reply_decode(buf, n, NULL, &tn2), 0,
	     "tensor_reply_decode");
	t_ok(!memcmp(&tn, &tn2, sizeof(tn)), "tensor_reply: same body");

	/* garbage after a string's NUL in the host struct is not sent */
	sample(HMM_PROTO_SHARE, &b);
	sh = b.share;
	memset(sh.name + 9, 'x', sizeof(sh.name) - 9);
	n = hmm_proto_share_encode(buf, sizeof(buf), 1, &sh);
	t_ok(n == 112 && !memcmp(buf + 48, "ckpt/emb\0\0\0", 11) &&
	     buf[111] == 0, "share: bytes after the name's NUL sent as 0");

	n = hmm_proto_flush_encode(buf, sizeof(buf), 77);
	t_eq(n, 32, "flush_encode: header only");
	t_eq(hmm_proto_flush_decode(buf, n, &h), 0, "flush_decode");
	t_eq(h.seq, 77, "flush: seq kept");
	t_eq(hmm_proto_stats_decode(buf, n, &h), -EPROTO,
	     "stats_decode of a flush: -EPROTO");
}

/* ---- bad datagrams ------------------------------------------------------- */

/* Decode buf[0..n), want err and a detail holding what. */
static void want(size_t n, int err, const char *what, const char *why)
{
	struct hmm_proto_msg msg;
	int r = hmm_proto_decode(buf, n, &msg);

	t_eq(r, err, "%s: %d", why, err);
	if (!t_ok(strstr(hmm_last_error(), what) != NULL,
		  "%s: detail names \"%s\"", why, what))
		t_diag("detail: %s", hmm_last_error());
}

static void test_framing(void)
{
	union hmm_proto_body b;
	size_t i, cut, n, bad = 0;
	char says[128];
	int r;

	for (i = 0; i < NTYPES; i++) {
		struct hmm_proto_msg msg;

		sample(types[i], &b);
		n = enc(types[i], &b, 1);
		for (cut = 0; cut < n; cut++) {
			r = hmm_proto_decode(buf, cut, &msg);
			bad += r != -EMSGSIZE;
		}
		buf[n] = 0;
		bad += hmm_proto_decode(buf, n + 1, &msg) != -EMSGSIZE;
	}
	t_eq(bad, 0, "every type cut at every length, or one byte long: "
	     "-EMSGSIZE");

	sample(HMM_PROTO_MAP, &b);
	n = enc(HMM_PROTO_MAP, &b, 1);
	want(10, -EMSGSIZE, "shorter than the 32-byte header", "10 bytes");
	want(HMM_PROTO_MSG_MAX + 1, -EMSGSIZE, "longer than 4096",
	     "oversized");
	buf[12] = 40;
	memset(buf + n, 0, 8);
	want(n + 8, -EMSGSIZE, "field length: 40, the body of map is 32",
	     "map with a 40-byte body");
	buf[12] = 32;
	want(n - 4, -EMSGSIZE, "field length: 32 but the datagram carries 28",
	     "map cut by 4");

	buf[0] = 'X';
	want(n, -EPROTO, "message header: field magic", "wrong magic");
	buf[0] = 'H';
	buf[4] = HMM_PROTO_VERSION_MAX + 1;
	snprintf(says, sizeof(says), "field version: %d not spoken (1..%d)",
		 HMM_PROTO_VERSION_MAX + 1, HMM_PROTO_VERSION_MAX);
	want(n, -EPROTO, says, "a version past the newest");
	buf[4] = 2;
	want(n, -EPROTO, "message map: field version: 2, but map is a "
	     "message of version 1", "map in a version-2 header");
	buf[4] = 0;
	want(n, -EPROTO, "field version: 0", "version 0");
	buf[4] = 1;
	buf[6] = 20;
	want(n, -EPROTO, "field type: 20 unknown", "type 20");
	buf[6] = 0;
	want(n, -EPROTO, "field type: 0 unknown", "type 0");
	buf[6] = 0xff;
	buf[7] = 0xff;
	want(n, -EPROTO, "field type: 65535 unknown", "type 65535");
	buf[6] = HMM_PROTO_MAP;
	buf[7] = 0;
	buf[8] = HMM_PROTO_F_FDS;
	want(n, -EPROTO, "message map: field flags: 0x1 not allowed",
	     "FDS flag on map");
	buf[8] = 0;
	buf[11] = 0x80;
	want(n, -EPROTO, "field flags", "unknown flag");
	buf[11] = 0;
	buf[31] = 1;
	want(n, -EPROTO, "message map: field reserved", "header reserved");
	buf[31] = 0;
	want(n, HMM_PROTO_MAP, "", "restored map decodes");

	sample(HMM_PROTO_MAP_REPLY, &b);
	r = hmm_proto_encode(buf, sizeof(buf), HMM_PROTO_MAP_REPLY,
			     HMM_PROTO_F_FDS, 1, &b);
	t_eq(r, 72, "map_reply with FDS encodes");
	want(r, HMM_PROTO_MAP_REPLY, "", "map_reply with FDS decodes");

	/* encoder refusals */
	sample(HMM_PROTO_MAP, &b);
	t_eq(hmm_proto_encode(buf, 63, HMM_PROTO_MAP, 0, 1, &b), -EMSGSIZE,
	     "encode into 63 bytes: -EMSGSIZE");
	t_eq(hmm_proto_encode(buf, sizeof(buf), 20, 0, 1, &b), -EPROTO,
	     "encode type 20: -EPROTO");
	t_eq(hmm_proto_encode(buf, sizeof(buf), HMM_PROTO_MAP,
			      HMM_PROTO_F_FDS, 1, &b), -EPROTO,
	     "encode map with FDS: -EPROTO");
	t_eq(hmm_proto_encode(buf, sizeof(buf), HMM_PROTO_MAP, 0, 1, NULL),
	     -EINVAL, "encode map without a body: -EINVAL");
}

/* ---- bad fields ------------------------------------------------------------ */

/* The encoder refuses a struct with a bad field. */
#define BADS(type, stmt, err, what)					\
	do {								\
		union hmm_proto_body b;						\
		sample(type, &b);					\
		stmt;							\
		bad_struct(type, &b, err, what, #stmt);			\
	} while (0)

static void bad_struct(unsigned type, union hmm_proto_body *b, int err,
		       const char *what, const char *how)
{
	int r = hmm_proto_encode(buf, sizeof(buf), type, 0, 1, b);

	t_eq(r, err, "encode %s with %s: %d", hmm_proto_type_name(type),
	     how, err);
	if (!t_ok(strstr(hmm_last_error(), what) != NULL,
		  "  detail names \"%s\"", what))
		t_diag("detail: %s", hmm_last_error());
}

/* The decoder refuses a valid datagram with bytes patched at body off. */
static void bad_wire(unsigned type, size_t off, int width, uint64_t v,
		     int err, const char *what)
{
	char why[128];
	union hmm_proto_body b;
	size_t n;
	int i;

	sample(type, &b);
	n = enc(type, &b, 1);
	for (i = 0; i < width; i++)
		buf[HMM_PROTO_HDR_SIZE + off + i] = (uint8_t)(v >> (8 * i));
	snprintf(why, sizeof(why), "decode %s with 0x%llx at body byte %zu",
		 hmm_proto_type_name(type), (unsigned long long)v, off);
	want(n, err, what, why);
}

static void test_fields(void)
{
	const int E = -EINVAL, P = -EPROTO;
	char says[128];
	int i;

	/* hello */
	BADS(HMM_PROTO_HELLO, b.hello.version_min = 0, E,
	     "message hello: field version_min: 0");
	bad_wire(HMM_PROTO_HELLO, 0, 2, 0, E, "field version_min");
	BADS(HMM_PROTO_HELLO, b.hello.version_min = 3, E,
	     "field version_max: 1 is below version_min 3");
	bad_wire(HMM_PROTO_HELLO, 0, 2, 2, E, "field version_max");
	BADS(HMM_PROTO_HELLO, memset(b.hello.name, 'a', 64), E,
	     "message hello: field name: not NUL-terminated within 64 bytes");
	for (i = 0; i < 64; i++)
		buf[HMM_PROTO_HDR_SIZE + 32 + i] = 'a';
	want(HMM_PROTO_HDR_SIZE + 96, E,
	     "message hello: field name: not NUL-terminated within 64 bytes",
	     "hello name of 64 'a'");
	bad_wire(HMM_PROTO_HELLO, 32 + 63, 1, 'x', E,
		 "field name: byte 63 after the NUL is 0x78, not 0");
	bad_wire(HMM_PROTO_HELLO, 32, 1, '\n', E,
		 "field name: control character 0x0a at byte 0");
	{
		struct hmm_proto_hello h = { 1, 1, 0, { 0 }, "" };

		t_eq(hmm_proto_hello_encode(buf, sizeof(buf), 1, &h), 128,
		     "hello with an empty name and unknown features: fine");
		h.features = ~0u;
		t_eq(hmm_proto_hello_encode(buf, sizeof(buf), 1, &h), 128,
		     "hello with every feature bit: fine");
		t_eq(hmm_proto_negotiate(&h), 1, "negotiate 1..1: 1");
		h.version_max = 99;
		t_eq(hmm_proto_negotiate(&h), HMM_PROTO_VERSION_MAX,
		     "negotiate 1..99: the newest, %d", HMM_PROTO_VERSION_MAX);
		h.version_max = 2;
		t_eq(hmm_proto_negotiate(&h), 2, "negotiate 1..2: 2 (a "
		     "version-2 client)");
		h.version_max = 99;
		h.version_min = HMM_PROTO_VERSION_MAX + 1;
		t_eq(hmm_proto_negotiate(&h), -EPROTO, "negotiate %d..99: "
		     "-EPROTO", HMM_PROTO_VERSION_MAX + 1);
		snprintf(says, sizeof(says), "client speaks versions %d..99, "
			 "daemon 1..%d", HMM_PROTO_VERSION_MAX + 1,
			 HMM_PROTO_VERSION_MAX);
		t_ok(strstr(hmm_last_error(), says) != NULL, "detail: %s",
		     hmm_last_error());
	}

	/* hello_reply */
	snprintf(says, sizeof(says), "message hello_reply: field version: "
		 "%d not spoken", HMM_PROTO_VERSION_MAX + 1);
	BADS(HMM_PROTO_HELLO_REPLY,
	     b.hello_reply.version = HMM_PROTO_VERSION_MAX + 1, P, says);
	bad_wire(HMM_PROTO_HELLO_REPLY, 2, 2, 1, P, "field reserved0");
	BADS(HMM_PROTO_HELLO_REPLY, b.hello_reply.features = 1u << 9, E,
	     "field features: unknown bits 0x200");
	bad_wire(HMM_PROTO_HELLO_REPLY, 4, 4, 1u << 9, E, "field features");
	BADS(HMM_PROTO_HELLO_REPLY, b.hello_reply.client_id = 0, E,
	     "field client_id: 0");
	bad_wire(HMM_PROTO_HELLO_REPLY, 8, 8, 0, E, "field client_id");
	BADS(HMM_PROTO_HELLO_REPLY, b.hello_reply.chunk_bytes = 4095, E,
	     "field chunk_bytes: 4095 is not a nonzero multiple of 4096");
	bad_wire(HMM_PROTO_HELLO_REPLY, 40, 4, 0, E, "field chunk_bytes: 0");
	bad_wire(HMM_PROTO_HELLO_REPLY, 44, 4, 5, P, "field reserved1");

	/* error */
	BADS(HMM_PROTO_ERROR, b.error.err = 0, E, "field err: 0 is not");
	BADS(HMM_PROTO_ERROR, b.error.err = 5, E, "field err: 5 is not");
	bad_wire(HMM_PROTO_ERROR, 0, 4, (uint32_t)-4096, E,
		 "field err: -4096 is not -4095..-1");
	bad_wire(HMM_PROTO_ERROR, 4, 4, 1, P, "message error: field reserved");
	bad_wire(HMM_PROTO_ERROR, 8 + 255, 1, 'z', E,
		 "field detail: byte 255 after the NUL");
	BADS(HMM_PROTO_ERROR, memset(b.error.detail, 'd', 256), E,
	     "field detail: not NUL-terminated within 256 bytes");
	{
		struct hmm_proto_error e;
		char big[600];

		memset(big, 'q', sizeof(big) - 1);
		big[sizeof(big) - 1] = 0;
		hmm_proto_error_fill(&e, 7, "a\tb\nc %s", big);
		t_ok(e.err == -EIO && !strncmp(e.detail, "a?b?c qqq", 9) &&
		     strlen(e.detail) == 255,
		     "error_fill: bad err -> -EIO, control chars -> ?, cut");
		t_eq(hmm_proto_error_encode(buf, sizeof(buf), 1, &e), 296,
		     "error_fill's result encodes");
	}

	/* tensor_new and tensor_reply */
	BADS(HMM_PROTO_TENSOR_NEW, b.tensor.dtype = 0, E,
	     "message tensor_new: field dtype: 0 unknown");
	bad_wire(HMM_PROTO_TENSOR_NEW, 0, 4, 9, E, "field dtype: 9 unknown");
	bad_wire(HMM_PROTO_TENSOR_NEW, 0, 4, 0xffffffffu, E, "field dtype");
	BADS(HMM_PROTO_TENSOR_NEW, b.tensor.ndim = 0, E,
	     "field ndim: 0 is not 1..8");
	bad_wire(HMM_PROTO_TENSOR_NEW, 4, 4, 9, E, "field ndim: 9");
	BADS(HMM_PROTO_TENSOR_NEW, b.tensor.shape[1] = 0, E,
	     "field shape: [1] = 0 < 1");
	bad_wire(HMM_PROTO_TENSOR_NEW, 8, 8, (uint64_t)-5, E,
		 "field shape: [0] = -5 < 1");
	BADS(HMM_PROTO_TENSOR_NEW, b.tensor.shape[7] = 1, E,
	     "field shape: [7] = 1 beyond ndim 2: must be 0");
	bad_wire(HMM_PROTO_TENSOR_NEW, 8 + 16, 8, 1, E,
		 "field shape: [2] = 1 beyond ndim 2");
	BADS(HMM_PROTO_TENSOR_NEW,
	     (b.tensor.shape[0] = 1ll << 40, b.tensor.shape[1] = 1ll << 23),
	     E, "field shape: size overflows 64 bits at [1]");
	bad_wire(HMM_PROTO_TENSOR_NEW, 8, 8, INT64_MAX, E,
		 "field shape: size overflows 64 bits at [1]");
	BADS(HMM_PROTO_TENSOR_NEW, b.tensor.flags = 2, E,
	     "field flags: unknown bits 0x2");
	bad_wire(HMM_PROTO_TENSOR_NEW, 76, 4, 1, P,
		 "message tensor_new: field reserved");
	BADS(HMM_PROTO_TENSOR_NEW, b.tensor.name[0] = 0, E,
	     "field name: empty");
	bad_wire(HMM_PROTO_TENSOR_NEW, 80, 8, 0, E, "field name: empty");
	BADS(HMM_PROTO_TENSOR_NEW, b.tensor.name[3] = 0x7f, E,
	     "field name: control character 0x7f at byte 3");
	BADS(HMM_PROTO_TENSOR_NEW, memset(b.tensor.name, 'n', 64), E,
	     "message tensor_new: field name: not NUL-terminated within 64 "
	     "bytes");
	BADS(HMM_PROTO_TENSOR_REPLY, b.tensor.id = 0, E,
	     "message tensor_reply: field id: 0");
	bad_wire(HMM_PROTO_TENSOR_REPLY, 0, 8, 0, E, "field id");
	BADS(HMM_PROTO_TENSOR_REPLY, b.tensor.bytes = 31, E,
	     "field bytes: 31 but dtype and shape make 30");
	bad_wire(HMM_PROTO_TENSOR_REPLY, 8, 8, 60, E, "field bytes: 60");
	bad_wire(HMM_PROTO_TENSOR_REPLY, 16 + 76, 4, 1, P, "field reserved");

	/* tensor_free */
	BADS(HMM_PROTO_TENSOR_FREE, b.tensor_free.id = 0, E,
	     "message tensor_free: field id: 0 names no tensor");
	bad_wire(HMM_PROTO_TENSOR_FREE, 0, 8, 0, E, "field id");

	/* map, unmap, prefetch, evict */
	BADS(HMM_PROTO_MAP, b.range.id = 0, E, "message map: field id");
	BADS(HMM_PROTO_MAP, b.range.len = 0, E, "field len: 0");
	bad_wire(HMM_PROTO_MAP, 16, 8, 0, E, "field len: 0");
	BADS(HMM_PROTO_MAP, b.range.len = UINT64_MAX - 8, E,
	     "field off: 78187493530 + len");
	bad_wire(HMM_PROTO_MAP, 8, 8, UINT64_MAX - 100, E, "overflows");
	BADS(HMM_PROTO_MAP, b.range.tier = HMM_TIER_STORE, E,
	     "field tier: 2 is not device (0) or host (1)");
	bad_wire(HMM_PROTO_MAP, 24, 4, 77, E, "field tier: 77");
	BADS(HMM_PROTO_MAP, b.range.access = 0, E, "field access: 0x0");
	bad_wire(HMM_PROTO_MAP, 28, 4, 8, E, "field access: 0x8");
	BADS(HMM_PROTO_UNMAP, b.range.access = HMM_READ, E,
	     "message unmap: field access: 0x1: must be 0 here");
	bad_wire(HMM_PROTO_PREFETCH, 28, 4, 1, E,
		 "message prefetch: field access");
	bad_wire(HMM_PROTO_EVICT, 24, 4, HMM_TIER_STORE, E,
		 "message evict: field tier: 2");
	BADS(HMM_PROTO_WRITEBACK, b.range.tier = HMM_TIER_DEVICE, E,
	     "message writeback: field tier: 0 is not host (1)");
	bad_wire(HMM_PROTO_WRITEBACK, 24, 4, HMM_TIER_DEVICE, E,
		 "message writeback: field tier: 0 is not host");
	bad_wire(HMM_PROTO_WRITEBACK, 24, 4, HMM_TIER_STORE, E,
		 "message writeback: field tier: 2");
	BADS(HMM_PROTO_WRITEBACK, b.range.access = HMM_WRITE, E,
	     "message writeback: field access: 0x2: must be 0 here");
	bad_wire(HMM_PROTO_WRITEBACK, 0, 8, 0, E,
		 "message writeback: field id: 0 names no tensor");
	BADS(HMM_PROTO_WRITEBACK, b.range.len = 0, E,
	     "message writeback: field len: 0");
	bad_wire(HMM_PROTO_WRITEBACK, 8, 8, UINT64_MAX - 100, E, "overflows");
	{
		union hmm_proto_body b;

		sample(HMM_PROTO_MAP, &b);
		b.range.off = UINT64_MAX;
		b.range.len = HMM_ALL;
		t_eq(enc(HMM_PROTO_MAP, &b, 1), 64, "map len HMM_ALL: fine");
		want(64, HMM_PROTO_MAP, "", "map len HMM_ALL decodes");
	}

	/* map_reply */
	BADS(HMM_PROTO_MAP_REPLY, b.map_reply.len = HMM_ALL, E,
	     "message map_reply: field off");
	bad_wire(HMM_PROTO_MAP_REPLY, 24, 8, UINT64_MAX - 4000, E,
		 "field addr");
	bad_wire(HMM_PROTO_MAP_REPLY, 32, 4, 2, E, "field tier: 2");
	bad_wire(HMM_PROTO_MAP_REPLY, 36, 4, 2, P, "field flags");	/* unknown bit */

	/* stats_reply: the counters are free, the reserved tail is not */
	bad_wire(HMM_PROTO_STATS_REPLY, 0, 8, UINT64_MAX, HMM_PROTO_STATS_REPLY,
		 "");
	bad_wire(HMM_PROTO_STATS_REPLY, 399, 1, 1, P,
		 "message stats_reply: field reserved");

	/* share, attach */
	BADS(HMM_PROTO_SHARE, b.share.uid = UINT32_MAX, E,
	     "message share: field uid: -1 is not a uid");
	bad_wire(HMM_PROTO_SHARE, 8, 4, UINT32_MAX, E, "field uid");
	BADS(HMM_PROTO_SHARE, b.share.access = HMM_WRITE, E,
	     "field access: 0x2 is not READ");
	bad_wire(HMM_PROTO_SHARE, 12, 4, HMM_DISCARD | HMM_READ, E,
		 "field access: 0x5");
	BADS(HMM_PROTO_SHARE, b.share.name[0] = 0, E, "field name: empty");
	bad_wire(HMM_PROTO_SHARE, 16 + 64 - 1, 1, 'k', E,
		 "message share: field name: byte 63 after the NUL");
	BADS(HMM_PROTO_ATTACH, b.attach.owner_uid = UINT32_MAX, E,
	     "message attach: field owner_uid: -1");
	bad_wire(HMM_PROTO_ATTACH, 4, 4, 3, P, "message attach: field reserved");
	bad_wire(HMM_PROTO_ATTACH, 8, 8, 0, E, "field name: empty");
	bad_wire(HMM_PROTO_ATTACH, 8, 1, 0, E,
		 "field name: byte 1 after the NUL is 0x6b");

	/* list, list_reply (hmmctl) */
	BADS(HMM_PROTO_LIST, b.list.what = 3, E,
	     "message list: field what: 3 is not clients (1) or tensors (2)");
	bad_wire(HMM_PROTO_LIST, 0, 4, 0, E, "field what: 0");
	bad_wire(HMM_PROTO_LIST, 4, 4, 1, P, "message list: field reserved");
	BADS(HMM_PROTO_LIST_REPLY, b.list_reply.name[2] = 7, E,
	     "field name: control character 0x07");
	bad_wire(HMM_PROTO_LIST_REPLY, 72, 4, 9, E, "field what: 9");
	bad_wire(HMM_PROTO_LIST_REPLY, 98, 1, 0x41, E,
		 "field name: byte 10 after the NUL is 0x41");
}

/* ---- garbage ------------------------------------------------------------- */

/*
 * Random datagrams, and valid ones with random bytes changed: each decodes
 * to a type or fails with one of the three errors and a detail; whatever
 * decodes re-encodes to exactly the same bytes (the encoding is canonical,
 * so nothing the decoder accepts is lost or altered).
 */
static void test_garbage(void)
{
	static uint8_t orig[sizeof(buf)];
	struct hmm_proto_msg msg;
	uint64_t seed = 0x5eed;
	long i, ok = 0, bad = 0, odd = 0, noncanon = 0;
	union hmm_proto_body b;

	for (i = 0; i < 400000; i++) {
		size_t n;
		int r;

		if (i % 2 == 0) {
			n = t_rand(&seed) % (HMM_PROTO_MSG_MAX + 16);
			if (i % 4 == 0)	/* mostly short ones */
				n %= 512;
			t_fill(buf, n, t_rand(&seed));
			if (n >= 8 && i % 8 == 0) {	/* past the magic */
				memcpy(buf, "HMMP\1\0", 6);
				buf[6] = t_rand(&seed) % 70;
				buf[7] = 0;
			}
		} else {
			unsigned type = types[t_rand(&seed) % NTYPES];
			int k, flips = 1 + t_rand(&seed) % 3;

			sample(type, &b);
			n = enc(type, &b, t_rand(&seed));
			for (k = 0; k < flips; k++)
				buf[t_rand(&seed) % n] ^= 1u << (t_rand(&seed) % 8);
		}
		memcpy(orig, buf, n);
		hmm_err(0, "%s", "");
		r = hmm_proto_decode(buf, n, &msg);
		if (r > 0) {
			ok++;
			if (hmm_proto_encode(buf, sizeof(buf), r,
					     msg.hdr.flags, msg.hdr.seq,
					     &msg.u) != (int)n ||
			    memcmp(buf, orig, n))
				noncanon++;
		} else if ((r == -EMSGSIZE || r == -EPROTO || r == -EINVAL) &&
			   hmm_last_error()[0]) {
			bad++;
		} else {
			if (odd++ < 5)
				t_diag("odd result %d: %s", r,
				       hmm_last_error());
		}
	}
	t_eq(odd, 0, "%ld random or damaged datagrams: %ld decoded, %ld "
	     "refused with a detail, none otherwise", i, ok, bad);
	t_eq(noncanon, 0, "every decoded one re-encodes to the same bytes");
	t_ok(ok > 1000 && bad > 1000, "both outcomes seen");
}

/* WAIT and STATS2 are of version 2: their headers say so, and no other
 * header does; STATS2_REPLY is STATS_REPLY and 64 bytes more. */
static void test_version2(void)
{
	struct hmm_proto_stats2_reply s2;
	union hmm_proto_body b;
	struct hmm_proto_wait w = { 0 }, w2 = { 9 };
	struct hmm_proto_hdr h;
	int n;

	n = hmm_proto_wait_encode(buf, sizeof(buf), 5, &w);
	t_eq(n, HMM_PROTO_HDR_SIZE + 8, "wait: 8 body bytes");
	t_eq(le(buf + 4, 2), 2, "wait: header version 2");
	t_ok(hmm_proto_wait_decode(buf, n, &h, &w2) == 0 && w2.id == 0 &&
	     h.version == 2, "wait of id 0 (all the client's tensors) "
	     "decodes");
	t_eq(hmm_proto_type_version(HMM_PROTO_WAIT), 2, "wait: version 2");
	t_eq(hmm_proto_type_version(HMM_PROTO_MAP), 1, "map: version 1");
	t_eq(hmm_proto_type_version(99), -EPROTO, "type 99: none");
	t_ok(hmm_proto_is_request(HMM_PROTO_WAIT), "wait is a request");
	buf[4] = 1;
	want(n, -EPROTO, "message wait: field version: 1, but wait is a "
	     "message of version 2", "wait in a version-1 header");

	sample(HMM_PROTO_STATS2_REPLY, &b);
	n = enc(HMM_PROTO_STATS2_REPLY, &b, 6);
	t_eq(n, HMM_PROTO_HDR_SIZE + 464, "stats2_reply: 464 body bytes");
	t_ok(le(buf + HMM_PROTO_HDR_SIZE + 400, 8) == 11 &&
	     le(buf + HMM_PROTO_HDR_SIZE + 416, 8) == 0x8000000000000001ull &&
	     le(buf + HMM_PROTO_HDR_SIZE + 456, 8) == 1, "stats2_reply: "
	     "discard_skips at 400, prefetch_hits at 416, store_direct at "
	     "456");
	t_ok(hmm_proto_stats2_reply_decode(buf, n, NULL, &s2) == 0 &&
	     s2.s.tensors == 3 && s2.s.tier[2].io_ns ==
	     0xfedcba9876543212ull && s2.store_direct == 1,
	     "stats2_reply decodes, the stats_reply part too");
	buf[HMM_PROTO_HDR_SIZE + 370] = 1;
	want(n, -EPROTO, "message stats2_reply: field reserved",
	     "stats2_reply with a reserved byte set");
	t_eq(hmm_proto_stats2_encode(buf, sizeof(buf), 7),
	     HMM_PROTO_HDR_SIZE, "stats2: empty body");
	t_eq(le(buf + 4, 2), 2, "stats2: header version 2");
}

/* type's message of n bytes in buf, in a header of the version before
 * its own: refused (-EPROTO), naming both versions. */
static void older_header(unsigned type, unsigned version, int n)
{
	const char *name = hmm_proto_type_name(type);
	char why[64], says[128];

	buf[4] = version - 1;
	snprintf(says, sizeof(says), "message %s: field version: %u, but %s "
		 "is a message of version %u", name, version - 1, name,
		 version);
	snprintf(why, sizeof(why), "%s in a version-%u header", name,
		 version - 1);
	want(n, -EPROTO, says, why);
}

/* No type of the list but type is of version. */
static void sole_of_version(unsigned type, unsigned version)
{
	size_t i;
	int others = 0;

	for (i = 0; i < NTYPES; i++)
		others += types[i] != type &&
			  hmm_proto_type_version(types[i]) == version;
	t_eq(others, 0, "no other type is of version %u", version);
}

/*
 * Types whose body is EVICT's 32-byte range at the same offsets, each in
 * a header of the version that added it, which no other type has:
 * WRITEBACK (version 3, hmm_writeback; access 0), UNMAP_EXACT (version
 * 6, the map of that access; access nonzero).
 */
static void test_range_type(unsigned type, unsigned version,
			    uint32_t access)
{
	const char *name = hmm_proto_type_name(type);
	struct hmm_proto_range rg = { 42, 8192, HMM_ALL, HMM_TIER_HOST,
				      access };
	struct hmm_proto_msg m;
	int n;

	n = hmm_proto_encode(buf, sizeof(buf), type, 0, 5, &rg);
	t_eq(n, HMM_PROTO_HDR_SIZE + 32, "%s: 32 body bytes", name);
	t_ok(le(buf + 4, 2) == version && le(buf + 6, 2) == type &&
	     le(buf + 32, 8) == 42 && le(buf + 40, 8) == 8192 &&
	     le(buf + 48, 8) == HMM_ALL && le(buf + 56, 4) == HMM_TIER_HOST &&
	     le(buf + 60, 4) == access, "%s: version %u, type %u; id, off, "
	     "len (HMM_ALL), tier, access at 0, 8, 16, 24, 28", name, version,
	     type);
	memset(&m, 0xa5, sizeof(m));
	t_ok(hmm_proto_decode(buf, n, &m) == (int)type &&
	     m.hdr.version == version && m.hdr.seq == 5 &&
	     !memcmp(&rg, &m.u.range, sizeof(rg)),
	     "%s decodes to the same header and range", name);
	t_eq(hmm_proto_evict_decode(buf, n, NULL, &m.u.range), -EPROTO,
	     "evict_decode of a %s: -EPROTO", name);
	t_eq(hmm_proto_type_version(type), (int)version, "%s: version %u",
	     name, version);
	t_ok(hmm_proto_is_request(type), "%s is a request", name);
	older_header(type, version, n);
	rg.access = access ? 0 : HMM_READ;
	t_eq(hmm_proto_encode(buf, sizeof(buf), type, 0, 5, &rg), -EINVAL,
	     "%s of access %#x: -EINVAL", name, rg.access);
	t_ok(strstr(hmm_last_error(), "access") != NULL, "... naming the "
	     "field access: %s", hmm_last_error());
	sole_of_version(type, version);
}

/*
 * Types whose body is one u64 id, nonzero, each in a header of the
 * version that added it, which no other type has: SAVE (version 4,
 * hmm_flush in shared mode), TENSOR_RM (version 5, hmmctl rm).
 */
static void test_id_type(unsigned type, unsigned version)
{
	const char *name = hmm_proto_type_name(type);
	uint64_t id = 42;
	struct hmm_proto_msg m;
	int n;

	n = hmm_proto_encode(buf, sizeof(buf), type, 0, 5, &id);
	t_eq(n, HMM_PROTO_HDR_SIZE + 8, "%s: 8 body bytes", name);
	t_ok(le(buf + 4, 2) == version && le(buf + 6, 2) == type &&
	     le(buf + 32, 8) == 42, "%s: version %u, type %u; id at 0", name,
	     version, type);
	memset(&m, 0xa5, sizeof(m));
	t_ok(hmm_proto_decode(buf, n, &m) == (int)type &&
	     m.hdr.version == version && !memcmp(&m.u, &id, 8),
	     "%s decodes to the same header and id", name);
	t_ok(hmm_proto_is_request(type), "%s is a request", name);
	older_header(type, version, n);
	id = 0;
	t_eq(hmm_proto_encode(buf, sizeof(buf), type, 0, 5, &id), -EINVAL,
	     "%s of id 0: -EINVAL", name);
	sole_of_version(type, version);
}

/* ---- the seed corpus for tests/fuzz/fuzz_proto ---------------------------- */

static int write_corpus(const char *dir)
{
	union hmm_proto_body b;
	char path[4096];
	size_t i;

	mkdir(dir, 0755);
	for (i = 0; i < NTYPES; i++) {
		int n, fd;

		sample(types[i], &b);
		n = enc(types[i], &b, i + 1);
		snprintf(path, sizeof(path), "%s/%s", dir,
			 hmm_proto_type_name(types[i]));
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (n < 0 || fd < 0 || write(fd, buf, n) != n) {
			fprintf(stderr, "write_corpus: %s: failed\n", path);
			return 1;
		}
		close(fd);
	}
	printf("wrote %zu datagrams into %s\n", NTYPES, dir);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--write-corpus"))
		return write_corpus(argv[2]);
	test_round_trip();
	test_typed();
	test_framing();
	test_fields();
	test_garbage();
	test_version2();
	test_range_type(HMM_PROTO_WRITEBACK, 3, 0);
	test_id_type(HMM_PROTO_SAVE, 4);
	test_id_type(HMM_PROTO_TENSOR_RM, 5);
	test_range_type(HMM_PROTO_UNMAP_EXACT, 6, HMM_READ | HMM_WRITE);
	return t_done();
}
