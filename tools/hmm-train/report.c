// SPDX-License-Identifier: MIT
/* report.c — placeholder until the report lands. */
#include <errno.h>
#include <stdio.h>
#include "run.h"

int report_write(const struct run *r, const char *path, char *err, size_t cap)
{
	snprintf(err, cap, "--report %s: not built yet", path);
	return -ENOSYS;
}
