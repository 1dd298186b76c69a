/* SPDX-License-Identifier: MIT */
/*
 * tests/prom.h — read hmmd's Prometheus text (--metrics 127.0.0.1:PORT)
 * in a test: the integration tests and the VM suite (tests/vm, which
 * includes it as "../prom.h") share it.  No harness needed.
 */
#ifndef HMM_TESTS_PROM_H
#define HMM_TESTS_PROM_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* GET /metrics from 127.0.0.1:port into text (cap bytes): the body, or
 * NULL with errno set when nothing could be asked (text is then ""). */
static inline const char *prom_fetch(int port, char *text, size_t cap)
{
	static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
	struct sockaddr_in sa = { .sin_family = AF_INET };
	size_t got = 0;
	const char *body;
	ssize_t n;
	int fd;

	text[0] = 0;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons(port);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) < 0) {
		close(fd);
		return NULL;
	}
	while (got < cap - 1 &&
	       (n = recv(fd, text + got, cap - 1 - got, 0)) > 0)
		got += n;
	text[got] = 0;
	close(fd);
	body = strstr(text, "\r\n\r\n");
	return body ? body + 4 : text;
}

/* The value of the sample line "name" (labels as written) in text, or
 * -1 when there is none (or text is NULL). */
static inline double prom_value(const char *text, const char *name)
{
	const char *p = text;
	size_t n = strlen(name);

	while (p && (p = strstr(p, name))) {
		if ((p == text || p[-1] == '\n') && p[n] == ' ')
			return atof(p + n + 1);
		p += n;
	}
	return -1;
}

#endif /* HMM_TESTS_PROM_H */
