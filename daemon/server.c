// SPDX-License-Identifier: MIT
/*
 * server.c — hmmd's listening socket and event loop: one epoll set with
 * the listener and a signalfd (SIGTERM, SIGINT).  Each client is served
 * by its own thread (conn.c); the loop reaps the finished ones every
 * REAP_MS.  The metrics listener has its own thread, so a slow scraper
 * never holds up accepting clients.
 */
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "hmmd.h"
#include "log.h"

/* Allocated by hmmd_server_open, freed by hmmd_server_close. */
struct hmmd_server {
	const struct hmmd_config *cfg;
	struct hmmd_engine *e;
	int mfd;			/* metrics listener; -1 = none */
	pthread_t mthread;		/* serves mfd once started */
	int mstarted;			/* mthread runs */
	int mstop;			/* atomic: metrics thread, stop */
	int lfd;			/* the listener */
	char *at;			/* where lfd is bound: PATH.new until
					   hmmd_server_start renames it to
					   PATH; then NULL (PATH) */
	int sfd;			/* signalfd: SIGTERM, SIGINT */
	int ep;				/* epoll: lfd, sfd, every client */
	struct hmmd_conn **conns;	/* [cfg->max_clients]; NULL = free */
	unsigned nconns;
	uint64_t next_id;
};

/* epoll data of the fixed fds. */
#define EV_LISTEN	0
#define EV_SIGNAL	1
#define REAP_MS		100

static int addr_of(const char *path, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path)) {
		hmmd_log("socket %s: path longer than %zu bytes", path,
			 sizeof(sa->sun_path) - 1);
		return -ENAMETOOLONG;
	}
	strcpy(sa->sun_path, path);
	return 0;
}

/* A socket file nobody listens on may go; a live one may not. */
static int clear_stale(const char *path, const struct sockaddr_un *sa)
{
	struct stat st;
	int fd, ret;

	if (lstat(path, &st) < 0)
		return 0;
	if (!S_ISSOCK(st.st_mode)) {
		hmmd_log("socket %s: exists and is not a socket", path);
		return -EEXIST;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	ret = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	close(fd);
	if (ret == 0) {
		hmmd_log("socket %s: another hmmd serves it", path);
		return -EADDRINUSE;
	}
	if (unlink(path) < 0 && errno != ENOENT) {
		hmmd_log("socket %s: stale, cannot remove: %s", path,
			 strerror(errno));
		return -errno;
	}
	return 0;
}

/* Mode 0660 and the configured group, before anyone may connect. */
static int set_owner(const struct hmmd_config *cfg, const char *path)
{
	struct group *g;

	if (cfg->socket_group) {
		g = getgrnam(cfg->socket_group);
		if (!g) {
			hmmd_log("socket_group %s: no such group",
				 cfg->socket_group);
			return -EINVAL;
		}
		if (chown(path, (uid_t)-1, g->gr_gid) < 0) {
			hmmd_log("socket %s: chown to group %s: %s", path,
				 cfg->socket_group, strerror(errno));
			return -errno;
		}
	}
	if (chmod(path, 0660) < 0) {
		hmmd_log("socket %s: chmod 0660: %s", path, strerror(errno));
		return -errno;
	}
	return 0;
}

/*
 * The listener, bound to "PATH.new" and renamed to PATH only once it
 * listens (and has its mode and group) and the engine is open
 * (hmmd_server_start), so whoever sees PATH can connect to it and be
 * served: a client that waits for the socket file never meets a bound
 * socket that still refuses.  A PATH too long for the suffix is bound
 * directly.  *at: the path bound, malloc'ed; NULL when it is PATH.
 */
static int listen_on(const struct hmmd_config *cfg, char **at_out)
{
	const char *path = cfg->socket_path;
	struct sockaddr_un sa;
	char tmp[sizeof(sa.sun_path)];
	const char *at = path;
	mode_t old;
	int fd, ret;

	*at_out = NULL;
	ret = addr_of(path, &sa);
	if (!ret)
		ret = clear_stale(path, &sa);
	if (ret)
		return ret;
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.new", path) < sizeof(tmp)) {
		at = tmp;
		strcpy(sa.sun_path, tmp);
		/* an earlier hmmd's, killed here, may go; anything else
		   (a user's file that happens to have the name, a live
		   hmmd's) is left as it is: it was unlinked unlooked */
		ret = clear_stale(tmp, &sa);
		if (ret)
			return ret;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	old = umask(0117);		/* never world-connectable, even briefly */
	ret = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (ret < 0) {
		ret = -errno;
		hmmd_log("socket %s: bind: %s", at, strerror(errno));
		goto out_close;
	}
	ret = set_owner(cfg, at);
	if (ret)
		goto out_unlink;
	if (listen(fd, 64) < 0) {
		ret = -errno;
		hmmd_log("socket %s: listen: %s", at, strerror(errno));
		goto out_unlink;
	}
	if (at != path && !(*at_out = strdup(at))) {
		ret = -ENOMEM;
		goto out_unlink;
	}
	return fd;

out_unlink:
	unlink(at);
out_close:
	close(fd);
	return ret;
}

static int ep_add(int ep, int fd, uint64_t data)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = data };

	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* The metrics thread: accepts scrapes until told to stop, then waits
 * for the answers in flight (they use the engine). */
static void *metrics_main(void *arg)
{
	struct hmmd_server *s = arg;

	while (!__atomic_load_n(&s->mstop, __ATOMIC_ACQUIRE))
		hmmd_metrics_serve(s->mfd, s->e);
	hmmd_metrics_drain();
	return NULL;
}

void hmmd_stop_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGHUP);
}

int hmmd_server_open(const struct hmmd_config *cfg, struct hmmd_server **out)
{
	struct hmmd_server *s;
	sigset_t sigs;
	int ret;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = cfg;
	s->lfd = s->sfd = s->ep = s->mfd = -1;
	s->conns = calloc(cfg->max_clients, sizeof(*s->conns));
	if (!s->conns) {
		ret = -ENOMEM;
		goto out_free;
	}
	hmmd_stop_signals(&sigs);
	s->sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	s->ep = epoll_create1(EPOLL_CLOEXEC);
	if (s->sfd < 0 || s->ep < 0) {
		ret = -errno;
		goto out_fds;
	}
	ret = listen_on(cfg, &s->at);
	if (ret < 0)
		goto out_fds;
	s->lfd = ret;
	ret = ep_add(s->ep, s->lfd, EV_LISTEN);
	if (!ret)
		ret = ep_add(s->ep, s->sfd, EV_SIGNAL);
	if (ret)
		goto out_listen;
	if (cfg->metrics) {	/* bound now, served once started */
		ret = hmmd_metrics_listen(cfg->metrics);
		if (ret < 0)
			goto out_listen;
		s->mfd = ret;
	}
	*out = s;
	return 0;

out_listen:
	close(s->lfd);
	unlink(s->at ? s->at : cfg->socket_path);
	free(s->at);
out_fds:
	if (s->ep >= 0)
		close(s->ep);
	if (s->sfd >= 0)
		close(s->sfd);
out_free:
	free(s->conns);
	free(s);
	return ret;
}

/* The metrics thread ends (its scrapes answered); mfd stays open. */
static void metrics_stop(struct hmmd_server *s)
{
	if (!s->mstarted)
		return;
	__atomic_store_n(&s->mstop, 1, __ATOMIC_RELEASE);
	shutdown(s->mfd, SHUT_RDWR);	/* wakes its accept() */
	pthread_join(s->mthread, NULL);
	s->mstarted = 0;
}

int hmmd_server_start(struct hmmd_server *s, struct hmmd_engine *e)
{
	const char *path = s->cfg->socket_path;
	int ret;

	s->e = e;
	if (s->mfd >= 0) {
		ret = -pthread_create(&s->mthread, NULL, metrics_main, s);
		if (ret) {
			hmmd_log("metrics: no thread: %s", strerror(-ret));
			goto out_engine;
		}
		s->mstarted = 1;
	}
	if (s->at && rename(s->at, path) < 0) {
		ret = -errno;
		hmmd_log("socket %s: rename from %s: %s", path, s->at,
			 strerror(errno));
		goto out_metrics;
	}
	free(s->at);
	s->at = NULL;
	return 0;

out_metrics:
	metrics_stop(s);
out_engine:
	s->e = NULL;		/* as opened: the engine may go first */
	return ret;
}

static void drop(struct hmmd_server *s, unsigned slot)
{
	hmmd_conn_free(s->conns[slot]);	/* joins its finished thread */
	s->conns[slot] = NULL;
	s->nconns--;
}

static void reap(struct hmmd_server *s);

/*
 * A free slot, or max_clients.  A full table may hold a client that has
 * hung up but whose thread has not ended yet: wait for such threads a
 * little (at most HUNGUP_WAIT_MS) rather than refuse a new client.
 */
#define HUNGUP_WAIT_MS 200
static unsigned free_slot(struct hmmd_server *s)
{
	for (int waited = 0;; waited += 2) {
		unsigned slot, i;
		int hung = 0;

		reap(s);
		for (slot = 0; slot < s->cfg->max_clients && s->conns[slot];
		     slot++)
			;
		if (slot < s->cfg->max_clients || waited >= HUNGUP_WAIT_MS)
			return slot;
		for (i = 0; i < s->cfg->max_clients && !hung; i++)
			hung = hmmd_conn_hung_up(s->conns[i]);
		if (!hung)
			return slot;
		usleep(2000);
	}
}

/*
 * May a peer of uid take a slot?  uid 0 and hmmd's own uid may take any
 * free one: its hello then tells whether it is hmmctl, which the last
 * HMMD_ADMIN_SLOTS are kept for (client.c refuses any other client
 * there), so hmmctl gets in whatever trainers hold; others only below
 * those, and one uid in at most half of what is left, so idle
 * connections of one user cannot lock everyone out.  0, or -EUSERS with
 * why[] filled.
 */
static int may_connect(struct hmmd_server *s, uid_t uid, char *why,
		       size_t cap)
{
	unsigned max = s->cfg->max_clients, i, mine = 0;
	unsigned open = hmmd_open_slots(max);
	unsigned per_uid = open / 2 ? open / 2 : 1;

	if (uid == 0 || uid == geteuid())
		return 0;
	for (i = 0; i < max; i++)
		mine += s->conns[i] && hmmd_conn_uid(s->conns[i]) == uid;
	if (s->nconns >= open)
		snprintf(why, cap, "hmmd: too many clients (%u connected; the "
			 "last %u of max_clients %u are kept for hmmctl)",
			 s->nconns, max - open, max);
	else if (mine >= per_uid)
		snprintf(why, cap, "hmmd: too many clients of uid %u (%u "
			 "connected, at most %u per uid)", (unsigned)uid,
			 mine, per_uid);
	else
		return 0;
	return -EUSERS;
}

static void accept_one(struct hmmd_server *s)
{
	socklen_t len = sizeof(struct ucred);
	struct hmmd_conn *c;
	struct ucred cred;
	char why[160];
	unsigned slot;
	int fd, ret;

	fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0) {
		int e = errno;

		if (e != EAGAIN && e != EINTR)
			hmmd_log("accept: %s", strerror(e));
		/* out of fds or memory: the listener stays readable, so
		 * back off rather than spin; clients wait in the backlog */
		if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM)
			usleep(REAP_MS * 1000);
		return;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		hmmd_log("accept: SO_PEERCRED: %s", strerror(errno));
		close(fd);
		return;
	}
	slot = free_slot(s);
	if (slot < s->cfg->max_clients &&
	    may_connect(s, cred.uid, why, sizeof(why))) {
		hmmd_log("refusing a client of uid %u: %s", (unsigned)cred.uid,
			 why + 6);
		hmmd_conn_refuse(fd, -EUSERS, why);
		close(fd);
		return;
	}
	if (slot == s->cfg->max_clients) {
		hmmd_log("refusing a client: %u connected (max_clients)",
			 s->nconns);
		snprintf(why, sizeof(why), "hmmd: too many clients (%u "
			 "connected, max_clients %u)", s->nconns,
			 s->cfg->max_clients);
		hmmd_conn_refuse(fd, -EUSERS, why);
		close(fd);
		return;
	}
	ret = hmmd_conn_new(fd, ++s->next_id, s->cfg, s->e, &c);
	if (ret) {
		hmmd_log("client %llu: cannot take it: %s",
			 (unsigned long long)s->next_id, strerror(-ret));
		close(fd);
		return;
	}
	ret = hmmd_conn_start(c);
	if (ret) {
		hmmd_log("client %llu: no thread: %s",
			 (unsigned long long)s->next_id, strerror(-ret));
		hmmd_conn_free(c);
		return;
	}
	s->conns[slot] = c;
	s->nconns++;
}

/* Free the connections whose thread has finished. */
static void reap(struct hmmd_server *s)
{
	unsigned i;

	for (i = 0; i < s->cfg->max_clients; i++)
		if (s->conns[i] && hmmd_conn_done(s->conns[i]))
			drop(s, i);
}

int hmmd_server_run(struct hmmd_server *s)
{
	struct epoll_event evs[32];
	struct signalfd_siginfo si;
	int i, n;

	for (;;) {
		n = epoll_wait(s->ep, evs, 32, REAP_MS);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		reap(s);
		for (i = 0; i < n; i++) {
			uint64_t d = evs[i].data.u64;

			if (d == EV_LISTEN) {
				accept_one(s);
			} else if (d == EV_SIGNAL) {
				if (read(s->sfd, &si, sizeof(si)) == sizeof(si)) {
					hmmd_log("%s: shutting down",
						 strsignal(si.ssi_signo));
					return 0;
				}
			}
		}
	}
}

void hmmd_server_close(struct hmmd_server *s)
{
	struct timespec until;
	unsigned i;

	/* wake every client thread (back-pressure, then socket), then
	   join; the maps woken answer first (1 s for all at most) */
	if (s->e)		/* NULL: never started, no client */
		hmmd_engine_stop(s->e);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	for (i = 0; i < s->cfg->max_clients; i++)
		if (s->conns[i])
			hmmd_conn_settle(s->conns[i], &until);
	for (i = 0; i < s->cfg->max_clients; i++)
		if (s->conns[i])
			hmmd_conn_kick(s->conns[i]);
	for (i = 0; i < s->cfg->max_clients; i++)
		if (s->conns[i])
			drop(s, i);
	metrics_stop(s);
	if (s->mfd >= 0)
		close(s->mfd);
	close(s->lfd);
	unlink(s->at ? s->at : s->cfg->socket_path);
	free(s->at);
	close(s->ep);
	close(s->sfd);
	free(s->conns);
	free(s);
}
