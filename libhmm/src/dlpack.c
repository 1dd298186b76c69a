// SPDX-License-Identifier: MIT
/* dlpack.c — placeholder. */
#include <errno.h>

#include "hmm.h"
#include "err.h"

int hmm_dlpack_export(struct hmm_tensor *t, int tier, unsigned access,
		      struct DLManagedTensor **out)
{
	return hmm_err(-ENOSYS, "hmm_dlpack_export: not built yet");
}
