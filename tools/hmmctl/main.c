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
 *   hmmctl [--socket PATH] rm TENSOR
 *
 * Seeing every client and tensor, setting another client's quota and
 * evicting or deleting another uid's tensor take an administrator (uid 0
 * or hmmd's own uid); others see (evict, delete) their own uid's clients
 * and tensors.
 * TENSOR is an id or the name of the one listed tensor that has it.
 * Exit status: 0, 1 when hmmd refused or is unreachable, 2 on a usage
 * error (found before hmmd is asked anything, the word named; client 0
 * among them).
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
"  set-quota CLIENT HOST [DEVICE [STORE]]   bytes (K, M, G, T suffixes)\n"
"  evict TENSOR [host|device]               start an eviction, wait\n"
"  rm TENSOR                 delete a saved (persistent) tensor\n"
"    (TENSOR: its id, or its name where one tensor has it)\n"
"-s, --socket PATH: default $HMMD_SOCKET or /run/hmm/hmmd.sock\n"
"-h, --help: this text\n");
}

/* A usage error naming the command, the word and why: exit status 2. */
static int bad(const char *cmd, const char *what, const char *val,
	       const char *why)
{
	fprintf(stderr, "hmmctl: %s: %s \"%s\": %s\n", cmd, what, val, why);
	return 2;
}

/* A whole decimal number that fits 64 bits. */
static int id_arg(const char *s, uint64_t *out)
{
	char *end;

	errno = 0;
	if (*s < '0' || *s > '9')
		return -1;
	*out = strtoull(s, &end, 10);
	return errno || *end ? -1 : 0;
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

/* TENSOR as given: its id, or the one tensor of that name hmmd lists. */
static int tensor_id(struct hmm_client *c, const char *cmd, const char *name,
		     uint64_t *id)
{
	struct hmm_proto_list_reply l;
	uint64_t cur = 1;
	int found = 0;

	if (!id_arg(name, id))
		return 0;
	for (;;) {
		if (hmm_client_list(c, HMM_PROTO_LIST_TENSORS, cur, &l))
			return fail(cmd);
		if (!l.id)
			break;
		if (!strncmp(l.name, name, sizeof(l.name)) &&
		    strlen(name) < sizeof(l.name)) {
			*id = l.id;
			found++;
		}
		cur = l.id + 1;
	}
	if (found == 1)
		return 0;
	if (found)
		fprintf(stderr, "hmmctl: %s: %d tensors are named \"%s\": "
			"give its id (hmmctl tensors)\n", cmd, found, name);
	else
		fprintf(stderr, "hmmctl: %s: no tensor \"%s\" that hmmd "
			"shows this user (hmmctl tensors)\n", cmd, name);
	return 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	static const char *const quota_what[] = { "CLIENT", "HOST", "DEVICE",
						  "STORE" };
	static const int quota_tier[] = { -1, HMM_TIER_HOST, HMM_TIER_DEVICE,
					  HMM_TIER_STORE };
	const char *sock = getenv("HMMD_SOCKET");
	struct hmm_proto_hello_reply rep;
	uint64_t q[HMM_TIERS] = { 0 }, id = 0;
	int o, ret, max_args, min_args = 0, json = 0, tier = HMM_TIER_HOST;
	struct hmm_client *c;
	const char *cmd;

	while ((o = getopt_long(argc, argv, "+s:h", opts, NULL)) != -1) {
		switch (o) {
		case 's':
			if (!*optarg) {
				fprintf(stderr, "hmmctl: --socket \"\": want "
					"a path, not empty\n");
				return 2;
			}
			sock = optarg;
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (sock && !*sock) {	/* set but empty: not a path, not unset */
		fprintf(stderr, "hmmctl: $HMMD_SOCKET is set but empty: want a "
			"path (or --socket PATH)\n");
		return 2;
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	cmd = argv[optind++];
	argc -= optind;
	argv += optind;
	/* every word is checked before hmmd is asked anything */
	if (!strcmp(cmd, "status") || !strcmp(cmd, "clients") ||
	    !strcmp(cmd, "tensors")) {
		max_args = 0;
	} else if (!strcmp(cmd, "stats")) {
		max_args = 1;
	} else if (!strcmp(cmd, "set-quota")) {
		min_args = 2;
		max_args = 4;
	} else if (!strcmp(cmd, "evict")) {
		min_args = 1;
		max_args = 2;
	} else if (!strcmp(cmd, "rm")) {
		min_args = max_args = 1;
	} else {
		fprintf(stderr, "hmmctl: unknown command \"%s\"\n", cmd);
		usage(stderr);
		return 2;
	}
	if (argc > max_args)
		return bad(cmd, "argument", argv[max_args], "unexpected");
	if (argc < min_args) {
		fprintf(stderr, "hmmctl: %s: wants %s\n", cmd,
			!strcmp(cmd, "evict") ? "TENSOR [host|device]" :
			!strcmp(cmd, "rm") ? "TENSOR" :
			"CLIENT HOST [DEVICE [STORE]]");
		return 2;
	}
	if (!strcmp(cmd, "stats") && argc) {
		if (strcmp(argv[0], "--json"))
			return bad(cmd, "option", argv[0], "only --json");
		json = 1;
	}
	for (int i = 0; !strcmp(cmd, "set-quota") && i < argc; i++) {
		int t = quota_tier[i];

		/* ids start at 1: 0 is the protocol's "this connection",
		   hmmctl's own, never the client meant */
		if (t < 0 ? id_arg(argv[i], &id) || !id :
		    hmm_size_parse(argv[i], &q[t]))
			return bad(cmd, quota_what[i], argv[i], t < 0 ?
				   "not a client id (hmmctl clients)" :
				   "not a byte size (K, M, G, T suffixes)");
	}
	if (!strcmp(cmd, "evict") && argc == 2) {
		if (strcmp(argv[1], "host") && strcmp(argv[1], "device"))
			return bad(cmd, "tier", argv[1], "host or device");
		tier = strcmp(argv[1], "host") ? HMM_TIER_DEVICE :
		       HMM_TIER_HOST;
	}
	if (!sock)
		sock = "/run/hmm/hmmd.sock";
	/* asks a 1-byte host quota: hmmctl pins nothing; and says it is
	   a control tool, which hmmd's kept slots are for (as root or as
	   hmmd's user) */
	if (hmm_client_open_feat(sock, (uint64_t[]){ 1, 1, 1 }, "hmmctl",
				 HMM_PROTO_FEAT_CONTROL, &c, &rep))
		return fail(sock);
	if (!strcmp(cmd, "status")) {
		printf("hmmd on %s: protocol %u, chunk %u bytes, this is "
		       "client %llu\n", sock, rep.version, rep.chunk_bytes,
		       (unsigned long long)rep.client_id);
		ret = cmd_stats(c, 0, 1);
	} else if (!strcmp(cmd, "clients")) {
		ret = cmd_list(c, HMM_PROTO_LIST_CLIENTS);
	} else if (!strcmp(cmd, "tensors")) {
		ret = cmd_list(c, HMM_PROTO_LIST_TENSORS);
	} else if (!strcmp(cmd, "stats")) {
		ret = cmd_stats(c, json, 0);
	} else if (!strcmp(cmd, "set-quota")) {
		ret = hmm_client_quota_set(c, id, q) ? fail("set-quota") : 0;
	} else {
		ret = tensor_id(c, cmd, argv[0], &id);
		if (!ret && !strcmp(cmd, "rm"))
			ret = hmm_client_tensor_rm(c, id) ? fail("rm") : 0;
		else if (!ret)
			ret = hmm_client_evict(c, id, 0, HMM_ALL, tier) ?
			      fail("evict") : 0;
	}
	hmm_client_close(c);
	return ret;
}
