// SPDX-License-Identifier: MIT
/*
 * open.c — hmm_open: the backend is picked here from config.daemon, as
 * dev.h's is from config.device: the embedded engine without it, shared
 * mode's backend over hmmd (remote/) with it.  Its own file so that a
 * program that never connects to hmmd (hmmd itself, which calls
 * hmm_engine_open) links no protocol client.
 */
#include <errno.h>

#include "ctx.h"
#include "err.h"
#include "remote.h"

int hmm_open(const struct hmm_config *cfg, struct hmm **out)
{
	const struct hmm_backend *be;

	if (!cfg || !out)
		return hmm_err(-EINVAL, "hmm_open: cfg and out are required");
	be = cfg->daemon ? &hmm_remote_backend : &hmm_engine_backend;
	return be->open(cfg, out);
}
