/* SPDX-License-Identifier: MIT */
/*
 * hmmd.h — the shared-mode daemon's internal interfaces.
 *
 * Reading order: main.c (flags, config, signals, readiness), config.c
 * (the INI file), server.c (the listening socket and the event loop),
 * conn.c (one client: receive, decode with libhmm's proto codec, answer),
 * engine.c (libhmm's engine embedded: one hmm context, per-client quotas
 * under the global host budget with back-pressure, metrics text), then
 * the requests (request.h lists their files: request.c dispatches to
 * client.c, tensor.c, handle.c, share.c, map.c, move.c, stats.c),
 * metrics.c (Prometheus text on a loopback TCP port), guard.c (SIGBUS
 * from a client's ftruncate of a host file), bridge.c (the
 * hmmk module's EVICT/FILL served from a store file of its own) and
 * log.c (the one log writer, log.h).
 *
 * What hmmd serves: the socket (SOCK_SEQPACKET, mode 0660, optional
 * group), SO_PEERCRED identity, the codec on every message, isolation of
 * a malformed client, tensors, host maps, quotas, sharing, stats, flush
 * on SIGTERM, restart recovery of persistent tensors, the module bridge.
 * What it does not: a MAP of the device tier is refused (-ENOTSUP: a
 * device address of hmmd is no use to a client); a client's device tier
 * is its own, staged through hmmd's host tier (libhmm's remote/dev_stage.c).
 * A client's regions are libhmm's, their evicted blocks kept in an hmmd
 * tensor (libhmm's remote/region.c), not in the module.
 *
 * Host maps and shared memory.  hmmd opens its engine with
 * HMM_CONFIG_HOST_SHARED: every tensor's host memory is its own memfd.
 * A host MAP pins the range in the engine, then sends that memfd
 * (SCM_RIGHTS; a read-only reopen for a read-only share, the file mode
 * 0600 so another uid cannot upgrade it via /proc/self/fd) with the
 * offset of the range's first byte (a memfd sealed against size
 * changes; an unsealable --host-dir file guarded, guard.c, so that a
 * client's ftruncate never faults hmmd); the client maps it MAP_SHARED, so
 * its pointer is the engine's page, with no copy either way, and two
 * clients of one shared tensor see each other's writes at once.  UNMAP
 * unpins.  The fd reaches the whole tensor: a client can see (not pin)
 * bytes outside its range, which may change or read as zeros while
 * unpinned; only tensors the client holds a handle to are sent, and
 * only to a uid whose reach stays within its host quota: any other map
 * gets a copy of its range (map.c).
 *
 * Threading: the main thread runs the event loop (listener, signalfd),
 * metrics have a thread; each client has its own thread (conn.c) that
 * blocks in its socket and in the engine, and a map that must wait for
 * the budget runs on a job thread of its connection (at most 32), so the
 * client's unmaps meanwhile go through.  engine.c's one mutex protects
 * every table.
 */
#ifndef HMMD_H
#define HMMD_H

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"

#define HMMD_SOCKET_DEFAULT	"/run/hmm/hmmd.sock"
#define HMMD_MAX_CLIENTS	256
#define HMMD_CLIENT_TENSORS	1024	/* tensors one client may hold
					   (each is a memfd in hmmd) */
#define HMMD_HELLO_MS		5000	/* a connection says hello by then */
#define HMMD_ADMIN_SLOTS	2	/* of max_clients (when above 4),
					   kept for hmmctl (a control
					   client of uid 0 or hmmd's uid) */

/* The slots of max clients that every other client may hold (server.c
 * at accept, client.c at hello). */
static inline unsigned hmmd_open_slots(unsigned max)
{
	return max - (max > 4 ? HMMD_ADMIN_SLOTS : 0);
}

/*
 * The daemon's settings: defaults, then the config file, then flags.
 * Owned by main(); strings are heap copies freed by hmmd_config_fini().
 */
struct hmmd_config {
	char *socket_path;	/* where to listen */
	char *socket_group;	/* group of the socket; NULL = hmmd's own */
	char *store_path;	/* the engine's store (NULL: host only) */
	uint64_t host_budget;	/* bytes; 0 = 256 MiB (engine.c) */
	uint64_t device_budget;
	uint64_t store_size;
	uint64_t client_quota;	/* host bytes per uid at most; 0 = a
				   quarter of the host budget (client.c) */
	unsigned max_clients;	/* 1..HMMD_MAX_CLIENTS */
	unsigned wait_ms;	/* back-pressure bound; 0 = 10000 */
	uint32_t chunk_bytes;	/* 0 = libhmm's default (2 MiB) */
	uint32_t pool_bytes;	/* the store's I/O knobs (hmm.h struct */
	uint32_t io_depth;	/* hmm_config); 0 = libhmm's defaults */
	uint32_t queue_depth;
	char *metrics;		/* "127.0.0.1:PORT"; NULL = none */
	char *host_dir;		/* tmpfs for the host tier's files (libhmm
				   config.host_dir); NULL = memfds */
	char *module;		/* hmmk device; NULL = HMMK_DEVICE if it
				   exists; "none" = never attach */
	char *module_store;	/* the bridge's page store; NULL =
				   <store_path>.hmmk */
	uint64_t module_store_size; /* of a new one; 0 = bridge.c's */
	int verbose;		/* log every message, not only failures */
	int format;		/* format the store whatever it holds
				   (HMM_CONFIG_STORE_FORMAT); 0 = keep an
				   hmm store, refuse foreign data */
};

void hmmd_config_init(struct hmmd_config *cfg);
void hmmd_config_fini(struct hmmd_config *cfg);

/*
 * Read the INI file path into cfg (section [hmmd]; keys socket,
 * socket_group, store, host_budget, device_budget, store_size,
 * client_quota, chunk_bytes, wait_ms, pool_bytes, io_depth, queue_depth,
 * metrics, host_dir, module,
 * module_store, module_store_size, max_clients, verbose, format).
 * Returns 0, or -ENOENT/-EACCES (cannot open),
 * -EINVAL (a bad line, key or value; the message names file and line,
 * written into err[errlen]).
 */
int hmmd_config_load(struct hmmd_config *cfg, const char *path,
		     char *err, size_t errlen);

/* Set key (a config file key) to value; 0 or -EINVAL (message in err). */
int hmmd_config_set(struct hmmd_config *cfg, const char *key,
		    const char *value, char *err, size_t errlen);

#define HMMD_HOST_BUDGET_DEF	(256ull << 20)	/* host_budget 0 */
#define HMMD_CHUNK_DEF		(2u << 20)	/* chunk_bytes 0 */

/*
 * The keys together, once all are set (file, then flags): every map pins
 * whole chunks, so a host_budget or a client_quota below one chunk could
 * admit no map at all.  0, or -EINVAL naming both keys in err.
 */
int hmmd_config_check(const struct hmmd_config *cfg, char *err,
		      size_t errlen);


/* ---- the engine (engine.c) ------------------------------------------------- */

struct hmmd_engine;		/* one per daemon */
struct hmmd_client;		/* one per connection that said hello */

/* Open libhmm on cfg's store and budgets; 0 or -errno (logged). */
int hmmd_engine_open(const struct hmmd_config *cfg, struct hmmd_engine **out);

/* Report b's counters (bridge.h) in the metrics; b may be NULL.  Main
 * thread, before the server opens; b outlives the engine's serving. */
struct hmmd_bridge;
void hmmd_engine_set_bridge(struct hmmd_engine *e, struct hmmd_bridge *b);

/* Wake every waiter; later admissions fail with -ESHUTDOWN. */
void hmmd_engine_stop(struct hmmd_engine *e);

/* Free the non-persistent tensors, flush the store, close libhmm.
 * Every client must be gone.  Returns the flush's result. */
int hmmd_engine_close(struct hmmd_engine *e);

/* A start that failed after hmmd_engine_open: close e, then remove the
 * store files this start created (a new --store, each new member of a
 * striped one); a store that was there before is kept, as closed. */
void hmmd_engine_discard(struct hmmd_engine *e);

/* Write the metrics (Prometheus text) into buf; its length. */
size_t hmmd_engine_metrics(struct hmmd_engine *e, char *buf, size_t cap);

/* ---- the server ------------------------------------------------------------ */

struct hmmd_server;		/* server.c: hmmd_server_open / _close */
struct hmmd_conn;		/* conn.c: one client */

/*
 * Check and take what serving needs before the engine opens (so that a
 * start that cannot serve fails before it makes a store): bind and
 * listen on "cfg->socket_path.new" (mode 0660, group socket_group),
 * bind the metrics listener.  A stale socket file at the path (nobody
 * listening) is replaced; a live one is not (-EADDRINUSE); a path that
 * is no socket is refused (-EEXIST).  Nobody is served until
 * hmmd_server_start.  Returns 0 and *out, or -errno with a logged
 * reason.
 */
int hmmd_server_open(const struct hmmd_config *cfg, struct hmmd_server **out);

/* Serve e: start the metrics thread and rename the socket to
 * cfg->socket_path, where clients find it.  0, or -errno (logged) with
 * s as hmmd_server_open left it (e may be closed before s). */
int hmmd_server_start(struct hmmd_server *s, struct hmmd_engine *e);

/* The signals that stop hmmd cleanly: SIGTERM, SIGINT and SIGHUP (a
 * closed terminal must not kill it without its flush), into *set. */
void hmmd_stop_signals(sigset_t *set);

/*
 * Serve until one of hmmd_stop_signals (blocked by the caller and read
 * here through a signalfd).  Returns 0 on a signal, -errno on a fatal
 * error.
 */
int hmmd_server_run(struct hmmd_server *s);

/* Close every client, the listener, and remove the socket file. */
void hmmd_server_close(struct hmmd_server *s);

/* ---- metrics (metrics.c) ------------------------------------------------- */

/* Parse "127.0.0.1:PORT" (IPv4, loopback only, port 0..65535; 0: the
 * kernel picks) into *sa: 0, or -EINVAL with the reason, naming the
 * metrics key and addr, in err.  The one parser: the config checks a
 * value with it when it is set, the listener when it binds. */
struct sockaddr_in;
int hmmd_metrics_addr(const char *addr, struct sockaddr_in *sa,
		      char *err, size_t errlen);
/* Listen on "127.0.0.1:PORT" (loopback only); the fd or -errno. */
int hmmd_metrics_listen(const char *addr);

/* Accept one connection on lfd (blocking) and have it answered (GET
 * /metrics or /, any query string; else 400, 404, 405, or 408 with no
 * request line) on a thread of its own, at most 16 at once (then a
 * 503), each within 1 s to read and 1 s to answer; returns at once when
 * lfd is shut down. */
void hmmd_metrics_serve(int lfd, struct hmmd_engine *e);

/* Wait for every answer in flight (bounded: 2 s each). */
void hmmd_metrics_drain(void);

/* ---- one connection (conn.c, called by server.c) --------------------------- */

/*
 * A new client on fd (accepted, non-blocking, close-on-exec): reads its
 * SO_PEERCRED.  Returns 0 and *out or -errno (fd left to the caller).
 */
int hmmd_conn_new(int fd, uint64_t id, const struct hmmd_config *cfg,
		  struct hmmd_engine *e, struct hmmd_conn **out);

/* Start c's thread: it serves c until the peer goes or breaks the
 * protocol (reason logged), then releases what c held in the engine and
 * sets c->done.  0 or -errno. */
int hmmd_conn_start(struct hmmd_conn *c);

/* The peer's uid (SO_PEERCRED at accept). */
uid_t hmmd_conn_uid(const struct hmmd_conn *c);

/* 1 once the thread has finished (then hmmd_conn_free joins it). */
int hmmd_conn_done(struct hmmd_conn *c);

/* 1 if the peer has hung up (its thread may not have noticed yet).
 * Main thread; does not read from the socket. */
int hmmd_conn_hung_up(struct hmmd_conn *c);

/* Wait (until the CLOCK_REALTIME time until at most) for c's waiting
 * maps to have answered, once hmmd_engine_stop woke them: so that their
 * clients read "shutting down" rather than find the connection gone. */
struct timespec;
void hmmd_conn_settle(struct hmmd_conn *c, const struct timespec *until);

/* Wake the thread out of its socket (shutdown); it then finishes. */
void hmmd_conn_kick(struct hmmd_conn *c);

/* Join the thread, close fd, free c. */
void hmmd_conn_free(struct hmmd_conn *c);

/* ---- requests (request.h's files, called by conn.c's thread) ---------- */

/* client.c: a hello from a peer with cred: register a client with its
 * quotas.  Fills the reply; 0 or -errno (detail in hmm_last_error()). */
int hmmd_client_new(struct hmmd_engine *e, uint64_t id, pid_t pid,
		    uid_t uid, const struct hmm_proto_hello *h,
		    struct hmmd_client **out,
		    struct hmm_proto_hello_reply *rep);

/* The client went away: unmap its maps, drop its handles, free its
 * non-persistent tensors nobody else holds. */
void hmmd_client_free(struct hmmd_engine *e, struct hmmd_client *cl);

/*
 * Serve request m for cl: the reply goes into out (cap bytes), its fd
 * (a MAP's memfd) into *fd (-1 when none; the caller sends and closes
 * it).  Returns the reply's length (> 0).  Failures of the request are
 * ERROR replies, not returns.
 */
int hmmd_request(struct hmmd_engine *e, struct hmmd_client *cl,
		 const struct hmm_proto_msg *m, void *out, size_t cap,
		 int *fd);

/* Refuse a connection politely: one ERROR of err with detail, no state. */
void hmmd_conn_refuse(int fd, int err, const char *detail);

#endif /* HMMD_H */
