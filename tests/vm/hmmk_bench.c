// SPDX-License-Identifier: GPL-2.0
/*
 * tests/vm/hmmk_bench.c — measures hmmk.ko against its ceilings in the same
 * VM, interleaved, medians of 5 (run by `tests/vm/run --bench`):
 *  - fault service: touching evicted pages served by the test daemon
 *    (FILL over poll + ioctl, pread from a tmpfs file) vs userfaultfd
 *    UFFDIO_COPY serving the same bytes from the same kind of file;
 *  - migration: MIGRATE node 0 -> 1 of resident pages vs move_pages(2)
 *    of anonymous pages.
 * Prints one JSON object per line; ratio > 1 means hmmk is faster.
 * Timings under TCG say little in absolute terms; the ratios are the point.
 */
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>

#include "hmmk_t.h"

#define RUNS	5

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_d);
	return v[n / 2];
}

static void touch_all(volatile char *p, uint64_t pages)
{
	for (uint64_t pg = 0; pg < pages; pg++)
		(void)p[pg * T_PAGE];
}

/* Seconds to refault `pages` evicted pages through the daemon. */
static double hmmk_fault_run(int fd, uint64_t pages)
{
	struct hmmk_region_create rc;
	double t;
	char *p = t_map(fd, pages * T_PAGE, HMMK_NODE_ANY, &rc);

	if (!p)
		return -1;
	t_fill(p, pages, 1);
	if (t_range(fd, HMMK_IOC_EVICT, rc.handle, 0, pages * T_PAGE, 0, 0,
		    NULL))
		return -1;
	t = now();
	touch_all(p, pages);
	t = now() - t;
	if (t_check(p, pages, 1))
		t = -1;
	munmap(p, pages * T_PAGE);
	return t;
}

struct uffd_srv {
	int uffd, store;
	char *base;
	volatile int stop;
};

/* Serves missing-page faults with UFFDIO_COPY from the store file. */
static void *uffd_thread(void *arg)
{
	static char buf[4096] __attribute__((aligned(4096)));
	struct uffd_srv *s = arg;
	struct uffd_msg msg;

	while (!s->stop) {
		struct pollfd pfd = { .fd = s->uffd, .events = POLLIN };
		struct uffdio_copy cp;
		uint64_t off;

		if (poll(&pfd, 1, 100) <= 0)
			continue;
		if (read(s->uffd, &msg, sizeof(msg)) != sizeof(msg))
			continue;
		if (msg.event != UFFD_EVENT_PAGEFAULT)
			continue;
		off = (msg.arg.pagefault.address & ~(T_PAGE - 1)) -
		      (uintptr_t)s->base;
		if (pread(s->store, buf, T_PAGE, off) < 0)
			memset(buf, 0, T_PAGE);
		cp.dst = (uintptr_t)s->base + off;
		cp.src = (uintptr_t)buf;
		cp.len = T_PAGE;
		cp.mode = 0;
		ioctl(s->uffd, UFFDIO_COPY, &cp);
	}
	return NULL;
}

/* Seconds to fault `pages` pages served by userfaultfd; -1 if absent. */
static double uffd_fault_run(uint64_t pages)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg;
	struct uffd_srv s = { 0 };
	pthread_t th;
	double t;
	char *src;

	s.uffd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (s.uffd < 0 || ioctl(s.uffd, UFFDIO_API, &api))
		return -1;
	s.store = open("/tmp/hmmk_bench.uffd", O_RDWR | O_CREAT | O_TRUNC,
		       0600);
	src = malloc(pages * T_PAGE);
	t_fill(src, pages, 1);
	if (pwrite(s.store, src, pages * T_PAGE, 0) != (ssize_t)(pages * T_PAGE))
		return -1;
	free(src);
	s.base = mmap(NULL, pages * T_PAGE, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	reg.range.start = (uintptr_t)s.base;
	reg.range.len = pages * T_PAGE;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	if (ioctl(s.uffd, UFFDIO_REGISTER, &reg))
		return -1;
	pthread_create(&th, NULL, uffd_thread, &s);
	t = now();
	touch_all(s.base, pages);
	t = now() - t;
	if (t_check(s.base, pages, 1))
		t = -1;
	s.stop = 1;
	pthread_join(th, NULL);
	munmap(s.base, pages * T_PAGE);
	close(s.uffd);
	close(s.store);
	return t;
}

/*
 * Seconds for MIGRATE of `pages` resident pages to node 1; with refault,
 * also the CPU touching each once after (MIGRATE unmaps, move_pages(2)
 * keeps the mappings, so this is the fair comparison).
 */
static double hmmk_migrate_run(int fd, uint64_t pages, int refault)
{
	struct hmmk_region_create rc;
	struct hmmk_range r;
	double t;
	char *p = t_map(fd, pages * T_PAGE, 0, &rc);

	if (!p)
		return -1;
	t_fill(p, pages, 2);
	t = now();
	if (t_range(fd, HMMK_IOC_MIGRATE, rc.handle, 0, pages * T_PAGE, 1, 0,
		    &r) || r.done != pages)
		t = -1;
	if (t >= 0 && refault)
		touch_all(p, pages);
	if (t >= 0)
		t = now() - t;
	if (t_check(p, pages, 2))
		t = -1;
	munmap(p, pages * T_PAGE);
	return t;
}

static double move_pages_run(uint64_t pages)
{
	void **addr = calloc(pages, sizeof(*addr));
	int *nodes = calloc(pages, sizeof(int));
	int *status = calloc(pages, sizeof(int));
	char *p = mmap(NULL, pages * T_PAGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	double t;

	t_fill(p, pages, 2);
	for (uint64_t i = 0; i < pages; i++) {
		addr[i] = p + i * T_PAGE;
		nodes[i] = 1;
	}
	t = now();
	if (syscall(SYS_move_pages, 0, pages, addr, nodes, status, 0))
		t = -1;
	else
		t = now() - t;
	if (status[0] != 1 || t_check(p, pages, 2))
		t = -1;
	munmap(p, pages * T_PAGE);
	free(addr);
	free(nodes);
	free(status);
	return t;
}

static void report(const char *name, uint64_t pages, const char *a,
		   double *ta, const char *b, double *tb)
{
	double mib = pages * T_PAGE / 1048576.0;
	double ma = median(ta, RUNS), mb = median(tb, RUNS);

	if (ma <= 0 || mb <= 0) {
		printf("{\"bench\":\"%s\",\"error\":\"a run failed\"}\n", name);
		return;
	}
	printf("{\"bench\":\"%s\",\"pages\":%llu,\"%s_mib_s\":%.1f,"
	       "\"%s_mib_s\":%.1f,\"ratio\":%.3f,\"runs\":%d}\n", name,
	       (unsigned long long)pages, a, mib / ma, b, mib / mb, mb / ma,
	       RUNS);
}

int main(void)
{
	const uint64_t pages = 2048;
	double ta[RUNS], tb[RUNS];
	pid_t d;
	int fd = t_open();

	if (fd < 0) {
		perror(HMMK_DEVICE);
		return 77;
	}
	d = t_daemon_start(NULL, NULL);
	if (d < 0) {
		fprintf(stderr, "hmmk_bench: no test daemon\n");
		return 1;
	}
	/* Each fault is two wakeups, slow under TCG: fewer pages here. */
	for (int i = 0; i < RUNS; i++) {
		ta[i] = hmmk_fault_run(fd, pages / 8);
		tb[i] = uffd_fault_run(pages / 8);
	}
	report("fault_service", pages / 8, "hmmk", ta, "uffd", tb);
	t_daemon_stop(d);

	if (t_nr_nodes() >= 2) {
		for (int i = 0; i < RUNS; i++) {
			ta[i] = hmmk_migrate_run(fd, pages, 0);
			tb[i] = move_pages_run(pages);
		}
		report("migrate", pages, "hmmk", ta, "move_pages", tb);
		for (int i = 0; i < RUNS; i++) {
			ta[i] = hmmk_migrate_run(fd, pages, 1);
			tb[i] = move_pages_run(pages);
		}
		report("migrate_refault", pages, "hmmk", ta, "move_pages",
		       tb);
	}
	close(fd);
	return 0;
}
