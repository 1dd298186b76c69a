// SPDX-License-Identifier: MIT
/*
 * managed.c — the fake driver's managed memory (unified memory):
 * cuMemAllocManaged / cuMemFree_v2, cuMemPrefetchAsync_v2 and
 * cuMemAdvise_v2 (CUDA 13's forms, with a CUmemLocation), and the
 * range attribute queries cuMemRangeGetAttribute(s).
 *
 * An allocation is anonymous host memory, so its pointer works on the
 * host and in a kernel (launch.c runs them on the host too).
 * Each 4 KiB page records where it is resident (host or the
 * device), the last location it was prefetched to, its preferred
 * location, read-mostly and accessed-by advice: what the attribute
 * queries report, so that a test can check where a library moved its
 * memory.  A prefetch moves the pages at once (its stream is only
 * checked: the real one runs in stream order, and the query "gives no
 * indication as to whether the prefetch operation has completed").
 * Device residency counts against FAKECUDA_MEM with cuMemCreate's
 * allocations; a prefetch that does not fit makes the "driver" move
 * other managed pages back to the host itself, as the real one may,
 * counted in driver_evicted: a library that keeps to its budget never
 * causes one.
 *
 * Contracts (the CUDA 13 driver API reference): size 0, a NULL pointer
 * or flags other than CU_MEM_ATTACH_GLOBAL / _HOST: INVALID_VALUE; a
 * range that is not managed memory, prefetch flags not 0, a location
 * type not device / host / host NUMA (accessed-by: device or host
 * only), an unknown advice or attribute, a data size not 4 (accessed-
 * by: a non-zero multiple of 4): INVALID_VALUE; a device id that is not
 * device 0: INVALID_DEVICE; an unknown stream: INVALID_HANDLE;
 * cuMemFree of anything but an allocation's start: INVALID_VALUE.  All
 * under fk.lock (fake.h).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fake.h"

#define FK_PAGE	4096ul
#define FK_BIG	(2ul << 20)	/* the driver's large page */
#define ULL(x)	((unsigned long long)(x))

/* ---- lookups ----------------------------------------------------------- */

static struct fk_managed *managed_find(uintptr_t p, size_t n)
{
	struct fk_managed *m;

	for (m = fk.managed; m; m = m->next)
		if (p >= m->base && p - m->base < m->size &&
		    n <= m->size - (p - m->base))
			return m;
	return NULL;
}

int fk_managed_ok(uintptr_t p, size_t n)
{
	return managed_find(p, n) != NULL;
}

/* [p, p+n) rounded out to pages (as the driver does) inside one
 * allocation: *m and the page range [*first, *end). */
static CUresult range(uintptr_t p, size_t n, struct fk_managed **m,
		      size_t *first, size_t *end)
{
	uintptr_t lo = p & ~(FK_PAGE - 1), hi = (p + n + FK_PAGE - 1) &
						~(FK_PAGE - 1);

	*m = n ? managed_find(lo, hi - lo) : NULL;
	if (!*m || (*m)->plain)
		return fk_bad(CUDA_ERROR_INVALID_VALUE, "%#llx + %zu is not "
			      "(all) managed memory of one allocation",
			      ULL(p), n);
	*first = (lo - (*m)->base) / FK_PAGE;
	*end = (hi - (*m)->base) / FK_PAGE;
	return CUDA_SUCCESS;
}

/* A location as FK_LOC_*, or the error for it.  accessed_by: the
 * accessed-by advice takes the device or the host, nothing else. */
static CUresult location(CUmemLocation l, int accessed_by, int *loc)
{
	switch (l.type) {
	case CU_MEM_LOCATION_TYPE_DEVICE:
		if (l.id != 0)
			return fk_bad(CUDA_ERROR_INVALID_DEVICE, "location "
				      "device %d (the fake has device 0)",
				      l.id);
		*loc = FK_LOC_DEV;
		return CUDA_SUCCESS;
	case CU_MEM_LOCATION_TYPE_HOST_NUMA:
		if (l.id != 0)
			return fk_bad(CUDA_ERROR_INVALID_VALUE, "host NUMA "
				      "node %d (the fake has node 0)", l.id);
		/* fall through */
	case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
		if (accessed_by)
			break;
		/* fall through */
	case CU_MEM_LOCATION_TYPE_HOST:
		*loc = FK_LOC_CPU;
		return CUDA_SUCCESS;
	}
	return fk_bad(CUDA_ERROR_INVALID_VALUE, "location type %d", l.type);
}

/* ---- allocation --------------------------------------------------------- */

static void managed_free(struct fk_managed *m)
{
	struct fk_managed **pm;
	size_t i;

	for (pm = &fk.managed; *pm != m; pm = &(*pm)->next)
		;
	*pm = m->next;
	for (i = 0; i < m->npages; i++)
		fk.st.managed_dev -= m->at_dev[i] ? FK_PAGE : 0;
	if (!m->plain)
		fk.st.managed_bytes -= m->size;
	munmap((void *)m->base, m->size);
	free(m->last);
	free(m);
}

static CUresult alloc(unsigned long long *dptr, size_t bytes,
		      unsigned flags, int plain);

CUresult cuMemAllocManaged(unsigned long long *dptr, size_t bytes,
			   unsigned flags)
{
	CUresult r = fk_begin("cuMemAllocManaged", FK_CTX);

	if (r)
		return fk_end(r);
	if (!dptr || !bytes || (flags != CU_MEM_ATTACH_GLOBAL &&
				flags != CU_MEM_ATTACH_HOST))
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "dptr %p, "
				     "bytesize %zu (not 0), flags %#x (one of "
				     "CU_MEM_ATTACH_GLOBAL, _HOST)",
				     (void *)dptr, bytes, flags));
	if (fk.nomanaged)
		return fk_end(CUDA_ERROR_NOT_SUPPORTED);
	return fk_end(alloc(dptr, bytes, flags, 0));
}

/*
 * cuMemAlloc_v2: plain device memory (hmm-train's activations, kernels
 * run by launch.c).  Here it is anonymous host memory like a managed
 * allocation, freed by cuMemFree_v2 the same way, but no advice,
 * prefetch or range query takes it, and it is in no managed count.
 */
CUresult cuMemAlloc_v2(unsigned long long *dptr, size_t bytes)
{
	CUresult r = fk_begin("cuMemAlloc_v2", FK_CTX);

	if (r)
		return fk_end(r);
	if (!dptr || !bytes)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "dptr %p, "
				     "bytesize %zu (not 0)", (void *)dptr,
				     bytes));
	return fk_end(alloc(dptr, bytes, CU_MEM_ATTACH_GLOBAL, 1));
}

static CUresult alloc(unsigned long long *dptr, size_t bytes,
		      unsigned flags, int plain)
{
	struct fk_managed *m;
	size_t size, np;
	void *p;

	size = (bytes + FK_PAGE - 1) & ~(FK_PAGE - 1);
	np = size / FK_PAGE;
	m = calloc(1, sizeof(*m));
	/* at a 2 MiB boundary, as the driver places large allocations */
	p = mmap(NULL, size + FK_BIG, PROT_READ | PROT_WRITE, MAP_PRIVATE |
		 MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p != MAP_FAILED) {
		uintptr_t a = ((uintptr_t)p + FK_BIG - 1) & ~(FK_BIG - 1);

		if (a > (uintptr_t)p)
			munmap(p, a - (uintptr_t)p);
		munmap((void *)(a + size), (uintptr_t)p + FK_BIG - a);
		p = (void *)a;
	}
	if (m)	/* one block: last, pref, at_dev, rmostly, accby */
		m->last = malloc(np * 5);
	if (!m || !m->last || p == MAP_FAILED) {
		if (p != MAP_FAILED)
			munmap(p, size);
		free(m ? m->last : NULL);
		free(m);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	m->pref = m->last + np;
	m->at_dev = (unsigned char *)m->pref + np;
	m->rmostly = m->at_dev + np;
	m->accby = m->rmostly + np;
	memset(m->last, FK_LOC_NONE, np * 2);
	memset(m->at_dev, 0, np * 3);
	m->base = (uintptr_t)p;
	m->size = size;
	m->flags = flags;
	m->npages = np;
	m->plain = plain;
	m->next = fk.managed;
	fk.managed = m;
	if (!plain)
		fk.st.managed_bytes += size;
	*dptr = m->base;
	return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(unsigned long long dptr)
{
	CUresult r = fk_begin("cuMemFree_v2", FK_CTX);
	struct fk_managed *m;

	if (r)
		return fk_end(r);
	m = managed_find(dptr, 1);
	if (!m || m->base != dptr)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "%#llx is not "
				     "the start of an allocation (cuMemAlloc"
				     "Managed's or cuMemAlloc_v2's)",
				     ULL(dptr)));
	managed_free(m);
	return fk_end(CUDA_SUCCESS);
}

/* ---- prefetch ------------------------------------------------------------ */

/* Makes room for `need` more device bytes: the "driver" moves managed
 * pages outside [skip, skip + n pages) back to the host. */
static void driver_evict(struct fk_managed *skip, size_t first, size_t end,
			 uint64_t need)
{
	uint64_t cap = fk.mem - fk.st.dev_used;
	struct fk_managed *m;
	size_t i;

	for (m = fk.managed; m && fk.st.managed_dev + need > cap;
	     m = m->next)
		for (i = 0; i < m->npages && fk.st.managed_dev + need > cap;
		     i++) {
			if (!m->at_dev[i] || (m == skip && i >= first &&
					      i < end))
				continue;
			m->at_dev[i] = 0;
			fk.st.managed_dev -= FK_PAGE;
			fk.st.driver_evicted += FK_PAGE;
		}
}

/* A prefetch (fk.lock held): cuMemPrefetchAsync_v2's, and the second
 * half of cuMemDiscardAndPrefetchBatchAsync's. */
static CUresult prefetch(unsigned long long p, size_t n, CUmemLocation l,
			 unsigned flags, void *ps)
{
	struct fk_managed *m;
	size_t first, end, i;
	uint64_t need = 0;
	CUresult r;
	int loc;

	if (flags)
		return fk_bad(CUDA_ERROR_INVALID_VALUE, "flags %#x, must be 0",
			      flags);
	if (!fk_stream_ok(ps))
		return fk_bad(CUDA_ERROR_INVALID_HANDLE, "stream %p", ps);
	r = range(p, n, &m, &first, &end);
	if (!r)
		r = location(l, 0, &loc);
	if (r)
		return r;
	for (i = first; i < end; i++)
		need += loc == FK_LOC_DEV && !m->at_dev[i] ? FK_PAGE : 0;
	if (need)
		driver_evict(m, first, end, need);
	if (loc == FK_LOC_DEV && fk.st.managed_dev + need >
	    fk.mem - fk.st.dev_used)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (i = first; i < end; i++) {
		if (loc == FK_LOC_DEV && !m->at_dev[i])
			fk.st.managed_dev += FK_PAGE;
		else if (loc == FK_LOC_CPU && m->at_dev[i])
			fk.st.managed_dev -= FK_PAGE;
		m->at_dev[i] = loc == FK_LOC_DEV;
		m->last[i] = loc;
	}
	if (fk.st.managed_dev > fk.st.managed_dev_peak)
		fk.st.managed_dev_peak = fk.st.managed_dev;
	if (loc == FK_LOC_DEV)
		fk.st.prefetch_dev += (end - first) * FK_PAGE;
	else
		fk.st.prefetch_host += (end - first) * FK_PAGE;
	return CUDA_SUCCESS;
}

CUresult cuMemPrefetchAsync_v2(unsigned long long p, size_t n,
			       CUmemLocation l, unsigned flags, void *ps)
{
	CUresult r = fk_begin("cuMemPrefetchAsync_v2", FK_CTX);

	return fk_end(r ? r : prefetch(p, n, l, flags, ps));
}

/* ---- discards (CUDA 13) --------------------------------------------------- */

/*
 * cuMemDiscardBatchAsync and cuMemDiscardAndPrefetchBatchAsync.  A
 * discarded range's contents are "indeterminate" until written or
 * prefetched: the fake fills it with 0xa5 bytes, in stream order (on the
 * stream's worker, after FAKECUDA_DELAY_US), so a library that reads
 * what it discarded, or lets anything write the range before the discard
 * ran, sees them; and it is no longer resident anywhere (the driver
 * frees its device pages without a copy).  A range freed before its
 * queued discard ran is a violation (cuMemFree only "may" wait).  How finely the
 * driver discards is not documented: the fake takes the whole 2 MiB
 * pages around each range, so a library that discards less than a
 * 2 MiB page loses its neighbours' bytes here.  Contracts: flags not 0,
 * count 0, a NULL array, the legacy NULL stream, a range not managed:
 * INVALID_VALUE; prefetch locations as cuMemPrefetchAsync's, their
 * indexes starting at 0, rising, below count, no more than count.
 */
struct fill {
	uintptr_t lo, hi;
};

/* On the stream's worker, fk.lock held. */
static void fill_run(void *arg)
{
	struct fill *f = arg;

	if (managed_find(f->lo, f->hi - f->lo))
		memset((void *)f->lo, 0xa5, f->hi - f->lo);
	else
		fk_bad(0, "stream worker: a discard of %#lx + %lu ran after "
		       "its memory was freed", (unsigned long)f->lo,
		       (unsigned long)(f->hi - f->lo));
	free(f);
}

static CUresult discard(const char *fn, unsigned long long *dptrs,
			size_t *sizes, size_t count, unsigned long long flags,
			void *ps)
{
	struct fk_managed *m;
	size_t i, first, end;
	uintptr_t lo, hi;
	struct fill *f;

	if (fk.nodiscard)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (flags || !count || !dptrs || !sizes || !ps)
		return fk_bad(CUDA_ERROR_INVALID_VALUE, "%s: flags %#llx "
			      "(must be 0), count %zu, dptrs %p, sizes %p, "
			      "stream %p (not the legacy NULL stream)", fn,
			      flags, count, (void *)dptrs, (void *)sizes, ps);
	if (!fk_stream_ok(ps))
		return fk_bad(CUDA_ERROR_INVALID_HANDLE, "stream %p", ps);
	for (i = 0; i < count; i++)
		if (range(dptrs[i], sizes[i], &m, &first, &end))
			return CUDA_ERROR_INVALID_VALUE;	/* said */
	for (i = 0; i < count; i++) {
		range(dptrs[i], sizes[i], &m, &first, &end);
		lo = (m->base + first * FK_PAGE) & ~(FK_BIG - 1);
		hi = (m->base + end * FK_PAGE + FK_BIG - 1) & ~(FK_BIG - 1);
		lo = lo < m->base ? m->base : lo;
		hi = hi > m->base + m->size ? m->base + m->size : hi;
		f = malloc(sizeof(*f));
		if (!f)
			return CUDA_ERROR_OUT_OF_MEMORY;
		*f = (struct fill){ lo, hi };
		if (fk_stream_call(ps, fill_run, f)) {
			free(f);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		for (first = (lo - m->base) / FK_PAGE;
		     first < (hi - m->base) / FK_PAGE; first++) {
			fk.st.managed_dev -= m->at_dev[first] ? FK_PAGE : 0;
			m->at_dev[first] = 0;
		}
		fk.st.discarded += sizes[i];
	}
	return CUDA_SUCCESS;
}

CUresult cuMemDiscardBatchAsync(unsigned long long *dptrs, size_t *sizes,
				size_t count, unsigned long long flags,
				void *ps)
{
	CUresult r = fk_begin("cuMemDiscardBatchAsync", FK_CTX);

	if (!r)
		r = discard("cuMemDiscardBatchAsync", dptrs, sizes, count,
			    flags, ps);
	return fk_end(r);
}

CUresult cuMemDiscardAndPrefetchBatchAsync(unsigned long long *dptrs,
					   size_t *sizes, size_t count,
					   CUmemLocation *locs, size_t *idxs,
					   size_t nlocs,
					   unsigned long long flags, void *ps)
{
	CUresult r = fk_begin("cuMemDiscardAndPrefetchBatchAsync", FK_CTX);
	size_t i, j;
	int loc;

	if (r)
		return fk_end(r);
	if (!locs || !idxs || !nlocs || nlocs > count || idxs[0])
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "prefetch "
				     "locations %p, indexes %p, %zu of them "
				     "(1..count %zu, the first index 0)",
				     (void *)locs, (void *)idxs, nlocs,
				     count));
	for (i = 0; i < nlocs; i++)
		if ((i && idxs[i] <= idxs[i - 1]) || idxs[i] >= count ||
		    location(locs[i], 0, &loc))
			return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE,
					     "prefetch location %zu: index "
					     "%zu of %zu", i, idxs[i], count));
	r = discard("cuMemDiscardAndPrefetchBatchAsync", dptrs, sizes, count,
		    flags, ps);
	for (i = 0, j = 0; !r && i < count; i++) {
		while (j + 1 < nlocs && idxs[j + 1] <= i)
			j++;
		r = prefetch(dptrs[i], sizes[i], locs[j], 0, ps);
	}
	return fk_end(r);
}

/* ---- advice -------------------------------------------------------------- */

CUresult cuMemAdvise_v2(unsigned long long p, size_t n, int advice,
			CUmemLocation l)
{
	CUresult r = fk_begin("cuMemAdvise_v2", FK_CTX);
	struct fk_managed *m;
	size_t first, end, i;
	int loc = FK_LOC_NONE;

	if (r)
		return fk_end(r);
	if (advice < CU_MEM_ADVISE_SET_READ_MOSTLY ||
	    advice > CU_MEM_ADVISE_UNSET_ACCESSED_BY)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "advice %d",
				     advice));
	r = range(p, n, &m, &first, &end);
	/* the location is ignored for read-mostly and unset-preferred */
	if (!r && advice != CU_MEM_ADVISE_SET_READ_MOSTLY &&
	    advice != CU_MEM_ADVISE_UNSET_READ_MOSTLY &&
	    advice != CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION)
		r = location(l, advice >= CU_MEM_ADVISE_SET_ACCESSED_BY, &loc);
	if (r)
		return fk_end(r);
	for (i = first; i < end; i++)
		switch (advice) {
		case CU_MEM_ADVISE_SET_READ_MOSTLY:
		case CU_MEM_ADVISE_UNSET_READ_MOSTLY:
			m->rmostly[i] = advice == CU_MEM_ADVISE_SET_READ_MOSTLY;
			break;
		case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
			m->pref[i] = loc;
			break;
		case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
			m->pref[i] = FK_LOC_NONE;
			break;
		case CU_MEM_ADVISE_SET_ACCESSED_BY:
			m->accby[i] |= loc == FK_LOC_DEV ? 1 : 2;
			break;
		default:
			m->accby[i] &= ~(loc == FK_LOC_DEV ? 1 : 2);
		}
	fk.st.advises++;
	return fk_end(CUDA_SUCCESS);
}

/* ---- attributes ---------------------------------------------------------- */

/* The one value of a per-page array over the range, or FK_LOC_NONE. */
static int same(const signed char *v, size_t first, size_t end)
{
	size_t i;

	for (i = first + 1; i < end; i++)
		if (v[i] != v[first])
			return FK_LOC_NONE;
	return v[first];
}

static int loc_type(int loc)
{
	return loc == FK_LOC_DEV ? CU_MEM_LOCATION_TYPE_DEVICE :
	       loc == FK_LOC_CPU ? CU_MEM_LOCATION_TYPE_HOST :
	       CU_MEM_LOCATION_TYPE_INVALID;
}

static CUresult attribute(void *data, size_t size, int attr, uintptr_t p,
			  size_t n)
{
	struct fk_managed *m;
	size_t first, end, i, k;
	int *out = data, v;
	unsigned all;
	CUresult r;

	if (!data || !size || size % 4 ||
	    (attr != CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY && size != 4))
		return fk_bad(CUDA_ERROR_INVALID_VALUE, "data %p, dataSize "
			      "%zu (4; accessed-by: a multiple of 4)", data,
			      size);
	r = range(p, n, &m, &first, &end);
	if (r)
		return r;
	switch (attr) {
	case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY:
		for (v = 1, i = first; i < end; i++)
			v &= m->rmostly[i];
		break;
	case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
	case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID:
		v = same(m->pref, first, end);
		break;
	case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
		v = loc_type(same(m->pref, first, end));
		break;
	case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
	case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID:
		v = same(m->last, first, end);
		break;
	case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE:
		v = loc_type(same(m->last, first, end));
		break;
	case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY:
		for (all = 3, i = first; i < end; i++)
			all &= m->accby[i];
		/* device ids; the host is not a device id here */
		for (k = 0; k < size / 4; k++)
			out[k] = CU_DEVICE_INVALID;
		if (all & 1)
			out[0] = 0;
		return CUDA_SUCCESS;
	default:
		return fk_bad(CUDA_ERROR_INVALID_VALUE, "attribute %d", attr);
	}
	*out = v;
	return CUDA_SUCCESS;
}

CUresult cuMemRangeGetAttribute(void *data, size_t size, int attr,
				unsigned long long p, size_t n)
{
	CUresult r = fk_begin("cuMemRangeGetAttribute", FK_CTX);

	if (!r)
		r = attribute(data, size, attr, p, n);
	return fk_end(r);
}

CUresult cuMemRangeGetAttributes(void **data, size_t *sizes, int *attrs,
				 size_t nattr, unsigned long long p, size_t n)
{
	CUresult r = fk_begin("cuMemRangeGetAttributes", FK_CTX);
	size_t i;

	if (!r && (!data || !sizes || !attrs || !nattr))
		r = fk_bad(CUDA_ERROR_INVALID_VALUE, "data %p, dataSizes %p, "
			   "attributes %p, numAttributes %zu", (void *)data,
			   (void *)sizes, (void *)attrs, nattr);
	for (i = 0; !r && i < nattr; i++)
		r = attribute(data[i], sizes[i], attrs[i], p, n);
	return fk_end(r);
}

/* ---- leaks --------------------------------------------------------------- */

void fk_managed_leaks(int free_them)
{
	struct fk_managed *m, *mn;

	for (m = fk.managed; m; m = mn) {
		mn = m->next;
		fk_leak("managed allocation %#llx (%zu bytes) never freed",
			ULL(m->base), m->size);
		if (free_them)
			managed_free(m);
	}
}
