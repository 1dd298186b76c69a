// SPDX-License-Identifier: MIT
/*
 * metrics.c — `hmmd --metrics 127.0.0.1:PORT`: Prometheus text
 * exposition (version 0.0.4) on a loopback TCP port.  A tiny HTTP/1.0
 * responder on its own thread (server.c): one request at a time, read
 * with a one-second limit, answered and closed.  Only loopback addresses are
 * accepted for listening: the counters name uids and clients.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "hmmd.h"
#include "log.h"

int hmmd_metrics_listen(const char *addr)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char host[64];
	const char *colon = strrchr(addr, ':');
	char *end;
	long port;
	int fd, one = 1;

	if (!colon || colon == addr || colon - addr >= (long)sizeof(host)) {
		hmmd_log("metrics %s: not HOST:PORT", addr);
		return -EINVAL;
	}
	memcpy(host, addr, colon - addr);
	host[colon - addr] = 0;
	port = strtol(colon + 1, &end, 10);
	if (*end || end == colon + 1 || port < 0 || port > 65535 ||
	    inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		hmmd_log("metrics %s: not IPV4:PORT", addr);
		return -EINVAL;
	}
	if ((ntohl(sa.sin_addr.s_addr) >> 24) != 127) {
		hmmd_log("metrics %s: loopback (127.0.0.0/8) only", addr);
		return -EINVAL;
	}
	sa.sin_port = htons((uint16_t)port);
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
	hmmd_log("metrics on http://%s/metrics", addr);
	return fd;
}

static void say(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t k = send(fd, s, n, MSG_NOSIGNAL);

		if (k <= 0)
			return;
		s += k;
		n -= k;
	}
}

void hmmd_metrics_serve(int lfd, struct hmmd_engine *e)
{
	struct timeval tv = { 1, 0 };
	char req[2048], hdr[256], *body;
	size_t got = 0, cap = 1 << 16, n;
	ssize_t k;
	int fd;

	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno != EINTR && errno != ECONNABORTED)
			usleep(10000);	/* shut down, or out of fds */
		return;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	while (got < sizeof(req) - 1) {
		k = recv(fd, req + got, sizeof(req) - 1 - got, 0);
		if (k <= 0)
			break;
		got += k;
		req[got] = 0;
		if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
			break;
	}
	req[got] = 0;
	if (strncmp(req, "GET /metrics ", 13) && strncmp(req, "GET / ", 6)) {
		static const char nf[] = "HTTP/1.0 404 Not Found\r\n"
			"Content-Type: text/plain\r\nContent-Length: 20\r\n\r\n"
			"try GET /metrics\r\n\r\n";

		say(fd, nf, sizeof(nf) - 1);
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
	say(fd, hdr, k);
	say(fd, body, n);
	free(body);
	close(fd);
}
