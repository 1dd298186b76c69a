// SPDX-License-Identifier: MIT
/*
 * tensor.c — the embedded engine's tensors: their chunks, host range
 * and device reservation; new, free, residency, host fd (backend.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "chunk.h"
#include "dev.h"
#include "err.h"
#include "node.h"
#include "store.h"

/* ---- new and free ------------------------------------------------------ */

int hmm_tensor_name_check(const char *fn, const char *name)
{
	char shown[64];
	size_t i, n = name ? strlen(name) : 0;

	if (!n || n > 63)
		return hmm_err(-EINVAL, "%s: name %s%.0zu%s: must be 1..63 "
			       "bytes", fn, !name ? "NULL" : !n ? "empty" :
			       "of ", n > 63 ? n : 0, n > 63 ? " bytes" : "");
	for (i = 0; i < n; i++) {
		unsigned char c = name[i];

		if (c >= 0x20 && c != 0x7f)
			continue;
		/* the detail shows the name, its control bytes as '?' */
		for (n = 0; name[n]; n++)
			shown[n] = (unsigned char)name[n] < 0x20 ||
				   name[n] == 0x7f ? '?' : name[n];
		shown[n] = 0;
		return hmm_err(-EINVAL, "%s: name \"%s\": control character "
			       "0x%02x at byte %zu", fn, shown, c, i);
	}
	return 0;
}

int hmm_tensor_check(struct hmm *h, const char *name, uint32_t dtype,
		     unsigned ndim, const int64_t *shape, uint64_t *bytes)
{
	uint64_t n = hmm_dtype_size(dtype);
	unsigned i;
	int r;

	if (!h)
		return hmm_err(-EINVAL, "hmm_tensor_new: no context");
	r = hmm_tensor_name_check("hmm_tensor_new", name);
	if (r < 0)
		return r;
	if (!n)
		return hmm_err(-EINVAL, "tensor %s: unknown dtype %u", name,
			       dtype);
	if (!ndim || ndim > HMM_MAX_DIMS)
		return hmm_err(-EINVAL, "tensor %s: ndim %u: must be 1..%d",
			       name, ndim, HMM_MAX_DIMS);
	if (!shape)
		return hmm_err(-EINVAL, "tensor %s: shape is NULL", name);
	/* every dimension first: a zero one is -EINVAL, not the overflow
	   of the dimensions before it */
	for (i = 0; i < ndim; i++)
		if (shape[i] <= 0)
			return hmm_err(-EINVAL, "tensor %s: shape[%u] = %lld: "
				       "must be > 0", name, i,
				       (long long)shape[i]);
	for (i = 0; i < ndim; i++) {
		if (__builtin_mul_overflow(n, (uint64_t)shape[i], &n) ||
		    n > (1ull << 46))
			return hmm_err(-EOVERFLOW, "tensor %s: size overflows "
				       "at shape[%u]", name, i);
	}
	if ((n + h->chunk_bytes - 1) / h->chunk_bytes > UINT32_MAX)
		return hmm_err(-EOVERFLOW, "tensor %s: too many chunks", name);
	*bytes = n;
	return 0;
}

/*
 * The tensor's host range.  With chunks a multiple of 2 MiB it is 2 MiB
 * aligned and its whole chunks are MADV_HUGEPAGE: O_DIRECT into huge
 * pages moves 2-5x faster here (fewer segments), and dropping a chunk
 * frees whole huge pages.  The short last chunk keeps 4 KiB pages so a
 * huge page never holds more than the budget counts.
 *
 * By default the memory is anonymous (MAP_PRIVATE, t->host_fd -1) and a
 * dropped chunk is MADV_DONTNEED'd.  With HMM_CONFIG_HOST_SHARED (hmmd)
 * it is a MAP_SHARED mapping of the tensor's own memfd, so that another
 * process can map the same pages (hmm_tensor_host_fd) instead of a copy,
 * and a dropped chunk is punched out of the memfd, which frees it in
 * every mapping.  A memfd gets huge pages only where
 * /sys/kernel/mm/transparent_hugepage/shmem_enabled allows (advise,
 * within_size, always); with "never" it is 4 KiB pages and store reads
 * into it run 2-3x slower, which is why it is not the default.  With
 * config.host_dir the file is an O_TMPFILE in that tmpfs instead, and a
 * tmpfs mounted with huge=within_size has huge pages whatever
 * shmem_enabled says (hmmd --host-dir).
 */
#define HUGE_BYTES	(2ull << 20)
static int tensor_host_fd_new(struct hmm *h, struct hmm_tensor *t)
{
	char mname[80];
	int fd;

	snprintf(mname, sizeof(mname), "hmm:%s", t->name);
	if (h->host_dirfd >= 0)		/* ctx.c: config.host_dir */
		fd = openat(h->host_dirfd, ".", O_TMPFILE | O_RDWR |
			    O_CLOEXEC, 0600);
	else
		fd = memfd_create(mname, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return hmm_err(-errno, "tensor %s: %s: %s", t->name,
			       h->host_dirfd >= 0 ? "O_TMPFILE in "
			       "config.host_dir" : "memfd_create",
			       strerror(errno));
	if (ftruncate(fd, t->span) < 0) {
		int r = hmm_err(-errno, "tensor %s: host file of %llu bytes: "
				"%s", t->name, (unsigned long long)t->span,
				strerror(errno));

		close(fd);
		return r;
	}
	/* its size is fixed: hmmd sends it to clients, and one that
	 * shrank it would fault hmmd's reads (holes stay allowed) */
	if (h->host_dirfd < 0 &&
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0) {
		int r = hmm_err(-errno, "tensor %s: sealing its memfd: %s",
				t->name, strerror(errno));

		close(fd);
		return r;
	}
	t->host_fd = fd;
	return 0;
}

static int tensor_host_map(struct hmm *h, struct hmm_tensor *t)
{
	int huge = h->chunk_bytes % HUGE_BYTES == 0 &&
		   t->bytes >= h->chunk_bytes;
	int shared = h->cfg.flags & HMM_CONFIG_HOST_SHARED;
	uint64_t len = t->span + (huge ? HUGE_BYTES : 0);
	char *p, *a;
	int r;

	t->host_fd = -1;
	if (shared) {
		r = tensor_host_fd_new(h, t);
		if (r < 0)
			return r;
	}
	/* reserve an aligned range (the memfd then goes over it) */
	p = mmap(NULL, len, shared ? PROT_NONE : PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		r = hmm_err(-errno, "tensor %s: cannot reserve %llu bytes "
			    "of address space", t->name,
			    (unsigned long long)t->span);
		goto out_fd;
	}
	a = p;
	if (huge) {
		a = (char *)HMM_ROUND_UP((uintptr_t)p, HUGE_BYTES);
		if (a > p)
			munmap(p, a - p);
		if (a + t->span < p + len)
			munmap(a + t->span, p + len - (a + t->span));
	}
	if (shared && mmap(a, t->span, PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_FIXED, t->host_fd, 0) ==
		      MAP_FAILED) {
		r = hmm_err(-errno, "tensor %s: mapping its memfd: %s",
			    t->name, strerror(errno));
		munmap(a, t->span);
		goto out_fd;
	}
	if (huge)
		madvise(a, t->bytes / h->chunk_bytes * h->chunk_bytes,
			MADV_HUGEPAGE);
	hmm_node_prefer(a, t->span, h->cfg.numa_node);
	t->host = a;
	return 0;

out_fd:
	if (t->host_fd >= 0)
		close(t->host_fd);
	t->host_fd = -1;
	return r;
}

static void tensor_host_unmap(struct hmm_tensor *t)
{
	munmap(t->host, t->span);
	if (t->host_fd >= 0)
		close(t->host_fd);
}

/* Where id is, or would go, in h->tensors (kept in id order). */
static uint32_t tensor_slot(const struct hmm *h, uint32_t id)
{
	uint32_t lo = 0, hi = h->ntensors;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (h->tensors[mid]->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct hmm_tensor *hmm_tensor_by_id(const struct hmm *h, uint32_t id)
{
	uint32_t i = tensor_slot(h, id);

	return i < h->ntensors && h->tensors[i]->id == id ? h->tensors[i]
							  : NULL;
}

/*
 * Give t an id (a new one when id < 0) and its place in h->tensors,
 * which holds the live tensors only: a store's ids, never reused, can be
 * far apart (or near 2^31: its own bytes say so) without an array that
 * large.  An id is the high half of its chunks' store keys, and the
 * store's table holds ids below 2^31 (persist.c).
 */
static int tensor_register(struct hmm *h, struct hmm_tensor *t, int64_t id)
{
	uint32_t i;

	if (id < 0 && h->next_id >= HMM_TENSOR_IDS)
		return hmm_err(-EOVERFLOW, "tensor %s: the store's %u tensor "
			       "ids are used up (ids are not reused)", t->name,
			       HMM_TENSOR_IDS);
	if (h->ntensors == h->tensors_cap) {
		uint32_t cap = h->tensors_cap ? 2 * h->tensors_cap : 64;
		void *p = realloc(h->tensors, cap * sizeof(*h->tensors));

		if (!p)
			return hmm_err(-ENOMEM, "tensor %s: no memory",
				       t->name);
		h->tensors = p;
		h->tensors_cap = cap;
	}
	t->id = id >= 0 ? (uint32_t)id : h->next_id++;
	if (t->id >= h->next_id)
		h->next_id = t->id + 1;
	i = tensor_slot(h, t->id);
	memmove(h->tensors + i + 1, h->tensors + i,
		(h->ntensors - i) * sizeof(*h->tensors));
	h->tensors[i] = t;
	h->ntensors++;
	h->live_chunks += t->nchunks;
	return 0;
}

/* Take t out of h->tensors (h->lock held). */
static void tensor_unregister(struct hmm *h, struct hmm_tensor *t)
{
	uint32_t i = tensor_slot(h, t->id);

	if (i == h->ntensors || h->tensors[i] != t)
		return;
	memmove(h->tensors + i, h->tensors + i + 1,
		(h->ntensors - i - 1) * sizeof(*h->tensors));
	h->ntensors--;
	h->live_chunks -= t->nchunks;
}

static void tensor_chunks_init(struct hmm *h, struct hmm_tensor *t,
			       const uint8_t *stored)
{
	uint32_t i;

	for (i = 0; i < t->nchunks; i++) {
		struct hmm_chunk *c = &t->chunks[i];
		uint64_t off = (uint64_t)i * h->chunk_bytes;
		uint64_t left = t->bytes - off;

		c->t = t;
		c->idx = i;
		c->bytes = left < h->chunk_bytes ? left : h->chunk_bytes;
		c->alloc = HMM_ROUND_UP(c->bytes, HMM_PAGE);
		c->zero = 1;
		if (stored && (stored[i / 8] >> (i % 8) & 1)) {
			c->zero = 0;
			c->stored = 1;
			c->valid = TB(HMM_TIER_STORE);
		}
		hmm_list_init(&c->lru[0]);
		hmm_list_init(&c->lru[1]);
		hmm_list_init(&c->wlink);
	}
}

int hmm_engine_tensor_new(struct hmm *h, const char *name, uint32_t dtype,
			  unsigned ndim, const int64_t *shape,
			  struct hmm_tensor **out)
{
	uint64_t bytes;
	int r = hmm_tensor_check(h, name, dtype, ndim, shape, &bytes);

	if (r < 0)	/* checked by api.c: this sets bytes */
		return r;
	return hmm_tensor_create(h, name, dtype, ndim, shape, bytes, -1,
				 NULL, out);
}

/* A tensor's struct with what the accessors return (ndim <= MAX_DIMS);
 * no chunks, no memory.  NULL with the detail set. */
static struct hmm_tensor *tensor_alloc(struct hmm *h, const char *name,
				       uint32_t dtype, unsigned ndim,
				       const int64_t *shape, uint64_t bytes)
{
	struct hmm_tensor *t = calloc(1, sizeof(*t));

	if (!t) {
		hmm_err(-ENOMEM, "tensor %s: no memory", name);
		return NULL;
	}
	t->h = h;
	t->host_fd = -1;
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->dtype = dtype;
	t->ndim = ndim;
	memcpy(t->shape, shape, ndim * sizeof(*shape));
	t->bytes = bytes;
	t->span = HMM_ROUND_UP(bytes, HMM_PAGE);
	hmm_list_init(&t->maps);
	return t;
}

/* a + b, UINT64_MAX when it overflows */
static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

void hmm_capacity(struct hmm *h, uint64_t cap[HMM_TIERS])
{
	memset(cap, 0, HMM_TIERS * sizeof(*cap));
	cap[HMM_TIER_HOST] = h->tier[HMM_TIER_HOST].cap;
	if (h->dev)
		cap[HMM_TIER_DEVICE] = h->tier[HMM_TIER_DEVICE].cap;
	if (h->store) {
		struct hmm_store_stats ss;

		hmm_store_stats(h->store, &ss);
		cap[HMM_TIER_STORE] = ss.capacity_bytes;
	}
}

/*
 * The one rule for what a context makes with a table of its own (a
 * tensor's chunks, about 300 bytes a chunk; a region's block states,
 * one byte a 64 KiB block): host memory outside the budgets, all
 * allocated and written at creation.  Checked before any allocation, so
 * that a size the API allows (up to 2^46) never costs tens of GB of
 * metadata:
 *  - a new one (fresh) may not be larger than everything the context
 *    can ever hold, cap[] (hmm_capacity; shared mode: hmmd's): its
 *    bytes past that could never all hold data (a chunk or block once
 *    written is never zero again), so it is refused, like a single
 *    allocation past RAM + swap under Linux's heuristic overcommit.  A
 *    tensor opened from the store (persist.c) is exempt: its data is
 *    already there, and the budgets may have changed since it was saved;
 *  - no table larger than the machine's memory, which could never be
 *    written without the OOM killer (Linux overcommit lets such a
 *    calloc "succeed").
 * Returns 0 or -ENOMEM with the detail: what ("tensor x"), its size,
 * what it exceeded and its table (tab says what that is).
 */
int hmm_fits(const char *what, const char *whose, uint64_t bytes,
	     const uint64_t cap[HMM_TIERS], int fresh, const char *tab,
	     uint64_t table)
{
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	uint64_t ram = pages > 0 && psize > 0 ?
		       (uint64_t)pages * (uint64_t)psize : UINT64_MAX;
	uint64_t all = add_sat(add_sat(cap[HMM_TIER_STORE],
				       cap[HMM_TIER_HOST]),
			       cap[HMM_TIER_DEVICE]);

	if (fresh && bytes > all)
		return hmm_err(-ENOMEM, "%s: %llu bytes, more than %s can "
			       "ever hold (store %llu + host budget %llu + "
			       "device budget %llu bytes); its %s would take "
			       "%llu bytes", what, (unsigned long long)bytes,
			       whose,
			       (unsigned long long)cap[HMM_TIER_STORE],
			       (unsigned long long)cap[HMM_TIER_HOST],
			       (unsigned long long)cap[HMM_TIER_DEVICE], tab,
			       (unsigned long long)table);
	if (table > ram)
		return hmm_err(-ENOMEM, "%s: %llu bytes: its %s would take "
			       "%llu bytes, more than the machine's %llu "
			       "bytes of memory", what,
			       (unsigned long long)bytes, tab,
			       (unsigned long long)table,
			       (unsigned long long)ram);
	return 0;
}

/* hmmd's engine shares its tensors' host memory with its clients. */
const char *hmm_whose(const struct hmm *h)
{
	return h->cfg.flags & HMM_CONFIG_HOST_SHARED ? "hmmd" :
	       "this context";
}

/* hmm_fits for a tensor of bytes in nchunks chunks. */
static int tensor_fits(struct hmm *h, const char *name, uint64_t bytes,
		       uint64_t nchunks, int fresh)
{
	uint64_t cap[HMM_TIERS];
	char what[80], tab[96];

	hmm_capacity(h, cap);
	snprintf(what, sizeof(what), "tensor %s", name);
	snprintf(tab, sizeof(tab), "chunk table (%llu chunks of %s %llu)",
		 (unsigned long long)nchunks,
		 h->cfg.flags & HMM_CONFIG_HOST_SHARED ? "hmmd's chunk" :
		 "config.chunk_bytes", (unsigned long long)h->chunk_bytes);
	return hmm_fits(what, hmm_whose(h), bytes, cap, fresh, tab,
			nchunks * sizeof(struct hmm_chunk));
}

int hmm_tensor_create(struct hmm *h, const char *name, uint32_t dtype,
		      unsigned ndim, const int64_t *shape, uint64_t bytes,
		      int64_t id, const uint8_t *stored,
		      struct hmm_tensor **out)
{
	uint64_t nchunks = (bytes + h->chunk_bytes - 1) / h->chunk_bytes;
	struct hmm_tensor *t;
	int r;

	r = tensor_fits(h, name, bytes, nchunks, id < 0);
	if (r < 0)
		return r;
	t = tensor_alloc(h, name, dtype, ndim, shape, bytes);
	if (!t)
		return -ENOMEM;
	t->nchunks = nchunks;	/* <= UINT32_MAX: hmm_tensor_check */
	t->chunks = calloc(t->nchunks, sizeof(*t->chunks));
	if (!t->chunks) {
		r = hmm_err(-ENOMEM, "tensor %s: %llu bytes: no memory for "
			    "its chunk table (%u chunks, %llu bytes)", name,
			    (unsigned long long)bytes, t->nchunks,
			    (unsigned long long)(nchunks *
						 sizeof(*t->chunks)));
		goto out_free;
	}
	tensor_chunks_init(h, t, stored);
	r = tensor_host_map(h, t);
	if (r < 0)
		goto out_chunks;
	if (h->dev) {
		r = h->dev->reserve(h->dev_priv, t->span, &t->dev);
		if (r < 0) {
			r = hmm_err(r, "tensor %s: cannot reserve %llu bytes "
				    "of device address space", name,
				    (unsigned long long)t->span);
			goto out_host;
		}
	}
	pthread_mutex_lock(&h->lock);
	r = tensor_register(h, t, id);
	pthread_mutex_unlock(&h->lock);
	if (r < 0)
		goto out_dev;
	*out = t;
	return 0;

out_dev:
	if (h->dev)
		h->dev->release(h->dev_priv, t->dev, t->span);
out_host:
	tensor_host_unmap(t);
out_chunks:
	free(t->chunks);
out_free:
	free(t);
	return r;
}

/*
 * A tensor with no chunks, no host range and no device reservation,
 * registered in h (so hmm_close finds it): what another backend fills,
 * its own state priv in t->be_priv, set before the shell is listed in
 * h->tensors (another thread may walk them as soon as it is: it once
 * found be_priv NULL there).  Freed by hmm_tensor_shell_free.
 */
int hmm_tensor_shell(struct hmm *h, const char *name, uint32_t dtype,
		     unsigned ndim, const int64_t *shape, uint64_t bytes,
		     void *priv, struct hmm_tensor **out)
{
	unsigned n = ndim < HMM_MAX_DIMS ? ndim : HMM_MAX_DIMS;
	struct hmm_tensor *t = tensor_alloc(h, name, dtype, n, shape, bytes);
	int r;

	if (!t)
		return -ENOMEM;
	t->be_priv = priv;
	pthread_mutex_lock(&h->lock);
	r = tensor_register(h, t, -1);
	pthread_mutex_unlock(&h->lock);
	if (r < 0) {
		free(t);
		return r;
	}
	*out = t;
	return 0;
}

int hmm_tensor_rename(struct hmm_tensor *t, const char *name)
{
	size_t n = strlen(name);

	if (!n || n >= sizeof(t->name))
		return hmm_err(-EINVAL, "tensor %s: new name of %zu bytes "
			       "(1..%zu)", t->name, n, sizeof(t->name) - 1);
	pthread_mutex_lock(&t->h->lock);
	memcpy(t->name, name, n + 1);
	pthread_mutex_unlock(&t->h->lock);
	return 0;
}

void hmm_tensor_shell_free(struct hmm_tensor *t)
{
	struct hmm *h = t->h;

	pthread_mutex_lock(&h->lock);
	tensor_unregister(h, t);
	pthread_mutex_unlock(&h->lock);
	free(t);
}

static void tensor_free_extent(struct hmm_ioreq *r)
{
	free(r);
}

/* Drop every copy of t (h->lock held, no I/O of t in flight). */
static void tensor_drop_all(struct hmm *h, struct hmm_tensor *t,
			    int forget)
{
	uint32_t i;

	for (i = 0; i < t->nchunks; i++) {
		struct hmm_chunk *c = &t->chunks[i];
		struct hmm_ioreq *r;

		if (!hmm_list_empty(&c->wlink))
			hmm_list_del(&c->wlink);
		if (c->res & TB(HMM_TIER_HOST))
			hmm_chunk_drop(h, c, HMM_TIER_HOST);
		if (c->res & TB(HMM_TIER_DEVICE))
			hmm_chunk_drop(h, c, HMM_TIER_DEVICE);
		if (!forget || !c->stored || !h->store || h->io_stop)
			continue;
		r = calloc(1, sizeof(*r));
		if (!r)
			continue;	/* the extent leaks until reformat */
		r->io.op = HMM_IOREQ_FREE;
		r->io.key = hmm_chunk_key(c);
		r->h = h;
		r->done = tensor_free_extent;
		hmm_iot_queue(h, r);
	}
}

/*
 * Free t whatever its state: hmm_tensor_free (forget: its store extents
 * are freed too) and hmm_close (they stay, for a later hmm_tensor_open
 * of what the last hmm_flush saved).
 */
void hmm_tensor_destroy(struct hmm_tensor *t, int forget)
{
	struct hmm *h = t->h;

	pthread_mutex_lock(&h->lock);
	while (t->inflight)
		pthread_cond_wait(&h->cond, &h->lock);
	while (!hmm_list_empty(&t->maps)) {
		struct hmm_list *p = t->maps.next;

		hmm_list_del(p);
		free(hmm_container_of(p, struct hmm_mapping, link));
	}
	for (uint32_t i = 0; i < t->nchunks; i++)
		t->chunks[i].pins[0] = t->chunks[i].pins[1] =
			t->chunks[i].wpins = 0;
	tensor_drop_all(h, t, forget);
	hmm_policy_forget(h, t);
	tensor_unregister(h, t);
	pthread_mutex_unlock(&h->lock);
	if (h->dev)
		h->dev->release(h->dev_priv, t->dev, t->span);
	tensor_host_unmap(t);
	free(t->chunks);
	free(t);
}

int hmm_engine_tensor_free(struct hmm_tensor *t)
{
	struct hmm *h = t->h;

	pthread_mutex_lock(&h->lock);
	if (!hmm_list_empty(&t->maps)) {
		pthread_mutex_unlock(&h->lock);
		return hmm_err(-EBUSY, "tensor %s: still mapped", t->name);
	}
	pthread_mutex_unlock(&h->lock);
	hmm_tensor_destroy(t, 1);
	return 0;
}

int hmm_engine_residency(struct hmm_tensor *t, uint64_t bytes[])
{
	struct hmm *h = t->h;
	uint32_t i;

	bytes[HMM_TIER_DEVICE] = bytes[HMM_TIER_HOST] = 0;
	bytes[HMM_TIER_STORE] = 0;
	pthread_mutex_lock(&h->lock);
	for (i = 0; i < t->nchunks; i++) {
		const struct hmm_chunk *c = &t->chunks[i];

		if (c->res & TB(HMM_TIER_DEVICE))
			bytes[HMM_TIER_DEVICE] += c->bytes;
		if (c->res & TB(HMM_TIER_HOST))
			bytes[HMM_TIER_HOST] += c->bytes;
		if (c->stored)
			bytes[HMM_TIER_STORE] += c->bytes;
	}
	pthread_mutex_unlock(&h->lock);
	return 0;
}

int hmm_engine_host_fd(struct hmm_tensor *t, int *fd, uint64_t *off)
{
	if (t->host_fd < 0)
		return hmm_err(-ENOTSUP, "tensor %s: its host memory is "
			       "anonymous (open the context with "
			       "HMM_CONFIG_HOST_SHARED)", t->name);
	*fd = t->host_fd;
	*off = 0;
	return 0;
}
