/* SPDX-License-Identifier: MIT */
/*
 * scratch.h — the files a run makes and must not leave: removed on every
 * exit, normal return, exit(), SIGINT, SIGTERM, SIGHUP, SIGPIPE.  They
 * are: a --ckpt store this run created until a checkpoint is complete in
 * it (then it is the checkpoint's, kept), the staged PATH.tmp with it,
 * the --report page being written, the --ckpt write probe's fallback
 * name.  The user's own files are never here: a path is added only once
 * this run has made it with O_EXCL.
 *
 * The handlers are installed for SIGINT and SIGTERM whatever the
 * inherited disposition (a shell starts a background job with SIGINT
 * ignored; `kill -INT` on it still stops it, cleanly), and for SIGHUP
 * and SIGPIPE unless they were inherited ignored (nohup, or a caller
 * that wants EPIPE).  The handler removes the files and dies of the
 * signal (exit status 128 + N from a shell).
 *
 * A signal may run the handler on any thread (OpenBLAS's and libhmm's
 * too), so making a file and adding it is a section the handler waits
 * for: scratch_begin(), make it, scratch_add(), scratch_end().  A signal
 * inside is acted on at scratch_end(), with the file added; the same
 * section around the last step that makes a file the user's
 * (scratch_keep(), then the rename) lets that step finish first.
 *
 * Threading: the calls below from one thread (main's).  At most
 * SCRATCH_MAX files at once.
 */
#ifndef HMM_TRAIN_SCRATCH_H
#define HMM_TRAIN_SCRATCH_H

#define SCRATCH_MAX	4

/* Install the handlers and the exit hook; call first thing in main. */
void scratch_arm(void);

/* Enter / leave a section that a signal waits for (see above). */
void scratch_begin(void);
void scratch_end(void);

/* Note path as this run's, to remove on exit: a slot, or -1 (full).
 * Call between scratch_begin() and scratch_end(). */
int scratch_add(const char *path);

/* Remove slot's file now (slot < 0: nothing). */
void scratch_remove(int slot);

/* Slot's file is no longer scratch: keep it (slot < 0: nothing). */
void scratch_keep(int slot);

#endif /* HMM_TRAIN_SCRATCH_H */
