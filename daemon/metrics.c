// SPDX-License-Identifier: MIT
/*
 * metrics.c — `hmmd --metrics 127.0.0.1:PORT`: Prometheus text
 * exposition (version 0.0.4) on a loopback TCP port.  A tiny HTTP/1.0
 * responder: its thread (server.c) accepts, and each request is answered
 * on a thread of its own, at most METRICS_CONC at once (more get a 503
 * at once), within METRICS_MS for the whole request and as long again
 * for the answer, so a slow or silent scraper never holds up another.
 * Only loopback addresses are accepted for listening: the counters name
 * uids and clients.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "hmmd.h"
#include "log.h"

int hmmd_metrics_addr(const char *addr, struct sockaddr_in *sa,
		      char *err, size_t errlen)
{
	const char *colon = strrchr(addr, ':'), *why = NULL;
	char host[64];
	char *end;
	long port = -1;

	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	if (!colon || colon == addr || colon - addr >= (long)sizeof(host)) {
		why = "is not IPV4:PORT (e.g. 127.0.0.1:9100)";
	} else {
		memcpy(host, addr, colon - addr);
		host[colon - addr] = 0;
		errno = 0;
		port = strtol(colon + 1, &end, 10);
		if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
			why = "is not IPV4:PORT (e.g. 127.0.0.1:9100)";
		else if (*end || end == colon + 1 || errno || port < 0 ||
			 port > 65535)
			why = "has a port not in 0..65535";
		else if ((ntohl(sa->sin_addr.s_addr) >> 24) != 127)
			why = "is not loopback (127.0.0.0/8 only)";
	}
	if (why) {
		snprintf(err, errlen, "metrics: \"%s\" %s", addr, why);
		return -EINVAL;
	}
	sa->sin_port = htons((uint16_t)port);
	return 0;
}

int hmmd_metrics_listen(const char *addr)
{
	struct sockaddr_in sa;
	socklen_t salen = sizeof(sa);
	char err[160];
	long port;
	int fd, one = 1;

	if (hmmd_metrics_addr(addr, &sa, err, sizeof(err))) {
		hmmd_log("%s", err);
		return -EINVAL;
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(fd, 16) < 0) {
		int err = -errno;

		hmmd_log("metrics %s: %s", addr, strerror(errno));
		close(fd);
		return err;
	}
	/* port 0: the kernel's pick, which is what a scraper needs */
	getsockname(fd, (struct sockaddr *)&sa, &salen);
	port = ntohs(sa.sin_port);
	hmmd_log("metrics on http://%.*s:%ld/metrics",
		 (int)(strrchr(addr, ':') - addr), addr, port);
	return fd;
}

#define METRICS_CONC	16	/* requests answered at once */
#define METRICS_MS	1000	/* to read a request; as long to answer */

static unsigned active;		/* atomic: answer threads running */

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Send s[0..n) until done, an error or the deadline (ms, now_ms). */
static void say(int fd, const char *s, size_t n, double deadline)
{
	while (n && now_ms() < deadline) {
		ssize_t k = send(fd, s, n, MSG_NOSIGNAL);

		if (k <= 0)
			return;
		s += k;
		n -= k;
	}
}

/*
 * What the request line line[0..n) (its line end cut) asks: 200 for a
 * GET of /metrics or / with any query string (a Prometheus scrape config
 * with params: adds one), else the status that refuses it: 400 for a
 * line that is not METHOD SP /TARGET SP HTTP/x (bytes, controls), 405
 * for another method, 404 for another path.
 */
static int route(const char *line, size_t n)
{
	const char *t, *v, *q;
	size_t i, len;

	for (i = 0; i < n; i++)
		if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
			return 400;
	t = memchr(line, ' ', n);
	v = t ? memchr(t + 1, ' ', line + n - t - 1) : NULL;
	if (!t || t == line || !v || t[1] != '/' ||
	    line + n - v - 1 < 5 || memcmp(v + 1, "HTTP/", 5) ||
	    memchr(v + 1, ' ', line + n - v - 1))
		return 400;
	if (t - line != 3 || memcmp(line, "GET", 3))
		return 405;
	t++;
	len = v - t;
	q = memchr(t, '?', len);
	if (q)
		len = q - t;
	if (len == 1 || (len == 8 && !memcmp(t, "/metrics", 8)))
		return 200;
	return 404;
}

/* Refuse a request with status (route's, or 408: no request line). */
static void refuse(int fd, int status)
{
	const char *what = status == 400 ? "Bad Request" :
			   status == 405 ? "Method Not Allowed" :
			   status == 408 ? "Request Timeout" : "Not Found";
	char out[256];
	int n;

	n = snprintf(out, sizeof(out), "HTTP/1.0 %d %s\r\nContent-Type: "
		     "text/plain\r\nContent-Length: 18\r\n%sConnection: "
		     "close\r\n\r\ntry GET /metrics\r\n", status, what,
		     status == 405 ? "Allow: GET\r\n" : "");
	say(fd, out, n, now_ms() + METRICS_MS);
}

/*
 * Read one request on fd and answer it; closes fd.  A request line that
 * will not be served is refused as soon as it is complete; one that will
 * is answered once its headers are read (closing on unread bytes would
 * reset the connection under the answer), the buffer is full, or
 * METRICS_MS passed.  Bytes are searched as bytes: a NUL in the request
 * once hid its end, and garbage waited out the whole second.
 */
static void answer(int fd, struct hmmd_engine *e)
{
	struct timeval tv = { 0, 200000 };
	double deadline = now_ms() + METRICS_MS;
	char req[2048], hdr[256], *body, *eol = NULL;
	size_t got = 0, cap = 1 << 16, n;
	struct pollfd p = { fd, POLLIN, 0 };
	int left, status = 408;
	ssize_t k;

	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	while (got < sizeof(req)) {
		left = (int)(deadline - now_ms());
		if (left <= 0 || poll(&p, 1, left) != 1)
			break;		/* too slow: whatever came is it */
		k = recv(fd, req + got, sizeof(req) - got, MSG_DONTWAIT);
		if (k <= 0)
			break;
		got += k;
		if (!eol) {
			eol = memchr(req, '\n', got);
			if (eol)
				status = route(req, eol - req -
					       (eol > req && eol[-1] == '\r'));
		}
		if (eol && (status != 200 || memmem(req, got, "\r\n\r\n", 4) ||
			    memmem(req, got, "\n\n", 2)))
			break;
	}
	if (!eol && got == sizeof(req))
		status = 400;		/* a request line longer than req */
	if (status != 200) {
		refuse(fd, status);
		close(fd);
		return;
	}
	body = malloc(cap);
	if (!body) {
		close(fd);
		return;
	}
	n = hmmd_engine_metrics(e, body, cap);
	k = snprintf(hdr, sizeof(hdr), "HTTP/1.0 200 OK\r\nContent-Type: "
		     "text/plain; version=0.0.4\r\nContent-Length: %zu\r\n"
		     "Connection: close\r\n\r\n", n);
	deadline = now_ms() + METRICS_MS;
	say(fd, hdr, k, deadline);
	say(fd, body, n, deadline);
	free(body);
	close(fd);
}

struct answer_job {
	int fd;
	struct hmmd_engine *e;
};

static void *answer_main(void *arg)
{
	struct answer_job *j = arg;

	answer(j->fd, j->e);
	free(j);
	__atomic_sub_fetch(&active, 1, __ATOMIC_RELEASE);
	return NULL;
}

void hmmd_metrics_serve(int lfd, struct hmmd_engine *e)
{
	static const char busy[] = "HTTP/1.0 503 Service Unavailable\r\n"
		"Content-Type: text/plain\r\nContent-Length: 23\r\n\r\n"
		"busy: try again later\r\n";
	struct answer_job *j;
	pthread_attr_t at;
	pthread_t t;
	int fd, r = -1;

	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno != EINTR && errno != ECONNABORTED)
			usleep(10000);	/* shut down, or out of fds */
		return;
	}
	if (__atomic_add_fetch(&active, 1, __ATOMIC_ACQ_REL) > METRICS_CONC) {
		say(fd, busy, sizeof(busy) - 1, now_ms() + 100);
		close(fd);
		__atomic_sub_fetch(&active, 1, __ATOMIC_RELEASE);
		return;
	}
	j = malloc(sizeof(*j));
	if (j) {
		j->fd = fd;
		j->e = e;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		r = pthread_create(&t, &at, answer_main, j);
		pthread_attr_destroy(&at);
	}
	if (r) {		/* no thread: answer here */
		free(j);
		answer(fd, e);
		__atomic_sub_fetch(&active, 1, __ATOMIC_RELEASE);
	}
}

void hmmd_metrics_drain(void)
{
	while (__atomic_load_n(&active, __ATOMIC_ACQUIRE))
		usleep(10000);
}
