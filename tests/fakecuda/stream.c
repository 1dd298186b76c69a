// SPDX-License-Identifier: MIT
/*
 * stream.c — the fake driver's streams, events, host registration and
 * asynchronous copies.
 *
 * Each stream has a worker thread that runs its operations in the order
 * they were queued, each after FAKECUDA_DELAY_US: a copy between device
 * memory and page-locked (cuMemHostRegister'ed) host memory is queued
 * and runs later, reading or writing the host buffer only then, as DMA
 * does; an event completes when the worker reaches it, after the work
 * queued before it.  A copy from or to pageable memory is done at once
 * after the stream drained, as the driver documents for pageable memory.
 * A queued copy whose device range was unmapped, or whose host range was
 * unregistered, by the time it runs is a violation and a sticky
 * CUDA_ERROR_ILLEGAL_ADDRESS for the context, as a real fault would be.
 * A kernel launch or a cuBLAS product (launch.c) is an FK_OP_CALL run
 * in the same order.  Everything under fk.lock (fake.h); workers hold
 * it while they copy or run a call.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake.h"

/* ---- lookups ----------------------------------------------------------- */

static struct fk_stream *stream_find(void *p)
{
	struct fk_stream *s;

	for (s = fk.streams; s; s = s->next)
		if ((void *)s == p)
			return s;
	return NULL;
}

static struct fk_event *event_find(void *p)
{
	struct fk_event *e;

	for (e = fk.events; e; e = e->next)
		if ((void *)e == p)
			return e;
	return NULL;
}

int fk_stream_ok(void *ps)
{
	return !ps || stream_find(ps);
}

/* The registration holding all of [p, p+n), or NULL. */
static struct fk_host *host_find(uintptr_t p, size_t n)
{
	struct fk_host *h;

	for (h = fk.hosts; h; h = h->next)
		if (p >= h->p && p - h->p <= h->size &&
		    n <= h->size - (p - h->p))
			return h;
	return NULL;
}

/* ---- the worker -------------------------------------------------------- */

static void op_copy(struct fk_op *op)
{
	uintptr_t host = op->kind == FK_OP_H2D ? op->src : op->dst;
	uintptr_t dev = op->kind == FK_OP_H2D ? op->dst : op->src;

	if (fk.sticky)
		return;		/* a faulted context runs nothing */
	if (!host_find(host, op->n)) {
		fk.sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
		fk_bad(0, "stream worker: async copy of %zu bytes ran after "
		       "host %#lx was unregistered", op->n,
		       (unsigned long)host);
		return;
	}
	if (!fk_dev_ok(dev, op->n, op->kind == FK_OP_H2D ? 3 : 1)) {
		fk.sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
		fk_bad(0, "stream worker: async copy of %zu bytes ran after "
		       "device %#lx was unmapped (or lost access)", op->n,
		       (unsigned long)dev);
		return;
	}
	memcpy((void *)op->dst, (const void *)op->src, op->n);
	fk.st.async_copies++;
}

static void *stream_main(void *arg)
{
	struct fk_stream *s = arg;

	pthread_mutex_lock(&fk.lock);
	for (;;) {
		struct fk_op *op;

		while (!s->head && !s->stop)
			pthread_cond_wait(&fk.cond, &fk.lock);
		op = s->head;
		if (!op)
			break;
		s->busy = 1;
		if (fk.delay_us) {
			pthread_mutex_unlock(&fk.lock);
			usleep(fk.delay_us);
			pthread_mutex_lock(&fk.lock);
		}
		if (op->kind == FK_OP_EVENT) {
			if (op->gen > op->ev->done)
				op->ev->done = op->gen;
		} else if (op->kind == FK_OP_CALL) {
			if (!fk.sticky)
				op->fn(op->arg);
		} else {
			op_copy(op);
		}
		s->head = op->next;
		if (!s->head)
			s->tail = NULL;
		s->busy = 0;
		free(op);
		pthread_cond_broadcast(&fk.cond);
	}
	pthread_mutex_unlock(&fk.lock);
	return NULL;
}

/* Waits (dropping fk.lock) until s, or every stream when s is NULL, ran
 * everything queued. */
static void drain(struct fk_stream *s)
{
	struct fk_stream *t;

again:
	for (t = fk.streams; t; t = t->next)
		if ((!s || t == s) && t->head) {
			pthread_cond_wait(&fk.cond, &fk.lock);
			goto again;
		}
}

static CUresult push(struct fk_stream *s, int kind, uintptr_t dst,
		     uintptr_t src, size_t n, struct fk_event *ev,
		     unsigned long gen)
{
	struct fk_op *op = calloc(1, sizeof(*op));

	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*op = (struct fk_op){ NULL, kind, dst, src, n, ev, gen, NULL, NULL };
	if (s->tail)
		s->tail->next = op;
	else
		s->head = op;
	s->tail = op;
	pthread_cond_broadcast(&fk.cond);
	return CUDA_SUCCESS;
}

CUresult fk_stream_call(void *ps, void (*fn)(void *), void *arg)
{
	struct fk_stream *s = stream_find(ps);
	CUresult r;

	if (ps && !s)
		return fk_bad(CUDA_ERROR_INVALID_HANDLE, "stream %p", ps);
	if (!s) {
		drain(NULL);
		if (!fk.sticky)
			fn(arg);
		return fk.sticky;
	}
	r = push(s, FK_OP_CALL, 0, 0, 0, NULL, 0);
	if (!r) {
		s->tail->fn = fn;
		s->tail->arg = arg;
	}
	return r;
}

/* ---- streams ----------------------------------------------------------- */

CUresult cuStreamCreate(void **ps, unsigned flags)
{
	CUresult r = fk_begin("cuStreamCreate", FK_CTX);
	struct fk_stream *s;

	if (r)
		return fk_end(r);
	if (!ps || flags > 1)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "phStream %p, "
				     "flags %#x", (void *)ps, flags));
	s = calloc(1, sizeof(*s));
	if (!s || pthread_create(&s->thr, NULL, stream_main, s)) {
		free(s);
		return fk_end(CUDA_ERROR_OUT_OF_MEMORY);
	}
	s->next = fk.streams;
	fk.streams = s;
	*ps = s;
	return fk_end(CUDA_SUCCESS);
}

/* Lets s finish its work, stops and frees it (lock held, dropped while
 * joining). */
static void stream_free(struct fk_stream *s)
{
	struct fk_stream **ps;

	drain(s);
	for (ps = &fk.streams; *ps != s; ps = &(*ps)->next)
		;
	*ps = s->next;
	s->stop = 1;
	pthread_cond_broadcast(&fk.cond);
	pthread_mutex_unlock(&fk.lock);
	pthread_join(s->thr, NULL);
	pthread_mutex_lock(&fk.lock);
	free(s);
}

CUresult cuStreamDestroy_v2(void *p)
{
	CUresult r = fk_begin("cuStreamDestroy_v2", FK_CTX);
	struct fk_stream *s;

	if (r)
		return fk_end(r);
	s = stream_find(p);
	if (!s)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_HANDLE, "stream %p",
				     p));
	stream_free(s);
	return fk_end(CUDA_SUCCESS);
}

CUresult cuStreamSynchronize(void *p)
{
	CUresult r = fk_begin("cuStreamSynchronize", FK_CTX);
	struct fk_stream *s;

	if (r)
		return fk_end(r);
	s = stream_find(p);
	if (p && !s)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_HANDLE, "stream %p",
				     p));
	drain(s);
	return fk_end(fk.sticky);
}

CUresult cuCtxSynchronize(void)
{
	CUresult r = fk_begin("cuCtxSynchronize", FK_CTX);

	if (r)
		return fk_end(r);
	drain(NULL);
	return fk_end(fk.sticky);
}

/* ---- events ------------------------------------------------------------ */

CUresult cuEventCreate(void **pe, unsigned flags)
{
	CUresult r = fk_begin("cuEventCreate", FK_CTX);
	struct fk_event *e;

	if (r)
		return fk_end(r);
	if (!pe || (flags & ~7u) || ((flags & 4) && !(flags & 2)))
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "phEvent %p, "
				     "flags %#x", (void *)pe, flags));
	e = calloc(1, sizeof(*e));
	if (!e)
		return fk_end(CUDA_ERROR_OUT_OF_MEMORY);
	e->next = fk.events;
	fk.events = e;
	*pe = e;
	return fk_end(CUDA_SUCCESS);
}

static void event_free(struct fk_event *e)
{
	struct fk_event **pe;

	while (e->done < e->gen)	/* its record still queued */
		pthread_cond_wait(&fk.cond, &fk.lock);
	for (pe = &fk.events; *pe != e; pe = &(*pe)->next)
		;
	*pe = e->next;
	free(e);
}

CUresult cuEventDestroy_v2(void *p)
{
	CUresult r = fk_begin("cuEventDestroy_v2", FK_CTX);
	struct fk_event *e;

	if (r)
		return fk_end(r);
	e = event_find(p);
	if (!e)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_HANDLE, "event %p",
				     p));
	event_free(e);
	return fk_end(CUDA_SUCCESS);
}

CUresult cuEventRecord(void *pe, void *ps)
{
	CUresult r = fk_begin("cuEventRecord", FK_CTX);
	struct fk_event *e;
	struct fk_stream *s;

	if (r)
		return fk_end(r);
	e = event_find(pe);
	s = stream_find(ps);
	if (!e || (ps && !s))
		return fk_end(fk_bad(CUDA_ERROR_INVALID_HANDLE, "event %p, "
				     "stream %p", pe, ps));
	if (!s) {			/* the NULL stream: after everything */
		drain(NULL);
		e->done = ++e->gen;
		return fk_end(CUDA_SUCCESS);
	}
	r = push(s, FK_OP_EVENT, 0, 0, 0, e, e->gen + 1);
	if (!r)
		e->gen++;
	return fk_end(r);
}

/* Never recorded: returns at once, as documented. */
CUresult cuEventSynchronize(void *pe)
{
	CUresult r = fk_begin("cuEventSynchronize", FK_CTX);
	struct fk_event *e;

	if (r)
		return fk_end(r);
	e = event_find(pe);
	if (!e)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_HANDLE, "event %p",
				     pe));
	while (e->done < e->gen && !fk.sticky)
		pthread_cond_wait(&fk.cond, &fk.lock);
	return fk_end(fk.sticky);
}

/* ---- host registration ------------------------------------------------- */

CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags)
{
	CUresult r = fk_begin("cuMemHostRegister_v2", FK_CTX);
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(pg - 1);
	uintptr_t b = ((uintptr_t)p + n + pg - 1) & ~(uintptr_t)(pg - 1);
	struct fk_host *h;

	if (r)
		return fk_end(r);
	if (!p || !n || (flags & ~0xfu))
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "%p + %zu, "
				     "flags %#x", p, n, flags));
	for (h = fk.hosts; h; h = h->next) {
		uintptr_t ha = h->p & ~(uintptr_t)(pg - 1);
		uintptr_t hb = (h->p + h->size + pg - 1) &
			       ~(uintptr_t)(pg - 1);

		if (a < hb && ha < b)
			return fk_end(fk_bad(
				CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
				"%p + %zu overlaps %#lx + %zu", p, n,
				(unsigned long)h->p, h->size));
	}
	if (madvise((void *)a, b - a, MADV_NORMAL) < 0)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "%p + %zu is "
				     "not all mapped memory", p, n));
	h = calloc(1, sizeof(*h));
	if (!h)
		return fk_end(CUDA_ERROR_OUT_OF_MEMORY);
	h->p = (uintptr_t)p;
	h->size = n;
	h->next = fk.hosts;
	fk.hosts = h;
	return fk_end(CUDA_SUCCESS);
}

/* Is an async copy still queued from or to [p, p+n)? */
static int host_busy(uintptr_t p, size_t n)
{
	struct fk_stream *s;
	struct fk_op *op;

	for (s = fk.streams; s; s = s->next)
		for (op = s->head; op; op = op->next) {
			uintptr_t x = op->kind == FK_OP_H2D ? op->src :
				      op->dst;

			if (op->kind != FK_OP_EVENT && x < p + n &&
			    p < x + op->n)
				return 1;
		}
	return 0;
}

CUresult cuMemHostUnregister(void *p)
{
	CUresult r = fk_begin("cuMemHostUnregister", FK_CTX);
	struct fk_host **ph, *h;

	if (r)
		return fk_end(r);
	for (ph = &fk.hosts; (h = *ph); ph = &h->next)
		if (h->p == (uintptr_t)p)
			break;
	if (!h)
		return fk_end(fk_bad(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
				     "%p is not the start of a registered "
				     "range", p));
	if (host_busy(h->p, h->size))
		fk_bad(0, "%p unregistered while an async copy is queued on "
		       "it", p);
	*ph = h->next;
	free(h);
	return fk_end(CUDA_SUCCESS);
}

/* ---- copies ------------------------------------------------------------ */

static CUresult copy(int kind, uintptr_t dst, uintptr_t src, size_t n,
		     void *ps)
{
	uintptr_t host = kind == FK_OP_H2D ? src : dst;
	uintptr_t dev = kind == FK_OP_H2D ? dst : src;
	struct fk_stream *s = stream_find(ps);

	if (ps && !s)
		return fk_bad(CUDA_ERROR_INVALID_HANDLE, "stream %p", ps);
	if (!n)
		return CUDA_SUCCESS;
	if (!host)
		return fk_bad(CUDA_ERROR_INVALID_VALUE, "host pointer NULL");
	if (!fk_dev_ok(dev, n, kind == FK_OP_H2D ? 3 : 1))
		return fk_bad(CUDA_ERROR_INVALID_VALUE, "device %#lx + %zu "
			      "is not all mapped with %s access",
			      (unsigned long)dev, n,
			      kind == FK_OP_H2D ? "read-write" : "read");
	if (s && host_find(host, n))
		return push(s, kind, dst, src, n, NULL, 0);
	/* pageable (or the NULL stream): after the stream, at once */
	drain(s);
	if (fk.sticky)
		return fk.sticky;
	memcpy((void *)dst, (const void *)src, n);
	fk.st.sync_copies++;
	return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoDAsync_v2(unsigned long long dst, const void *src,
			      size_t n, void *ps)
{
	CUresult r = fk_begin("cuMemcpyHtoDAsync_v2", FK_CTX);

	if (!r)
		r = copy(FK_OP_H2D, dst, (uintptr_t)src, n, ps);
	return fk_end(r);
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, unsigned long long src, size_t n,
			      void *ps)
{
	CUresult r = fk_begin("cuMemcpyDtoHAsync_v2", FK_CTX);

	if (!r)
		r = copy(FK_OP_D2H, (uintptr_t)dst, src, n, ps);
	return fk_end(r);
}

/* ---- leaks ------------------------------------------------------------- */

void fk_stream_leaks(int free_them)
{
	struct fk_stream *s, *sn;
	struct fk_event *e, *en;
	struct fk_host *h, *hn;

	for (s = fk.streams; s; s = sn) {
		sn = s->next;
		fk_leak("stream %p never destroyed", (void *)s);
		if (free_them)
			stream_free(s);
	}
	for (e = fk.events; e; e = en) {
		en = e->next;
		fk_leak("event %p never destroyed", (void *)e);
		if (free_them)
			event_free(e);
	}
	for (h = fk.hosts; h; h = hn) {
		hn = h->next;
		fk_leak("host range %#lx + %zu still registered",
			(unsigned long)h->p, h->size);
		if (free_them)
			free(h);
	}
	if (free_them)
		fk.hosts = NULL;
}
