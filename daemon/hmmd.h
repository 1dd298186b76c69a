/* SPDX-License-Identifier: MIT */
/*
 * hmmd.h — the shared-mode daemon's internal interfaces.
 *
 * Reading order: main.c (flags, config, signals, readiness), config.c
 * (the INI file), server.c (the listening socket and the event loop),
 * conn.c (one client: receive, decode with libhmm/src/proto.c, answer).
 *
 * What is built: the socket (SOCK_SEQPACKET, mode 0660, optional group),
 * SO_PEERCRED identity, the codec on every message, the hello version
 * negotiation, isolation of a malformed client (its connection closes
 * with a logged reason, everyone else is served), readiness and SIGTERM.
 * What is not: the engine (tensors, maps, quotas, stats, the store, the
 * module bridge).  Every request the engine would serve is answered with
 * an ERROR of -ENOSYS whose detail says so; nothing is faked.
 *
 * Threading: hmmd is one thread; nothing here locks.
 */
#ifndef HMMD_H
#define HMMD_H

#include <stdint.h>
#include <sys/types.h>

#define HMMD_SOCKET_DEFAULT	"/run/hmm/hmmd.sock"
#define HMMD_MAX_CLIENTS	256

/*
 * The daemon's settings: defaults, then the config file, then flags.
 * Owned by main(); strings are heap copies freed by hmmd_config_fini().
 */
struct hmmd_config {
	char *socket_path;	/* where to listen */
	char *socket_group;	/* group of the socket; NULL = hmmd's own */
	char *store_path;	/* the store (NULL: none); not opened yet */
	uint64_t host_budget;	/* bytes; 0 = unset (engine not built) */
	uint64_t device_budget;
	uint64_t store_size;
	unsigned max_clients;	/* 1..HMMD_MAX_CLIENTS */
	int verbose;		/* log every message, not only failures */
};

void hmmd_config_init(struct hmmd_config *cfg);
void hmmd_config_fini(struct hmmd_config *cfg);

/*
 * Read the INI file path into cfg (section [hmmd]; keys socket,
 * socket_group, store, host_budget, device_budget, store_size,
 * max_clients, verbose).  Returns 0, or -ENOENT/-EACCES (cannot open),
 * -EINVAL (a bad line, key or value; the message names file and line,
 * written into err[errlen]).
 */
int hmmd_config_load(struct hmmd_config *cfg, const char *path,
		     char *err, size_t errlen);

/* Set key (a config file key) to value; 0 or -EINVAL (message in err). */
int hmmd_config_set(struct hmmd_config *cfg, const char *key,
		    const char *value, char *err, size_t errlen);

/* ---- the server ------------------------------------------------------------ */

struct hmmd_server;		/* server.c: hmmd_server_open / _close */
struct hmmd_conn;		/* conn.c: one client */

/*
 * Bind and listen on cfg->socket_path (mode 0660, group socket_group).
 * A stale socket file (nobody listening) is replaced; a live one is not
 * (-EADDRINUSE).  Returns 0 and *out, or -errno with a logged reason.
 */
int hmmd_server_open(const struct hmmd_config *cfg,
		     struct hmmd_server **out);

/*
 * Serve until SIGTERM or SIGINT (blocked by the caller and read here
 * through a signalfd).  Returns 0 on a signal, -errno on a fatal error.
 */
int hmmd_server_run(struct hmmd_server *s);

/* Close every client, the listener, and remove the socket file. */
void hmmd_server_close(struct hmmd_server *s);

/* ---- one connection (conn.c, called by server.c) --------------------------- */

/*
 * A new client on fd (accepted, non-blocking, close-on-exec): reads its
 * SO_PEERCRED.  Returns 0 and *out or -errno (fd left to the caller).
 */
int hmmd_conn_new(int fd, uint64_t id, const struct hmmd_config *cfg,
		  struct hmmd_conn **out);

/*
 * fd is ready (hmmd_conn_events): send the reply waiting, then receive
 * and answer queued messages (up to a turn's worth).  Returns 0 to keep
 * the connection, or -errno (reason logged) when the server must free it
 * with hmmd_conn_free().
 */
int hmmd_conn_serve(struct hmmd_conn *c);

int hmmd_conn_fd(const struct hmmd_conn *c);

/* What to wait for next: EPOLLIN, or EPOLLOUT while a reply waits. */
int hmmd_conn_events(const struct hmmd_conn *c);

/* Close fd and free c. */
void hmmd_conn_free(struct hmmd_conn *c);

/* Refuse a connection politely: one ERROR of err with detail, no state. */
void hmmd_conn_refuse(int fd, int err, const char *detail);

/* ---- log --------------------------------------------------------------- */

/* A line on stderr (the journal under systemd), "hmmd: " first. */
void hmmd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* HMMD_H */
