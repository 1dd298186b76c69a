// SPDX-License-Identifier: MIT
/*
 * dlpack.c — a mapped tensor as a DLPack DLManagedTensor.
 *
 * hmm_dlpack_export maps the whole tensor (hmm_map) and fills a
 * DLManagedTensor allocated with it; the deleter unmaps and frees it.
 * The struct is owned by the consumer from export until it calls the
 * deleter (exactly once, from any thread).
 *
 * A consumer may hold an export past hmm_close (PyTorch frees a tensor
 * whenever its last reference goes), so the context counts its exports
 * (h->dl_live, ctx.h): hmm_close with some alive only marks it closed,
 * and the last deleter unmaps and then closes it.  Until then the
 * mapping, the tensor and the store stay as they were.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chunk.h"
#include "dev.h"
#include "dlpack.h"
#include "err.h"

struct hmm_dlpack {
	DLManagedTensor m;	/* first: the consumer sees this */
	struct hmm_tensor *t;
	void *ptr;		/* what hmm_map returned */
	int64_t shape[HMM_MAX_DIMS];
};

static int dl_dtype(uint32_t dtype, DLDataType *d)
{
	static const DLDataType map[] = {
		[HMM_DTYPE_F32] = { kDLFloat, 32, 1 },
		[HMM_DTYPE_F64] = { kDLFloat, 64, 1 },
		[HMM_DTYPE_F16] = { kDLFloat, 16, 1 },
		[HMM_DTYPE_BF16] = { kDLBfloat, 16, 1 },
		[HMM_DTYPE_I8] = { kDLInt, 8, 1 },
		[HMM_DTYPE_U8] = { kDLUInt, 8, 1 },
		[HMM_DTYPE_I32] = { kDLInt, 32, 1 },
		[HMM_DTYPE_I64] = { kDLInt, 64, 1 },
	};

	if (dtype >= sizeof(map) / sizeof(map[0]) || !map[dtype].bits)
		return -EINVAL;
	*d = map[dtype];
	return 0;
}

int hmm_dlpack_close(struct hmm *h)
{
	int now;

	pthread_mutex_lock(&h->dl_lock);
	h->dl_closed = 1;
	now = !h->dl_live;
	pthread_mutex_unlock(&h->dl_lock);
	return now;
}

static void dl_deleter(DLManagedTensor *self)
{
	struct hmm_dlpack *d = (struct hmm_dlpack *)self;
	struct hmm *h;
	int last;

	if (!d)
		return;
	h = d->t->h;
	/* h is whole: hmm_close, if it ran, left it to the last deleter */
	hmm_unmap(d->t, d->ptr);
	free(d);
	pthread_mutex_lock(&h->dl_lock);
	last = !--h->dl_live && h->dl_closed;
	pthread_mutex_unlock(&h->dl_lock);
	if (last)
		h->be->close(h);
}

int hmm_dlpack_export(struct hmm_tensor *t, int tier, unsigned access,
		      struct DLManagedTensor **out)
{
	struct hmm_dlpack *d;
	DLDataType dt;
	int r;

	if (!t || !out)
		return hmm_err(-EINVAL, "hmm_dlpack_export: tensor and out "
			       "are required");
	if (dl_dtype(t->dtype, &dt) < 0)
		return hmm_err(-EINVAL, "tensor %s: dtype %u has no DLPack "
			       "code", t->name, t->dtype);
	d = calloc(1, sizeof(*d));
	if (!d)
		return hmm_err(-ENOMEM, "tensor %s: no memory", t->name);
	r = hmm_map(t, 0, HMM_ALL, tier, access, &d->ptr);
	if (r < 0) {
		free(d);
		return r;
	}
	d->t = t;
	pthread_mutex_lock(&t->h->dl_lock);
	t->h->dl_live++;
	pthread_mutex_unlock(&t->h->dl_lock);
	memcpy(d->shape, t->shape, t->ndim * sizeof(int64_t));
	d->m.dl_tensor.data = d->ptr;
	d->m.dl_tensor.device.device_type =
		tier != HMM_TIER_DEVICE || !t->h->dev ||
		!strcmp(t->h->dev->name, "sim") ? kDLCPU :
		!strcmp(t->h->dev->name, "uvm") ? kDLCUDAManaged : kDLCUDA;
	d->m.dl_tensor.device.device_id =
		d->m.dl_tensor.device.device_type != kDLCPU ?
		t->h->cfg.device_index : 0;
	d->m.dl_tensor.ndim = t->ndim;
	d->m.dl_tensor.dtype = dt;
	d->m.dl_tensor.shape = d->shape;
	d->m.dl_tensor.strides = NULL;
	d->m.dl_tensor.byte_offset = 0;
	d->m.manager_ctx = d;
	d->m.deleter = dl_deleter;
	*out = &d->m;
	return 0;
}
