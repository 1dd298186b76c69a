/* SPDX-License-Identifier: MIT */
/* guard.h — hmmd survives a client's ftruncate of an unsealable host
 * file (guard.c). */
#ifndef HMMD_GUARD_H
#define HMMD_GUARD_H

/* Install the SIGBUS handler; 0 or -errno.  main(), before serving. */
int hmmd_guard_init(void);

/* Guard the host file fd is open on (sent to a client) until
 * hmmd_guard_remove: a slot > 0, 0 when fd is sealed (nothing to
 * guard), or -errno (-EMFILE: every slot taken). */
int hmmd_guard_add(int fd);

/* Stop guarding slot (a return of hmmd_guard_add; <= 0 is a no-op). */
void hmmd_guard_remove(int slot);

#endif /* HMMD_GUARD_H */
