// SPDX-License-Identifier: MIT
/*
 * test_tensor_abi — libhmm.so.0 exports the public API of hmm.h and
 * nothing else: every hmm.h function resolves, the engine's internals
 * (store, pool, error helper, chunk state) do not; symbols added later
 * carry the version node that added them.  Skipped when the
 * shared library is not built (sanitizer builds).
 */
#include <dlfcn.h>
#include <libgen.h>

#include "t.h"

static const char *const api[] = {
	"hmm_config_default", "hmm_open", "hmm_close", "hmm_dtype_size",
	"hmm_tensor_new", "hmm_tensor_open", "hmm_tensor_free", "hmm_tensor_name",
	"hmm_tensor_bytes", "hmm_tensor_dtype", "hmm_tensor_ndim",
	"hmm_tensor_shape", "hmm_map", "hmm_unmap", "hmm_prefetch",
	"hmm_evict", "hmm_wait", "hmm_flush", "hmm_step_begin",
	"hmm_step_end", "hmm_stats", "hmm_stats_json", "hmm_strerror",
	"hmm_last_error", "hmm_region_new", "hmm_region_advise",
	"hmm_region_free", "hmm_dlpack_export", "hmm_store_required",
	"hmm_writeback",
};

/* Symbols at the version node that added them (libhmm.map): a node,
 * once released, never changes. */
static const char *const versioned[][2] = {
	{ "hmm_map", "LIBHMM_0" },
	{ "hmm_store_required", "LIBHMM_1" },
	{ "hmm_writeback", "LIBHMM_2" },
};

static const char *const internal[] = {
	"hmm_store_open", "hmm_store_submit", "hmm_store_pool", "hmm_err",
	"hmm_pool_alloc", "hmm_chunk_step", "hmm_budget_room",
	"hmm_iot_queue", "hmm_fault_set", "hmm_now",
};

int main(void)
{
	char exe[4096], lib[4300];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	void *so;
	size_t i;

	if (n <= 0)
		t_skip_all("no /proc/self/exe");
	exe[n] = 0;
	snprintf(lib, sizeof(lib), "%s/../../lib/libhmm.so.0", dirname(exe));
	so = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!so)
		t_skip_all("libhmm.so.0 not built here: %s", dlerror());
	for (i = 0; i < sizeof(api) / sizeof(api[0]); i++)
		t_ok(dlsym(so, api[i]) != NULL, "exports %s", api[i]);
	for (i = 0; i < sizeof(versioned) / sizeof(versioned[0]); i++)
		t_ok(dlvsym(so, versioned[i][0], versioned[i][1]) != NULL,
		     "%s at version %s", versioned[i][0], versioned[i][1]);
	t_ok(dlvsym(so, "hmm_writeback", "LIBHMM_1") == NULL,
	     "hmm_writeback not in LIBHMM_1");
	for (i = 0; i < sizeof(internal) / sizeof(internal[0]); i++)
		t_ok(dlsym(so, internal[i]) == NULL, "hides %s", internal[i]);
	dlclose(so);
	return t_done();
}
