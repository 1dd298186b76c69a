// SPDX-License-Identifier: MIT
/*
 * main.c — hmmd, the shared-mode daemon of hmm: flags, the config file,
 * signals, readiness for systemd, then the server loop (server.c).
 *
 *   hmmd [--config FILE] [--socket PATH] [--store PATH] [--group NAME]
 *        [--host-budget SIZE] [--client-quota SIZE] [--chunk SIZE]
 *        [--wait-ms MS] [--metrics 127.0.0.1:PORT] [-v]
 *        [--module DEV|none] [--module-store PATH] [--module-store-size SIZE]
 *        [--format]
 *
 * The module bridge (bridge.c): when DEV (default /dev/hmmk, if it
 * exists) is there, hmmd attaches as the hmmk module's daemon and serves
 * its EVICT / FILL from the store file --module-store (default: the
 * --store path with ".hmmk" appended).  An explicit --module that cannot
 * attach is an error; an absent /dev/hmmk is not.
 *
 * Start order: the socket (bound as PATH.new) and the metrics port,
 * then the engine and its store, then the bridge, then the socket is
 * renamed to PATH; a start that cannot serve thus fails before it makes
 * a store, and one that fails later removes the new store it made.
 *
 * Runs in the foreground.  Flags override the config file, whatever
 * their order.  When $NOTIFY_SOCKET is set (systemd Type=notify) it
 * sends "READY=1" once the socket listens and "STOPPING=1" on SIGTERM.
 * Exit status: 0 after SIGTERM/SIGINT/SIGHUP, 1 on a runtime failure, 2
 * on a usage or config error.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "uapi/hmmk.h"
#include "bridge.h"
#include "guard.h"
#include "hmm.h"
#include "hmmd.h"
#include "log.h"
#include "proto.h"

/* sd_notify(3) without libsystemd: one datagram to $NOTIFY_SOCKET. */
static void notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t len;
	int fd;

	if (!path || !*path || strlen(path) >= sizeof(sa.sun_path))
		return;
	memcpy(sa.sun_path, path, strlen(path));
	if (sa.sun_path[0] == '@')	/* abstract namespace */
		sa.sun_path[0] = 0;
	len = offsetof(struct sockaddr_un, sun_path) + strlen(path);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (sendto(fd, state, strlen(state), MSG_NOSIGNAL,
		   (struct sockaddr *)&sa, len) < 0)
		hmmd_log("NOTIFY_SOCKET %s: %s", path, strerror(errno));
	close(fd);
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: hmmd [--config FILE] [--socket PATH] [--store PATH] [--group NAME]\n"
"            [--host-budget SIZE] [--client-quota SIZE] [--chunk SIZE]\n"
"            [--wait-ms MS] [--metrics 127.0.0.1:PORT] [--host-dir DIR]\n"
"            [--module DEV] [--module-store PATH] [--format] [-v]\n"
"            [--pool SIZE] [--io-depth N] [--queue-depth N]\n"
"            [--store-size SIZE] [--module-store-size SIZE]\n"
"  -c, --config FILE  INI file, section [hmmd] (see\n"
"                 daemon/hmmd.conf.example)\n"
"  -s, --socket PATH  listen here (default %s)\n"
"  -S, --store PATH   the store file or block device (persistent\n"
"                 tensors)\n"
"  -g, --group NAME   group owning the socket (mode 0660)\n"
"  --store-size SIZE    size of a new store file (default 1G)\n"
"  --format       format the store whatever it holds, persistent tensors\n"
"                 included (without it: an hmm store is kept, a new or\n"
"                 empty file formatted, foreign data refused)\n"
"  --host-budget SIZE   global host budget (default 256M)\n"
"  --client-quota SIZE  host quota per uid at most (default budget/4)\n"
"  --chunk SIZE   chunk bytes (default 2M)\n"
"  --wait-ms MS   back-pressure bound of a map (default 10000)\n"
"  --pool SIZE    the store's pinned I/O pool, up to 1G (default 4M)\n"
"  --io-depth N   store I/Os in flight, up to 4096 (default 4)\n"
"  --queue-depth N  io_uring entries, up to 4096 (default max(64, N))\n"
"  --metrics ADDR Prometheus text on http://ADDR/metrics (loopback only)\n"
"  --host-dir DIR the host tier's files in this tmpfs (mount it with\n"
"                 huge=within_size for huge pages); default memfds\n"
"  -v, --verbose  log every message\n"
"  --module DEV   attach to the hmmk module (default %s if present;\n"
"                 \"none\" = never)\n"
"  --module-store PATH  the module's page store (default STORE.hmmk)\n"
"  --module-store-size SIZE  size of a new module store (default 1G)\n"
"  -h, --help     this text\n"
"Flags override the config file.  Foreground; SIGTERM stops it.\n",
		HMMD_SOCKET_DEFAULT, HMMK_DEVICE);
}

/* Parse argv into cfg: config file first, then the flags over it. */
static int parse_args(int argc, char **argv, struct hmmd_config *cfg)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "socket", required_argument, NULL, 's' },
		{ "store", required_argument, NULL, 'S' },
		{ "group", required_argument, NULL, 'g' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "host-budget", required_argument, NULL, 'B' },
		{ "store-size", required_argument, NULL, 'Z' },
		{ "client-quota", required_argument, NULL, 'Q' },
		{ "chunk", required_argument, NULL, 'C' },
		{ "wait-ms", required_argument, NULL, 'W' },
		{ "metrics", required_argument, NULL, 'M' },
		{ "module", required_argument, NULL, 'm' },
		{ "module-store", required_argument, NULL, 'D' },
		{ "module-store-size", required_argument, NULL, 'z' },
		{ "host-dir", required_argument, NULL, 'H' },
		{ "pool", required_argument, NULL, 'P' },
		{ "io-depth", required_argument, NULL, 'I' },
		{ "queue-depth", required_argument, NULL, 'q' },
		{ "format", no_argument, NULL, 'F' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const char *config = NULL, *keys[32], *vals[32];
	char err[512];
	int o, n = 0, i;

	while ((o = getopt_long(argc, argv, "c:s:S:g:vh", opts, NULL)) != -1) {
		switch (o) {
		case 'c': config = optarg; break;
		case 's': keys[n] = "socket"; vals[n++] = optarg; break;
		case 'S': keys[n] = "store"; vals[n++] = optarg; break;
		case 'g': keys[n] = "socket_group"; vals[n++] = optarg; break;
		case 'v': keys[n] = "verbose"; vals[n++] = "1"; break;
		case 'B': keys[n] = "host_budget"; vals[n++] = optarg; break;
		case 'Z': keys[n] = "store_size"; vals[n++] = optarg; break;
		case 'Q': keys[n] = "client_quota"; vals[n++] = optarg; break;
		case 'C': keys[n] = "chunk_bytes"; vals[n++] = optarg; break;
		case 'W': keys[n] = "wait_ms"; vals[n++] = optarg; break;
		case 'M': keys[n] = "metrics"; vals[n++] = optarg; break;
		case 'm': keys[n] = "module"; vals[n++] = optarg; break;
		case 'D': keys[n] = "module_store"; vals[n++] = optarg; break;
		case 'z':
			keys[n] = "module_store_size";
			vals[n++] = optarg;
			break;
		case 'H': keys[n] = "host_dir"; vals[n++] = optarg; break;
		case 'P': keys[n] = "pool_bytes"; vals[n++] = optarg; break;
		case 'I': keys[n] = "io_depth"; vals[n++] = optarg; break;
		case 'q': keys[n] = "queue_depth"; vals[n++] = optarg; break;
		case 'F': keys[n] = "format"; vals[n++] = "1"; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -EINVAL;
		}
		if (n == 32) {
			hmmd_log("too many flags");
			return -EINVAL;
		}
	}
	if (optind < argc) {
		hmmd_log("unexpected argument \"%s\"", argv[optind]);
		usage(stderr);
		return -EINVAL;
	}
	if (config && hmmd_config_load(cfg, config, err, sizeof(err))) {
		hmmd_log("config %s", err);
		return -EINVAL;
	}
	for (i = 0; i < n; i++)
		if (hmmd_config_set(cfg, keys[i], vals[i], err, sizeof(err))) {
			hmmd_log("flag: %s", err);
			return -EINVAL;
		}
	if (hmmd_config_check(cfg, err, sizeof(err))) {
		hmmd_log("config: %s", err);
		return -EINVAL;
	}
	if (!cfg->socket_path &&
	    hmmd_config_set(cfg, "socket", HMMD_SOCKET_DEFAULT, err,
			    sizeof(err)))
		return -ENOMEM;
	return 0;
}

/*
 * Start the module bridge when asked or when the module is there.
 * Returns 0 (attached, or nothing to attach to) or -errno when an
 * explicit --module cannot be served.
 */
static int bridge_start(const struct hmmd_config *cfg,
			struct hmmd_bridge **out, char **store_buf)
{
	const char *dev = cfg->module ? cfg->module : HMMK_DEVICE;
	const char *store = cfg->module_store;
	int ret;

	*out = NULL;
	if (!strcmp(dev, "none"))
		return 0;
	if (!cfg->module && access(dev, F_OK))
		return 0;			/* no module: run as before */
	if (!store && cfg->store_path) {
		/* a striped store's first member's name */
		if (asprintf(store_buf, "%.*s.hmmk",
			     (int)strcspn(cfg->store_path, ","),
			     cfg->store_path) < 0)
			return -ENOMEM;
		store = *store_buf;
	}
	if (!store) {
		hmmd_log("module bridge: %s: no store for its pages "
			 "(--store or --module-store)%s", dev,
			 cfg->module ? "" : "; not attaching");
		return cfg->module ? -EINVAL : 0;
	}
	if (cfg->store_path && !strcmp(store, cfg->store_path)) {
		hmmd_log("module bridge: --module-store %s is the engine's "
			 "store; give it a file of its own", store);
		return -EINVAL;
	}
	ret = hmmd_bridge_open(dev, store, cfg->module_store_size, out);
	if (ret && !cfg->module) {
		hmmd_log("module bridge: not attached; serving without it");
		return 0;
	}
	return ret;
}

/* Every tensor is a memfd here: take all the fds the hard limit allows
 * (a soft limit of 1024 ran out at 1,010 tensors). */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		hmmd_log("RLIMIT_NOFILE: cannot raise to %llu: %s",
			 (unsigned long long)rl.rlim_max, strerror(errno));
}

int main(int argc, char **argv)
{
	struct hmmd_bridge *bridge = NULL;
	char *bridge_store = NULL;
	struct hmmd_config cfg;
	struct hmmd_server *s;
	struct hmmd_engine *e;
	sigset_t sigs;
	int ret;

	hmmd_config_init(&cfg);
	if (parse_args(argc, argv, &cfg)) {
		hmmd_config_fini(&cfg);
		return 2;
	}
	/* SIGTERM, SIGINT and SIGHUP are read from a signalfd in the loop */
	hmmd_stop_signals(&sigs);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	hmmd_guard_init();	/* a client's ftruncate must not kill us */
	raise_nofile();

	/* what serving needs first (the socket, the metrics port), so that
	   a start that cannot serve fails before it makes a store */
	ret = hmmd_server_open(&cfg, &s);
	if (ret) {
		hmmd_log("cannot serve %s%s%s: %s", cfg.socket_path,
			 cfg.metrics ? " and metrics on " : "",
			 cfg.metrics ? cfg.metrics : "", strerror(-ret));
		goto out_config;
	}
	ret = hmmd_engine_open(&cfg, &e);
	if (ret)
		goto out_server;
	ret = bridge_start(&cfg, &bridge, &bridge_store);
	if (ret)
		goto out_engine;
	hmmd_engine_set_bridge(e, bridge);
	ret = hmmd_server_start(s, e);
	if (ret)
		goto out_bridge;
	hmmd_log("listening on %s (protocol %d..%d, pid %d)", cfg.socket_path,
		 HMM_PROTO_VERSION_MIN, HMM_PROTO_VERSION_MAX, (int)getpid());
	notify("READY=1\nSTATUS=serving");
	ret = hmmd_server_run(s);
	notify("STOPPING=1");
	hmmd_server_close(s);
	hmmd_bridge_close(bridge);	/* flushes the module's store */
	free(bridge_store);
	/* every client is gone: flush the store (persistent tensors) */
	if (hmmd_engine_close(e) && !ret)
		ret = -EIO;
	if (ret)
		hmmd_log("event loop: %s", strerror(-ret));
	else
		hmmd_log("stopped");
	hmmd_config_fini(&cfg);
	return ret ? 1 : 0;

	/* a failed start: nothing was served; a store it made goes */
out_bridge:
	hmmd_bridge_close(bridge);
	free(bridge_store);
out_engine:
	hmmd_engine_discard(e);
out_server:
	hmmd_server_close(s);
out_config:
	hmmd_config_fini(&cfg);
	return 1;
}
