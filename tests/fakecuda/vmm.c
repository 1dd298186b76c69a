// SPDX-License-Identifier: MIT
/*
 * vmm.c — the fake driver's virtual memory management: address
 * reservations (an mmap PROT_NONE range each), physical allocations (a
 * memfd each, counted against FAKECUDA_MEM), maps (mmap MAP_FIXED |
 * MAP_SHARED of the memfd at the reserved address, PROT_NONE until
 * cuMemSetAccess) and access.  The contracts checked are those of the
 * CUDA driver API reference for cuMemAddressReserve/Free, cuMemCreate/
 * Release, cuMemMap/Unmap, cuMemSetAccess and
 * cuMemGetAllocationGranularity.  Everything under fk.lock (fake.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake.h"

#define ULL(x) ((unsigned long long)(x))

static int prop_ok(const CUmemAllocationProp *p)
{
	return p && p->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
	       p->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
	       p->location.id == 0;
}

static int gran_ok(uint64_t v)
{
	return v % fk.gran == 0;
}

CUresult cuMemGetAllocationGranularity(size_t *g,
				       const CUmemAllocationProp *prop,
				       int option)
{
	CUresult r = fk_begin("cuMemGetAllocationGranularity", FK_INIT);

	if (r)
		return fk_end(r);
	if (!g || !prop_ok(prop) || (option != 0 && option != 1))
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "granularity "
				     "%p, prop (type, location) not (pinned, "
				     "device 0), or option %d", (void *)g,
				     option));
	*g = fk.gran;
	return fk_end(CUDA_SUCCESS);
}

/* ---- reservations ------------------------------------------------------ */

static struct fk_resv *resv_find(uintptr_t p, size_t n)
{
	struct fk_resv *v;

	for (v = fk.resv; v; v = v->next)
		if (p >= v->base && p - v->base <= v->size &&
		    n <= v->size - (p - v->base))
			return v;
	return NULL;
}

CUresult cuMemAddressReserve(unsigned long long *ptr, size_t size,
			     size_t align, unsigned long long addr,
			     unsigned long long flags)
{
	CUresult r = fk_begin("cuMemAddressReserve", FK_CTX);
	struct fk_resv *v;
	uintptr_t p, a;
	void *m;

	if (r)
		return fk_end(r);
	if (!ptr || !size || !gran_ok(size) || flags ||
	    (align & (align - 1)) || (align && !gran_ok(align)))
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "size %zu "
				     "(a multiple of the granularity %llu), "
				     "align %zu, flags %llu", size,
				     ULL(fk.gran), align, flags));
	align = align ? align : fk.gran;
	v = calloc(1, sizeof(*v));
	m = mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
		 MAP_NORESERVE, -1, 0);
	if (!v || m == MAP_FAILED) {
		free(v);
		return fk_end(CUDA_ERROR_OUT_OF_MEMORY);
	}
	p = (uintptr_t)m;
	a = (p + align - 1) & ~(uintptr_t)(align - 1);
	if (a > p)
		munmap(m, a - p);
	if (align - (a - p))
		munmap((void *)(a + size), align - (a - p));
	v->base = a;
	v->size = size;
	v->next = fk.resv;
	fk.resv = v;
	*ptr = a;
	return fk_end(CUDA_SUCCESS);
}

static int maps_within(uintptr_t p, size_t n)
{
	struct fk_map *m;
	int k = 0;

	for (m = fk.maps; m; m = m->next)
		k += m->va < p + n && p < m->va + m->size;
	return k;
}

CUresult cuMemAddressFree(unsigned long long ptr, size_t size)
{
	CUresult r = fk_begin("cuMemAddressFree", FK_CTX);
	struct fk_resv **pv, *v;
	int k;

	if (r)
		return fk_end(r);
	for (pv = &fk.resv; (v = *pv); pv = &v->next)
		if (v->base == ptr)
			break;
	if (!v || v->size != size)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "%#llx + %zu "
				     "is not a reservation (its size: %zu)",
				     ptr, size, v ? v->size : 0));
	k = maps_within(ptr, size);
	if (k)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "%#llx + %zu "
				     "still has %d mapping(s)", ptr, size, k));
	*pv = v->next;
	munmap((void *)v->base, v->size);
	free(v);
	return fk_end(CUDA_SUCCESS);
}

/* ---- physical allocations ---------------------------------------------- */

static struct fk_alloc *alloc_find(unsigned long long id)
{
	struct fk_alloc *a;

	for (a = fk.allocs; a; a = a->next)
		if (a->id == id)
			return a;
	return NULL;
}

static void alloc_free(struct fk_alloc *a)
{
	struct fk_alloc **pa;

	for (pa = &fk.allocs; *pa != a; pa = &(*pa)->next)
		;
	*pa = a->next;
	fk.st.dev_used -= a->size;
	close(a->fd);
	free(a);
}

CUresult cuMemCreate(unsigned long long *h, size_t size,
		     const CUmemAllocationProp *prop, unsigned long long flags)
{
	CUresult r = fk_begin("cuMemCreate", FK_CTX);
	struct fk_alloc *a;

	if (r)
		return fk_end(r);
	if (!h || !size || !gran_ok(size) || !prop_ok(prop) || flags)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "size %zu "
				     "(a multiple of the granularity %llu), "
				     "prop, flags %llu", size, ULL(fk.gran),
				     flags));
	if (size > fk.mem - fk.st.dev_used)
		return fk_end(CUDA_ERROR_OUT_OF_MEMORY);
	a = calloc(1, sizeof(*a));
	if (!a)
		return fk_end(CUDA_ERROR_OUT_OF_MEMORY);
	a->fd = memfd_create("fakecuda", MFD_CLOEXEC);
	if (a->fd < 0 || ftruncate(a->fd, size) < 0) {
		if (a->fd >= 0)
			close(a->fd);
		free(a);
		return fk_end(CUDA_ERROR_OUT_OF_MEMORY);
	}
	a->size = size;
	a->id = fk.next_id++;
	a->next = fk.allocs;
	fk.allocs = a;
	fk.st.dev_used += size;
	if (fk.st.dev_used > fk.st.dev_peak)
		fk.st.dev_peak = fk.st.dev_used;
	*h = a->id;
	return fk_end(CUDA_SUCCESS);
}

/* Documented: the memory is freed once every mapping of it is unmapped
 * and the handle released; releasing while mapped is allowed. */
CUresult cuMemRelease(unsigned long long h)
{
	CUresult r = fk_begin("cuMemRelease", FK_CTX);
	struct fk_alloc *a;

	if (r)
		return fk_end(r);
	a = alloc_find(h);
	if (!a || a->released)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "handle %#llx "
				     "%s", h, a ? "released twice" :
				     "unknown"));
	a->released = 1;
	if (!a->maps)
		alloc_free(a);
	return fk_end(CUDA_SUCCESS);
}

/* ---- maps and access --------------------------------------------------- */

CUresult cuMemMap(unsigned long long ptr, size_t size, size_t off,
		  unsigned long long h, unsigned long long flags)
{
	CUresult r = fk_begin("cuMemMap", FK_CTX);
	struct fk_alloc *a;
	struct fk_map *m;
	void *p;

	if (r)
		return fk_end(r);
	a = alloc_find(h);
	if (!a || a->released)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "handle %#llx "
				     "%s", h, a ? "already released" :
				     "unknown"));
	if (!size || !gran_ok(ptr) || !gran_ok(size) || !gran_ok(off) ||
	    flags || off > a->size || size > a->size - off)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "%#llx + %zu "
				     "at offset %zu of %zu bytes, flags %llu "
				     "(granularity %llu)", ptr, size, off,
				     a->size, flags, ULL(fk.gran)));
	if (!resv_find(ptr, size))
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "%#llx + %zu "
				     "is not inside one reservation", ptr,
				     size));
	if (maps_within(ptr, size))
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "%#llx + %zu "
				     "overlaps a mapping", ptr, size));
	m = calloc(1, sizeof(*m));
	if (!m)
		return fk_end(CUDA_ERROR_OUT_OF_MEMORY);
	p = mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED |
		 MAP_FIXED, a->fd, off);
	if (p == MAP_FAILED) {
		free(m);
		return fk_end(CUDA_ERROR_OUT_OF_MEMORY);
	}
	m->va = ptr;
	m->size = size;
	m->a = a;
	m->next = fk.maps;
	fk.maps = m;
	a->maps++;
	return fk_end(CUDA_SUCCESS);
}

static struct fk_map *map_at(uintptr_t p)
{
	struct fk_map *m;

	for (m = fk.maps; m; m = m->next)
		if (p >= m->va && p - m->va < m->size)
			return m;
	return NULL;
}

/* Is [p, p+n) whole mappings, end to end?  Returns how many, or 0. */
static int maps_whole(uintptr_t p, size_t n)
{
	uintptr_t cur = p;
	int k = 0;

	while (cur < p + n) {
		struct fk_map *m = map_at(cur);

		if (!m || m->va != cur || m->size > p + n - cur)
			return 0;
		cur += m->size;
		k++;
	}
	return k;
}

int fk_dev_ok(uintptr_t p, size_t n, int need)
{
	uintptr_t cur = p;

	if (fk_managed_ok(p, n))
		return 1;	/* managed memory: every access allowed */
	while (cur < p + n) {
		struct fk_map *m = map_at(cur);

		if (!m || (m->access & need) != need)
			return 0;
		cur = m->va + m->size;
	}
	return 1;
}

static void map_remove(struct fk_map *m)
{
	struct fk_map **pm;

	for (pm = &fk.maps; *pm != m; pm = &(*pm)->next)
		;
	*pm = m->next;
	/* back to a plain reservation */
	mmap((void *)m->va, m->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
	     MAP_NORESERVE | MAP_FIXED, -1, 0);
	if (--m->a->maps == 0 && m->a->released)
		alloc_free(m->a);
	free(m);
}

CUresult cuMemUnmap(unsigned long long ptr, size_t size)
{
	CUresult r = fk_begin("cuMemUnmap", FK_CTX);
	uintptr_t cur = ptr;

	if (r)
		return fk_end(r);
	if (!size || !maps_whole(ptr, size))
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "%#llx + %zu "
				     "is not whole mapped range(s)", ptr,
				     size));
	while (cur < ptr + size) {
		struct fk_map *m = map_at(cur);

		cur += m->size;
		map_remove(m);
	}
	return fk_end(CUDA_SUCCESS);
}

CUresult cuMemSetAccess(unsigned long long ptr, size_t size,
			const CUmemAccessDesc *desc, size_t count)
{
	CUresult r = fk_begin("cuMemSetAccess", FK_CTX);
	uintptr_t cur = ptr;
	int flags;

	if (r)
		return fk_end(r);
	if (!desc || count != 1 || desc->location.type != 1 ||
	    desc->location.id != 0 || (desc->flags != 0 &&
	    desc->flags != 1 && desc->flags != 3))
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "%zu "
				     "descriptor(s): want one for device 0 "
				     "with flags 0, 1 or 3", count));
	if (!size || !maps_whole(ptr, size))
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "%#llx + %zu "
				     "is not a fully mapped range", ptr,
				     size));
	flags = desc->flags;
	while (cur < ptr + size) {
		struct fk_map *m = map_at(cur);

		mprotect((void *)m->va, m->size,
			 flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ?
			 PROT_READ | PROT_WRITE : flags ? PROT_READ : PROT_NONE);
		m->access = flags;
		cur += m->size;
	}
	return fk_end(CUDA_SUCCESS);
}

/* ---- leaks ------------------------------------------------------------- */

void fk_vmm_leaks(int free_them)
{
	struct fk_alloc *a, *an;
	struct fk_resv *v, *vn;
	struct fk_map *m, *mn;

	for (m = fk.maps; m; m = mn) {
		mn = m->next;
		fk_leak("mapping %#llx + %zu still mapped", ULL(m->va),
			m->size);
		if (free_them)
			map_remove(m);
	}
	for (a = fk.allocs; a; a = an) {
		an = a->next;
		if (!a->released)
			fk_leak("allocation %#llx (%zu bytes) never released",
				a->id, a->size);
		if (free_them && !a->maps)
			alloc_free(a);
	}
	for (v = fk.resv; v; v = vn) {
		vn = v->next;
		fk_leak("reservation %#llx + %zu never freed", ULL(v->base),
			v->size);
		if (!free_them)
			continue;
		munmap((void *)v->base, v->size);
		free(v);
	}
	if (free_them)
		fk.resv = NULL;
}
