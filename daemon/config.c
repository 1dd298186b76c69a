// SPDX-License-Identifier: MIT
/*
 * config.c — hmmd's settings from an INI file (libinih) and flags.
 * See hmmd.conf.example for every key.
 */
#include <errno.h>
#include <grp.h>
#include <ini.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>

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

/* What a string key's value can be checked for before anything starts
 * (a bad one would otherwise stop hmmd half-way, in a second message). */
static int str_check(const char *key, const char *value, char *err,
		     size_t errlen)
{
	struct sockaddr_in sa;

	if (!strcmp(key, "metrics"))
		return hmmd_metrics_addr(value, &sa, err, errlen);
	if (!strcmp(key, "socket_group") && !getgrnam(value)) {
		snprintf(err, errlen, "socket_group: \"%s\" is no group",
			 value);
		return -EINVAL;
	}
	return 0;
}

#define OFF(f)	offsetof(struct hmmd_config, f)

/* The string keys: a heap copy at off, never empty. */
static const struct {
	const char *key;
	size_t off;
} strs[] = {
	{ "socket", OFF(socket_path) },
	{ "socket_group", OFF(socket_group) },
	{ "store", OFF(store_path) },
	{ "metrics", OFF(metrics) },
	{ "host_dir", OFF(host_dir) },
	{ "module", OFF(module) },
	{ "module_store", OFF(module_store) },
};

/*
 * The numeric keys: a field of size bytes (4: uint32_t, unsigned or int;
 * 8: uint64_t) at off.  NUM_SIZE takes a size with a suffix, any value;
 * NUM_RANGE a size in [min, max] and a multiple of align (1 or 4096);
 * NUM_INT a plain integer in [min, max] (a count, milliseconds: no
 * suffix).  A value that does not parse is "not a size" or "not a
 * number", told apart from one out of range: "5 # five" is refused for
 * the comment in it, not for a range it never reached.
 */
enum { NUM_SIZE, NUM_RANGE, NUM_INT };
static const struct {
	const char *key;
	size_t off, size;
	int kind;
	uint64_t min, max, align;
} nums[] = {
	/* 0 would mean "the default" inside, not what a user means by 0:
	 * refused (hmmd_config_check then wants a chunk at least) */
	{ "host_budget", OFF(host_budget), 8, NUM_RANGE, 1, UINT64_MAX, 1 },
	{ "device_budget", OFF(device_budget), 8, NUM_SIZE, 0, 0, 1 },
	/* so would a store's: --store-size 0 made a 1 GiB store */
	{ "store_size", OFF(store_size), 8, NUM_RANGE, 1, UINT64_MAX, 1 },
	{ "client_quota", OFF(client_quota), 8, NUM_RANGE, 1, UINT64_MAX, 1 },
	{ "module_store_size", OFF(module_store_size), 8, NUM_RANGE, 1,
	  UINT64_MAX, 1 },
	{ "chunk_bytes", OFF(chunk_bytes), 4, NUM_RANGE, 4096, UINT32_MAX,
	  4096 },
	{ "wait_ms", OFF(wait_ms), 4, NUM_INT, 0, UINT32_MAX, 1 },
	/* the engine store's I/O knobs (struct hmm_config's); 0 = default */
	{ "pool_bytes", OFF(pool_bytes), 4, NUM_RANGE, 0, HMM_CONFIG_POOL_MAX,
	  4096 },
	{ "io_depth", OFF(io_depth), 4, NUM_INT, 0, HMM_CONFIG_DEPTH_MAX, 1 },
	{ "queue_depth", OFF(queue_depth), 4, NUM_INT, 0, HMM_CONFIG_DEPTH_MAX,
	  1 },
	{ "max_clients", OFF(max_clients), 4, NUM_INT, 1, HMMD_MAX_CLIENTS, 1 },
	{ "verbose", OFF(verbose), 4, NUM_INT, 0, 1, 1 },
	{ "format", OFF(format), 4, NUM_INT, 0, 1, 1 },
};

/* Parse value for nums[i] into *v; 0, or -EINVAL with the reason in err. */
static int num_parse(unsigned i, const char *value, uint64_t *v, char *err,
		     size_t errlen)
{
	const char *key = nums[i].key;
	unsigned long long min = nums[i].min, max = nums[i].max;
	char *end;
	long long n;
	int ret;

	if (nums[i].kind == NUM_INT) {
		errno = 0;
		n = strtoll(value, &end, 10);
		if (end == value || *end) {
			snprintf(err, errlen, "%s: \"%s\" is not a number "
				 "(want %llu..%llu)", key, value, min, max);
			return -EINVAL;
		}
		if (errno || n < (long long)min || n > (long long)max) {
			snprintf(err, errlen, "%s: \"%s\" is not %llu..%llu",
				 key, value, min, max);
			return -EINVAL;
		}
		*v = (uint64_t)n;
		return 0;
	}
	ret = hmm_size_parse(value, v);
	if (ret == -EINVAL) {
		snprintf(err, errlen, "%s: \"%s\" is not a size (e.g. 8G, "
			 "512M)", key, value);
		return -EINVAL;
	}
	if (nums[i].kind == NUM_SIZE && !ret)
		return 0;
	if (!ret && *v >= min && *v <= max && *v % nums[i].align == 0)
		return 0;
	if (max == UINT64_MAX || nums[i].kind == NUM_SIZE)
		snprintf(err, errlen, "%s: \"%s\" is out of range (want a "
			 "size, at least %llu, below 16E)", key, value, min);
	else
		snprintf(err, errlen, "%s: \"%s\" is out of range (want "
			 "%llu to %llu%s)", key, value, min, max,
			 nums[i].align > 1 ? ", a multiple of 4096" : "");
	return -EINVAL;
}

int hmmd_config_set(struct hmmd_config *cfg, const char *key,
		    const char *value, char *err, size_t errlen)
{
	uint64_t v;
	unsigned i;
	int ret;

	for (i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		if (strcmp(key, strs[i].key))
			continue;
		if (!*value) {
			snprintf(err, errlen, "%s: empty", key);
			return -EINVAL;
		}
		ret = str_check(key, value, err, errlen);
		if (ret)
			return ret;
		return set_str((char **)((char *)cfg + strs[i].off), value);
	}
	for (i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		if (strcmp(key, nums[i].key))
			continue;
		ret = num_parse(i, value, &v, err, errlen);
		if (ret)
			return ret;
		if (nums[i].size == 4) {
			uint32_t w = (uint32_t)v;

			memcpy((char *)cfg + nums[i].off, &w, 4);
		} else {
			memcpy((char *)cfg + nums[i].off, &v, 8);
		}
		return 0;
	}
	snprintf(err, errlen, "unknown key \"%s\"", key);
	return -EINVAL;
}

int hmmd_config_check(const struct hmmd_config *cfg, char *err,
		      size_t errlen)
{
	uint64_t chunk = cfg->chunk_bytes ? cfg->chunk_bytes : HMMD_CHUNK_DEF;
	uint64_t budget = cfg->host_budget ? cfg->host_budget :
			  HMMD_HOST_BUDGET_DEF;
	const char *key = NULL;
	uint64_t v = 0;

	/* a path no Unix socket can have: a usage error, before anything
	   is made (it was found at the bind: exit 1, a runtime failure) */
	if (cfg->socket_path &&
	    strlen(cfg->socket_path) >= sizeof(((struct sockaddr_un *)0)->
					       sun_path)) {
		snprintf(err, errlen, "socket: \"%s\": %zu bytes, longer than "
			 "the %zu a Unix socket's path may have",
			 cfg->socket_path, strlen(cfg->socket_path),
			 sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
		return -EINVAL;
	}
	if (budget < chunk) {
		key = "host_budget";
		v = budget;
	} else if (cfg->client_quota && cfg->client_quota < chunk) {
		key = "client_quota";
		v = cfg->client_quota;
	}
	if (!key)
		return 0;
	snprintf(err, errlen, "%s %llu bytes is less than chunk_bytes %llu: "
		 "every map pins whole chunks, so no client could map "
		 "anything; make %s a chunk at least, or the chunk smaller",
		 key, (unsigned long long)v, (unsigned long long)chunk, key);
	return -EINVAL;
}

/* Which key: an index over strs then nums, or -1 for none. */
#define NSTRS	(sizeof(strs) / sizeof(strs[0]))
#define NKEYS	(NSTRS + sizeof(nums) / sizeof(nums[0]))
static int key_id(const char *key)
{
	unsigned i;

	for (i = 0; i < NKEYS; i++)
		if (!strcmp(key, i < NSTRS ? strs[i].key : nums[i - NSTRS].key))
			return (int)i;
	return -1;
}

/*
 * The file's lines go through read_line before libinih sees them, for
 * what it cannot tell us: it reads C strings, so text after a NUL byte
 * would vanish; it splits a line longer than its buffer into two; and it
 * calls on_line for keys only, so a second section header would pass.
 * What it read, and the first error met (which stops the parse).
 */
struct load {
	struct hmmd_config *cfg;
	FILE *f;
	char *buf;		/* getline's, freed by hmmd_config_load */
	size_t cap;
	int line;		/* lines read so far */
	int section;		/* the line of the section header; 0 = none */
	int indented;		/* the last line read starts with a blank */
	int set_on[NKEYS];	/* the line each key was set on; 0 = not */
	char msg[256];
	int err;
};

/* The key of a raw line s (before '=' or ':'), trimmed, into key[cap];
 * NULL when the line has none. */
static const char *line_key(const char *s, char *key, size_t cap)
{
	size_t k = strcspn(s, "=:");

	if (!s[k])
		return NULL;
	while (k && (s[k - 1] == ' ' || s[k - 1] == '\t'))
		k--;
	if (!k || k >= cap)
		return NULL;
	memcpy(key, s, k);
	key[k] = '\0';
	return key;
}

/* libinih's ini_reader: the next line into str[num], or NULL at the end
 * or at an error (l->err, l->msg). */
static char *read_line(char *str, int num, void *stream)
{
	struct load *l = stream;
	char key[64];
	const char *p;
	ssize_t n;

	if (l->err)
		return NULL;
	n = getline(&l->buf, &l->cap, l->f);
	if (n < 0)
		return NULL;
	l->line++;
	p = l->buf + strspn(l->buf, " \t");
	if (l->line == 1 && !strncmp(p, "\xef\xbb\xbf", 3))	/* a BOM */
		p += 3;
	if (memchr(l->buf, '\0', n)) {
		const char *k = line_key(p, key, sizeof(key));

		snprintf(l->msg, sizeof(l->msg), "%s%sa NUL byte in the line "
			 "(the text after it would be lost)", k ? k : "",
			 k ? ": " : "");
		l->err = -EINVAL;
		return NULL;
	}
	if (n >= num) {
		snprintf(l->msg, sizeof(l->msg), "a line longer than %d "
			 "bytes", num - 2);
		l->err = -EINVAL;
		return NULL;
	}
	if (*p == '[' && l->section) {
		int len = (int)strcspn(p + 1, "]\r\n");

		if (len == 4 && !strncmp(p + 1, "hmmd", 4))
			snprintf(l->msg, sizeof(l->msg), "[hmmd] again (first "
				 "on line %d): every key goes in the one "
				 "section", l->section);
		else
			snprintf(l->msg, sizeof(l->msg), "section [%.*s]: "
				 "only [hmmd] is known", len, p + 1);
		l->err = -EINVAL;
		return NULL;
	}
	if (*p == '[')
		l->section = l->line;
	l->indented = p > l->buf && l->line > 1;
	memcpy(str, l->buf, n + 1);
	return str;
}

static int on_line(void *user, const char *section, const char *name,
		   const char *value)
{
	struct load *l = user;
	int id = key_id(name);

	if (l->err)		/* keep the first error */
		return 0;
	if (strcmp(section, "hmmd")) {
		snprintf(l->msg, sizeof(l->msg),
			 "section [%s]: only [hmmd] is known", section);
		l->err = -EINVAL;
		return 0;
	}
	/* the last one silently winning hides a mistake in the other */
	if (id >= 0 && l->set_on[id]) {
		/* libinih reads an indented line as the key above's value
		   going on (multi-line values): say so */
		snprintf(l->msg, sizeof(l->msg), "%s: set again (first on "
			 "line %d)%s", name, l->set_on[id], l->indented ?
			 ": an indented line continues the key above" :
			 ": each key is set once");
		l->err = -EINVAL;
		return 0;
	}
	if (id >= 0)
		l->set_on[id] = l->line;
	l->err = hmmd_config_set(l->cfg, name, value, l->msg, sizeof(l->msg));
	return l->err == 0;
}

int hmmd_config_load(struct hmmd_config *cfg, const char *path,
		     char *err, size_t errlen)
{
	struct load l = { .cfg = cfg };
	struct stat st;
	int line;

	l.f = fopen(path, "re");
	if (!l.f) {
		int e = -errno;

		snprintf(err, errlen, "%s: %s", path, strerror(-e));
		return e;
	}
	/* a folder opens, and reads as an empty file: no settings at all */
	if (fstat(fileno(l.f), &st) || S_ISDIR(st.st_mode)) {
		fclose(l.f);
		snprintf(err, errlen, "%s: %s", path, strerror(EISDIR));
		return -EISDIR;
	}
	line = ini_parse_stream(read_line, &l, on_line, &l);
	fclose(l.f);
	free(l.buf);
	if (line == 0 && !l.err)
		return 0;
	if (!l.err)
		snprintf(l.msg, sizeof(l.msg), "not an INI line");
	snprintf(err, errlen, "%s:%d: %s", path, l.err ? l.line : line, l.msg);
	return l.err ? l.err : -EINVAL;
}
