// SPDX-License-Identifier: MIT
/*
 * guard.c — a client's ftruncate must not kill hmmd (issue 18 item 1).
 *
 * A MAP sends the client the tensor's host file.  A memfd is sealed
 * against any size change (libhmm's tensor.c: F_SEAL_SHRINK |
 * F_SEAL_GROW, which still lets the host tier punch holes).  A tmpfs
 * O_TMPFILE of --host-dir cannot be sealed (tmpfs files carry
 * F_SEAL_SEAL), and a writable shared mapping needs a descriptor open
 * for writing, which can ftruncate: there a shrunk file would make
 * hmmd's next read of the lost pages (the crc of an evict) a SIGBUS.
 *
 * So each such file sent is registered here (a descriptor of our own and
 * its size), and a SIGBUS handler grows every registered file that has
 * shrunk back to its size (fstat and ftruncate are async-signal-safe);
 * the faulting read then retries and reads zeros (the holes), which is
 * no more than a writer could have written.  A SIGBUS that no
 * registered file explains (a hardware memory error, a bug) restores
 * the default action and re-faults: hmmd dies as it would have.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guard.h"

#define GUARD_MAX	4096

static struct {
	atomic_int fd1;			/* fd + 1; 0 = free */
	atomic_ullong size;
} slots[GUARD_MAX];

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	int saved = errno, healed = 0, i, fd;
	struct stat st;
	off_t want;

	(void)uc;
	if (si->si_code == BUS_ADRERR)
		for (i = 0; i < GUARD_MAX; i++) {
			fd = atomic_load(&slots[i].fd1) - 1;
			want = (off_t)atomic_load(&slots[i].size);
			if (fd >= 0 && !fstat(fd, &st) && st.st_size < want &&
			    !ftruncate(fd, want))
				healed++;
		}
	if (!healed)
		signal(sig, SIG_DFL);	/* re-faults, and dies */
	errno = saved;
}

int hmmd_guard_init(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	return sigaction(SIGBUS, &sa, NULL) ? -errno : 0;
}

int hmmd_guard_add(int fd)
{
	struct stat st;
	int i, own, seals, zero;

	seals = fcntl(fd, F_GET_SEALS);
	if (seals >= 0 && (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) ==
			  (F_SEAL_SHRINK | F_SEAL_GROW))
		return 0;		/* sealed: nothing to guard */
	if (fstat(fd, &st))
		return -errno;
	own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (own < 0)
		return -errno;
	for (i = 0; i < GUARD_MAX; i++) {
		zero = 0;
		atomic_store(&slots[i].size, (unsigned long long)st.st_size);
		if (atomic_compare_exchange_strong(&slots[i].fd1, &zero,
						   own + 1))
			return i + 1;
	}
	close(own);
	return -EMFILE;
}

void hmmd_guard_remove(int slot)
{
	int fd;

	if (slot <= 0 || slot > GUARD_MAX)
		return;
	fd = atomic_exchange(&slots[slot - 1].fd1, 0) - 1;
	if (fd >= 0)
		close(fd);
}
