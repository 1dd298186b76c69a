/* SPDX-License-Identifier: MIT */
/*
 * loopdev.h — a loop block device over an image file, for the tests that
 * need a real block device (root and losetup).  t_loop_attach(img, opts)
 * returns the device ("/dev/loopN"), detached at exit, or NULL when
 * there is none to be had (the caller skips).  Include after t.h.  One
 * device per process; single-threaded setup only.
 */
#ifndef HMM_LOOPDEV_H
#define HMM_LOOPDEV_H

#include <unistd.h>

static char t_loop_dev_[64];

static void t_loop_detach_(void)
{
	char cmd[128];

	if (t_loop_dev_[0]) {
		snprintf(cmd, sizeof(cmd), "losetup -d %s", t_loop_dev_);
		if (system(cmd) != 0)
			printf("# could not detach %s\n", t_loop_dev_);
	}
}

static inline const char *t_loop_attach(const char *img, const char *opts)
{
	char cmd[4400];
	FILE *f;

	if (geteuid() != 0 || system("command -v losetup >/dev/null 2>&1"))
		return NULL;
	snprintf(cmd, sizeof(cmd), "losetup --find --show %s '%s' 2>/dev/null",
		 opts, img);
	f = popen(cmd, "r");
	if (!f || !fgets(t_loop_dev_, sizeof(t_loop_dev_), f) ||
	    strncmp(t_loop_dev_, "/dev/loop", 9)) {
		if (f)
			pclose(f);
		t_loop_dev_[0] = 0;
		return NULL;
	}
	pclose(f);
	t_loop_dev_[strcspn(t_loop_dev_, "\n")] = 0;
	atexit(t_loop_detach_);
	return t_loop_dev_;
}

#endif /* HMM_LOOPDEV_H */
