// SPDX-License-Identifier: GPL-2.0
/*
 * tests/vm/hmmk_testd.c — a small daemon for the VM tests: it attaches to
 * /dev/hmmk and serves EVICT (store the page) and FILL (read it back) from
 * one sparse file, at offset (region << 36) + page * 4096.
 *
 * Usage: hmmk_testd [--ready-fd N] [--store PATH] [--stall-fill]
 *                   [--fill-delay-ms N]
 *   --ready-fd     write "ready\n" to fd N once attached
 *   --stall-fill   take FILL requests and never answer them (for the
 *                  "daemon killed mid-flight" test); creates
 *                  /tmp/hmmk_testd.stalled when the first one arrives
 *   --fill-delay-ms  wait before answering each FILL
 * Exits 1 on setup errors; otherwise runs until killed.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>

#include "uapi/hmmk.h"

#define STALLED	"/tmp/hmmk_testd.stalled"

static int stall_fill, fill_delay_ms;

static off_t key(const struct hmmk_daemon_req *r)
{
	return (off_t)((r->region << 36) + r->page * HMMK_PAGE_SIZE);
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Serves one request; returns 0, or -1 to stop. */
static int serve(int fd, int store, struct hmmk_daemon_req *r, char *buf)
{
	struct hmmk_daemon_cmpl c;
	ssize_t n;

	memset(&c, 0, sizeof(c));
	c.id = r->id;
	c.buf = (uintptr_t)buf;
	if (r->op == HMMK_OP_EVICT) {
		n = pwrite(store, buf, HMMK_PAGE_SIZE, key(r));
		c.status = n == (ssize_t)HMMK_PAGE_SIZE ? 0 : EIO;
	} else if (r->op == HMMK_OP_FILL) {
		if (stall_fill) {
			close(open(STALLED, O_CREAT | O_WRONLY, 0644));
			return 0;	/* never answered */
		}
		if (fill_delay_ms)
			sleep_ms(fill_delay_ms);
		n = pread(store, buf, HMMK_PAGE_SIZE, key(r));
		if (n >= 0 && n < (ssize_t)HMMK_PAGE_SIZE)
			memset(buf + n, 0, HMMK_PAGE_SIZE - n);
		c.status = n >= 0 ? 0 : EIO;
	} else if (r->op == HMMK_OP_FORGET) {
		c.status = 0;		/* a region is gone: nothing kept here */
	} else {
		c.status = EINVAL;
	}
	if (ioctl(fd, HMMK_IOC_DAEMON_COMPLETE, &c) && errno != ENOENT) {
		perror("hmmk_testd: DAEMON_COMPLETE");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *path = "/tmp/hmmk_testd.store";
	static char buf[HMMK_PAGE_SIZE] __attribute__((aligned(4096)));
	struct hmmk_daemon_req r;
	int fd, store, ready_fd = -1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--ready-fd") && i + 1 < argc)
			ready_fd = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--store") && i + 1 < argc)
			path = argv[++i];
		else if (!strcmp(argv[i], "--stall-fill"))
			stall_fill = 1;
		else if (!strcmp(argv[i], "--fill-delay-ms") && i + 1 < argc)
			fill_delay_ms = atoi(argv[++i]);
		else {
			fprintf(stderr, "hmmk_testd: unknown argument %s\n",
				argv[i]);
			return 1;
		}
	}
	unlink(STALLED);
	store = open(path, O_RDWR | O_CREAT, 0600);
	if (store < 0) {
		perror(path);
		return 1;
	}
	fd = open(HMMK_DEVICE, O_RDWR);
	if (fd < 0 || ioctl(fd, HMMK_IOC_DAEMON_ATTACH)) {
		perror("hmmk_testd: attach");
		return 1;
	}
	if (ready_fd >= 0) {
		if (write(ready_fd, "ready\n", 6) != 6)
			return 1;
		close(ready_fd);
	}
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };

		if (poll(&pfd, 1, 1000) < 0 && errno != EINTR)
			return 1;
		for (;;) {
			memset(&r, 0, sizeof(r));
			r.buf = (uintptr_t)buf;
			if (ioctl(fd, HMMK_IOC_DAEMON_FETCH, &r)) {
				if (errno == EAGAIN)
					break;
				perror("hmmk_testd: DAEMON_FETCH");
				return 1;
			}
			if (serve(fd, store, &r, buf))
				return 1;
		}
	}
}
