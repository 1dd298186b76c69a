/* SPDX-License-Identifier: MIT */
/*
 * loopdev.h — loop block devices over image files, for the tests that
 * need a real block device (root and losetup).  t_loop_attach(img, opts)
 * returns a device ("/dev/loopN"), detached at exit, or NULL when there
 * is none to be had (the caller skips).  Include after t.h.  Up to
 * T_LOOP_MAX devices per process; single-threaded setup only.
 */
#ifndef HMM_LOOPDEV_H
#define HMM_LOOPDEV_H

#include <unistd.h>

#define T_LOOP_MAX 4

static char t_loop_dev_[T_LOOP_MAX][64];
static int t_loop_n_;

static void t_loop_detach_(void)
{
	char cmd[128];

	for (int i = 0; i < t_loop_n_ && i < T_LOOP_MAX; i++) {
		snprintf(cmd, sizeof(cmd), "losetup -d %.63s", t_loop_dev_[i]);
		if (system(cmd) != 0)
			printf("# could not detach %s\n", t_loop_dev_[i]);
	}
}

static inline const char *t_loop_attach(const char *img, const char *opts)
{
	char cmd[4400], *dev;
	FILE *f;

	if (t_loop_n_ == T_LOOP_MAX || geteuid() != 0 ||
	    system("command -v losetup >/dev/null 2>&1"))
		return NULL;
	dev = t_loop_dev_[t_loop_n_];
	snprintf(cmd, sizeof(cmd), "losetup --find --show %s '%s' 2>/dev/null",
		 opts, img);
	f = popen(cmd, "r");
	if (!f || !fgets(dev, sizeof(t_loop_dev_[0]), f) ||
	    strncmp(dev, "/dev/loop", 9)) {
		if (f)
			pclose(f);
		dev[0] = 0;
		return NULL;
	}
	pclose(f);
	dev[strcspn(dev, "\n")] = 0;
	if (t_loop_n_++ == 0)
		atexit(t_loop_detach_);
	return dev;
}

#endif /* HMM_LOOPDEV_H */
