// SPDX-License-Identifier: MIT
/*
 * config.c — hmmd's settings from an INI file (libinih) and flags.
 * See hmmd.conf.example for every key.
 */
#include <errno.h>
#include <ini.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmm.h"
#include "hmmd.h"

void hmmd_config_init(struct hmmd_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->max_clients = 64;
}

void hmmd_config_fini(struct hmmd_config *cfg)
{
	free(cfg->socket_path);
	free(cfg->socket_group);
	free(cfg->store_path);
	free(cfg->metrics);
	free(cfg->host_dir);
	free(cfg->module);
	free(cfg->module_store);
	memset(cfg, 0, sizeof(*cfg));
}

/* "8G", "512M", "4096", "1T": bytes, 1024-based suffixes (hmmd.h). */
static int set_str(char **dst, const char *value)
{
	char *s = strdup(value);

	if (!s)
		return -ENOMEM;
	free(*dst);
	*dst = s;
	return 0;
}

int hmmd_config_set(struct hmmd_config *cfg, const char *key,
		    const char *value, char *err, size_t errlen)
{
	static const struct {
		const char *key;
		size_t off;
	} strs[] = {
		{ "socket", offsetof(struct hmmd_config, socket_path) },
		{ "socket_group", offsetof(struct hmmd_config, socket_group) },
		{ "store", offsetof(struct hmmd_config, store_path) },
		{ "metrics", offsetof(struct hmmd_config, metrics) },
		{ "host_dir", offsetof(struct hmmd_config, host_dir) },
		{ "module", offsetof(struct hmmd_config, module) },
		{ "module_store", offsetof(struct hmmd_config, module_store) },
	};
	uint64_t v;
	unsigned i;

	for (i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		if (strcmp(key, strs[i].key))
			continue;
		if (!*value) {
			snprintf(err, errlen, "%s: empty", key);
			return -EINVAL;
		}
		return set_str((char **)((char *)cfg + strs[i].off), value);
	}
	if (!strcmp(key, "chunk_bytes") || !strcmp(key, "wait_ms")) {
		if (hmm_size_parse(value, &v) || v > UINT32_MAX ||
		    (!strcmp(key, "chunk_bytes") && v % 4096)) {
			snprintf(err, errlen, "%s: \"%s\" is out of range",
				 key, value);
			return -EINVAL;
		}
		if (!strcmp(key, "chunk_bytes"))
			cfg->chunk_bytes = (uint32_t)v;
		else
			cfg->wait_ms = (unsigned)v;
		return 0;
	}
	if (!strcmp(key, "host_budget") || !strcmp(key, "device_budget") ||
	    !strcmp(key, "store_size") || !strcmp(key, "client_quota") ||
	    !strcmp(key, "module_store_size")) {
		if (hmm_size_parse(value, &v)) {
			snprintf(err, errlen,
				 "%s: \"%s\" is not a size (e.g. 8G, 512M)",
				 key, value);
			return -EINVAL;
		}
		*(!strcmp(key, "host_budget") ? &cfg->host_budget :
		  !strcmp(key, "device_budget") ? &cfg->device_budget :
		  !strcmp(key, "client_quota") ? &cfg->client_quota :
		  !strcmp(key, "module_store_size") ?
		  &cfg->module_store_size : &cfg->store_size) = v;
		return 0;
	}
	if (!strcmp(key, "max_clients") || !strcmp(key, "verbose") ||
	    !strcmp(key, "format")) {
		int max = strcmp(key, "max_clients") ? 1 : HMMD_MAX_CLIENTS;
		int min = strcmp(key, "max_clients") ? 0 : 1;
		char *end;
		long n;

		errno = 0;
		n = strtol(value, &end, 10);
		if (errno || end == value || *end || n < min || n > max) {
			snprintf(err, errlen, "%s: \"%s\" is not %d..%d",
				 key, value, min, max);
			return -EINVAL;
		}
		if (!strcmp(key, "verbose"))
			cfg->verbose = (int)n;
		else if (!strcmp(key, "format"))
			cfg->format = (int)n;
		else
			cfg->max_clients = (unsigned)n;
		return 0;
	}
	snprintf(err, errlen, "unknown key \"%s\"", key);
	return -EINVAL;
}

/* What ini_parse's handler needs, and the first error it met. */
struct load {
	struct hmmd_config *cfg;
	char msg[256];
	int err;
};

static int on_line(void *user, const char *section, const char *name,
		   const char *value)
{
	struct load *l = user;

	if (l->err)		/* keep the first error */
		return 0;
	if (strcmp(section, "hmmd")) {
		snprintf(l->msg, sizeof(l->msg),
			 "section [%s]: only [hmmd] is known", section);
		l->err = -EINVAL;
		return 0;
	}
	l->err = hmmd_config_set(l->cfg, name, value, l->msg, sizeof(l->msg));
	return l->err == 0;
}

int hmmd_config_load(struct hmmd_config *cfg, const char *path,
		     char *err, size_t errlen)
{
	struct load l = { .cfg = cfg };
	FILE *f = fopen(path, "re");
	int line;

	if (!f) {
		int e = -errno;

		snprintf(err, errlen, "%s: %s", path, strerror(-e));
		return e;
	}
	line = ini_parse_file(f, on_line, &l);
	fclose(f);
	if (line == 0)
		return 0;
	if (!l.err)
		snprintf(l.msg, sizeof(l.msg), "not an INI line");
	snprintf(err, errlen, "%s:%d: %s", path, line, l.msg);
	return l.err ? l.err : -EINVAL;
}
