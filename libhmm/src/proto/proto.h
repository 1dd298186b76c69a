/* SPDX-License-Identifier: MIT */
/*
 * proto.h — the hmmd wire protocol: messages between libhmm in shared
 * mode (the client) and hmmd (the daemon), over a SOCK_SEQPACKET Unix
 * socket.  One message is one datagram: a 32-byte header and a body whose
 * size is fixed by the message type.  Everything is little-endian, every
 * field naturally aligned; strings are fixed-size byte arrays holding a
 * NUL-terminated string followed by zero bytes.  File descriptors (the
 * memfd of the shared host tier) travel beside a message as SCM_RIGHTS,
 * and a message that carries some says so with HMM_PROTO_F_FDS.
 *
 * Reading order: the header, message types, the body of each type (the
 * C struct is the decoded, host-order form; the comment gives the wire
 * offset of each field), the encode/decode pairs, helpers.
 *
 * The codec is pure: no I/O, no allocation, no global state except the
 * per-thread error detail.  Decoding validates every field, so a decoded
 * message can be used without further checks of its form (the daemon
 * still checks what depends on its state: ids, quotas, uids):
 *
 *   -EMSGSIZE  the datagram is shorter than the header, longer than
 *              HMM_PROTO_MSG_MAX, or its length disagrees with the header
 *              or with the body size of its type;
 *   -EPROTO    wrong magic, unsupported version, unknown type, unknown or
 *              misplaced flag, a reserved field not zero, a message of
 *              another type than the one asked for;
 *   -EINVAL    a field out of range: an enum, a string not NUL-terminated
 *              within its array or with bytes after the NUL, an empty
 *              name, a control character, a range or size that overflows.
 *
 * Each failure leaves hmm_last_error() naming the message and the field,
 * e.g. "message tensor_new: field name: not NUL-terminated within 64
 * bytes".  Encoders validate the same way (a sender cannot put a message
 * on the wire that its peer would refuse) and return the datagram's
 * length.  Threading: every function may be called from any thread.
 */
#ifndef HMM_PROTO_H
#define HMM_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "hmm.h"

/* ---- the header ---------------------------------------------------------- */

#define HMM_PROTO_MAGIC		0x504d4d48u	/* "HMMP" as bytes on the wire */
#define HMM_PROTO_VERSION_MIN	1		/* the versions this codec speaks */
#define HMM_PROTO_VERSION_MAX	6
#define HMM_PROTO_HDR_SIZE	32
#define HMM_PROTO_MSG_MAX	4096	/* no datagram is longer; receive into
					   MSG_MAX + 1 bytes to see truncation */

/*
 * Header flags.
 * HMM_PROTO_F_FDS: file descriptors ride with this message (SCM_RIGHTS).
 *   Only on HELLO_REPLY (the host tier's memfd) and MAP_REPLY (a memfd
 *   added since); a receiver closes fds that arrive without the flag and
 *   fails the message.
 */
#define HMM_PROTO_F_FDS		(1u << 0)
#define HMM_PROTO_F_ALL		HMM_PROTO_F_FDS

/*
 * Wire layout, 32 bytes:
 *   0 u32 magic  4 u16 version  6 u16 type  8 u32 flags  12 u32 length
 *  16 u64 seq   24 u64 reserved (zero)
 * length counts the body bytes after the header.  seq is chosen by the
 * client, any value; a reply carries the seq of its request.
 *
 * Versions.  version is the protocol version that defined the message's
 * type, exactly: 1 for every type of version 1, 2 for WAIT, 3 for
 * WRITEBACK, 4 for SAVE, 5 for TENSOR_RM, 6 for UNMAP_EXACT.  A type's
 * layout never changes; a later version adds types
 * (a changed layout would be a new type).  So every version-1 message is
 * byte-identical in every version, a version-1 peer reads all of them,
 * and a sender uses a type of version N only once HELLO negotiated
 * version N or later (hmmd closes a connection that does otherwise).  The decoder refuses a header whose
 * version is not its type's (-EPROTO, field version).
 *   version 1: HELLO .. LIST and their replies;
 *   version 2: WAIT (the client's prefetches and evictions finished),
 *              STATS2 / STATS2_REPLY (the engine's other counters too);
 *   version 3: WRITEBACK (hmm_writeback: write back, keep resident);
 *   version 4: SAVE (hmm_flush saves every tensor the client holds);
 *   version 5: TENSOR_RM (hmmctl rm: delete a saved tensor);
 *   version 6: UNMAP_EXACT (the map of a range with that access).
 */
struct hmm_proto_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;		/* HMM_PROTO_* below */
	uint32_t flags;		/* HMM_PROTO_F_* */
	uint32_t length;
	uint64_t seq;
	uint64_t reserved;
};

/* ---- message types ------------------------------------------------------- */

/* Client to daemon (requests).  Each is answered by one reply. */
#define HMM_PROTO_HELLO		1	/* -> HELLO_REPLY; first message */
#define HMM_PROTO_TENSOR_NEW	2	/* -> TENSOR_REPLY */
#define HMM_PROTO_TENSOR_FREE	3	/* -> OK */
#define HMM_PROTO_MAP		4	/* -> MAP_REPLY */
#define HMM_PROTO_UNMAP		5	/* -> OK */
#define HMM_PROTO_PREFETCH	6	/* -> OK (started, not done) */
#define HMM_PROTO_EVICT		7	/* -> OK (started, not done) */
#define HMM_PROTO_FLUSH		8	/* -> OK (durable) */
#define HMM_PROTO_STATS		9	/* -> STATS_REPLY */
#define HMM_PROTO_SHARE		10	/* -> OK */
#define HMM_PROTO_ATTACH	11	/* -> TENSOR_REPLY */
#define HMM_PROTO_QUOTA_SET	12	/* -> OK */
#define HMM_PROTO_LIST		13	/* -> LIST_REPLY (hmmctl) */
#define HMM_PROTO_WAIT		14	/* -> OK (version 2: I/O done) */
#define HMM_PROTO_STATS2	15	/* -> STATS2_REPLY (version 2) */
#define HMM_PROTO_WRITEBACK	16	/* -> OK (version 3: written) */
#define HMM_PROTO_SAVE		17	/* -> OK (version 4: persistent) */
#define HMM_PROTO_TENSOR_RM	18	/* -> OK (version 5: deleted) */
#define HMM_PROTO_UNMAP_EXACT	19	/* -> OK (version 6: that map) */
/* Daemon to client (replies).  ERROR may answer any request. */
#define HMM_PROTO_HELLO_REPLY	64
#define HMM_PROTO_ERROR		65
#define HMM_PROTO_OK		66
#define HMM_PROTO_TENSOR_REPLY	67
#define HMM_PROTO_MAP_REPLY	68
#define HMM_PROTO_STATS_REPLY	69
#define HMM_PROTO_LIST_REPLY	70
#define HMM_PROTO_STATS2_REPLY	71	/* version 2 */

#define HMM_PROTO_NAME_MAX	64	/* name arrays: 1..63 bytes + NUL */
#define HMM_PROTO_DETAIL_MAX	256	/* error detail: 0..255 bytes + NUL */

/* HELLO / HELLO_REPLY features, negotiated: the reply holds the subset of
 * the asked ones that the daemon grants (bits it does not know it drops).
 * HMM_PROTO_FEAT_MEMFD: the host tier is shared memory (a memfd mapped
 *   by the client); without it map of the host tier is refused.
 * HMM_PROTO_FEAT_MODULE: the daemon serves hmmk.ko's FILL/EVICT, so
 *   transparent regions are backed by the module.
 * HMM_PROTO_FEAT_CONTROL: the client is a control tool (hmmctl); granted
 *   to an administrator's (uid 0, the daemon's uid), which may then hold
 *   the connection slots hmmd keeps back from every other client. */
#define HMM_PROTO_FEAT_MEMFD	(1u << 0)
#define HMM_PROTO_FEAT_MODULE	(1u << 1)
#define HMM_PROTO_FEAT_CONTROL	(1u << 2)
#define HMM_PROTO_FEAT_ALL	(HMM_PROTO_FEAT_MEMFD | HMM_PROTO_FEAT_MODULE | \
				 HMM_PROTO_FEAT_CONTROL)

/* TENSOR_NEW / TENSOR_REPLY flags. */
#define HMM_PROTO_TENSOR_PERSIST (1u << 0)	/* keep in the store by name
						   across daemon restarts */
#define HMM_PROTO_TENSOR_F_ALL	HMM_PROTO_TENSOR_PERSIST

/* ---- bodies --------------------------------------------------------------
 * quota[] and per-tier arrays are indexed by HMM_TIER_DEVICE, _HOST,
 * _STORE (hmm.h); a quota of 0 means "the daemon's default".
 */

/* HELLO, 96 bytes: 0 u16 version_min, 2 u16 version_max, 4 u32 features,
 * 8 u64 quota[3], 32 char name[64] (may be empty). */
struct hmm_proto_hello {
	uint16_t version_min;	/* 1 <= min <= max */
	uint16_t version_max;
	uint32_t features;	/* wanted; unknown bits allowed */
	uint64_t quota[HMM_TIERS];	/* bytes asked for per tier */
	char name[HMM_PROTO_NAME_MAX];	/* the client, for logs */
};

/* HELLO_REPLY, 48 bytes: 0 u16 version, 2 u16 reserved, 4 u32 features,
 * 8 u64 client_id, 16 u64 quota[3], 40 u32 chunk_bytes, 44 u32 reserved. */
struct hmm_proto_hello_reply {
	uint16_t version;	/* chosen, within the client's range */
	uint32_t features;	/* granted, within HMM_PROTO_FEAT_ALL */
	uint64_t client_id;	/* nonzero */
	uint64_t quota[HMM_TIERS];	/* granted */
	uint32_t chunk_bytes;	/* nonzero multiple of 4096 */
};

/* ERROR, 264 bytes: 0 s32 err, 4 u32 reserved, 8 char detail[256]. */
struct hmm_proto_error {
	int32_t err;		/* -4095..-1 */
	char detail[HMM_PROTO_DETAIL_MAX];	/* may be empty */
};

/* TENSOR_NEW, 144 bytes: 0 u32 dtype, 4 u32 ndim, 8 s64 shape[8],
 * 72 u32 flags, 76 u32 reserved, 80 char name[64].
 * TENSOR_REPLY, 160 bytes: 0 u64 id, 8 u64 bytes, then the 144 bytes of
 * TENSOR_NEW at offset 16.  One struct holds both; id and bytes are zero
 * in TENSOR_NEW. */
struct hmm_proto_tensor {
	uint64_t id;		/* REPLY: nonzero; NEW: 0 (not on the wire) */
	uint64_t bytes;		/* REPLY: = elements * dtype size; NEW: 0 */
	uint32_t dtype;		/* HMM_DTYPE_* */
	uint32_t ndim;		/* 1..HMM_MAX_DIMS */
	int64_t shape[HMM_MAX_DIMS];	/* >= 1 below ndim, 0 above */
	uint32_t flags;		/* HMM_PROTO_TENSOR_* */
	char name[HMM_PROTO_NAME_MAX];	/* 1..63 bytes */
};

/* TENSOR_FREE, 8 bytes: 0 u64 id. */
struct hmm_proto_tensor_free {
	uint64_t id;		/* nonzero */
};

/* MAP, UNMAP, UNMAP_EXACT, PREFETCH, EVICT, WRITEBACK, 32 bytes: 0 u64
 * id, 8 u64 off, 16 u64 len, 24 u32 tier, 28 u32 access.  UNMAP ends,
 * of the client's maps of exactly that range, the latest read-only one,
 * else the latest; UNMAP_EXACT (version 6) the latest of exactly that
 * access, the one the client ends (a read-only one ended in place of a
 * writable copy map left the copy's bytes out of hmmd until the next
 * unmap).  ERROR -EINVAL: no such map. */
struct hmm_proto_range {
	uint64_t id;		/* nonzero */
	uint64_t off;
	uint64_t len;		/* > 0, off + len fits; HMM_ALL = to the end */
	uint32_t tier;		/* HMM_TIER_DEVICE or HMM_TIER_HOST */
	uint32_t access;	/* MAP, UNMAP_EXACT: HMM_READ|WRITE|
				   DISCARD, nonzero; others: 0 */
};

/* MAP_REPLY, 40 bytes: 0 u64 id, 8 u64 off, 16 u64 len, 24 u64 addr,
 * 32 u32 tier, 36 u32 flags. */
struct hmm_proto_map_reply {
	uint64_t id;		/* nonzero */
	uint64_t off;		/* the range pinned; len never HMM_ALL */
	uint64_t len;
	uint64_t addr;		/* host: offset of byte off in the memfd;
				   device: the device address */
	uint32_t tier;		/* HMM_TIER_DEVICE or HMM_TIER_HOST */
	uint32_t flags;		/* HMM_PROTO_MAP_F_* */
};

/*
 * HMM_PROTO_MAP_F_COPY: the memfd is not the tensor's but a copy of the
 * range's pages (a window as large as the range, page-rounded): map it
 * for this map alone and drop it at UNMAP, when hmmd copies a write
 * map's bytes back.  hmmd sends one where the tensor's whole memory is
 * more than the client's uid may reach.  A client that predates it
 * refuses the reply (the field was reserved, zero).
 */
#define HMM_PROTO_MAP_F_COPY	0x1u
#define HMM_PROTO_MAP_F_ALL	HMM_PROTO_MAP_F_COPY

/* STATS_REPLY, 400 bytes: 0 tier[3] of 12 u64 each (capacity, resident,
 * peak, pinned, bytes_in, bytes_out, hits, misses, evictions, io_ops,
 * stall_ns, io_ns), 288 u64 tensors, chunks, clients, io_errors,
 * 320 u64 quota[3], 344 u64 used[3], 368 u64 reserved[4]. */
struct hmm_proto_tier_stats {
	uint64_t capacity, resident, peak, pinned;
	uint64_t bytes_in, bytes_out, hits, misses, evictions, io_ops;
	uint64_t stall_ns, io_ns;
};

struct hmm_proto_stats_reply {
	struct hmm_proto_tier_stats tier[HMM_TIERS];	/* the daemon's */
	uint64_t tensors, chunks, clients, io_errors;
	uint64_t quota[HMM_TIERS];	/* this client's */
	uint64_t used[HMM_TIERS];	/* this client's resident bytes */
};

/* SHARE, 80 bytes: 0 u64 id, 8 u32 uid, 12 u32 access, 16 char name[64].
 * Lets uid attach tensor id under name. */
struct hmm_proto_share {
	uint64_t id;		/* nonzero */
	uint32_t uid;		/* not (uid_t)-1 */
	uint32_t access;	/* HMM_READ, or HMM_READ | HMM_WRITE */
	char name[HMM_PROTO_NAME_MAX];	/* 1..63 bytes */
};

/* ATTACH, 72 bytes: 0 u32 owner_uid, 4 u32 reserved, 8 char name[64]. */
struct hmm_proto_attach {
	uint32_t owner_uid;	/* not (uid_t)-1 */
	char name[HMM_PROTO_NAME_MAX];	/* 1..63 bytes */
};

/* QUOTA_SET, 32 bytes: 0 u64 client_id, 8 u64 quota[3]. */
struct hmm_proto_quota_set {
	uint64_t client_id;	/* 0 = the caller */
	uint64_t quota[HMM_TIERS];
};

/* LIST, 16 bytes: 0 u32 what, 4 u32 reserved, 8 u64 cursor.
 * One entry per round trip: the daemon answers the first client or
 * tensor whose id is >= cursor (hmmctl starts at 1), or id 0 when none
 * is left.  A client that is not an administrator (uid 0 or hmmd's own
 * uid) sees only itself and the tensors it holds. */
#define HMM_PROTO_LIST_CLIENTS	1
#define HMM_PROTO_LIST_TENSORS	2

struct hmm_proto_list {
	uint32_t what;		/* HMM_PROTO_LIST_* */
	uint64_t cursor;
};

/* LIST_REPLY, 152 bytes: 0 u64 id, 8 u64 owner, 16 u32 uid, 20 u32 pid,
 * 24 u64 a[3], 48 u64 b[3], 72 u32 what, 76 u32 flags, 80 u64 bytes,
 * 88 char name[64].
 *   clients: id = client id, owner 0, uid/pid its SO_PEERCRED, a = quota
 *            per tier, b = used per tier, bytes = tensors held, flags 0;
 *   tensors: id = tensor id, owner = the client that made it (0: none
 *            connected), uid = its owner's uid, pid 0, a = resident bytes
 *            per tier (store: the bytes saved), b[0] = pinned bytes,
 *            b[1] = handles on it, b[2] = 0, bytes = its size, flags =
 *            HMM_PROTO_TENSOR_* (| 1u << 31 when shared). */
struct hmm_proto_list_reply {
	uint64_t id;		/* 0: nothing at or after the cursor */
	uint64_t owner;
	uint32_t uid, pid;
	uint64_t a[HMM_TIERS];
	uint64_t b[HMM_TIERS];
	uint32_t what;		/* HMM_PROTO_LIST_* */
	uint32_t flags;
	uint64_t bytes;
	char name[HMM_PROTO_NAME_MAX];	/* may be empty */
};

/* WAIT (version 2), 8 bytes: 0 u64 id.  Answered OK once the prefetches
 * and evictions the engine has in flight for tensor id (0: for every
 * tensor the client holds) are done, or ERROR with the first I/O error
 * they met (as hmm_wait). */
struct hmm_proto_wait {
	uint64_t id;		/* 0 = all the client's tensors */
};

/* STATS2_REPLY (version 2), 464 bytes: the 400 bytes of STATS_REPLY
 * (its reserved fields zero), then 400 u64 discard_skips, prefetches,
 * prefetch_hits, recordings, divergences, region_faults,
 * region_evictions, store_direct: the engine's counters of those names
 * in struct hmm_stats. */
struct hmm_proto_stats2_reply {
	struct hmm_proto_stats_reply s;
	uint64_t discard_skips, prefetches, prefetch_hits;
	uint64_t recordings, divergences;
	uint64_t region_faults, region_evictions, store_direct;
};

/* WRITEBACK (version 3), 32 bytes: the range of EVICT (struct
 * hmm_proto_range), tier HMM_TIER_HOST (the chunks written are the
 * host's; the device tier is kept for later), access 0.  Answered OK
 * once the engine's write-backs of the range are done (as EVICT is), or
 * ERROR with the first I/O error they met; the chunks stay resident. */

/* SAVE (version 4), 8 bytes: 0 u64 id.  Tensor id, which the client
 * holds and its uid owns, becomes the uid's persistent tensor under its
 * name (as TENSOR_NEW with HMM_PROTO_TENSOR_PERSIST would have made it):
 * one the uid saved under that name before is replaced (the daemon
 * frees it once nobody holds it).  OK at once when it is that already.
 * Durable at the next FLUSH: a client saves each tensor it holds, then
 * flushes (hmm_flush).  ERROR -ENOENT (not held), -EPERM (another uid's,
 * attached), -ENAMETOOLONG (the name with the uid's prefix is too long
 * for the store). */
struct hmm_proto_save {
	uint64_t id;		/* nonzero */
};

/* TENSOR_RM (version 5), 8 bytes: the body of TENSOR_FREE.  Persistent
 * tensor id, one this client may see (an administrator's: any; others:
 * their uid's), is deleted: no client opens it by name from now on, its
 * holders keep it until they let go, and the daemon's store is flushed,
 * so it stays deleted.  ERROR -ENOENT (no such tensor: "not one of uid
 * U's" to others), -EINVAL (a client's temporary: it goes with its
 * client). */

/* OK, FLUSH, STATS, STATS2: empty bodies (no struct). */

/* Any decoded message (hmm_proto_decode). */
struct hmm_proto_msg {
	struct hmm_proto_hdr hdr;
	union hmm_proto_body {	/* the body of each type */
		struct hmm_proto_hello hello;
		struct hmm_proto_hello_reply hello_reply;
		struct hmm_proto_error error;
		struct hmm_proto_tensor tensor;	/* TENSOR_NEW, TENSOR_REPLY */
		struct hmm_proto_tensor_free tensor_free; /* and TENSOR_RM */
		struct hmm_proto_range range;	/* MAP, UNMAP(_EXACT),
						   PREFETCH, EVICT,
						   WRITEBACK */
		struct hmm_proto_map_reply map_reply;
		struct hmm_proto_stats_reply stats_reply;
		struct hmm_proto_share share;
		struct hmm_proto_attach attach;
		struct hmm_proto_quota_set quota_set;
		struct hmm_proto_list list;
		struct hmm_proto_list_reply list_reply;
		struct hmm_proto_wait wait;
		struct hmm_proto_stats2_reply stats2_reply;
		struct hmm_proto_save save;
	} u;
};

/* ---- encode and decode ---------------------------------------------------
 *
 * hmm_proto_encode(buf, cap, type, flags, seq, body): write one message
 * of type with body (the struct of that type, NULL for an empty body)
 * into buf.  Returns its length (HMM_PROTO_HDR_SIZE + body size), or
 * -EMSGSIZE (cap too small), -EPROTO (unknown type, flag not allowed on
 * type), -EINVAL (a field out of range).  Nothing is written on failure
 * beyond buf[0..cap).
 *
 * hmm_proto_decode(buf, len, msg): validate the datagram buf[0..len) and
 * fill *msg.  Returns the message type (> 0) or -EMSGSIZE / -EPROTO /
 * -EINVAL as above.  *msg is unspecified on failure.
 *
 * The typed pairs below are the same with the type fixed: encoders take
 * flags 0; decoders fail with -EPROTO when the datagram is of another
 * type, fill *hdr when hdr is not NULL, and return 0.
 */
int hmm_proto_encode(void *buf, size_t cap, unsigned type, uint32_t flags,
		     uint64_t seq, const void *body);
int hmm_proto_decode(const void *buf, size_t len, struct hmm_proto_msg *msg);

/* The header alone (magic, version, type, flags, length, reserved). */
int hmm_proto_hdr_decode(const void *buf, size_t len,
			 struct hmm_proto_hdr *hdr);

#define HMM_PROTO_PAIR(name, T)						\
	int hmm_proto_##name##_encode(void *buf, size_t cap, uint64_t seq, \
				      const T *m);			\
	int hmm_proto_##name##_decode(const void *buf, size_t len,	\
				      struct hmm_proto_hdr *hdr, T *m)
#define HMM_PROTO_PAIR0(name)						\
	int hmm_proto_##name##_encode(void *buf, size_t cap, uint64_t seq); \
	int hmm_proto_##name##_decode(const void *buf, size_t len,	\
				      struct hmm_proto_hdr *hdr)

HMM_PROTO_PAIR(hello, struct hmm_proto_hello);
HMM_PROTO_PAIR(hello_reply, struct hmm_proto_hello_reply);
HMM_PROTO_PAIR(error, struct hmm_proto_error);
HMM_PROTO_PAIR0(ok);
HMM_PROTO_PAIR(tensor_new, struct hmm_proto_tensor);
HMM_PROTO_PAIR(tensor_reply, struct hmm_proto_tensor);
HMM_PROTO_PAIR(tensor_free, struct hmm_proto_tensor_free);
HMM_PROTO_PAIR(tensor_rm, struct hmm_proto_tensor_free);
HMM_PROTO_PAIR(map, struct hmm_proto_range);
HMM_PROTO_PAIR(map_reply, struct hmm_proto_map_reply);
HMM_PROTO_PAIR(unmap, struct hmm_proto_range);
HMM_PROTO_PAIR(unmap_exact, struct hmm_proto_range);
HMM_PROTO_PAIR(prefetch, struct hmm_proto_range);
HMM_PROTO_PAIR(evict, struct hmm_proto_range);
HMM_PROTO_PAIR0(flush);
HMM_PROTO_PAIR0(stats);
HMM_PROTO_PAIR(stats_reply, struct hmm_proto_stats_reply);
HMM_PROTO_PAIR(share, struct hmm_proto_share);
HMM_PROTO_PAIR(attach, struct hmm_proto_attach);
HMM_PROTO_PAIR(quota_set, struct hmm_proto_quota_set);
HMM_PROTO_PAIR(list, struct hmm_proto_list);
HMM_PROTO_PAIR(list_reply, struct hmm_proto_list_reply);
HMM_PROTO_PAIR(wait, struct hmm_proto_wait);
HMM_PROTO_PAIR0(stats2);
HMM_PROTO_PAIR(stats2_reply, struct hmm_proto_stats2_reply);
HMM_PROTO_PAIR(writeback, struct hmm_proto_range);
HMM_PROTO_PAIR(save, struct hmm_proto_save);

/* ---- helpers ------------------------------------------------------------- */

/* "map", "hello_reply", ...; "unknown" for a type that does not exist. */
const char *hmm_proto_type_name(unsigned type);

/* Body bytes of type, or -EPROTO when the type does not exist. */
int hmm_proto_body_size(unsigned type);

/* The protocol version that defined type (its header's version), or
 * -EPROTO when the type does not exist. */
int hmm_proto_type_version(unsigned type);

/* 1 for a request (client to daemon), 0 for a reply or an unknown type. */
int hmm_proto_is_request(unsigned type);

/*
 * The version the daemon speaks with a client that said hello: the
 * highest in both ranges.  Returns it, or -EPROTO naming both ranges
 * when they do not meet.
 */
int hmm_proto_negotiate(const struct hmm_proto_hello *hello);

/*
 * Build an ERROR body for err with a printf detail; the detail is cut to
 * fit and control characters in it become '?', so any text may be sent.
 */
void hmm_proto_error_fill(struct hmm_proto_error *e, int err,
			  const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif /* HMM_PROTO_H */
