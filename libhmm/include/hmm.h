/* SPDX-License-Identifier: MIT */
/*
 * hmm.h — libhmm, the heterogeneous memory manager: swap-aware tensors
 * across device memory, host DRAM and an NVMe store, in the trainer's
 * own process.
 *
 * Reading order: constants, the config, the context, tensors, map/unmap,
 * asynchronous prefetch/evict/writeback, steps, stats, errors, regions,
 * DLPack.
 *
 * Model.  A tensor is split in chunks (default 2 MiB).  Each chunk has a
 * set of tiers holding a valid copy, pins per tier, and at most one I/O
 * in flight.  hmm_map() pins a byte range resident at a tier and returns
 * a pointer to it; the pointer of a tensor at a tier is stable for the
 * tensor's life (base + offset), so two maps of the same range return
 * the same pointer.  hmm_unmap() drops the pin.  Budgets per tier are
 * byte-exact and never exceeded: when a tier is full, unpinned chunks are
 * evicted by the policy (dirty ones written back first); when everything
 * is pinned a map waits (back-pressure) and fails with -ENOMEM only after
 * hmm_config.wait_ms.
 *
 * Errors.  Every function returning int returns 0 (or a count) on success
 * and a negative errno on failure; it never sets errno, prints, exits or
 * aborts.  A failing call leaves a sentence naming the thing that failed
 * (tensor, offset, path) in a per-thread buffer read by hmm_last_error().
 * A call that fails validation changes nothing.
 *
 * Threading.  Unless a function says otherwise, it may be called from any
 * thread at the same time as any other function on the same context,
 * except hmm_close() (no call on the context may be running or follow,
 * but the deleters of its DLPack exports) and hmm_tensor_free() (no other
 * call on that tensor).  One context lock
 * serialises state changes; I/O runs on libhmm's own threads.
 */
#ifndef HMM_H
#define HMM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HMM_VERSION_MAJOR	0
#define HMM_VERSION_MINOR	1

/* ---- constants --------------------------------------------------------- */

/* Tiers, fastest first. */
#define HMM_TIER_DEVICE		0	/* GPU memory (or the "sim" device) */
#define HMM_TIER_HOST		1	/* host DRAM */
#define HMM_TIER_STORE		2	/* the NVMe store (not mappable) */
#define HMM_TIERS		3

/* Access to a mapped range (hmm_map). */
#define HMM_READ	(1u << 0)	/* contents are read-in before map returns */
#define HMM_WRITE	(1u << 1)	/* range becomes dirty: other copies stale */
#define HMM_DISCARD	(1u << 2)	/* contents will be overwritten: no
					   read-in of the chunks the range
					   covers whole (to the tensor's end);
					   implies WRITE; the range's bytes
					   seen at map time are unspecified,
					   the rest of a partly covered chunk
					   is kept (read in) */

/* Element types (hmm_tensor_new). */
#define HMM_DTYPE_F32		1
#define HMM_DTYPE_F64		2
#define HMM_DTYPE_F16		3
#define HMM_DTYPE_BF16		4
#define HMM_DTYPE_I8		5
#define HMM_DTYPE_U8		6
#define HMM_DTYPE_I32		7
#define HMM_DTYPE_I64		8

/* Policies (hmm_config.policy). */
#define HMM_POLICY_LRU		0	/* least recently used, prefetch only
					   when asked (hmm_prefetch) */
#define HMM_POLICY_SCHEDULE	1	/* record the first step's accesses,
					   then prefetch k ahead and evict the
					   chunk used farthest in the future */

/* hmm_config.flags */
#define HMM_CONFIG_STORE_BUFFERED (1u << 0) /* store: do not try O_DIRECT */
#define HMM_CONFIG_STORE_KEEP	  (1u << 1) /* store: keep an existing store
					       and its saved tensors
					       (default: see hmm_open) */
#define HMM_CONFIG_HOST_SHARED	  (1u << 2) /* tensors' host memory is a
					       shmem file each (shareable:
					       hmm_tensor_host_fd): a memfd,
					       4 KiB pages unless shmem THP
					       is enabled, or a file in
					       host_dir; default: anonymous
					       memory with huge pages */
#define HMM_CONFIG_STORE_FORMAT	  (1u << 3) /* store: format whatever
					       store_path holds (foreign
					       data, or an hmm store with
					       named tensors); not with
					       KEEP */

/* hmm_map len: from off to the end of the tensor. */
#define HMM_ALL			UINT64_MAX

#define HMM_MAX_DIMS		8

/* ---- the context ------------------------------------------------------- */

/*
 * What a context is opened from.  Fill with hmm_config_default() and
 * change what you need; the strings are copied by hmm_open().
 */
struct hmm_config {
	const char *store_path;	/* file or block device, or "a,b,..."
				   to stripe over several (libhmm(3));
				   NULL = no store tier (the host budget
				   must hold all) */
	uint64_t store_size;	/* bytes; 0 = the file's current size */
	uint64_t host_budget;	/* bytes of host memory for chunks (> 0) */
	uint64_t device_budget;	/* bytes of device memory; 0 = the device's */
	const char *device;	/* "none" (or NULL), "sim", "cuda" or "uvm"
				   (CUDA managed memory moved by hmm) */
	const char *daemon;	/* "unix:PATH": shared mode, every call goes
				   to that hmmd (its host tier; a device is
				   this process's own, staged through host
				   maps in hmmd; regions live in this
				   process, see hmm_region_new;
				   libhmm/src/remote/); NULL = the
				   embedded engine */
	const char *trace_path;	/* Chrome trace JSON; NULL = $HMM_TRACE
				   (shared mode: this process's calls to
				   hmmd and its regions) */
	const char *host_dir;	/* with HMM_CONFIG_HOST_SHARED: a tmpfs
				   directory where each tensor's host memory
				   is an unnamed file (O_TMPFILE), so a mount
				   with huge=within_size gives it huge pages
				   whatever shmem_enabled says; NULL = memfds */
	uint32_t chunk_bytes;	/* multiple of 4096; 0 = 2 MiB (huge pages
				   only for multiples of 2 MiB: libhmm(3)) */
	uint32_t policy;	/* HMM_POLICY_* */
	uint32_t prefetch_depth; /* schedule policy: chunks ahead (bounded
				    by the budget: a prefetch only evicts
				    chunks used later); 0 = 16 */
	uint32_t wait_ms;	/* back-pressure bound; 0 = 10000 */
	uint64_t sim_bandwidth;	/* "sim" copy bytes/s; 0 = memcpy speed */
	int numa_node;		/* host memory node (preferred); -1 =
				   local; another negative value, or a
				   node this process may not allocate on:
				   -EINVAL */
	int device_index;	/* CUDA device ordinal */
	uint32_t flags;		/* HMM_CONFIG_* */
	/* I/O and thread knobs (carved from reserved[]); 0 = the default
	   derived from the machine, as hmm_stats reports it in use: */
	uint32_t pool_bytes;	/* the store's pinned (registered) bounce
				   pool, multiple of 4096, 4 KiB..1 GiB;
				   0 = 4 MiB */
	uint32_t io_depth;	/* extent I/Os handed to the store at a
				   time, 1..4096; 0 = 4 (see iothread.c) */
	uint32_t queue_depth;	/* io_uring SQ entries, 1..4096 (I/Os past
				   it wait in the store); 0 = max(64,
				   io_depth) */
	uint32_t kernel_threads; /* threads for the bundled kernels
				   (hk_set_threads) of the trainer on this
				   context, 1..64; 0 = online CPUs.  libhmm
				   runs no kernels: it checks and reports
				   it; hmm-train and hk users apply it */
	uint32_t reserved[1];	/* zero */
};

/* The knobs' bounds (hmm_open refuses a value past them: -EINVAL) */
#define HMM_CONFIG_POOL_MAX	(1u << 30)	/* pool_bytes */
#define HMM_CONFIG_DEPTH_MAX	4096u		/* io_depth, queue_depth */
#define HMM_CONFIG_THREADS_MAX	64u		/* kernel_threads */

struct hmm;			/* a context: hmm_open / hmm_close */
struct hmm_tensor;		/* hmm_tensor_new / hmm_tensor_free */

/* Defaults: no store, 1 GiB host budget, device "none", LRU.  Any thread. */
void hmm_config_default(struct hmm_config *cfg);

/*
 * The store_size that holds bytes of tensors in chunks of chunk_bytes
 * (0 = 2 MiB), each tensor counted in whole chunks (pass the sum of
 * each tensor's bytes rounded up to chunk_bytes).  A store formatted by
 * a context with chunk_bytes C and store_size S has room for
 *	E = the largest E with 8 KiB + 2 up(24 E + 1 MiB, 4 KiB)
 *	    + (E + k) C <= S,  k = E / 16 within [8, 64],
 * chunks: its table holds E of them, and its data area E + k (room for
 * the new copies of chunks rewritten while their old place is in use:
 * writes in flight, or data a flushed table still names until the
 * next hmm_flush).  That layout is used past 1 << 22 blocks of 4 KiB
 * (16 GiB); a smaller store keeps one table entry per block, which any
 * extent size fits (regions' blocks too), and holds at least as much.
 * hmm_store_required(B, C) is the size that holds E = ceil(B / C)
 * chunks and their slack in whichever layout that size gets; past it a
 * write-back fails with -ENOSPC naming the store.  The slack suffices
 * for any config.io_depth: a write-back the store has no room for yet
 * waits for the I/O in flight (a completed rewrite frees its old place)
 * and fails only when nothing is in flight.
 * 0 when chunk_bytes is not a multiple of 4096 or B is too large.
 * Pure; any thread.
 */
uint64_t hmm_store_required(uint64_t bytes, uint32_t chunk_bytes);

/*
 * A config by name, for bindings that should not know the struct's
 * layout (python/hmm; libhmm/src/config_set.c).  The keys are the field
 * names: store_path, store_size, host_budget, device_budget, device,
 * daemon, trace_path, host_dir, chunk_bytes, policy, prefetch_depth,
 * wait_ms, sim_bandwidth, numa_node, device_index, flags, pool_bytes,
 * io_depth, queue_depth, kernel_threads.  Values are strings: sizes
 * (store_size, host_budget, device_budget, chunk_bytes, sim_bandwidth,
 * pool_bytes) as hmm_size_parse() reads them ("2G", "64K"); counts and
 * numa_node / device_index in decimal; policy "lru" or "schedule"; flags
 * "store_buffered", "store_keep", "host_shared", "store_format" joined
 * by ',' or '|' (or a number; "0", as hmm_config_get writes it, or "" for
 * none; an empty name among others, as in "store_keep,", is refused).
 * A string field keeps the value's pointer, as an
 * assignment would (NULL sets NULL): it must stay valid until hmm_open()
 * copies it.
 * hmm_config_set returns 0, or -EINVAL (unknown key, or a value that is
 * not of the key's kind or does not fit it: the detail names both;
 * nothing changed).  Range checks of the whole config stay hmm_open's.
 * hmm_config_get writes the value (sizes in bytes; a NULL string as "")
 * into buf (cap bytes, terminated when cap > 0) and returns the length
 * it needs, as snprintf (buf may be NULL with cap 0), or -EINVAL
 * (unknown key, or buf NULL with cap > 0).
 * hmm_config_key(i) is the i-th key, NULL past the last: to enumerate.
 * hmm_config_new returns a heap config with the defaults (NULL when out
 * of memory), hmm_config_free frees it.  Any thread; a config itself is
 * not locked.
 */
struct hmm_config *hmm_config_new(void);
void hmm_config_free(struct hmm_config *cfg);
int hmm_config_set(struct hmm_config *cfg, const char *key,
		   const char *value);
int hmm_config_get(const struct hmm_config *cfg, const char *key,
		   char *buf, size_t cap);
const char *hmm_config_key(unsigned i);

/*
 * Open a context: validates cfg, opens the store, starts the I/O thread
 * and the device backend.  The store: with HMM_CONFIG_STORE_KEEP an hmm
 * store is loaded as it is (a new or empty file or device is formatted,
 * foreign data refused as below);
 * with HMM_CONFIG_STORE_FORMAT whatever store_path holds is formatted;
 * with neither, a new or empty file or device, or an hmm store with no
 * named tensors, is formatted, and anything else is refused with
 * -EEXIST naming the path and what was found ("foreign data: ...", "hmm
 * store with 3 named tensors") and left untouched.
 * Returns 0 and *out, or -EINVAL (bad field, named in the detail),
 * the connect error of daemon (e.g. -ENOENT, -ECONNREFUSED), -ENODEV (device
 * "cuda" with no driver or GPU), -EBUSY (another context, of this or
 * another process, has the store open: one context per store, by an
 * exclusive lock held until hmm_close; the detail names the path and the
 * holder's pid), -EUCLEAN (the store is damaged: both superblocks, the
 * tables they name or the table of tensors fail their checks; the detail
 * names the path and what failed, and nothing is written), -ENOSPC
 * (store_size, or with 0 the file's size, too small for a store: the
 * detail names the path and the size it needs; nothing is made),
 * the error opening a file the config names (store_path, trace_path,
 * host_dir: e.g. -ENOENT, -EACCES, naming it), or the store's error
 * (-EIO: the device failed a read).  Any thread.
 */
int hmm_open(const struct hmm_config *cfg, struct hmm **out);

/*
 * Close: waits for I/O in flight, frees every tensor, region and the
 * context.  Does not flush (call hmm_flush() to keep the store's
 * contents).  No other call on h may run during or after it, except the
 * deleters of its DLPack exports (hmm_dlpack_export): while some are
 * alive it only marks h closed and returns; their memory stays mapped
 * and the store open, and the last deleter, on whatever thread runs it
 * (even at the same time as this call), does the close.
 */
void hmm_close(struct hmm *h);

/* ---- tensors ----------------------------------------------------------- */

/* Bytes per element of dtype; 0 when dtype is unknown.  Any thread. */
size_t hmm_dtype_size(uint32_t dtype);

/*
 * A new tensor of ndim (1..HMM_MAX_DIMS) dimensions shape[], contents
 * zero.  name (1..63 bytes, none a control character: below 0x20 or
 * 0x7f) shows in stats and traces; it need not be unique (hmm_flush
 * saves every tensor, and hmm_tensor_open opens those of one name in
 * turn, oldest first).  Returns 0
 * and *out, -EINVAL (unknown dtype, zero or negative dimension, bad
 * ndim, a name empty, too long or with a control character: the detail
 * names the byte), -EOVERFLOW (over 2^46 bytes, or 2^32 chunks or
 * more, or the store's 2^31 tensor ids used: ids are not reused),
 * -ENOMEM, and in shared mode -EDQUOT (this client's tensors
 * would pass its store quota in hmmd: config.store_size as hmmd capped
 * it, 0 = hmmd's default; the detail names the tensor and the quota) or
 * an error talking to hmmd.  Any thread.
 * Its size must be one the context can hold: at most the store's data
 * area + host_budget + the device budget (no store: the budgets alone;
 * shared mode: hmmd's), since a chunk once written holds data until the
 * tensor is freed; -ENOMEM otherwise, before anything is allocated, the
 * detail naming the tensor, its size, those capacities and what its
 * chunk table would take.  That table is about 300 bytes of host memory
 * a chunk, outside the budgets, all allocated here (0.014% of the
 * tensor at 2 MiB chunks, 7% at 4 KiB); one larger than the machine's
 * memory is refused the same way whatever the budgets, and by
 * hmm_tensor_open too (which otherwise opens a saved tensor of any size:
 * its data is in the store).
 */
int hmm_tensor_new(struct hmm *h, const char *name, uint32_t dtype,
		   unsigned ndim, const int64_t *shape,
		   struct hmm_tensor **out);

/*
 * Open a tensor saved in the store by an earlier context's hmm_flush()
 * (the context must be opened with HMM_CONFIG_STORE_KEEP and the same
 * chunk_bytes).  Its contents are read on demand.  Several tensors
 * saved under one name are opened in turn, one a call, in the order
 * they were made (hmm_tensor_new); the next call after the last gets
 * -ENOENT.  Returns 0 and *out,
 * -ENOENT (no such name saved, or already opened), -EINVAL (as well a
 * name hmm_tensor_new would refuse), -EUCLEAN (the saved record is
 * corrupt), -ENOMEM.  Any thread.
 */
int hmm_tensor_open(struct hmm *h, const char *name,
		    struct hmm_tensor **out);

/*
 * Free a tensor and its copies in every tier.  Returns 0, or -EBUSY when
 * a range is still mapped (nothing freed).  Waits for its I/O in flight.
 * No other call on t may run during or after it.
 */
int hmm_tensor_free(struct hmm_tensor *t);

/* Accessors; constant for the tensor's life, any thread. */
const char *hmm_tensor_name(const struct hmm_tensor *t);
uint64_t hmm_tensor_bytes(const struct hmm_tensor *t);
uint32_t hmm_tensor_dtype(const struct hmm_tensor *t);
unsigned hmm_tensor_ndim(const struct hmm_tensor *t);
const int64_t *hmm_tensor_shape(const struct hmm_tensor *t);

/*
 * Bytes of t per tier now, in bytes[HMM_TIERS]: DEVICE and HOST count
 * the chunks with memory there, STORE the chunks the store holds an
 * extent for (valid or not).  In shared mode hmmd's engine answers
 * for HOST and STORE (what hmmctl tensors shows), and DEVICE is the
 * bytes this process's device maps of t hold, each byte once (nothing
 * stays at the device between maps).  A snapshot; any thread.  Returns
 * 0, -EINVAL (no tensor or bytes), or in shared mode an error talking
 * to hmmd.
 */
int hmm_tensor_residency(struct hmm_tensor *t, uint64_t bytes[]);

/*
 * The memfd behind t's host range and the offset of t's byte 0 in it,
 * for a process that hands the tensor's pages to another (hmmd does, so
 * a client's map is the same memory without a copy).  The fd stays
 * t's: valid until hmm_tensor_free, never closed by the caller (dup it
 * to keep it).  Bytes of unpinned chunks may change or read as zeros at
 * any time; only a mapped range is stable.  Returns 0, -EINVAL,
 * -ENOTSUP (shared mode, or the context was opened without
 * HMM_CONFIG_HOST_SHARED).  Any thread.
 */
int hmm_tensor_host_fd(struct hmm_tensor *t, int *fd, uint64_t *off);

/* ---- map and unmap ----------------------------------------------------- */

/*
 * Pin bytes [off, off + len) of t resident at tier (HMM_TIER_DEVICE or
 * HMM_TIER_HOST) with access (HMM_READ, HMM_WRITE, HMM_DISCARD, or'ed)
 * and return in *ptr the address of byte off at that tier (a device
 * address for the device tier; in shared mode a copy of the range at an
 * address of its own for a uid whose tensors would reach past its host
 * quota in hmmd: libhmm(3)).  len HMM_ALL = to the end.  Blocks until
 * the range is resident.  A WRITE or DISCARD map makes the range dirty:
 * other tiers' copies become stale at once.
 * Returns 0, -EINVAL (bad range, access or tier; tier with no backend),
 * -ENOMEM (the tier stayed full of pinned chunks for wait_ms, or the
 * range is larger than the budget; embedded, at the host while a
 * userfaultfd region lives, also when the pins would leave less than
 * 128 KiB of the budget unpinned: at once if this range alone would,
 * else after wait_ms), -EIO and other I/O errors (the range is left
 * unpinned).  Any thread.
 */
int hmm_map(struct hmm_tensor *t, uint64_t off, uint64_t len, int tier,
	    unsigned access, void **ptr);

/*
 * Drop the pin of an hmm_map() of t that returned ptr.  Maps of one
 * tier at one offset share a pointer; of those, the one that pins
 * least: the shortest, a read-only one before a writable one, the latest
 * of equals, so that until the other unmaps every byte a map still held
 * covers stays pinned and its writes seen.  Returns 0, or -EINVAL when ptr is not mapped by t (e.g. unmapped
 * twice, or mapped through another tensor, whose map stays: the detail
 * names t).  Any thread.
 */
int hmm_unmap(struct hmm_tensor *t, void *ptr);

/* ---- asynchronous movement --------------------------------------------- */

/*
 * Start moving [off, off + len) of t to tier (device or host) without
 * pinning it, and return at once; chunks that cannot get space without
 * evicting pinned ones are skipped.  Chunks that wait for space a copy in
 * flight will free get it in the order they were asked.  A read or copy
 * of it that fails is reported by the next hmm_wait or hmm_flush (the
 * detail naming the tensor and chunk, and for the store its path, offset
 * and why); a later map of the chunk tries again.  Returns 0 or
 * -EINVAL.  Any thread.
 */
int hmm_prefetch(struct hmm_tensor *t, uint64_t off, uint64_t len, int tier);

/*
 * Start moving the unpinned chunks of [off, off + len) of t out of tier
 * (device -> host, host -> store; dirty data is written first) and
 * return at once.  Returns 0 or -EINVAL (no lower tier).  Any thread.
 */
int hmm_evict(struct hmm_tensor *t, uint64_t off, uint64_t len, int tier);

/*
 * Start writing the dirty chunks of [off, off + len) of t that are at
 * the host and not mapped to the store, and return at once: unlike
 * hmm_evict they stay resident, and become clean when the write lands,
 * so that the budget's policy later drops them without I/O when it
 * needs the room (and a map finds them at the host meanwhile).  Skipped:
 * chunks that are clean or never written, not at the host, mapped at
 * the host (their bytes may still change: they are written at the next
 * hmm_writeback, eviction or flush after the unmap), or with a copy in
 * flight; a chunk whose earlier write-back failed is tried again.  A
 * write's error is reported by the next hmm_wait or hmm_flush, naming
 * the tensor; the chunk then stays dirty in memory, its bytes intact.
 * len HMM_ALL = to the end.  Returns 0, -EINVAL (no tensor, or a range
 * outside it: the detail names both), -ENODEV (no store tier), or in
 * shared mode -EOPNOTSUPP (an hmmd older than protocol version 3) or an
 * error talking to hmmd; there hmmd answers once the writes are done,
 * as it does an eviction, so a write's error may come from this call.
 * Any thread.
 */
int hmm_writeback(struct hmm_tensor *t, uint64_t off, uint64_t len);

/*
 * Wait until no prefetch, eviction or write-back (hmm_writeback's too)
 * of t (of every tensor when t is NULL) is in flight.  Returns 0, or the
 * first asynchronous error since the last hmm_wait/hmm_flush (e.g. -EIO
 * of a write-back, the chunk staying dirty in memory; or of a prefetch's
 * read, a checksum mismatch included).  In shared mode,
 * the first met by a tensor this context holds of its own uid (another
 * client's never, nor its tensor's name).  Any thread.
 */
int hmm_wait(struct hmm *h, struct hmm_tensor *t);

/*
 * Write every dirty chunk to the store, then the table of tensors (names,
 * shapes, which chunks are stored: see hmm_tensor_open; every live
 * tensor and every saved one not opened, several of one name
 * included, none hiding another), and make the
 * store durable: a checkpoint.  Mapped chunks are written as they are.
 * Returns 0, -ENODEV (no store tier), -ENOMEM (a dirty chunk only at
 * the device reaches the store through the host, and pinned maps held
 * the host budget full for wait_ms: nothing is lost, and a flush after
 * the unmaps saves it; the detail names the tensor and chunk), or an I/O
 * error.  Any thread.
 * Shared mode: every tensor the context holds becomes its uid's saved
 * tensor of that name in hmmd (replacing one saved before under that
 * name), which hmmd keeps while no client holds it, until a context of
 * the uid opens and frees it; the same errors, and -ENAMETOOLONG (a name
 * longer than 63 bytes with hmmd's "u<uid>/" prefix: the others are
 * saved), -EOPNOTSUPP (an hmmd older than protocol 4 saves only tensors
 * opened with hmm_tensor_open), naming the tensor.
 */
int hmm_flush(struct hmm *h);

/* ---- steps (the schedule-aware policy) --------------------------------- */

/*
 * Mark the start and end of a training iteration.  With
 * HMM_POLICY_SCHEDULE, the chunk accesses of the first complete step are
 * recorded; later steps follow the record (prefetch ahead, evict the
 * chunk used farthest in the future) and a step that diverges from it is
 * recorded anew.  Returns 0 or -EINVAL (unbalanced).  Any thread; the
 * accesses of all threads form one sequence.
 */
int hmm_step_begin(struct hmm *h);
int hmm_step_end(struct hmm *h);

/* ---- stats ------------------------------------------------------------- */

struct hmm_tier_stats {
	uint64_t capacity;	/* budget, bytes */
	uint64_t resident;	/* bytes allocated to chunks now */
	uint64_t peak;		/* highest resident ever (on the host,
				   with host_spare) */
	uint64_t pinned;	/* bytes of pinned chunks now */
	uint64_t bytes_in;	/* copied into this tier */
	uint64_t bytes_out;	/* copied out of this tier */
	uint64_t hits;		/* map found the chunk valid here */
	uint64_t misses;	/* map had to bring it here */
	uint64_t evictions;	/* chunks dropped from this tier */
	uint64_t io_ops;	/* copies into or out of this tier */
	double stall_s;		/* time maps waited for this tier (those
				   that then failed with -ENOMEM too) */
	double io_s;		/* time its link was busy (store, device;
				   0 for the host) */
};

/* A snapshot; fields are exact counters since hmm_open(). */
struct hmm_stats {
	struct hmm_tier_stats tier[HMM_TIERS];
	uint64_t tensors, chunks;
	uint64_t discard_skips;	/* DISCARD maps that skipped a read-in */
	uint64_t prefetches;	/* chunk moves started by prefetch */
	uint64_t prefetch_hits;	/* maps served by a prefetched chunk */
	uint64_t steps;
	uint64_t recordings;	/* schedule recordings completed */
	uint64_t divergences;	/* steps that left the record */
	uint64_t io_errors;	/* failed store or device copies */
	uint64_t region_faults;
	uint64_t region_evictions;
	uint64_t store_direct;	/* 1: the store uses O_DIRECT; 0: buffered
				   fallback (e.g. tmpfs) or no store */
	/* the knobs in use (defaults resolved; the I/O ones are 0 in
	   shared mode, where they are hmmd's: hmmctl stats), and what
	   they allowed: */
	uint64_t pool_bytes;	/* the store's pinned pool; 0 = no store */
	uint64_t queue_depth;	/* its io_uring SQ entries */
	uint64_t io_depth;	/* extent I/Os in the store at a time, max */
	uint64_t io_inflight_peak; /* most extent I/Os seen in the store at
				   once (<= io_depth) */
	uint64_t kernel_threads; /* config.kernel_threads resolved */
	uint64_t store_buffers_registered; /* 1: the pool is registered
				   with io_uring (fixed buffers) */
	uint64_t host_spare;	/* bytes of dropped host chunks' pages kept
				   for the next chunks read in (at most a
				   quarter of the host budget or 32 MiB,
				   whichever is more, 2 to 1024 chunks):
				   counted in the host budget and its
				   peak, not in its resident; freed before
				   anything is evicted for room */
};

/* Fill *st.  Returns 0.  Any thread. */
int hmm_stats(struct hmm *h, struct hmm_stats *st);

/*
 * Write the stats as one JSON object (no newline) into buf (cap bytes,
 * always terminated when cap > 0).  Returns the length the whole object
 * needs (as snprintf), so a return >= cap means it was cut; buf may be
 * NULL with cap 0, to ask for it.  -EINVAL: no context, or buf NULL with
 * cap > 0.  Any thread.  Besides struct hmm_stats' fields it holds
 * "chunk_bytes": the context's chunk size (in shared mode hmmd's, which
 * may differ from config.chunk_bytes).
 */
int hmm_stats_json(struct hmm *h, char *buf, size_t cap);

/* ---- errors ------------------------------------------------------------ */

/* A short text for a negative errno (or 0); any other int gets one too.
 * Any thread. */
const char *hmm_strerror(int err);

/*
 * Parse a byte size: digits, then optionally K, M, G or T (powers of
 * 1024, either case), optionally followed by "iB"; or digits and "B"
 * (bytes): "4096", "512B", "64K", "2MiB", "1G".  "KB", "MB", "GB" and
 * "TB" are refused (-EINVAL), not read as powers of 1024: MB is 10^6
 * bytes wherever hmm prints it.
 * Returns 0 with *out set, -EINVAL (not a size: nothing written) or
 * -ERANGE (does not fit 64 bits).  Any thread; no detail string.
 */
int hmm_size_parse(const char *s, uint64_t *out);

/*
 * The current thread's detail of its latest failure (tensor, offset,
 * path); "" when none.  Valid until the next libhmm call on this thread.
 */
const char *hmm_last_error(void);

/* ---- transparent regions ----------------------------------------------- */

#define HMM_ADVISE_WILLNEED	1	/* fault the range in now */
#define HMM_ADVISE_COLD		2	/* evict the range now */
#define HMM_ADVISE_NORMAL	3	/* forget earlier advice */

/*
 * A region of bytes (rounded up to the region block, 64 KiB) addressed
 * by a plain pointer: pages are faulted in on access (zeros first, then
 * the last written contents) and evicted when the host budget
 * (config.host_budget; all the context's regions together) is full.
 * Embedded: userfaultfd here, evicted blocks in the store.  Shared mode:
 * hmmk.ko backs it when the hmmd of this context is the module's daemon
 * (evicted pages go to hmmd); otherwise userfaultfd here with evicted
 * blocks in an hmmd tensor.  An access whose bytes are lost (a failed
 * read, hmmd gone) gets SIGBUS, never wrong bytes; hmmd short of room
 * (this client's quota kept full by its own maps) only makes an access
 * wait: its block's eviction or read is tried again.  No access waits
 * for ever: one that finds no room for config.wait_ms (the host budget
 * full of what cannot go, as pinned chunks, chunks whose write-back
 * failed, blocks of a region whose store is full; or hmmd refusing the
 * block all that time; at once in a region whose store is full) gets
 * SIGBUS, and the next hmm_wait / hmm_flush returns -ENOMEM (-ENOSPC)
 * naming the region, the block, the budget and what holds it.  Its
 * block keeps its bytes: accesses get SIGBUS until room returns (looked
 * for every 0.1 s), then are served again (on a kernel without
 * UFFDIO_POISON, before 6.6, the block is lost instead).  A userfaultfd
 * region may be no larger than a new tensor: the store's data area +
 * host_budget + the device budget (shared mode: hmmd's, where its blocks
 * go, and a smaller one may still pass this client's store quota there,
 * -EDQUOT); past that, -ENOMEM before its block table (a byte a block,
 * 1 GiB at 2^46) is allocated, the detail naming the region, its size
 * and those capacities.  Returns 0 and *ptr, -EINVAL (zero bytes, or a
 * host budget under 128 KiB: one access may touch two blocks, and both
 * must fit; in shared mode also a host quota in hmmd, config.host_budget
 * as hmmd capped it, under the whole chunks one block's eviction maps
 * there, a chunk of hmmd's, 2 MiB by default: the detail names the
 * region, the quota and the chunk), -ENODEV (embedded with no store
 * tier), -ENOSYS / -EPERM (userfaultfd unavailable), -ENOMEM (larger
 * than the context can hold, as above; embedded, also when pinned chunks
 * leave less than 128 KiB of the host budget unpinned: while a
 * userfaultfd region lives, host maps keep that much free of pins, so
 * that pins alone never starve an access), or hmmd's error.  Any
 * thread.
 */
int hmm_region_new(struct hmm *h, uint64_t bytes, void **ptr);

/*
 * Advise [ptr, ptr + len) of a region (HMM_ADVISE_*): COLD evicts now
 * (the module's EVICT for a module region), WILLNEED faults in now,
 * skipping blocks an access would get SIGBUS for.  Returns 0, -EINVAL
 * (not inside one region, unknown advice) or an I/O error (-EPIPE /
 * -ENOTCONN once hmmd is gone; -EDQUOT / -ENOMEM when hmmd had no room
 * for now: those blocks stay resident; WILLNEED: -ENOMEM when a block
 * found no room for wait_ms, as an access would, the detail naming it:
 * it and the blocks after it stay out).  Any thread.
 */
int hmm_region_advise(struct hmm *h, void *ptr, uint64_t len, int advice);

/*
 * Free the region starting at ptr.  No thread may touch it during or
 * after; an access already waiting for room gets SIGBUS at once (as at
 * hmm_close), never holding the free up.  Returns 0 or -EINVAL (not a
 * region).
 */
int hmm_region_free(struct hmm *h, void *ptr);

/* ---- DLPack ------------------------------------------------------------ */

struct DLManagedTensor;		/* dlpack.h */

/*
 * Map the whole tensor at tier with access and describe it as a DLPack
 * DLManagedTensor (shape, dtype, device).  Its deleter unmaps and frees
 * it; the consumer calls it exactly once, from any thread, before or
 * after hmm_close(): the export keeps the context (its memory, the
 * store) until then, and the last deleter after hmm_close closes it.
 * Returns 0 and *out, or the errors of hmm_map(), -EINVAL (dtype without
 * a DLPack code).  Any thread, before hmm_close().
 */
int hmm_dlpack_export(struct hmm_tensor *t, int tier, unsigned access,
		      struct DLManagedTensor **out);

#ifdef __cplusplus
}
#endif

#endif /* HMM_H */
