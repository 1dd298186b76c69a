// SPDX-License-Identifier: MIT
/*
 * scratch.c — files a benchmark made and must remove on every exit:
 * normal return, exit() from a failure, SIGINT, SIGTERM, SIGHUP or
 * SIGPIPE (its output's reader gone, as `| head` does) (and an empty
 * file it was given, cut back to empty on the same exits, and
 * a tmpfs it mounted, unmounted and its folder removed); and
 * the child programs it runs (a peer's Python), stopped first on such
 * an exit, so that none writes a file again after the files are gone.
 * A child is the leader of its own process group, and the whole group
 * is killed: a shell's own children too.  A file that cannot be removed
 * (a read-only or immutable folder) is named on stderr where stdio may
 * run, at a return or exit(), and fails the run (main.c): a shared disk
 * must not fill up with scratch nobody was told about.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define MAX_SCRATCH	16

#define MAX_CHILD	4

static char *scratch[MAX_SCRATCH];
static volatile sig_atomic_t nscratch;
static volatile pid_t child[MAX_CHILD];	/* 0: a free slot */
static volatile int empty_fd = -1;
static char *volatile mount_dir;	/* a tmpfs of the run's, or NULL */

static volatile sig_atomic_t nleft;	/* files that could not go */

/* Say a file that could not be removed: only where stdio may run (not
 * in a signal handler), so that a full or read-only disk is not left
 * holding a run's scratch unsaid. */
static void unlink_said(const char *path, int say)
{
	if (unlink(path) == 0 || errno == ENOENT)
		return;
	nleft = nleft + 1;
	if (say)
		fprintf(stderr, "hmm-bench: %s: cannot remove this run's "
			"scratch file: %s (left behind)\n", path,
			strerror(errno));
}

static void remove_all(int say)
{
	for (int i = 0; i < MAX_CHILD; i++) {	/* kill, waitpid: signal-safe */
		pid_t pid = child[i];

		if (pid > 0) {
			kill(-pid, SIGKILL);
			waitpid(pid, NULL, 0);
			child[i] = 0;
		}
	}
	for (int i = 0; i < nscratch; i++) {
		char *p = scratch[i];

		if (p) {
			scratch[i] = NULL;	/* once, whoever runs first */
			unlink_said(p, say);
		}
	}
	if (empty_fd >= 0)	/* ftruncate: async-signal-safe too */
		(void)!ftruncate(empty_fd, 0);
	if (mount_dir && !umount2(mount_dir, MNT_DETACH))	/* syscalls */
		rmdir(mount_dir);
}

static void at_exit(void)
{
	remove_all(1);
}

static void on_signal(int sig)
{
	remove_all(0);		/* unlink is async-signal-safe, stdio not */
	signal(sig, SIG_DFL);
	raise(sig);
}

int bench_scratch_finish(void)
{
	remove_all(1);
	return nleft;
}

static void arm(void)
{
	static int armed;

	if (!armed) {
		armed = 1;
		atexit(at_exit);
		signal(SIGINT, on_signal);
		signal(SIGTERM, on_signal);
		signal(SIGHUP, on_signal);
		signal(SIGPIPE, on_signal);
	}
}

int bench_scratch_add(const char *path)
{
	int i = 0;
	char *p;

	while (i < nscratch && scratch[i])	/* a slot removed before */
		i++;
	if (i == MAX_SCRATCH || !(p = strdup(path)))
		return -1;
	arm();
	scratch[i] = p;
	if (i == nscratch)
		nscratch = nscratch + 1;
	return 0;
}

int bench_scratch_claim(const char *cmd, const char *path)
{
	if (!access(path, F_OK)) {
		fprintf(stderr, "hmm-bench %s: %s: exists: not this run's to "
			"overwrite or remove\n", cmd, path);
		return 1;
	}
	if (bench_scratch_add(path)) {
		fprintf(stderr, "hmm-bench %s: %s: %s\n", cmd, path,
			strerror(ENOMEM));
		return 1;
	}
	return 0;
}

int bench_user_file(const char *cmd, const char *flag, const char *path,
		    int overwrite)
{
	struct stat st;
	int fd;

	if (stat(path, &st) == 0) {
		if ((!S_ISREG(st.st_mode) || st.st_size) && !overwrite) {
			fprintf(stderr, "hmm-bench %s: %s %s: %s; not "
				"overwritten (--overwrite formats it)\n", cmd,
				flag, path, S_ISREG(st.st_mode) ?
				"holds data" : "not a regular file");
			return 2;
		}
		if (S_ISREG(st.st_mode) && !st.st_size)
			bench_scratch_empty(open(path, O_WRONLY | O_CLOEXEC));
		return 0;
	}
	if (errno == ENOENT) {
		fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
		if (fd >= 0) {
			close(fd);
			if (!bench_scratch_add(path))
				return 0;
			unlink(path);
			errno = ENOMEM;
		}
	}
	fprintf(stderr, "hmm-bench %s: %s %s: %s\n", cmd, flag, path,
		strerror(errno));
	return errno == ENOMEM ? 1 : 2;	/* else the path is the fault */
}

/*
 * The folder: one rule for every subcommand, hmm-train's for its store
 * (state_store.c) with the tests' folder first: $HMM_TEST_DIR, else
 * build/tmp in a source tree, else $TMPDIR, else /var/tmp (a disk, not
 * tmpfs: O_DIRECT).  Never made here: a folder we made would be left
 * behind (or, removed, would race another run's); a missing one is a
 * bad input, named.
 */
const char *bench_scratch_dir(const char *flag, const char *dir)
{
	const char *what = flag, *why = NULL, *env;
	struct stat st;

	if (!dir) {
		what = "scratch folder";
		if ((env = getenv("HMM_TEST_DIR")) && *env) {
			what = "$HMM_TEST_DIR";
			dir = env;
		} else if (!stat("build/tmp", &st) && S_ISDIR(st.st_mode)) {
			dir = "build/tmp";
		} else if ((env = getenv("TMPDIR")) && *env) {
			what = "$TMPDIR";
			dir = env;
		} else {
			dir = "/var/tmp";
		}
	}
	if (stat(dir, &st))
		why = strerror(errno);
	else if (!S_ISDIR(st.st_mode))
		why = "not a folder";
	else if (access(dir, W_OK | X_OK))
		why = strerror(errno);
	if (why)
		bench_arg_bad(what, dir, why);
	return dir;
}

void bench_scratch_mount(const char *dir)
{
	char *d = dir ? strdup(dir) : NULL, *old = mount_dir;

	arm();
	mount_dir = d;		/* NULL where strdup failed: not unmounted */
	free(old);
}

void bench_scratch_empty(int fd)
{
	arm();
	empty_fd = fd;
}

void bench_scratch_remove(const char *path)
{
	for (int i = 0; i < nscratch; i++)
		if (scratch[i] && !strcmp(scratch[i], path)) {
			char *p = scratch[i];

			scratch[i] = NULL;	/* before a signal could see it */
			unlink_said(p, 1);
			free(p);
		}
}

char **bench_env_with(const char *name, const char *value,
		      const char *join, char **mine)
{
	const char *old = getenv(name);
	size_t n = 0, k = 0, len = strlen(name);
	char **e;
	int r = 0;

	while (environ[n])
		n++;
	e = calloc(n + 2, sizeof(*e));
	if (!e)
		return NULL;
	*mine = NULL;
	if (!old || !*old)
		r = asprintf(mine, "%s=%s", name, value);
	else if (join)
		r = asprintf(mine, "%s=%s%s%s", name, old, join, value);
	if (r < 0) {
		free(e);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		if (!*mine || strncmp(environ[i], name, len) ||
		    environ[i][len] != '=')
			e[k++] = environ[i];
	if (*mine)
		e[k] = *mine;
	return e;
}

/*
 * posix_spawn, not fork: glibc's is a vfork (CLONE_VM), while fork copies
 * the page tables and write-protects every private page of this process,
 * hmm's resident chunks and the bench's own arrays among them, until
 * each page's next write faults: hmm-bench offload's compute floor ran
 * twice as slow (0.16 against 0.08 s at 64M) after each fio started that
 * way, and so did the step's writes to host chunks.
 */
FILE *bench_child_open(char *const argv[], char *const envp[], pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t all, old, dfl;
	int fd[2], slot = 0, r;
	FILE *f;

	while (slot < MAX_CHILD && child[slot])
		slot++;
	if (slot == MAX_CHILD || pipe2(fd, O_CLOEXEC))
		return NULL;
	arm();
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, fd[1], 2);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGINT);
	sigaddset(&dfl, SIGTERM);
	sigaddset(&dfl, SIGHUP);
	sigaddset(&dfl, SIGPIPE);
	/* no signal between the spawn and the slot holding the pid */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	posix_spawnattr_init(&at);
	posix_spawnattr_setpgroup(&at, 0);	/* its own group */
	posix_spawnattr_setsigdefault(&at, &dfl);
	posix_spawnattr_setsigmask(&at, &old);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP |
				 POSIX_SPAWN_SETSIGDEF |
				 POSIX_SPAWN_SETSIGMASK);
	r = posix_spawnp(pid, argv[0], &fa, &at, argv, envp ? envp : environ);
	if (!r)
		child[slot] = *pid;
	sigprocmask(SIG_SETMASK, &old, NULL);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	close(fd[1]);
	if (r || !(f = fdopen(fd[0], "r"))) {
		close(fd[0]);
		if (!r)
			bench_child_close(NULL, *pid);
		errno = r ? r : ENOMEM;	/* the caller says why */
		return NULL;
	}
	return f;
}

/*
 * fork, for a child that runs this program's code (a worker) or execs
 * one that does not take a pipe (hmmd): as bench_child_open's, it leads
 * its own group, held in a slot from before it can run, so that a
 * signal which ends us stops it before the files go.  And it is told
 * when we die even by SIGKILL, which nothing here can catch: the kernel
 * sends it SIGTERM (PR_SET_PDEATHSIG), hmmd's own way to stop.  In the
 * child our signal handlers and registries are dropped: its SIGTERM
 * must end it, not remove our files or kill hmmd from under us.
 */
pid_t bench_child_fork(void)
{
	pid_t parent = getpid(), pid;
	sigset_t all, old;
	int slot = 0;

	while (slot < MAX_CHILD && child[slot])
		slot++;
	if (slot == MAX_CHILD)
		return -1;
	arm();
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	pid = fork();
	if (pid == 0) {
		for (int i = 0; i < MAX_CHILD; i++)
			child[i] = 0;
		nscratch = 0;
		empty_fd = -1;
		mount_dir = NULL;
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		signal(SIGPIPE, SIG_DFL);
		setpgid(0, 0);
		/* set, then look: a parent gone before is not signalled */
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) || getppid() != parent)
			_exit(127);
		sigprocmask(SIG_SETMASK, &old, NULL);
		return 0;
	}
	if (pid > 0) {
		setpgid(pid, pid);	/* whichever of the two runs first */
		child[slot] = pid;
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	return pid;
}

int bench_child_close(FILE *f, pid_t pid)
{
	int st = -1;

	if (f)
		fclose(f);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	for (int i = 0; i < MAX_CHILD; i++)
		if (child[i] == pid)
			child[i] = 0;
	if (st == -1)
		return -128;	/* reaped before (start_hmmd's WNOHANG) */
	return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
}

const char *bench_child_said(int st, char *buf, size_t cap)
{
	if (st >= 0)
		snprintf(buf, cap, "exited with status %d", st);
	else if (st > -128)
		snprintf(buf, cap, "killed by signal %d (%s)", -st,
			 strsignal(-st));
	else
		snprintf(buf, cap, "could not be waited for");
	return buf;
}
