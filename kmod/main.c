// SPDX-License-Identifier: GPL-2.0
/*
 * hmmk: /dev/hmmk: module init/exit, the misc device and its file
 * operations.  Each open is a space (space.c); ioctls are dispatched here
 * to the file that holds the operation.
 */
#include <linux/module.h>
#include <linux/miscdevice.h>
#include <linux/poll.h>
#include <linux/uaccess.h>
#include <linux/sched/mm.h>
#include <linux/nodemask.h>

#include "hmmk.h"

unsigned int hmmk_fill_timeout_ms = 10000;
module_param_named(fill_timeout_ms, hmmk_fill_timeout_ms, uint, 0644);
MODULE_PARM_DESC(fill_timeout_ms,
		 "how long a fault waits for the daemon before SIGBUS");

static int hmmk_open(struct inode *inode, struct file *filp)
{
	struct hmmk_space *space = hmmk_space_new(filp);

	if (IS_ERR(space))
		return PTR_ERR(space);
	filp->private_data = space;
	filp->f_mapping = &space->mapping;
	return 0;
}

/* Last close: no VMA of this space is left (each holds the file). */
static int hmmk_release(struct inode *inode, struct file *filp)
{
	struct hmmk_space *space = filp->private_data;

	if (space->daemon)
		hmmk_daemon_detach(space);
	hmmk_space_free(space);
	return 0;
}

static int hmmk_mmap(struct file *filp, struct vm_area_struct *vma)
{
	return hmmk_region_mmap(filp->private_data, vma);
}

static __poll_t hmmk_poll(struct file *filp, struct poll_table_struct *wait)
{
	struct hmmk_space *space = filp->private_data;

	if (!space->daemon)
		return EPOLLERR;
	return hmmk_daemon_poll(space, filp, wait);
}

static long hmmk_get_features(void __user *arg)
{
	struct hmmk_features f;

	memset(&f, 0, sizeof(f));
	f.features = HMMK_F_ALL;
	f.api_version = HMMK_API_VERSION;
	f.page_size = PAGE_SIZE;
	f.block_size = HMMK_BLOCK_SIZE;
	f.nr_nodes = nr_node_ids;
	return copy_to_user(arg, &f, sizeof(f)) ? -EFAULT : 0;
}

/* Operations on regions are only for the mm the space is bound to. */
static long hmmk_owner_ioctl(struct hmmk_space *space, unsigned int cmd,
			     void __user *arg)
{
	if (space->daemon || current->mm != space->mm)
		return -EPERM;

	switch (cmd) {
	case HMMK_IOC_REGION_CREATE:
		return hmmk_region_create_ioctl(space, arg);
	case HMMK_IOC_REGION_DESTROY:
		return hmmk_region_destroy_ioctl(space, arg);
	case HMMK_IOC_MIGRATE:
		return hmmk_migrate_ioctl(space, arg);
	case HMMK_IOC_SNAPSHOT:
		return hmmk_snapshot_ioctl(space, arg);
	case HMMK_IOC_STATS:
		return hmmk_stats_ioctl(space, arg);
	case HMMK_IOC_EVICT:
		return hmmk_evict_ioctl(space, arg);
	case HMMK_IOC_DEV_ACCESS:
		return hmmk_dev_access_ioctl(space, arg);
	case HMMK_IOC_SAMPLE:
		return hmmk_sample_ioctl(space, arg);
	case HMMK_IOC_SPACE_LIMIT:
		return hmmk_space_limit_ioctl(space, arg);
	}
	return -ENOTTY;
}

static long hmmk_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	struct hmmk_space *space = filp->private_data;
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case HMMK_IOC_GET_FEATURES:
		return hmmk_get_features(uarg);
	case HMMK_IOC_SIMDEV_CONFIG:
		return hmmk_simdev_config_ioctl(uarg);
	case HMMK_IOC_DAEMON_ATTACH:
		return hmmk_daemon_attach(space);
	case HMMK_IOC_DAEMON_FETCH:
		return hmmk_daemon_fetch(space, uarg);
	case HMMK_IOC_DAEMON_COMPLETE:
		return hmmk_daemon_complete(space, uarg);
	case HMMK_IOC_DAEMON_INFO:
		return hmmk_daemon_info(uarg);
	case HMMK_IOC_REGION_CREATE:
	case HMMK_IOC_REGION_DESTROY:
	case HMMK_IOC_MIGRATE:
	case HMMK_IOC_SNAPSHOT:
	case HMMK_IOC_STATS:
	case HMMK_IOC_EVICT:
	case HMMK_IOC_DEV_ACCESS:
	case HMMK_IOC_SAMPLE:
	case HMMK_IOC_SPACE_LIMIT:
		return hmmk_owner_ioctl(space, cmd, uarg);
	}
	return -ENOTTY;
}

static const struct file_operations hmmk_fops = {
	.owner		= THIS_MODULE,
	.open		= hmmk_open,
	.release	= hmmk_release,
	.mmap		= hmmk_mmap,
	.poll		= hmmk_poll,
	.unlocked_ioctl	= hmmk_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.llseek		= hmmk_llseek,
};

/*
 * 0660: devtmpfs makes the node root:root; kmod/60-hmmk.rules gives it to
 * group hmm, whose members may open it (each open its own space).
 */
static struct miscdevice hmmk_misc = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= "hmmk",
	.fops	= &hmmk_fops,
	.mode	= 0660,
};

static void hmmk_check_uapi(void)
{
	BUILD_BUG_ON(sizeof(struct hmmk_features) != 56);
	BUILD_BUG_ON(sizeof(struct hmmk_region_create) != 72);
	BUILD_BUG_ON(sizeof(struct hmmk_region_destroy) != 32);
	BUILD_BUG_ON(sizeof(struct hmmk_range) != 64);
	BUILD_BUG_ON(sizeof(struct hmmk_page_info) != 4);
	BUILD_BUG_ON(sizeof(struct hmmk_snapshot) != 64);
	BUILD_BUG_ON(sizeof(struct hmmk_stats) != 224);
	BUILD_BUG_ON(sizeof(struct hmmk_simdev_config) != 48);
	BUILD_BUG_ON(sizeof(struct hmmk_daemon_req) != 72);
	BUILD_BUG_ON(sizeof(struct hmmk_daemon_cmpl) != 40);
	BUILD_BUG_ON(sizeof(struct hmmk_daemon_info) != 48);
	BUILD_BUG_ON(sizeof(struct hmmk_space_limit) != 32);
	BUILD_BUG_ON(HMMK_PAGE_SIZE != PAGE_SIZE);
	BUILD_BUG_ON(HMMK_BLOCK_PAGES > 512);
}

static int __init hmmk_init(void)
{
	int ret;

	hmmk_check_uapi();
	hmmk_daemon_init();
	ret = hmmk_simdev_init();
	if (ret)
		return ret;
	ret = misc_register(&hmmk_misc);
	if (ret)
		goto out_simdev;
	hmmk_debugfs_init();
	pr_info("hmmk: /dev/hmmk ready, features 0x%llx\n", HMMK_F_ALL);
	return 0;

out_simdev:
	hmmk_simdev_exit();
	return ret;
}

/* Open files hold the module, so no space exists here. */
static void __exit hmmk_exit(void)
{
	hmmk_debugfs_exit();
	misc_deregister(&hmmk_misc);
	hmmk_simdev_exit();
}

module_init(hmmk_init);
module_exit(hmmk_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("hmm managed unified-memory regions over NUMA, simdev, NVMe");
MODULE_VERSION("0.1.0");	/* = VERSION in mk/install.mk (test_kmod_install) */
