// SPDX-License-Identifier: MIT
/* test_store_blkdev — a store on a block device (a loop device over a
 * file in build/tmp): formatted when blank, sized by BLKGETSIZE64,
 * O_DIRECT, round trip, flush, reopen; a size larger than the device is
 * -ENOSPC.  Skips without root or losetup.  The loop device is detached
 * at exit. */
#include <sys/stat.h>

#include "store_t.h"
#include "loopdev.h"

int main(void)
{
	const char *img = st_path("blk.img");
	char cmd[4400];
	struct hmm_store *s;
	struct hmm_store_stats st;
	struct stat sb;
	const char *dev;
	uint8_t *b, *c;

	snprintf(cmd, sizeof(cmd), "truncate -s 32M '%s'", img);
	if (system(cmd) != 0)
		t_fail_all("truncate %s", img);
	dev = t_loop_attach(img, "--direct-io=on");
	if (!dev)
		t_skip_all("needs root, losetup and a loop device");
	t_ok(stat(dev, &sb) == 0 && S_ISBLK(sb.st_mode), "%s is a block device", dev);

	{
		struct hmm_store_config cfg = { .path = dev, .size = 64 << 20,
						.flags = HMM_STORE_CREATE,
						.pool_bytes = 1 << 20,
						.numa_node = -1 };

		t_eq(hmm_store_open(&cfg, &s), -ENOSPC,
		     "a size beyond the device: -ENOSPC");
		t_ok(strstr(hmm_last_error(), "device has"), "detail: %s",
		     hmm_last_error());
	}
	s = st_open(dev, 0, HMM_STORE_CREATE, 8);
	hmm_store_stats(s, &st);
	t_eq(st.direct, 1, "O_DIRECT on the device");
	t_ok(st.capacity_bytes > 28 << 20 && st.capacity_bytes < 32 << 20,
	     "sized from the device: %llu", (unsigned long long)st.capacity_bytes);
	b = hmm_pool_alloc(hmm_store_pool(s), 65536);
	c = hmm_pool_alloc(hmm_store_pool(s), 65536);
	t_fill(b, 65536, 5);
	t_eq(st_io(s, HMM_IO_WRITE, 5, 0, b, 65536), 0, "write");
	t_eq(hmm_store_flush(s), 0, "flush");
	hmm_store_close(s);
	s = st_open(dev, 0, 0, 8);
	c = hmm_pool_alloc(hmm_store_pool(s), 65536);
	t_eq(st_io(s, HMM_IO_READ, 5, 0, c, 65536), 0, "reopen and read");
	t_fill(b = malloc(65536), 65536, 5);
	t_ok(!memcmp(b, c, 65536), "byte-exact");
	free(b);
	hmm_store_close(s);
	return t_done();
}
