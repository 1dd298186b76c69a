/* SPDX-License-Identifier: MIT */
/*
 * store.h — the NVMe tier: one file or block device holding extents.
 *
 * Layout on disk (all little-endian, 4 KiB aligned):
 *   [superblock slot A][superblock slot B][table area A][table area B][data...]
 * A flush writes the extent table and the metadata blob to the table area
 * not named by the live superblock, makes it durable, then writes the
 * other superblock slot with generation + 1: a crash at any point leaves
 * one valid superblock naming a complete table.  Every extent carries the
 * crc32c of its bytes; a read whose crc does not match fails with -EIO.
 *
 * Extents are named by a 64-bit key chosen by the caller (the tensor layer
 * uses tensor id << 32 | chunk index).  Writing a key that was flushed
 * never overwrites the flushed bytes: the write goes to a fresh place and
 * the old place is reused only after the next flush (copy-on-write), so
 * that reopening after a crash presents exactly the flushed extents.
 *
 * Ownership: hmm_store_open allocates the store, hmm_store_close frees it
 * (it does not flush: call hmm_store_flush first to keep what was written).
 * I/O buffers are the caller's; registered (fast path) when they come from
 * the store's pinned pool (hmm_store_pool()).
 *
 * Threading: a store is used by one thread at a time (the io_uring is
 * created SINGLE_ISSUER where the kernel allows it, so that thread should
 * stay the same one: the tensor layer runs a dedicated I/O thread).
 * hmm_store_stats() may be called from any thread.  (As built: the ring
 * binds to the first thread that submits, polls or flushes, which need
 * not be the one that opened it; any other thread then gets -EEXIST.
 * hmm_store_close may run on any thread.)
 *
 * Fallbacks are never silent: O_DIRECT refused (or tmpfs), the pool not
 * mlock'd or not registered, no SQPOLL or SINGLE_ISSUER show in the
 * stats and in one sentence from hmm_store_note().  Fault injection for
 * tests: HMM_FAULT / hmm_fault_set() (fault_inject.h).
 *
 * Errors: 0 or -errno; hmm_last_error() names path and offset.  Never an
 * assert or abort on an I/O result.
 *
 * Striping: a path with commas, "a.store,b.store", names the ordered
 * members of a striped store (stripe.h): each a complete store as above
 * whose superblock records the set (uuid, index, count); extent key k
 * lives on member ((k >> 32) + (uint32_t)k) % members; size is the
 * total, shared out by extents; the meta blob is member 0's; a flush
 * commits every member before any reuses a place, and an open rolls a
 * member that got one flush further than the others back.  The API is
 * the same; stats sum the members.
 */
#ifndef HMM_STORE_H
#define HMM_STORE_H

#include <stddef.h>
#include <stdint.h>

struct hmm_pool;
struct hmm_store;

/* hmm_store_config.flags */
#define HMM_STORE_CREATE	(1u << 0) /* create/format when absent or empty */
#define HMM_STORE_SQPOLL	(1u << 1) /* ask for an SQPOLL ring */
#define HMM_STORE_BUFFERED	(1u << 2) /* do not try O_DIRECT */
#define HMM_STORE_TRUNCATE	(1u << 3) /* format even when a valid store is there */

struct hmm_store_config {
	const char *path;	/* file or block device; "a,b,..." stripes
				 * the store over them (below) */
	uint64_t size;		/* bytes wanted; 0 = the file's current size */
	uint32_t queue_depth;	/* io_uring entries; 0 = 32 */
	uint32_t block_size;	/* allocation unit, power of two >= 4096; 0 = 4096 */
	uint32_t max_extents;	/* table capacity; 0 = derived from size */
	uint32_t flags;		/* HMM_STORE_* */
	size_t pool_bytes;	/* pinned pool to create; 0 = 64 MiB */
	int numa_node;		/* pool's node; -1 = local */
	/* added by the store after the first version: */
	uint32_t meta_bytes;	/* meta blob capacity at format; 0 = 1 MiB */
	uint32_t pool_flags;	/* HMM_POOL_* (pool.h): NOHUGE, NOLOCK */
	uint32_t extent_bytes;	/* at format, with max_extents 0: the
				 * largest extent (the tensor layer's
				 * chunk, a multiple of block_size); the
				 * table then holds as many such extents
				 * as the data area does, less
				 * k(E) (table.h: the formula);
				 * 0 = one table entry per block */
};

/* Statistics, a snapshot; bytes are exact. */
struct hmm_store_stats {
	uint64_t capacity_bytes;	/* data area */
	uint64_t used_bytes;		/* allocated to extents (incl. quarantined) */
	uint64_t extents;
	uint64_t read_bytes, write_bytes;
	uint64_t read_ops, write_ops;
	uint64_t short_resubmits;	/* short I/O completed by resubmission */
	uint64_t errors;		/* I/O completions that failed */
	uint64_t crc_errors;		/* reads whose crc did not match */
	uint64_t flushes;
	uint64_t generation;		/* of the live superblock */
	uint32_t direct;		/* 1 = O_DIRECT, 0 = buffered fallback */
	uint32_t registered_files;	/* 1 = io_uring registered file */
	uint32_t registered_buffers;	/* 1 = pool registered with io_uring */
	uint32_t sqpoll;		/* 1 = SQPOLL ring */
	uint32_t ring_flags;		/* IORING_SETUP_* actually in use */
	uint32_t queue_depth;
	uint64_t pool_bytes, pool_used_bytes, pool_huge;	/* pinned pool */
	/* added by the store after the first version: */
	uint64_t quarantined_bytes;	/* freed, reusable after next flush */
	uint64_t data_offset;		/* where the data area starts */
	uint32_t block_size;		/* allocation unit */
	uint32_t pool_locked;		/* 1 = pool mlock'd */
	uint32_t tmpfs;			/* 1 = the file is on tmpfs */
	uint32_t inflight;		/* requests not completed */
	uint64_t flush_bytes;		/* table + superblock bytes written
					 * (not in write_bytes/write_ops) */
	uint32_t members;		/* files or devices: 1, or a striped
					 * store's (the rest summed over
					 * them; direct, registered_* and
					 * sqpoll only when all have it) */
};

/*
 * Open (load or, per flags, format) the store at cfg->path, holding an
 * exclusive flock on it until hmm_store_close: -EBUSY, naming the path and
 * the holder's pid, while another open store (any process) holds it.
 */
int hmm_store_open(const struct hmm_store_config *cfg, struct hmm_store **out);
void hmm_store_close(struct hmm_store *s);

/* The size of a store (default block size and meta blob) whose table
 * and data area hold extents extents of up to extent_bytes each (a
 * multiple of 4096), formatted with that extent_bytes: see table.h.
 * 0 when extent_bytes is not a multiple of 4096 or extents is too many. */
uint64_t hmm_store_size_for(uint64_t extents, uint32_t extent_bytes);

/* The pinned buffer pool the store owns and registered with its ring. */
struct hmm_pool *hmm_store_pool(struct hmm_store *s);

void hmm_store_stats(struct hmm_store *s, struct hmm_store_stats *st);

/* One line saying what fell back at open (O_DIRECT refused, buffers not
 * registered, no SINGLE_ISSUER...), "" when nothing did.  Lives as long
 * as the store; the library never prints it: callers may. */
const char *hmm_store_note(struct hmm_store *s);

/* ---- asynchronous extent I/O ---------------------------------------- */

#define HMM_IO_READ	1	/* read the extent named by key into buf */
#define HMM_IO_WRITE	2	/* write buf as the extent named by key */
#define HMM_IO_READ_RAW	3	/* read len bytes at off of the data area */
#define HMM_IO_WRITE_RAW 4	/* write len bytes at off of the data area */

/*
 * The crc32c of an extent is the store's thread's work unless the
 * caller takes it (flags): 2 MiB take 0.2-0.4 ms of CPU, and a thread
 * that checks every completion before it can submit the next leaves the
 * disk idle (architecture.md, "Checksums off the I/O thread").
 */
#define HMM_IOF_CRC_GIVEN 1u	/* WRITE: io->crc is crc32c(buf, len),
				   computed by the caller, and buf does not
				   change until done() */
#define HMM_IOF_CRC_LATER 2u	/* READ: the reap does not check the
				   bytes; the caller calls hmm_store_check
				   before it uses them */

/*
 * One request, owned by the caller and untouched by the store between
 * done() and the next submit.  buf and len must be 4096-aligned (-EINVAL
 * otherwise).  For READ, len must equal the extent's length.  A WRITE of
 * a key creates or replaces that extent with len bytes (crc computed at
 * submission, or given: HMM_IOF_CRC_GIVEN).  RAW ops bypass the table
 * (benchmarks, tests).
 */
struct hmm_io {
	uint32_t op;		/* HMM_IO_* (in) */
	uint32_t len;		/* bytes (in) */
	uint64_t key;		/* extent key (in, extent ops) */
	uint64_t off;		/* data-area offset (in, RAW ops) */
	void *buf;		/* (in) */
	int result;		/* (out) 0 or -errno, valid in done() */
	void (*done)(struct hmm_io *io);	/* called from poll/wait; may be NULL */
	void *priv;		/* caller's */
	uint32_t flags;		/* HMM_IOF_* (in) */
	uint32_t crc;		/* (in) with HMM_IOF_CRC_GIVEN */
	/* store-private below */
	uint64_t s_off;		/* where the bytes go or come from */
	uint32_t s_done;	/* bytes transferred so far */
	uint32_t s_crc;
	uint32_t s_state;
	/* added by the store after the first version: */
	struct hmm_io *s_next;	/* backlog link */
	uint32_t s_fault;	/* HMM_FAULT_* chosen for this request */
	uint32_t s_zero;	/* zero-byte completions in a row */
	struct hmm_store *s_store;	/* the store (a stripe's member) that
					   carried it */
};

/* Queue n requests and submit them in one batch.  Returns the number
 * queued (>= 0) or -errno before any was queued.  May be called from a
 * done() callback while hmm_store_poll (or _wait, _poll_wake) reaps:
 * the requests join the backlog and are submitted as any others. */
int hmm_store_submit(struct hmm_store *s, struct hmm_io **ios, unsigned n);

/* Reap completions, calling done(); waits for at least min_complete
 * (0 = don't wait) or timeout_ms (-1 = forever).  Returns the number
 * completed or -errno. */
int hmm_store_poll(struct hmm_store *s, unsigned min_complete, int timeout_ms);

/*
 * hmm_store_poll that also returns early, with the completions reaped so
 * far (maybe 0), as soon as wake_fd is readable: another thread (which
 * may not touch the store) writes an eventfd to make the store's thread
 * look at new work without waiting for a completion or the timeout.
 * The store keeps one POLL_ADD on wake_fd armed in its own ring (so a
 * completion and a wake-up end the same wait) and never reads, writes
 * or closes wake_fd: the caller drains it before it looks for new work,
 * so that work queued after the drain makes the next poll return; pass
 * the same fd every time and keep it open until hmm_store_close (a
 * poll still armed is cancelled then).  Plain hmm_store_poll, _wait and
 * _flush ignore a wake-up.  Without io_uring (the pread/pwrite fallback)
 * completions happen within submit and this poll never sleeps (nor arms
 * anything): the caller needs no wake-up there.
 * Returns the number completed, or -errno (-EINVAL: wake_fd < 0).
 */
int hmm_store_poll_wake(struct hmm_store *s, unsigned min_complete,
			int timeout_ms, int wake_fd);

/* Wait until io has completed (reaping others on the way); io->result. */
int hmm_store_wait(struct hmm_store *s, struct hmm_io *io);

/* Requests submitted and not yet completed. */
unsigned hmm_store_inflight(struct hmm_store *s);

/*
 * Check the bytes of a READ submitted with HMM_IOF_CRC_LATER that
 * completed with result 0 against the crc32c the table holds: 0, or
 * -EIO naming the store (a stripe's member), the extent and the offset,
 * counted in stats.crc_errors.  Any thread may call it, while the store
 * is open; it touches nothing of the store's but its stats.
 */
int hmm_store_check(const struct hmm_io *io);

/* ---- extents and the table ------------------------------------------ */

/* Length of extent key, or -ENOENT. */
int64_t hmm_store_extent_len(struct hmm_store *s, uint64_t key);

/* Byte offset in the file (a striped store's: the member's,
 * hmm_store_extent_path) where extent key's data starts: 0 or -ENOENT
 * (tests use it to damage an extent on purpose). */
int hmm_store_extent_where(struct hmm_store *s, uint64_t key,
			   uint64_t *file_off);

/* The path of the file or device holding extent key (a striped store's
 * member), or NULL when there is no such extent. */
const char *hmm_store_extent_path(struct hmm_store *s, uint64_t key);

/* Forget an extent; its space is reused after the next flush. */
int hmm_store_extent_free(struct hmm_store *s, uint64_t key);

/* Call fn for each live extent (in key order) until it returns nonzero. */
int hmm_store_extent_each(struct hmm_store *s,
			  int (*fn)(void *arg, uint64_t key, uint32_t len),
			  void *arg);

/* An opaque blob (e.g. the tensor layer's names) kept with the table. */
int hmm_store_meta_set(struct hmm_store *s, const void *blob, size_t len);
int hmm_store_meta_get(struct hmm_store *s, void *blob, size_t cap); /* len */

/* Wait for in-flight writes, write the table and superblock durably. */
int hmm_store_flush(struct hmm_store *s);

#endif /* HMM_STORE_H */
