// SPDX-License-Identifier: MIT
/*
 * config_set.c — struct hmm_config by name: hmm_config_set / _get /
 * _key, and hmm_config_new / _free, so that a binding (python/hmm) needs
 * no struct layout.  One table lists every field with its kind; sizes go
 * through hmm_size_parse() (size.c), the one size parser.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "hmm.h"

enum kind {
	K_STR,		/* const char *; the value's pointer is kept */
	K_SIZE64,	/* uint64_t bytes, K/M/G/T */
	K_SIZE32,	/* uint32_t bytes, K/M/G/T */
	K_U32,		/* uint32_t, decimal */
	K_INT,		/* int, decimal, may be negative */
	K_POLICY,	/* uint32_t HMM_POLICY_*: "lru", "schedule" or a number */
	K_FLAGS,	/* uint32_t HMM_CONFIG_*: names joined by ',' or '|' */
};

static const struct field {
	const char *key;
	enum kind kind;
	size_t off;
} fields[] = {
#define F(name, kind) { #name, kind, offsetof(struct hmm_config, name) }
	F(store_path, K_STR),
	F(store_size, K_SIZE64),
	F(host_budget, K_SIZE64),
	F(device_budget, K_SIZE64),
	F(device, K_STR),
	F(daemon, K_STR),
	F(trace_path, K_STR),
	F(host_dir, K_STR),
	F(chunk_bytes, K_SIZE32),
	F(policy, K_POLICY),
	F(prefetch_depth, K_U32),
	F(wait_ms, K_U32),
	F(sim_bandwidth, K_SIZE64),
	F(numa_node, K_INT),
	F(device_index, K_INT),
	F(flags, K_FLAGS),
	F(pool_bytes, K_SIZE32),
	F(io_depth, K_U32),
	F(queue_depth, K_U32),
	F(kernel_threads, K_U32),
#undef F
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

/* A field added to struct hmm_config (or carved from reserved[]) needs
 * its row above, and test_config_set's count: fail the build until then. */
_Static_assert(sizeof(struct hmm_config) == 120 &&
	       offsetof(struct hmm_config, reserved) ==
	       offsetof(struct hmm_config, kernel_threads) + sizeof(uint32_t),
	       "struct hmm_config changed: update fields[] in config_set.c");

static const char *const policy_name[] = { "lru", "schedule" };

static const struct {
	const char *name;
	uint32_t bit;
} flag_name[] = {
	{ "store_buffered", HMM_CONFIG_STORE_BUFFERED },
	{ "store_keep", HMM_CONFIG_STORE_KEEP },
	{ "host_shared", HMM_CONFIG_HOST_SHARED },
	{ "store_format", HMM_CONFIG_STORE_FORMAT },
};
#define NFLAGS (sizeof(flag_name) / sizeof(flag_name[0]))

struct hmm_config *hmm_config_new(void)
{
	struct hmm_config *cfg = malloc(sizeof(*cfg));

	if (cfg)
		hmm_config_default(cfg);
	return cfg;
}

void hmm_config_free(struct hmm_config *cfg)
{
	free(cfg);
}

const char *hmm_config_key(unsigned i)
{
	return i < NFIELDS ? fields[i].key : NULL;
}

static const struct field *field_of(const char *key)
{
	for (unsigned i = 0; key && i < NFIELDS; i++)
		if (!strcmp(fields[i].key, key))
			return &fields[i];
	return NULL;
}

/* A decimal integer in [lo, hi], the whole string; 0 or -EINVAL. */
static int parse_int(const char *s, long long lo, long long hi,
		     long long *out)
{
	long long v = 0;
	int neg = 0;

	if (*s == '-') {
		neg = 1;
		s++;
	}
	if (*s < '0' || *s > '9')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > (LLONG_MAX - (*s - '0')) / 10)
			return -EINVAL;
		v = v * 10 + (*s - '0');
	}
	if (*s)
		return -EINVAL;
	v = neg ? -v : v;
	if (v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_policy(const char *s, uint32_t *out)
{
	long long v;

	for (unsigned i = 0; i < 2; i++)
		if (!strcmp(s, policy_name[i])) {
			*out = i;
			return 0;
		}
	if (parse_int(s, 0, HMM_POLICY_SCHEDULE, &v))
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

/* "", a number, or flag names joined by ',' or '|'.  A number with a
 * bit that is no flag is -EDOM: hmm_open would refuse it, and its
 * read-back (names, then the rest as a number) would not parse.  An
 * empty name (",x", "x,,y", "x,") is -ENODATA: likely a name lost. */
static int parse_flags(const char *s, uint32_t *out)
{
	uint32_t bits = 0, known = 0;
	long long v;

	if (!parse_int(s, 0, UINT32_MAX, &v)) {
		for (unsigned i = 0; i < NFLAGS; i++)
			known |= flag_name[i].bit;
		if ((uint32_t)v & ~known)
			return -EDOM;
		*out = (uint32_t)v;
		return 0;
	}
	while (*s) {
		size_t n = strcspn(s, ",|");
		unsigned i;

		if (!n || (s[n] && !s[n + 1]))
			return -ENODATA;
		for (i = 0; i < NFLAGS; i++)
			if (strlen(flag_name[i].name) == n &&
			    !strncmp(s, flag_name[i].name, n))
				break;
		if (i == NFLAGS)
			return -EINVAL;
		bits |= flag_name[i].bit;
		s += n;
		if (*s)
			s++;
	}
	*out = bits;
	return 0;
}

static const char *expect(enum kind k)
{
	switch (k) {
	case K_SIZE64:
	case K_SIZE32: return "a size (e.g. 4096, 64K, 2M, 1G)";
	case K_U32: return "a number 0..4294967295";
	case K_INT: return "an integer";
	case K_POLICY: return "lru, schedule, 0 or 1";
	case K_FLAGS: return "a number or store_buffered, store_keep, "
			     "host_shared, store_format joined by ','";
	default: return "a string";
	}
}

int hmm_config_set(struct hmm_config *cfg, const char *key,
		   const char *value)
{
	const struct field *f = field_of(key);
	uint64_t sz;
	uint32_t u;
	long long v;
	int r = 0;
	char *p;

	if (!cfg)
		return hmm_err(-EINVAL, "hmm_config_set: no config");
	if (!f)
		return hmm_err(-EINVAL, "hmm_config_set: unknown key '%s'",
			       key ? key : "(null)");
	p = (char *)cfg + f->off;
	if (!value && f->kind != K_STR)
		return hmm_err(-EINVAL, "config.%s: no value (want %s)",
			       key, expect(f->kind));
	switch (f->kind) {
	case K_STR:
		*(const char **)p = value;
		return 0;
	case K_SIZE64:
	case K_SIZE32:
		r = hmm_size_parse(value, &sz);
		if (!r && f->kind == K_SIZE32 && sz > UINT32_MAX)
			r = -ERANGE;
		if (!r && f->kind == K_SIZE32)
			*(uint32_t *)p = (uint32_t)sz;
		else if (!r)
			*(uint64_t *)p = sz;
		break;
	case K_U32:
		r = parse_int(value, 0, UINT32_MAX, &v);
		if (!r)
			*(uint32_t *)p = (uint32_t)v;
		break;
	case K_INT:
		r = parse_int(value, INT_MIN, INT_MAX, &v);
		if (!r)
			*(int *)p = (int)v;
		break;
	case K_POLICY:
	case K_FLAGS:
		r = f->kind == K_POLICY ? parse_policy(value, &u) :
					  parse_flags(value, &u);
		if (!r)
			*(uint32_t *)p = u;
		break;
	}
	if (r)
		return hmm_err(-EINVAL, "config.%s: '%s' is not %s%s", key,
			       value, expect(f->kind),
			       r == -ERANGE ? " (too large)" :
			       r == -EDOM ? " (it sets bits that are no "
			       "flag)" : r == -ENODATA ? " (an empty name "
			       "before, between or after the separators)" :
			       "");
	return 0;
}

/* The flags as names joined by ',' (unknown bits as a number).  n and
 * cap stay size_t: any cap, past INT_MAX too, is a cap like another. */
static int flags_str(uint32_t bits, char *buf, size_t cap)
{
	size_t n = 0;

	if (cap)
		*buf = 0;
	for (unsigned i = 0; i < NFLAGS; i++)
		if (bits & flag_name[i].bit) {
			n += snprintf(n < cap ? buf + n : NULL,
				      n < cap ? cap - n : 0, "%s%s",
				      n ? "," : "", flag_name[i].name);
			bits &= ~flag_name[i].bit;
		}
	if (bits || !n)
		n += snprintf(n < cap ? buf + n : NULL, n < cap ? cap - n : 0,
			      "%s%" PRIu32, n ? "," : "", bits);
	return (int)n;	/* at most the names and a number: small */
}

int hmm_config_get(const struct hmm_config *cfg, const char *key,
		   char *buf, size_t cap)
{
	const struct field *f = field_of(key);
	const char *p;
	uint32_t u;

	if (!cfg || (!buf && cap))
		return hmm_err(-EINVAL, "hmm_config_get: no config or buffer");
	if (!f)
		return hmm_err(-EINVAL, "hmm_config_get: unknown key '%s'",
			       key ? key : "(null)");
	p = (const char *)cfg + f->off;
	switch (f->kind) {
	case K_STR:
		return snprintf(buf, cap, "%s",
				*(const char *const *)p ?
				*(const char *const *)p : "");
	case K_SIZE64:
		return snprintf(buf, cap, "%" PRIu64, *(const uint64_t *)p);
	case K_SIZE32:
	case K_U32:
		return snprintf(buf, cap, "%" PRIu32, *(const uint32_t *)p);
	case K_INT:
		return snprintf(buf, cap, "%d", *(const int *)p);
	case K_POLICY:
		u = *(const uint32_t *)p;
		if (u < 2)
			return snprintf(buf, cap, "%s", policy_name[u]);
		return snprintf(buf, cap, "%" PRIu32, u);
	case K_FLAGS:
		return flags_str(*(const uint32_t *)p, buf, cap);
	}
	return 0;
}
