// SPDX-License-Identifier: MIT
/* test_alloc — the extent allocator: first fit, coalescing, exhaustion
 * (-ENOSPC), fragmentation, double free, reserve, quarantine, and a
 * random workload checked against a bitmap. */
#include "t.h"
#include "extent.h"

#define U 4096

static int check(const struct hmm_ext *a, const uint8_t *used)
{
	uint64_t free_units = 0, pos = 0;

	for (size_t i = 0; i < a->nfree; i++) {
		const struct hmm_ext_range *r = &a->free[i];

		if (!r->len || r->off < pos || (i && r->off == pos))
			return 0;	/* unsorted, empty or not coalesced */
		for (uint64_t k = r->off; k < r->off + r->len; k++)
			if (used[k])
				return 0;
		free_units += r->len;
		pos = r->off + r->len;
	}
	for (uint64_t k = 0; k < a->size; k++)
		if (!used[k])
			free_units--;
	return free_units == 0 && a->free_units + 0 ==
	       a->size - hmm_ext_used(a);
}

int main(void)
{
	struct hmm_ext a;
	uint64_t off[8], x;
	static uint8_t used[U];
	uint64_t offs[U], lens[U], seed = 1;
	size_t live = 0;
	int bad = 0;

	t_eq(hmm_ext_init(&a, 100), 0, "init 100 units");
	t_eq(hmm_ext_alloc(&a, 0, &x), -EINVAL, "zero length");
	t_eq(hmm_ext_alloc(&a, 101, &x), -ENOSPC, "larger than all");
	for (int i = 0; i < 5; i++)
		hmm_ext_alloc(&a, 20, &off[i]);
	t_ok(off[0] == 0 && off[1] == 20 && off[4] == 80, "first fit in order");
	t_eq(hmm_ext_used(&a), 100, "full");
	t_eq(hmm_ext_alloc(&a, 1, &x), -ENOSPC, "exhausted -> -ENOSPC");

	/* fragmentation: free every other one: 60 free, none longer than 20 */
	hmm_ext_free(&a, off[0], 20);
	hmm_ext_free(&a, off[2], 20);
	hmm_ext_free(&a, off[4], 20);
	t_eq(a.free_units, 60, "60 units free");
	t_eq(hmm_ext_largest(&a), 20, "largest run 20");
	t_eq(hmm_ext_alloc(&a, 21, &x), -ENOSPC, "fragmented: 21 does not fit");
	t_eq(hmm_ext_alloc(&a, 20, &x), 0, "20 fits");
	t_eq(x, 0, "reused the first hole");
	t_eq(hmm_ext_free(&a, 45, 3), -EINVAL, "free of a free range");
	t_eq(hmm_ext_free(&a, 50, 20), -EINVAL, "overlapping double free");
	t_eq(hmm_ext_free(&a, 95, 10), -EINVAL, "past the end");
	/* coalescing: free the middle ones, one run of 80 appears */
	hmm_ext_free(&a, off[1], 20);
	hmm_ext_free(&a, off[3], 20);
	t_eq(a.nfree, 1, "coalesced into one range");
	t_eq(hmm_ext_largest(&a), 80, "run of 80");

	/* reserve */
	t_eq(hmm_ext_reserve(&a, 50, 10), 0, "reserve a middle range");
	t_eq(a.nfree, 2, "split in two");
	t_eq(hmm_ext_reserve(&a, 55, 1), -EEXIST, "reserve of used space");
	t_eq(hmm_ext_reserve(&a, 20, 30), 0, "reserve a prefix");
	t_eq(hmm_ext_reserve(&a, 90, 10), 0, "reserve a suffix");
	t_eq(hmm_ext_reserve(&a, 60, 30), 0, "reserve a whole range");
	t_eq(a.nfree, 0, "nothing free");

	/* quarantine: deferred space stays used until release */
	t_eq(hmm_ext_defer(&a, 60, 30), 0, "defer");
	t_eq(hmm_ext_used(&a), 100, "deferred counts as used");
	t_eq(hmm_ext_alloc(&a, 1, &x), -ENOSPC, "deferred is not reusable");
	hmm_ext_release(&a);
	t_eq(hmm_ext_used(&a), 70, "released");
	t_eq(a.quar_units, 0, "quarantine empty");
	t_eq(hmm_ext_alloc(&a, 30, &x), 0, "reusable after release");
	t_eq(x, 60, "at the released place");
	hmm_ext_fini(&a);

	/* random workload against a bitmap */
	hmm_ext_init(&a, U);
	for (int step = 0; step < 200000; step++) {
		uint64_t r = t_rand(&seed);

		if (live && (r & 1 || live == U)) {
			size_t i = (r >> 8) % live;

			if (hmm_ext_free(&a, offs[i], lens[i]))
				bad++;
			memset(used + offs[i], 0, lens[i]);
			offs[i] = offs[--live];
			lens[i] = lens[live];
		} else {
			uint64_t len = 1 + (r >> 16) % 37;
			int e = hmm_ext_alloc(&a, len, &x);

			if (e == 0) {
				for (uint64_t k = x; k < x + len; k++)
					bad += used[k];
				memset(used + x, 1, len);
				offs[live] = x;
				lens[live++] = len;
			} else if (e != -ENOSPC || hmm_ext_largest(&a) >= len) {
				bad++;
			}
		}
		if (step % 5000 == 0 && !check(&a, used))
			bad++;
	}
	t_eq(bad, 0, "random alloc/free never overlaps, -ENOSPC only when no run fits");
	t_ok(check(&a, used), "free list sorted, coalesced, counts exact");
	while (live--)
		hmm_ext_free(&a, offs[live], lens[live]);
	t_eq(a.nfree, 1, "all freed: one range again");
	t_eq(a.free_units, U, "all units free");
	hmm_ext_fini(&a);
	return t_done();
}
