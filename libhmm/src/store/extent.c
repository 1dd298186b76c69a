// SPDX-License-Identifier: MIT
/* extent.c — first-fit range allocator with quarantine (see extent.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "extent.h"

static int grow(struct hmm_ext_range **v, size_t *cap, size_t need)
{
	struct hmm_ext_range *n;
	size_t c = *cap ? *cap : 16;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	n = realloc(*v, c * sizeof(*n));
	if (!n)
		return -ENOMEM;
	*v = n;
	*cap = c;
	return 0;
}

int hmm_ext_init(struct hmm_ext *a, uint64_t size)
{
	memset(a, 0, sizeof(*a));
	a->size = size;
	if (grow(&a->free, &a->free_cap, 16))
		return -ENOMEM;
	if (size) {
		a->free[0] = (struct hmm_ext_range){ 0, size };
		a->nfree = 1;
		a->free_units = size;
	}
	return 0;
}

void hmm_ext_fini(struct hmm_ext *a)
{
	free(a->free);
	free(a->quar);
	memset(a, 0, sizeof(*a));
}

/* Index of the first free range with off > x (0..nfree). */
static size_t upper(const struct hmm_ext *a, uint64_t x)
{
	size_t lo = 0, hi = a->nfree;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (a->free[mid].off > x)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

static int insert_at(struct hmm_ext *a, size_t i, uint64_t off, uint64_t len)
{
	if (grow(&a->free, &a->free_cap, a->nfree + 1))
		return -ENOMEM;
	memmove(&a->free[i + 1], &a->free[i], (a->nfree - i) * sizeof(*a->free));
	a->free[i] = (struct hmm_ext_range){ off, len };
	a->nfree++;
	return 0;
}

static void remove_at(struct hmm_ext *a, size_t i)
{
	memmove(&a->free[i], &a->free[i + 1],
		(a->nfree - i - 1) * sizeof(*a->free));
	a->nfree--;
}

int hmm_ext_alloc(struct hmm_ext *a, uint64_t len, uint64_t *off)
{
	if (!len)
		return -EINVAL;
	if (len > a->free_units)
		return -ENOSPC;
	for (size_t i = 0; i < a->nfree; i++) {
		struct hmm_ext_range *r = &a->free[i];

		if (r->len < len)
			continue;
		*off = r->off;
		r->off += len;
		r->len -= len;
		if (!r->len)
			remove_at(a, i);
		a->free_units -= len;
		return 0;
	}
	return -ENOSPC;
}

int hmm_ext_free(struct hmm_ext *a, uint64_t off, uint64_t len)
{
	size_t i;
	int left, right;

	if (!len || off >= a->size || len > a->size - off)
		return -EINVAL;
	i = upper(a, off);
	if (i > 0 && a->free[i - 1].off + a->free[i - 1].len > off)
		return -EINVAL;
	if (i < a->nfree && off + len > a->free[i].off)
		return -EINVAL;
	left = i > 0 && a->free[i - 1].off + a->free[i - 1].len == off;
	right = i < a->nfree && off + len == a->free[i].off;
	if (left && right) {
		a->free[i - 1].len += len + a->free[i].len;
		remove_at(a, i);
	} else if (left) {
		a->free[i - 1].len += len;
	} else if (right) {
		a->free[i].off = off;
		a->free[i].len += len;
	} else if (insert_at(a, i, off, len)) {
		return -ENOMEM;
	}
	a->free_units += len;
	return 0;
}

int hmm_ext_reserve(struct hmm_ext *a, uint64_t off, uint64_t len)
{
	struct hmm_ext_range *r;
	uint64_t end = off + len, rend;
	size_t i;

	if (!len || off >= a->size || len > a->size - off)
		return -EINVAL;
	i = upper(a, off);
	if (i == 0)
		return -EEXIST;
	r = &a->free[i - 1];
	rend = r->off + r->len;
	if (rend < end)
		return -EEXIST;
	if (r->off < off && rend > end) {
		if (insert_at(a, i, end, rend - end))
			return -ENOMEM;
		a->free[i - 1].len = off - a->free[i - 1].off;
	} else if (r->off < off) {
		r->len = off - r->off;
	} else if (rend > end) {
		r->off = end;
		r->len = rend - end;
	} else {
		remove_at(a, i - 1);
	}
	a->free_units -= len;
	return 0;
}

int hmm_ext_defer(struct hmm_ext *a, uint64_t off, uint64_t len)
{
	if (!len || off >= a->size || len > a->size - off)
		return -EINVAL;
	if (grow(&a->quar, &a->quar_cap, a->nquar + 1))
		return -ENOMEM;
	a->quar[a->nquar++] = (struct hmm_ext_range){ off, len };
	a->quar_units += len;
	return 0;
}

void hmm_ext_release(struct hmm_ext *a)
{
	size_t kept = 0;

	for (size_t i = 0; i < a->nquar; i++) {
		struct hmm_ext_range r = a->quar[i];

		if (hmm_ext_free(a, r.off, r.len) == -ENOMEM)
			a->quar[kept++] = r;	/* try again next time */
		else
			a->quar_units -= r.len;
	}
	a->nquar = kept;
}

uint64_t hmm_ext_used(const struct hmm_ext *a)
{
	return a->size - a->free_units;
}

uint64_t hmm_ext_largest(const struct hmm_ext *a)
{
	uint64_t m = 0;

	for (size_t i = 0; i < a->nfree; i++)
		if (a->free[i].len > m)
			m = a->free[i].len;
	return m;
}
