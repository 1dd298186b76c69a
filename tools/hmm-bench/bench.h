/* SPDX-License-Identifier: MIT */
/*
 * bench.h — hmm-bench subcommands and the helpers they share.
 *
 * Each subcommand is one file in tools/hmm-bench/ that ends with
 *	HMM_BENCH(io, "store I/O vs fio", bench_io);
 * and is then found by main.c (the macro puts a descriptor in a linker
 * section: no table to edit).  A subcommand measures its ceiling in the
 * same run, interleaved with the code under test, reports medians, and
 * with --json prints one object as its last line (bench_json_*).
 */
#ifndef HMM_BENCH_H
#define HMM_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct bench_cmd {
	const char *name;
	const char *help;
	int (*run)(int argc, char **argv);	/* argv[0] is the name */
};

#define HMM_BENCH(n, h, fn)                                             \
	static const struct bench_cmd bench_cmd_##n                     \
		__attribute__((used, section("hmm_bench"), aligned(8))) = { \
			#n, h, fn }

double bench_now(void);				/* monotonic seconds */
double bench_median(double *v, int n);		/* sorts v */
/* Parse "123", "4K", "2M", "1G", "2MiB" (powers of 1024;
 * hmm_size_parse); -1 on junk, "2MB" included. */
int64_t bench_parse_size(const char *s);

/* Remove path (a file this run made) at exit, whatever the exit:
 * return, exit() from a failure, SIGINT/SIGTERM/SIGHUP (scratch.c).
 * 0, or -1 when it cannot be registered (more than 16). */
int bench_scratch_add(const char *path);
/* A name this run will make a file at: refused when anything is there
 * (not the run's to overwrite or remove), else added as above.  0, or 1
 * when refused or not added (said on stderr, naming cmd and path). */
int bench_scratch_claim(const char *cmd, const char *path);
/* Cut the file open as fd back to empty on those exits (one at most). */
void bench_scratch_empty(int fd);
/* A file the user named for this run to format (--file, --store): one
 * that does not exist is made, and removed on those exits; an empty
 * regular file is used and cut back to empty; one that holds data or is
 * not a regular file (a device) only with overwrite, and is then left
 * as the run leaves it.  0; 2 when refused or it cannot be made there
 * (a missing folder: a bad value), 1 when out of memory (said on
 * stderr, naming cmd, flag and path). */
int bench_user_file(const char *cmd, const char *flag, const char *path,
		    int overwrite);
/* The folder for a run's scratch files: dir (the value of flag, e.g.
 * --dir, or any folder a flag names for the run to write in) when not
 * NULL, else $HMM_TEST_DIR, else build/tmp where it is
 * a folder (a source tree), else $TMPDIR, else /var/tmp.  Not made: one
 * that is not a folder this run can write is refused as a bad value
 * (bench_arg_bad, naming the flag or variable and the path: exit 2). */
const char *bench_scratch_dir(const char *flag, const char *dir);
/* Unmount dir, a tmpfs this run mounted, and remove the folder on those
 * exits (after the children are stopped); NULL forgets it. */
void bench_scratch_mount(const char *dir);
/* Remove it now and forget it (one that cannot go is said on stderr,
 * naming it, and counted for bench_scratch_finish). */
void bench_scratch_remove(const char *path);
/* At a subcommand's return (main.c): stop the children and remove the
 * files now, saying each that cannot go (as the exit() and return
 * paths do; a signal's cannot print); how many were left behind. */
int bench_scratch_finish(void);
/* This process's environment with name=value in it, for
 * bench_child_open: where name is set already, join (non-NULL) appends
 * value to it after join, NULL keeps it as it is.  An array of borrowed
 * strings but for the one *mine points to (NULL if none); free both. */
char **bench_env_with(const char *name, const char *value,
		      const char *join, char **mine);
/* Run argv (argv[0] looked up on PATH) in its own process group, with
 * environment envp (NULL: this process's), its stdout and stderr into
 * the stream returned (NULL: could not start, errno says why).
 * On the exits above the group is killed and reaped before any scratch
 * file is removed (scratch.c; at most 4 at once). */
FILE *bench_child_open(char *const argv[], char *const envp[], pid_t *pid);
/* bench_child_open's kind of child, forked: this program's code (0 in
 * the child, which leads its own group, our signal handlers and files
 * dropped) or an exec of one that needs no pipe.  Unlike a spawned one
 * it gets SIGTERM when we die, SIGKILL included (PR_SET_PDEATHSIG).
 * Its pid in the parent; -1 when it could not (4 held, or fork). */
pid_t bench_child_fork(void);
/* Close f (may be NULL), wait for pid: its exit status 0..255, or
 * -SIG when signal SIG killed it, -128 when it was reaped before
 * (never 0 but for a clean exit). */
int bench_child_close(FILE *f, pid_t pid);
/* bench_child_close's st in words, into buf: "exited with status 1",
 * "killed by signal 9 (Killed)"; buf. */
const char *bench_child_said(int st, char *buf, size_t cap);

/* Run fio with argv (argv[0] "fio"; --thread added, so that fio is one
 * process, fio.c says why) as a bench child: all it wrote, its
 * JSON and anything it said on stderr, as a string to free; NULL when
 * it did not run or did not exit 0, said on stderr: the file, its exit
 * status or the signal that killed it, and its last lines.  huge: fio's buffers on transparent
 * huge pages where the system gives them, as hmm's are (fio.c says why);
 * 0: on 4 KiB pages, fio's default. */
char *bench_fio_run(char *const argv[], int huge);
/* The queue depths an I/O floor tries: 16 and 64 (fio.c). */
extern const int bench_fio_qd[2];
/* Seconds fio takes to move io_bytes over the first size bytes of file
 * (made if absent; the caller removes it): blocks of bs, readpct% reads,
 * O_DIRECT, io_uring, the faster of bench_fio_qd's two (fio.c).
 * -1 when fio fails (said, as bench_fio_run does); 0 when it took under a millisecond, the
 * finest time its report gives. */
double bench_fio_s(const char *file, int64_t bs, int64_t size,
		   int64_t io_bytes, int readpct);
/* The same at queue depth qd alone, over the size bytes of file from
 * offset off (a file shorter than off + size is made that long). */
double bench_fio_qd_s(const char *file, int64_t bs, int64_t off,
		      int64_t size, int64_t io_bytes, int readpct, int qd);

/* A subcommand's options (args.c): a table ended by { NULL }.  dst is
 * an int (BA_FLAG: set to 1; BA_INT), an int64_t (BA_SIZE), a double
 * (BA_NUM) or a const char * (BA_STR); lo and hi bound the numbers,
 * inclusive, and a BA_SIZE is a multiple of mult where that is not 0.
 * --help and -h print usage on stdout and exit 0; an unknown option, a
 * missing value or a bad one is named on stderr, the usage follows, and
 * the process exits 2. */
enum bench_arg_kind { BA_FLAG, BA_INT, BA_SIZE, BA_NUM, BA_STR };
struct bench_arg {
	const char *name;		/* "--reps" */
	enum bench_arg_kind kind;
	void *dst;
	double lo, hi;
	int64_t mult;
};
void bench_args(const char *cmd, const char *usage, int argc, char **argv,
		const struct bench_arg *args);
/* After bench_args: refuse what the table cannot judge, the same way
 * ("hmm-bench CMD: FLAG VAL: why", the usage, exit 2; val may be NULL). */
void bench_arg_bad(const char *flag, const char *val, const char *why)
	__attribute__((noreturn));
/* After bench_args: the text given for flag name, the last one; NULL
 * when it was not given. */
const char *bench_arg_val(const char *name);

/* A JSON object on one line: bench_json_begin(f), then fields, then end. */
void bench_json_begin(FILE *f, const char *bench);
void bench_json_str(FILE *f, const char *key, const char *val);
void bench_json_num(FILE *f, const char *key, double val);
void bench_json_int(FILE *f, const char *key, int64_t val);
void bench_json_end(FILE *f);

#endif /* HMM_BENCH_H */
