// SPDX-License-Identifier: MIT
/*
 * hmmctl — look at and steer a running hmmd over its own protocol
 * (libhmm/src/remote/client.c): it connects as one more client (quota 0 asked,
 * nothing pinned), asks, prints, disconnects.
 *
 *   hmmctl [--socket PATH] status
 *   hmmctl [--socket PATH] clients
 *   hmmctl [--socket PATH] tensors
 *   hmmctl [--socket PATH] stats [--json]
 *   hmmctl [--socket PATH] set-quota CLIENT HOST [DEVICE [STORE]]
 *   hmmctl [--socket PATH] evict TENSOR [host|device]
 *
 * Seeing every client and tensor, setting another client's quota and
 * evicting another client's tensor take an administrator (uid 0 or
 * hmmd's own uid); others see themselves.  Exit status: 0, 1 when hmmd
 * refused or is unreachable, 2 on a usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "err.h"

static const char *const tier_name[HMM_TIERS] = { "device", "host", "store" };

static void usage(FILE *f)
{
	fprintf(f,
"usage: hmmctl [--socket PATH] COMMAND\n"
"  status                    daemon summary\n"
"  clients                   connected clients, quotas and use\n"
"  tensors                   tensors, residency per tier\n"
"  stats [--json]            the engine's counters\n"
"  set-quota CLIENT HOST [DEVICE [STORE]]   bytes (K, M, G suffixes)\n"
"  evict TENSOR [host|device]               start an eviction, wait\n"
"--socket: default $HMMD_SOCKET or /run/hmm/hmmd.sock\n");
}

static int size_arg(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -1;
	switch (*end) {
	case 'K': case 'k': v <<= 10; end++; break;
	case 'M': case 'm': v <<= 20; end++; break;
	case 'G': case 'g': v <<= 30; end++; break;
	case 'T': case 't': v <<= 40; end++; break;
	}
	if (*end)
		return -1;
	*out = v;
	return 0;
}

static int fail(const char *what)
{
	fprintf(stderr, "hmmctl: %s: %s\n", what, hmm_last_error());
	return 1;
}

static int cmd_stats(struct hmm_client *c, int json, int brief)
{
	struct hmm_proto_stats_reply st;
	int i;

	if (hmm_client_stats(c, &st))
		return fail("stats");
	if (json) {
		printf("{\"clients\":%llu,\"tensors\":%llu,\"chunks\":%llu,"
		       "\"io_errors\":%llu,\"tiers\":{",
		       (unsigned long long)st.clients,
		       (unsigned long long)st.tensors,
		       (unsigned long long)st.chunks,
		       (unsigned long long)st.io_errors);
		for (i = 0; i < HMM_TIERS; i++) {
			const struct hmm_proto_tier_stats *t = &st.tier[i];

			printf("%s\"%s\":{\"capacity\":%llu,\"resident\":%llu,"
			       "\"peak\":%llu,\"pinned\":%llu,\"bytes_in\":%llu,"
			       "\"bytes_out\":%llu,\"hits\":%llu,\"misses\":%llu,"
			       "\"evictions\":%llu,\"io_ops\":%llu,"
			       "\"stall_s\":%.6f,\"io_s\":%.6f}", i ? "," : "",
			       tier_name[i], (unsigned long long)t->capacity,
			       (unsigned long long)t->resident,
			       (unsigned long long)t->peak,
			       (unsigned long long)t->pinned,
			       (unsigned long long)t->bytes_in,
			       (unsigned long long)t->bytes_out,
			       (unsigned long long)t->hits,
			       (unsigned long long)t->misses,
			       (unsigned long long)t->evictions,
			       (unsigned long long)t->io_ops,
			       t->stall_ns / 1e9, t->io_ns / 1e9);
		}
		printf("}}\n");
		return 0;
	}
	printf("clients %llu  tensors %llu  chunks %llu  io_errors %llu\n",
	       (unsigned long long)st.clients, (unsigned long long)st.tensors,
	       (unsigned long long)st.chunks,
	       (unsigned long long)st.io_errors);
	printf("%-7s %14s %14s %14s %14s", "tier", "capacity", "resident",
	       "peak", "pinned");
	if (!brief)
		printf(" %14s %14s %10s %10s %10s", "bytes_in", "bytes_out",
		       "hits", "misses", "evictions");
	printf("\n");
	for (i = 0; i < HMM_TIERS; i++) {
		const struct hmm_proto_tier_stats *t = &st.tier[i];

		printf("%-7s %14llu %14llu %14llu %14llu", tier_name[i],
		       (unsigned long long)t->capacity,
		       (unsigned long long)t->resident,
		       (unsigned long long)t->peak,
		       (unsigned long long)t->pinned);
		if (!brief)
			printf(" %14llu %14llu %10llu %10llu %10llu",
			       (unsigned long long)t->bytes_in,
			       (unsigned long long)t->bytes_out,
			       (unsigned long long)t->hits,
			       (unsigned long long)t->misses,
			       (unsigned long long)t->evictions);
		printf("\n");
	}
	return 0;
}

static int cmd_list(struct hmm_client *c, uint32_t what)
{
	struct hmm_proto_list_reply l;
	uint64_t cur = 1;

	if (what == HMM_PROTO_LIST_CLIENTS)
		printf("%6s %8s %6s %-20s %12s %12s %12s %8s\n", "id", "pid",
		       "uid", "name", "host_quota", "host_pinned",
		       "store_used", "tensors");
	else
		printf("%6s %6s %6s %-24s %12s %12s %12s %12s %12s %s\n",
		       "id", "owner", "uid", "name", "bytes", "device",
		       "host", "store", "pinned", "flags");
	for (;;) {
		if (hmm_client_list(c, what, cur, &l))
			return fail("list");
		if (!l.id)
			return 0;
		if (what == HMM_PROTO_LIST_CLIENTS)
			printf("%6llu %8u %6u %-20s %12llu %12llu %12llu "
			       "%8llu\n", (unsigned long long)l.id, l.pid,
			       l.uid, l.name[0] ? l.name : "-",
			       (unsigned long long)l.a[HMM_TIER_HOST],
			       (unsigned long long)l.b[HMM_TIER_HOST],
			       (unsigned long long)l.b[HMM_TIER_STORE],
			       (unsigned long long)l.bytes);
		else
			printf("%6llu %6llu %6u %-24s %12llu %12llu %12llu "
			       "%12llu %12llu %s%s\n",
			       (unsigned long long)l.id,
			       (unsigned long long)l.owner, l.uid, l.name,
			       (unsigned long long)l.bytes,
			       (unsigned long long)l.a[HMM_TIER_DEVICE],
			       (unsigned long long)l.a[HMM_TIER_HOST],
			       (unsigned long long)l.a[HMM_TIER_STORE],
			       (unsigned long long)l.b[0],
			       l.flags & HMM_PROTO_TENSOR_PERSIST ?
			       "persist" : "temp",
			       l.flags & (1u << 31) ? ",shared" : "");
		cur = l.id + 1;
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const char *sock = getenv("HMMD_SOCKET");
	struct hmm_proto_hello_reply rep;
	struct hmm_client *c;
	const char *cmd;
	int o, ret;

	while ((o = getopt_long(argc, argv, "+s:h", opts, NULL)) != -1) {
		switch (o) {
		case 's': sock = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	cmd = argv[optind++];
	argc -= optind;
	argv += optind;
	if (strcmp(cmd, "status") && strcmp(cmd, "clients") &&
	    strcmp(cmd, "tensors") && strcmp(cmd, "stats") &&
	    strcmp(cmd, "set-quota") && strcmp(cmd, "evict")) {
		fprintf(stderr, "hmmctl: unknown command \"%s\"\n", cmd);
		usage(stderr);
		return 2;
	}
	if (!sock)
		sock = "/run/hmm/hmmd.sock";
	/* asks a 1-byte host quota: hmmctl pins nothing */
	if (hmm_client_open(sock, (uint64_t[]){ 1, 1, 1 }, "hmmctl", &c,
			    &rep))
		return fail(sock);
	ret = 2;
	if (!strcmp(cmd, "status") && argc == 0) {
		printf("hmmd on %s: protocol %u, chunk %u bytes, this is "
		       "client %llu\n", sock, rep.version, rep.chunk_bytes,
		       (unsigned long long)rep.client_id);
		ret = cmd_stats(c, 0, 1);
	} else if (!strcmp(cmd, "clients") && argc == 0) {
		ret = cmd_list(c, HMM_PROTO_LIST_CLIENTS);
	} else if (!strcmp(cmd, "tensors") && argc == 0) {
		ret = cmd_list(c, HMM_PROTO_LIST_TENSORS);
	} else if (!strcmp(cmd, "stats") && argc <= 1) {
		if (argc == 1 && strcmp(argv[0], "--json"))
			fprintf(stderr, "hmmctl: stats: \"%s\"?\n", argv[0]);
		else
			ret = cmd_stats(c, argc == 1, 0);
	} else if (!strcmp(cmd, "set-quota") && argc >= 2 && argc <= 4) {
		uint64_t q[HMM_TIERS] = { 0 }, id;
		char *end;
		int bad = 0;

		id = strtoull(argv[0], &end, 10);
		bad = *end || end == argv[0] || size_arg(argv[1],
							 &q[HMM_TIER_HOST]) ||
		      (argc > 2 && size_arg(argv[2], &q[HMM_TIER_DEVICE])) ||
		      (argc > 3 && size_arg(argv[3], &q[HMM_TIER_STORE]));
		if (bad)
			fprintf(stderr, "hmmctl: set-quota CLIENT HOST "
				"[DEVICE [STORE]]: numbers, please\n");
		else
			ret = hmm_client_quota_set(c, id, q) ?
			      fail("set-quota") : 0;
	} else if (!strcmp(cmd, "evict") && argc >= 1 && argc <= 2) {
		int tier = argc == 2 && !strcmp(argv[1], "device") ?
			   HMM_TIER_DEVICE : HMM_TIER_HOST;
		char *end;
		uint64_t id = strtoull(argv[0], &end, 10);

		if (*end || end == argv[0] || (argc == 2 &&
		    strcmp(argv[1], "host") && strcmp(argv[1], "device")))
			fprintf(stderr, "hmmctl: evict TENSOR [host|device]\n");
		else
			ret = hmm_client_evict(c, id, 0, HMM_ALL, tier) ?
			      fail("evict") : 0;
	} else {
		usage(stderr);
	}
	hmm_client_close(c);
	return ret;
}
