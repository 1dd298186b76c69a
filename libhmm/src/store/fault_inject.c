// SPDX-License-Identifier: MIT
/* fault_inject.c — fault injection into the store's I/O (fault_inject.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "fault_inject.h"

#define FAULT_MAX 16

struct fault_rule {
	uint64_t at;	/* operation number, from 1 */
	int kind;	/* HMM_FAULT_* */
};

/* fault_lock protects rules/nrules/inited; ops and fired are atomics. */
static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fault_rule rules[FAULT_MAX];
static int nrules, inited;
static uint64_t ops, fired;
static int armed;	/* atomic: nrules > 0, read without the lock */

static int parse_kind(const char *s, size_t n)
{
	if (n == 3 && !strncmp(s, "eio", 3))
		return HMM_FAULT_EIO;
	if (n == 6 && !strncmp(s, "enospc", 6))
		return HMM_FAULT_ENOSPC;
	if (n == 5 && !strncmp(s, "short", 5))
		return HMM_FAULT_SHORT;
	return -1;
}

static int parse(const char *spec, struct fault_rule *out, int *n)
{
	const char *p = spec;

	*n = 0;
	while (p && *p) {
		const char *at = strchr(p, '@'), *comma = strchr(p, ',');
		char *end;
		unsigned long long v;
		int kind;

		if (!at || (comma && comma < at))
			return hmm_err(-EINVAL, "fault spec '%s': want KIND@N", spec);
		kind = parse_kind(p, at - p);
		if (kind < 0)
			return hmm_err(-EINVAL, "fault spec '%s': unknown kind '%.*s'",
				       spec, (int)(at - p), p);
		v = strtoull(at + 1, &end, 10);
		if (end == at + 1 || v == 0 || (*end && *end != ','))
			return hmm_err(-EINVAL, "fault spec '%s': bad count", spec);
		if (*n == FAULT_MAX)
			return hmm_err(-EINVAL, "fault spec '%s': over %d rules",
				       spec, FAULT_MAX);
		out[*n].at = v;
		out[(*n)++].kind = kind;
		p = *end ? end + 1 : end;
	}
	return 0;
}

int hmm_fault_set(const char *spec)
{
	struct fault_rule r[FAULT_MAX];
	int n, err;

	err = parse(spec ? spec : "", r, &n);
	if (err)
		return err;
	pthread_mutex_lock(&fault_lock);
	memcpy(rules, r, sizeof(r));
	nrules = n;
	inited = 1;
	__atomic_store_n(&ops, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&fired, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&armed, n > 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&fault_lock);
	return 0;
}

int hmm_fault_init_env(void)
{
	const char *env;
	int done;

	pthread_mutex_lock(&fault_lock);
	done = inited;
	inited = 1;
	pthread_mutex_unlock(&fault_lock);
	env = getenv("HMM_FAULT");
	if (!done && env && *env)
		return hmm_fault_set(env);	/* a bad one arms none */
	return 0;
}

int hmm_fault_next(void)
{
	uint64_t n = __atomic_add_fetch(&ops, 1, __ATOMIC_RELAXED);
	int kind = HMM_FAULT_NONE;

	if (!__atomic_load_n(&armed, __ATOMIC_ACQUIRE))
		return kind;
	pthread_mutex_lock(&fault_lock);
	for (int i = 0; i < nrules; i++)
		if (rules[i].at == n) {
			kind = rules[i].kind;
			break;
		}
	pthread_mutex_unlock(&fault_lock);
	if (kind)
		__atomic_add_fetch(&fired, 1, __ATOMIC_RELAXED);
	return kind;
}

uint64_t hmm_fault_ops(void)
{
	return __atomic_load_n(&ops, __ATOMIC_RELAXED);
}

uint64_t hmm_fault_fired(void)
{
	return __atomic_load_n(&fired, __ATOMIC_RELAXED);
}
