// SPDX-License-Identifier: MIT
/*
 * test_client_version — libhmm's shared-mode client against an hmmd that
 * speaks an older protocol version.  A scripted peer on a Unix socket
 * answers HELLO with version 1 or 2 and records every request after it.
 * The client must not send what that version lacks: WRITEBACK (version
 * 3) fails at once with -EOPNOTSUPP naming both versions and sends
 * nothing, and so does SAVE (version 4) of a tensor not yet persistent
 * (hmm_flush's error), while one persistent already needs none; against version 1, WAIT returns at once (nothing sent) and
 * STATS2 falls back to STATS.  Against version 2, WAIT and STATS2 go out.
 * An unmap is UNMAP before version 6 (which refuses an access) and
 * UNMAP_EXACT, naming the map's access, from it on.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "t.h"
#include "client.h"
#include "err.h"
#include "proto_sock.h"

struct peer {
	int lfd;
	unsigned version;	/* what HELLO_REPLY says */
	unsigned types[16];	/* requests after HELLO, in order */
	unsigned n;
};

/* Answer one request as an hmmd of p->version would; 0 on a hang-up. */
static int answer(struct peer *p, int fd, char *buf, char *out)
{
	struct hmm_proto_msg m;
	int type = hmm_proto_recv(fd, buf, HMM_PROTO_RECV_BUF, &m, NULL, NULL,
				  0);
	int len;

	if (type < 0)
		return 0;
	if (type == HMM_PROTO_HELLO) {
		struct hmm_proto_hello_reply r = {
			.version = (uint16_t)p->version, .client_id = 7,
			.chunk_bytes = 64 << 10,
		};

		len = hmm_proto_hello_reply_encode(out, HMM_PROTO_MSG_MAX,
						   m.hdr.seq, &r);
	} else {
		if (p->n < 16)
			p->types[p->n++] = (unsigned)type;
		if (type == HMM_PROTO_STATS) {
			struct hmm_proto_stats_reply s;

			memset(&s, 0, sizeof(s));
			len = hmm_proto_stats_reply_encode(out,
							   HMM_PROTO_MSG_MAX,
							   m.hdr.seq, &s);
		} else if (type == HMM_PROTO_MAP) {	/* a memfd of it */
			struct hmm_proto_map_reply r = {
				.id = m.u.range.id, .off = m.u.range.off,
				.len = m.u.range.len, .tier = HMM_TIER_HOST,
			};
			int mfd = memfd_create("peer", MFD_CLOEXEC), ok;

			if (mfd < 0 || ftruncate(mfd, r.off + r.len))
				return 0;
			len = hmm_proto_encode(out, HMM_PROTO_MSG_MAX,
					       HMM_PROTO_MAP_REPLY,
					       HMM_PROTO_F_FDS, m.hdr.seq, &r);
			ok = len > 0 && !hmm_proto_send(fd, out, (size_t)len,
							&mfd, 1, 0);
			close(mfd);
			return ok;
		} else if (type == HMM_PROTO_STATS2) {
			struct hmm_proto_stats2_reply s;

			memset(&s, 0, sizeof(s));
			len = hmm_proto_stats2_reply_encode(out,
							    HMM_PROTO_MSG_MAX,
							    m.hdr.seq, &s);
		} else {
			len = hmm_proto_ok_encode(out, HMM_PROTO_MSG_MAX,
						  m.hdr.seq);
		}
	}
	return len > 0 && !hmm_proto_send(fd, out, (size_t)len, NULL, 0, 0);
}

static void *serve(void *arg)
{
	struct peer *p = arg;
	static char buf[HMM_PROTO_RECV_BUF], out[HMM_PROTO_MSG_MAX];
	int fd = accept(p->lfd, NULL, NULL);

	if (fd < 0)
		return NULL;
	while (answer(p, fd, buf, out))
		;
	close(fd);
	return NULL;
}

static void against(unsigned version)
{
	char path[4096];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct peer p = { .version = version };
	struct hmm_proto_hello_reply rep;
	struct hmm_proto_stats2_reply st;
	struct hmm_client *c = NULL;
	pthread_t th;
	char want[64];
	int r;

	if (snprintf(path, sizeof(path), "%s/v%u.sock", t_tmpdir(), version) >=
	    (int)sizeof(path) || strlen(path) >= sizeof(sa.sun_path))
		t_skip_all("socket path %s: longer than a Unix socket's", path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	p.lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (p.lfd < 0 || bind(p.lfd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(p.lfd, 1) || pthread_create(&th, NULL, serve, &p))
		t_fail_all("peer on %s: %s", path, strerror(errno));
	r = hmm_client_open(path, NULL, "test", &c, &rep);
	t_ok(r == 0 && rep.version == version,
	     "v%u: the client agrees on version %u (%d: %s)", version,
	     version, r, r ? hmm_last_error() : "");
	if (r)
		goto out;

	/* an unmap names the map's access from version 6 on (UNMAP_EXACT);
	   before, UNMAP, which an older hmmd refuses with an access */
	{
		void *m;

		r = hmm_client_map(c, 1, 0, 4096, HMM_READ, &m);
		t_eq(r, 0, "v%u: map (%s)", version, r ? hmm_last_error() : "");
		if (!r)
			t_eq(hmm_client_unmap(c, m), 0, "v%u: unmap", version);
	}
	if (version >= 3) {	/* what follows is of versions 1 and 2 */
		hmm_client_close(c);
		c = NULL;
		pthread_join(th, NULL);
		t_ok(p.n == 2 && p.types[0] == HMM_PROTO_MAP &&
		     p.types[1] == (version >= 6 ? HMM_PROTO_UNMAP_EXACT :
				    HMM_PROTO_UNMAP),
		     "v%u: MAP and %s went out (%u requests, second %s)",
		     version, version >= 6 ? "UNMAP_EXACT" : "UNMAP", p.n,
		     p.n > 1 ? hmm_proto_type_name(p.types[1]) : "-");
		close(p.lfd);
		unlink(path);
		return;
	}
	r = hmm_client_writeback(c, 1, 0, 64 << 10);
	snprintf(want, sizeof(want), "protocol version %u", version);
	t_ok(r == -EOPNOTSUPP && strstr(hmm_last_error(), want) &&
	     strstr(hmm_last_error(), "WRITEBACK is of version 3"),
	     "v%u: writeback is -EOPNOTSUPP naming both versions (%d: %s)",
	     version, r, hmm_last_error());
	{
		struct hmm_proto_tensor tt = { .id = 1, .name = "w" };

		r = hmm_client_save(c, &tt);
		t_ok(r == -EOPNOTSUPP && strstr(hmm_last_error(), want) &&
		     strstr(hmm_last_error(), "(SAVE) is of version 4") &&
		     strstr(hmm_last_error(), "tensor w"),
		     "v%u: save is -EOPNOTSUPP naming the tensor and both "
		     "versions (%d: %s)", version, r, hmm_last_error());
		tt.flags = HMM_PROTO_TENSOR_PERSIST;
		t_eq(hmm_client_save(c, &tt), 0, "v%u: save of a persistent "
		     "tensor: 0 (FLUSH saves it), nothing sent", version);
	}
	r = hmm_client_wait(c, 1);
	t_eq(r, 0, "v%u: wait returns 0", version);
	r = hmm_client_stats2(c, &st);
	t_eq(r, 0, "v%u: stats2 answers", version);
	hmm_client_close(c);
	c = NULL;
	pthread_join(th, NULL);
	if (version == 1) {
		t_ok(p.n == 3 && p.types[1] == HMM_PROTO_UNMAP &&
		     p.types[2] == HMM_PROTO_STATS,
		     "v1: MAP, UNMAP and STATS went out (no WRITEBACK, WAIT "
		     "or STATS2; %u requests, third %s)", p.n,
		     p.n > 2 ? hmm_proto_type_name(p.types[2]) : "-");
	} else {
		t_ok(p.n == 4 && p.types[1] == HMM_PROTO_UNMAP &&
		     p.types[2] == HMM_PROTO_WAIT &&
		     p.types[3] == HMM_PROTO_STATS2,
		     "v2: MAP, UNMAP, WAIT and STATS2 went out, no WRITEBACK "
		     "(%u requests)", p.n);
	}
	close(p.lfd);
	unlink(path);
	return;
out:
	shutdown(p.lfd, SHUT_RDWR);	/* wakes an accept never answered */
	pthread_join(th, NULL);
	close(p.lfd);
	unlink(path);
}

int main(void)
{
	against(1);
	against(2);
	against(5);
	against(6);
	return t_done();
}
