/* SPDX-License-Identifier: MIT */
/*
 * proto_wire.h — inside the wire codec (proto.c, proto_msg.c): byte
 * cursors, the field error, and the table of message types.  Not for
 * anyone else: the codec's interface is proto.h.
 */
#ifndef HMM_PROTO_WIRE_H
#define HMM_PROTO_WIRE_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "proto.h"

/* ---- byte cursors --------------------------------------------------------
 * The caller has checked that the body is exactly the type's size, so the
 * cursors cannot run past it; rd still refuses to (and remembers) as a
 * second line of defence. */

struct wr {
	uint8_t *p;
	size_t off;
};

struct rd {
	const uint8_t *p;
	size_t n, off;
	int past;		/* a read went past n (a codec bug) */
};

static inline void w16(struct wr *w, uint16_t v)
{
	w->p[w->off++] = v;
	w->p[w->off++] = v >> 8;
}

static inline void w32(struct wr *w, uint32_t v)
{
	w16(w, v);
	w16(w, v >> 16);
}

static inline void w64(struct wr *w, uint64_t v)
{
	w32(w, v);
	w32(w, v >> 32);
}

/* A string array: the string (already checked to fit), then zeros. */
static inline void wstr(struct wr *w, const char *s, size_t cap)
{
	size_t n = strnlen(s, cap);

	memcpy(w->p + w->off, s, n);
	memset(w->p + w->off + n, 0, cap - n);
	w->off += cap;
}

static inline const uint8_t *rtake(struct rd *r, size_t n)
{
	static const uint8_t zeros[HMM_PROTO_DETAIL_MAX];
	const uint8_t *p = r->p + r->off;

	if (r->past || n > r->n - r->off) {
		r->past = 1;
		return zeros;
	}
	r->off += n;
	return p;
}

static inline uint16_t r16(struct rd *r)
{
	const uint8_t *p = rtake(r, 2);

	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t r32(struct rd *r)
{
	const uint8_t *p = rtake(r, 4);

	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t r64(struct rd *r)
{
	uint64_t lo = r32(r);

	return lo | (uint64_t)r32(r) << 32;
}

/* ---- errors naming the field ---------------------------------------------
 * ferr(err, msg, field, fmt, ...): "message MSG: field FIELD: what" as
 * the thread's detail; returns err. */

static inline int ferr(int err, const char *msg, const char *field,
		       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static inline int ferr(int err, const char *msg, const char *field,
		       const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return hmm_err(err, "message %s: field %s: %s", msg, field, what);
}

/* ---- the table of message types (proto_msg.c) ----------------------------
 * One row per type, indexed by type; a row whose name is NULL is no type.
 * put writes the body (the caller checked it and the room); get reads it
 * from exactly size bytes, checking what only the wire has (reserved
 * fields, bytes after a string's NUL); check validates the values and is
 * shared by encoder and decoder. */
struct hmm_proto_mtype {
	const char *name;		/* NULL: no such type */
	uint16_t size;			/* body bytes */
	uint8_t request;		/* client to daemon */
	uint8_t version;		/* the version that defined it */
	uint32_t flags_ok;		/* header flags it may carry */
	void (*put)(struct wr *w, const void *m);	/* NULL: empty body */
	int (*get)(struct rd *r, void *m, const char *msg);
	int (*check)(const void *m, const char *msg);
};

extern const struct hmm_proto_mtype hmm_proto_mtypes[];
extern const unsigned hmm_proto_mtypes_n;

#endif /* HMM_PROTO_WIRE_H */
