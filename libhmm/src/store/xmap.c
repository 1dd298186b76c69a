// SPDX-License-Identifier: MIT
/* xmap.c — the store's key -> extent hash table (see xmap.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "xmap.h"

static size_t slot_of(const struct hmm_xmap *m, uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return (size_t)k & (m->cap - 1);
}

int hmm_xmap_init(struct hmm_xmap *m, size_t hint)
{
	size_t cap = 64;

	while (cap < hint * 2)
		cap *= 2;
	m->v = calloc(cap, sizeof(*m->v));
	if (!m->v)
		return -ENOMEM;
	m->cap = cap;
	m->n = 0;
	return 0;
}

void hmm_xmap_fini(struct hmm_xmap *m)
{
	free(m->v);
	memset(m, 0, sizeof(*m));
}

static void raw_insert(struct hmm_xmap *m, const struct hmm_xent *e)
{
	size_t i = slot_of(m, e->key);

	while (m->v[i].used)
		i = (i + 1) & (m->cap - 1);
	m->v[i] = *e;
	m->v[i].used = 1;
}

int hmm_xmap_reserve(struct hmm_xmap *m, size_t n)
{
	struct hmm_xent *old = m->v;
	size_t cap = m->cap, oldcap = m->cap;

	while (cap < n * 2)
		cap *= 2;
	if (cap == oldcap)
		return 0;
	m->v = calloc(cap, sizeof(*m->v));
	if (!m->v) {
		m->v = old;
		return -ENOMEM;
	}
	m->cap = cap;
	for (size_t i = 0; i < oldcap; i++)
		if (old[i].used)
			raw_insert(m, &old[i]);
	free(old);
	return 0;
}

struct hmm_xent *hmm_xmap_get(struct hmm_xmap *m, uint64_t key)
{
	size_t i = slot_of(m, key);

	while (m->v[i].used) {
		if (m->v[i].key == key)
			return &m->v[i];
		i = (i + 1) & (m->cap - 1);
	}
	return NULL;
}

int hmm_xmap_put(struct hmm_xmap *m, const struct hmm_xent *e,
		 struct hmm_xent *old)
{
	struct hmm_xent *cur = hmm_xmap_get(m, e->key);

	if (cur) {
		*old = *cur;
		*cur = *e;
		cur->used = 1;
		return 0;
	}
	memset(old, 0, sizeof(*old));
	if (hmm_xmap_reserve(m, m->n + 1))
		return -ENOMEM;
	raw_insert(m, e);
	m->n++;
	return 0;
}

int hmm_xmap_del(struct hmm_xmap *m, uint64_t key, struct hmm_xent *old)
{
	struct hmm_xent *cur = hmm_xmap_get(m, key);
	size_t i, j, mask = m->cap - 1;

	if (!cur)
		return -ENOENT;
	*old = *cur;
	i = (size_t)(cur - m->v);
	/* backward shift: pull later members of the cluster into the hole */
	for (j = (i + 1) & mask; m->v[j].used; j = (j + 1) & mask) {
		size_t h = slot_of(m, m->v[j].key);

		if (((j - h) & mask) >= ((j - i) & mask)) {
			m->v[i] = m->v[j];
			i = j;
		}
	}
	memset(&m->v[i], 0, sizeof(m->v[i]));
	m->n--;
	return 0;
}

static int cmp_key(const void *a, const void *b)
{
	uint64_t x = ((const struct hmm_xent *)a)->key;
	uint64_t y = ((const struct hmm_xent *)b)->key;

	return (x > y) - (x < y);
}

struct hmm_xent *hmm_xmap_sorted(struct hmm_xmap *m, size_t *n)
{
	struct hmm_xent *out;
	size_t k = 0;

	*n = m->n;
	if (!m->n)
		return NULL;
	out = malloc(m->n * sizeof(*out));
	if (!out)
		return NULL;
	for (size_t i = 0; i < m->cap; i++)
		if (m->v[i].used)
			out[k++] = m->v[i];
	qsort(out, k, sizeof(*out), cmp_key);
	return out;
}
