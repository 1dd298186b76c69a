/* SPDX-License-Identifier: MIT */
/*
 * fake.h — the fake CUDA driver's insides, shared by its four files:
 * libcuda.c (init, devices, the primary context, knobs, error strings,
 * reports), vmm.c (address reservations, physical allocations, maps,
 * access), stream.c (streams, events, host registration, copies) and
 * managed.c (managed memory: allocation, prefetch, advice, attributes).
 *
 * The device is host memory: a reservation is an mmap PROT_NONE range, a
 * physical allocation a memfd, a map an mmap MAP_FIXED|MAP_SHARED of it
 * at the reserved address, PROT_NONE until cuMemSetAccess.  A device
 * pointer is that host address.
 *
 * Locking: one mutex, fk.lock, protects everything in struct fk and every
 * object on its lists; fk.cond is broadcast whenever a stream finishes an
 * operation.  Every entry point takes the lock in fk_begin and drops it
 * in fk_end; stream workers take it to pop and to run an operation, so a
 * copy and a cuMemUnmap never overlap.
 */
#ifndef FAKECUDA_FAKE_H
#define FAKECUDA_FAKE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "fakecuda.h"

#pragma GCC visibility push(hidden)

/* The driver ABI: libhmm's one copy (types, CUresult codes), held
 * against cuda.h by tests/unit/test_cuda_abi.c. */
#include "cuda_abi.h"

/* An address range from cuMemAddressReserve; freed by cuMemAddressFree. */
struct fk_resv {
	struct fk_resv *next;
	uintptr_t base;
	size_t size;
};

/* A cuMemCreate allocation: freed when released and no longer mapped. */
struct fk_alloc {
	struct fk_alloc *next;
	unsigned long long id;	/* the handle */
	int fd;			/* memfd of size bytes */
	size_t size;
	int released;		/* cuMemRelease called */
	int maps;		/* live cuMemMap's of it */
};

/* One cuMemMap; removed by cuMemUnmap. */
struct fk_map {
	struct fk_map *next;
	uintptr_t va;
	size_t size;
	struct fk_alloc *a;
	int access;		/* cuMemSetAccess flags: 0, 1, 3 */
};

/* One cuMemHostRegister'ed range. */
struct fk_host {
	struct fk_host *next;
	uintptr_t p;
	size_t size;
};

/* A cuMemAllocManaged allocation (anonymous host memory: the pointer
 * is valid on the host and the "device" alike), freed by cuMemFree_v2.
 * Per 4 KiB page: where it is resident, the last prefetch location and
 * the advice, as the attribute queries report them. */
struct fk_managed {
	struct fk_managed *next;
	uintptr_t base;
	size_t size;		/* rounded up to pages */
	unsigned flags;		/* CU_MEM_ATTACH_* */
	size_t npages;
	signed char *last;	/* FK_LOC_*: the last prefetch target */
	signed char *pref;	/* FK_LOC_*: the preferred location */
	unsigned char *at_dev;	/* 1: resident at the device */
	unsigned char *rmostly;	/* CU_MEM_ADVISE_SET_READ_MOSTLY */
	unsigned char *accby;	/* bit 0 the device, bit 1 the host */
	int plain;		/* cuMemAlloc_v2's: device memory, not
				   managed (no advice, no prefetch) */
};
#define FK_LOC_NONE	(-2)	/* CU_DEVICE_INVALID */
#define FK_LOC_CPU	(-1)	/* CU_DEVICE_CPU */
#define FK_LOC_DEV	0	/* device 0 */

struct fk_event;

/* One queued operation of a stream; freed by its worker once run. */
struct fk_op {
	struct fk_op *next;
	int kind;		/* FK_OP_* */
	uintptr_t dst, src;
	size_t n;
	struct fk_event *ev;	/* FK_OP_EVENT */
	unsigned long gen;	/* the record it completes */
	void (*fn)(void *);	/* FK_OP_CALL: fn(arg), lock held */
	void *arg;
};
#define FK_OP_H2D	0
#define FK_OP_D2H	1
#define FK_OP_EVENT	2
#define FK_OP_CALL	3	/* a kernel or a product (launch.c) */

/* cuStreamCreate'd; its worker runs ops in order.  Freed by
 * cuStreamDestroy_v2 after the worker drained and exited. */
struct fk_stream {
	struct fk_stream *next;
	struct fk_op *head, *tail;
	int busy;		/* the worker is running an op */
	int stop;
	pthread_t thr;
};

/* cuEventCreate'd: gen counts records, done the last one completed. */
struct fk_event {
	struct fk_event *next;
	unsigned long gen, done;
};

struct fk {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int knobs_read;
	/* knobs (environment), read once */
	uint64_t mem;		/* FAKECUDA_MEM, device bytes */
	uint64_t gran;		/* FAKECUDA_GRAN */
	int nodev;		/* FAKECUDA_NODEV: 1 cuInit fails, 2 no GPUs */
	int nomanaged;		/* FAKECUDA_NOMANAGED: no managed memory */
	int nodiscard;		/* FAKECUDA_NODISCARD: no discards */
	int strict;		/* FAKECUDA_STRICT: abort on a violation */
	unsigned delay_us;	/* FAKECUDA_DELAY_US before each async op */
	/* state */
	int init;		/* cuInit succeeded */
	int ctx_refs;		/* primary context retains */
	CUresult sticky;	/* an error in async work: the context is dead */
	unsigned long long next_id;
	struct fk_resv *resv;
	struct fk_alloc *allocs;
	struct fk_map *maps;
	struct fk_host *hosts;
	struct fk_stream *streams;
	struct fk_event *events;
	struct fk_managed *managed;
	struct fakecuda_stats st;
};

extern struct fk fk;

/* Needs for fk_begin. */
#define FK_INIT	1		/* cuInit called */
#define FK_CTX	2		/* a live context current on this thread */

/* Takes fk.lock, counts the call, applies FAKECUDA_FAIL and the needs.
 * Returns 0, or the code the entry point must return (lock held). */
CUresult fk_begin(const char *fn, unsigned needs);
/* Drops fk.lock; returns r. */
CUresult fk_end(CUresult r);
/* A contract violation by the caller: reported, counted; returns r. */
CUresult fk_bad(CUresult r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A leak (context destroy or exit): reported and counted. */
void fk_leak(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* vmm.c: is [p, p+n) mapped with at least access `need`? (lock held) */
int fk_dev_ok(uintptr_t p, size_t n, int need);
/* vmm.c / stream.c: report and free what is left (context destroy);
 * free_them = 0 only reports (exit). Called with the lock held; stream.c
 * drops it to join workers. */
void fk_vmm_leaks(int free_them);
void fk_stream_leaks(int free_them);
void fk_managed_leaks(int free_them);
/* managed.c: is [p, p+n) inside one managed allocation? (lock held) */
int fk_managed_ok(uintptr_t p, size_t n);
/* stream.c: is ps NULL or a live stream? (lock held) */
int fk_stream_ok(void *ps);
/* stream.c: fn(arg) in stream order on ps (the NULL stream: after every
 * stream drained, at once); lock held, as fn runs. */
CUresult fk_stream_call(void *ps, void (*fn)(void *), void *arg);

#pragma GCC visibility pop

#endif /* FAKECUDA_FAKE_H */
