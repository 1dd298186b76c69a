// SPDX-License-Identifier: GPL-2.0
/*
 * hmmk: the channel to the userspace daemon (hmmd, or the test daemon)
 * that holds the NVMe tier: poll + ioctl, and the request lifecycle.
 *
 * A faulting task (FILL) or the EVICT ioctl builds a request, queues it on
 * hmmk_daemon.pending and sleeps killably with a timeout.  The daemon polls,
 * takes it with DAEMON_FETCH (the request moves to inflight; for EVICT the
 * page's bytes are copied out), does its I/O and DAEMON_COMPLETEs it (for
 * FILL the bytes are copied in).  When the daemon's file is released every
 * queued or held request fails with -EIO, and with no daemon attached new
 * requests fail at once: faults get SIGBUS, nothing waits forever.
 *
 * The daemon receives every space's evicted pages and answers every
 * space's faults, so only a privileged process may attach: one with
 * CAP_SYS_ADMIN, or the uid / a member of the gid named by the daemon_uid /
 * daemon_gid parameters.  Its commands work only in the attacher's mm, so
 * a fork or a passed file does not inherit the role.
 *
 * Region handles are unique only within one load of the module, and a
 * region freed with no daemon attached sends no FORGET, so a daemon that
 * keeps pages in a file would serve an old load's bytes to a new region
 * with the same handle.  hmmk_load_id names the load (DAEMON_INFO): such
 * a daemon drops the pages of any other load when it attaches.
 */
#include <linux/slab.h>
#include <linux/highmem.h>
#include <linux/poll.h>
#include <linux/uaccess.h>
#include <linux/sched/signal.h>
#include <linux/pid.h>
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/module.h>
#include <linux/random.h>

#include "hmmk.h"

static int hmmk_daemon_uid = -1;
module_param_named(daemon_uid, hmmk_daemon_uid, int, 0644);
MODULE_PARM_DESC(daemon_uid,
		 "a uid that may attach as the daemon without CAP_SYS_ADMIN (-1: none)");

static int hmmk_daemon_gid = -1;
module_param_named(daemon_gid, hmmk_daemon_gid, int, 0644);
MODULE_PARM_DESC(daemon_gid,
		 "a gid whose members may attach as the daemon without CAP_SYS_ADMIN (-1: none)");

/* The one attached daemon.  lock (a spinlock) protects every field. */
static struct {
	spinlock_t lock;
	struct hmmk_space *owner;
	struct pid *owner_pid;		/* the attacher's thread group */
	struct list_head pending;
	struct list_head inflight;
	u64 next_id;
} hmmk_daemon = {
	.lock = __SPIN_LOCK_UNLOCKED(hmmk_daemon.lock),
	.pending = LIST_HEAD_INIT(hmmk_daemon.pending),
	.inflight = LIST_HEAD_INIT(hmmk_daemon.inflight),
};
static DECLARE_WAIT_QUEUE_HEAD(hmmk_daemon_wq);	/* poll: pending grew */

/* Random, nonzero; written once by hmmk_daemon_init, before the device. */
static u64 hmmk_load_id;

void hmmk_daemon_init(void)
{
	do {
		hmmk_load_id = get_random_u64();
	} while (!hmmk_load_id);
}

static void hmmk_req_release(struct kref *ref)
{
	struct hmmk_req *req = container_of(ref, struct hmmk_req, ref);

	if (req->page)
		put_page(req->page);
	kfree(req);
}

void hmmk_req_put(struct hmmk_req *req)
{
	kref_put(&req->ref, hmmk_req_release);
}

struct hmmk_req *hmmk_req_new(struct hmmk_block *blk, unsigned int i, u32 op,
			      struct page *page)
{
	struct hmmk_req *req = kzalloc(sizeof(*req), GFP_KERNEL);

	if (!req)
		return NULL;
	kref_init(&req->ref);
	INIT_LIST_HEAD(&req->link);
	init_completion(&req->done);
	req->op = op;
	req->space = blk->region->space->id;
	req->region = blk->region->handle;
	req->index = (u64)blk->index * HMMK_BLOCK_PAGES + i;
	get_page(page);
	req->page = page;
	return req;
}

/*
 * Tells the daemon that region is gone, so that it can drop the pages it
 * holds of it: a FORGET request nobody waits for, freed when the daemon
 * completes it or goes.  Best effort: without a daemon or memory the
 * daemon keeps them.  Process context; may sleep.
 */
void hmmk_req_forget(struct hmmk_region *region)
{
	struct hmmk_req *req = kzalloc(sizeof(*req), GFP_KERNEL);

	if (!req)
		return;
	kref_init(&req->ref);
	INIT_LIST_HEAD(&req->link);
	init_completion(&req->done);
	req->op = HMMK_OP_FORGET;
	req->space = region->space->id;
	req->region = region->handle;
	req->index = region->nr_pages;
	hmmk_req_submit(req);	/* the list takes its own reference */
	hmmk_req_put(req);
}

/* Queues req for the daemon; -EIO when none is attached. */
int hmmk_req_submit(struct hmmk_req *req)
{
	spin_lock(&hmmk_daemon.lock);
	if (!hmmk_daemon.owner) {
		spin_unlock(&hmmk_daemon.lock);
		return -EIO;
	}
	req->id = ++hmmk_daemon.next_id;
	req->state = HMMK_REQ_PENDING;
	kref_get(&req->ref);
	list_add_tail(&req->link, &hmmk_daemon.pending);
	spin_unlock(&hmmk_daemon.lock);
	wake_up_interruptible(&hmmk_daemon_wq);
	return 0;
}

/*
 * Ends the waiter's interest in a submitted request: its result if the
 * daemon finished it, else it is withdrawn and -EIO (or -EINTR when
 * left < 0, a fatal signal) returned.  The daemon cannot change it after.
 */
int hmmk_req_end(struct hmmk_req *req, long left)
{
	int ret;

	spin_lock(&hmmk_daemon.lock);
	if (req->state == HMMK_REQ_DONE) {
		ret = req->result;
	} else {
		if (req->state == HMMK_REQ_PENDING ||
		    req->state == HMMK_REQ_INFLIGHT) {
			list_del_init(&req->link);
			kref_put(&req->ref, hmmk_req_release);	/* list ref */
		}
		req->state = HMMK_REQ_DONE;
		req->result = -EIO;
		ret = left < 0 ? -EINTR : -EIO;
	}
	spin_unlock(&hmmk_daemon.lock);
	return ret;
}

/* Sleeps killably until deadline (jiffies), then ends the request. */
int hmmk_req_wait(struct hmmk_req *req, unsigned long deadline)
{
	long left = 0;

	if (time_before(jiffies, deadline))
		left = wait_for_completion_killable_timeout(&req->done,
							    deadline - jiffies);
	return hmmk_req_end(req, left);
}

unsigned long hmmk_deadline(void)
{
	return jiffies + msecs_to_jiffies(READ_ONCE(hmmk_fill_timeout_ms));
}

/* Whether a daemon is attached now (it may go at any time). */
bool hmmk_daemon_attached(void)
{
	return READ_ONCE(hmmk_daemon.owner);
}

/*
 * Whether current may hold the daemon role or set module-wide knobs:
 * the daemon_uid (effective uid), a member of daemon_gid (effective or
 * supplementary), or CAP_SYS_ADMIN in the initial user namespace (checked
 * last, so that an allowed uid leaves no capability denial in the audit
 * log).
 */
bool hmmk_privileged(void)
{
	int uid = READ_ONCE(hmmk_daemon_uid), gid = READ_ONCE(hmmk_daemon_gid);

	if (uid >= 0 && uid_eq(current_euid(), make_kuid(&init_user_ns, uid)))
		return true;
	if (gid >= 0 && in_egroup_p(make_kgid(&init_user_ns, gid)))
		return true;
	return capable(CAP_SYS_ADMIN);
}

/* Daemon commands: only on the daemon's file, from the attacher's mm. */
static bool hmmk_is_daemon(struct hmmk_space *space)
{
	return space->daemon && current->mm == space->mm;
}

long hmmk_daemon_attach(struct hmmk_space *space)
{
	struct pid *pid;
	long ret = 0;

	if (current->mm != space->mm || !hmmk_privileged())
		return -EPERM;
	pid = get_task_pid(current, PIDTYPE_TGID);
	mutex_lock(&space->lock);
	if (space->nr_regions) {
		mutex_unlock(&space->lock);
		put_pid(pid);
		return -EINVAL;
	}
	spin_lock(&hmmk_daemon.lock);
	if (hmmk_daemon.owner) {
		ret = -EBUSY;
	} else {
		hmmk_daemon.owner = space;
		hmmk_daemon.owner_pid = pid;
		pid = NULL;
	}
	spin_unlock(&hmmk_daemon.lock);
	if (!ret)
		space->daemon = true;
	mutex_unlock(&space->lock);
	put_pid(pid);
	return ret;
}

/* DAEMON_INFO: any opener may ask. */
long hmmk_daemon_info(void __user *arg)
{
	struct hmmk_daemon_info di;
	struct hmmk_req *req;
	struct pid *pid;

	memset(&di, 0, sizeof(di));
	spin_lock(&hmmk_daemon.lock);
	pid = get_pid(hmmk_daemon.owner_pid);
	di.attached = !!hmmk_daemon.owner;
	di.load_id = hmmk_load_id;
	list_for_each_entry(req, &hmmk_daemon.pending, link)
		di.pending++;
	list_for_each_entry(req, &hmmk_daemon.inflight, link)
		di.inflight++;
	spin_unlock(&hmmk_daemon.lock);
	if (pid) {
		di.pid = pid_vnr(pid);
		put_pid(pid);
	}
	return copy_to_user(arg, &di, sizeof(di)) ? -EFAULT : 0;
}

/* The daemon's file is released: fail everything it was given. */
void hmmk_daemon_detach(struct hmmk_space *space)
{
	struct hmmk_req *req, *tmp;
	struct pid *pid = NULL;
	LIST_HEAD(gone);

	spin_lock(&hmmk_daemon.lock);
	if (hmmk_daemon.owner == space) {
		hmmk_daemon.owner = NULL;
		pid = hmmk_daemon.owner_pid;
		hmmk_daemon.owner_pid = NULL;
	}
	list_splice_init(&hmmk_daemon.pending, &gone);
	list_splice_init(&hmmk_daemon.inflight, &gone);
	list_for_each_entry(req, &gone, link) {
		req->state = HMMK_REQ_DONE;
		req->result = -EIO;
	}
	spin_unlock(&hmmk_daemon.lock);

	list_for_each_entry_safe(req, tmp, &gone, link) {
		list_del_init(&req->link);
		complete(&req->done);
		hmmk_req_put(req);	/* list ref */
	}
	put_pid(pid);
	space->daemon = false;
}

__poll_t hmmk_daemon_poll(struct hmmk_space *space, struct file *filp,
			  struct poll_table_struct *wait)
{
	__poll_t mask = 0;

	poll_wait(filp, &hmmk_daemon_wq, wait);
	spin_lock(&hmmk_daemon.lock);
	if (!list_empty(&hmmk_daemon.pending))
		mask = EPOLLIN | EPOLLRDNORM;
	spin_unlock(&hmmk_daemon.lock);
	return mask;
}

/* Ends a request taken off the lists by COMPLETE (or a failed FETCH). */
static void hmmk_req_finish(struct hmmk_req *req, int result)
{
	spin_lock(&hmmk_daemon.lock);
	if (req->state == HMMK_REQ_BUSY) {
		req->state = HMMK_REQ_DONE;
		req->result = result;
	}
	spin_unlock(&hmmk_daemon.lock);
	complete(&req->done);
	hmmk_req_put(req);	/* list ref */
}

/* Takes req off the inflight list for finishing; false if it is gone. */
static bool hmmk_req_take(struct hmmk_req *req)
{
	bool ok;

	spin_lock(&hmmk_daemon.lock);
	ok = req->state == HMMK_REQ_INFLIGHT;
	if (ok) {
		list_del_init(&req->link);
		req->state = HMMK_REQ_BUSY;
	}
	spin_unlock(&hmmk_daemon.lock);
	return ok;
}

static int hmmk_copy_page_out(void __user *buf, struct page *page)
{
	void *p = kmap_local_page(page);
	unsigned long left = copy_to_user(buf, p, PAGE_SIZE);

	kunmap_local(p);
	return left ? -EFAULT : 0;
}

long hmmk_daemon_fetch(struct hmmk_space *space, void __user *arg)
{
	struct hmmk_daemon_req dr;
	struct hmmk_req *req;
	int ret = 0;

	if (!hmmk_is_daemon(space))
		return -EPERM;
	if (copy_from_user(&dr, arg, sizeof(dr)))
		return -EFAULT;
	if (dr.reserved0)
		return -EINVAL;

	spin_lock(&hmmk_daemon.lock);
	req = list_first_entry_or_null(&hmmk_daemon.pending, struct hmmk_req,
				       link);
	if (!req) {
		spin_unlock(&hmmk_daemon.lock);
		return -EAGAIN;
	}
	list_move_tail(&req->link, &hmmk_daemon.inflight);
	req->state = HMMK_REQ_INFLIGHT;
	kref_get(&req->ref);
	spin_unlock(&hmmk_daemon.lock);

	if (req->op == HMMK_OP_EVICT)
		ret = hmmk_copy_page_out(u64_to_user_ptr(dr.buf), req->page);
	dr.id = req->id;
	dr.op = req->op;
	dr.reserved1 = 0;
	dr.space = req->space;
	dr.region = req->region;
	dr.page = req->index;
	memset(dr.reserved, 0, sizeof(dr.reserved));
	if (!ret && copy_to_user(arg, &dr, sizeof(dr)))
		ret = -EFAULT;
	if (ret && hmmk_req_take(req))
		hmmk_req_finish(req, -EIO);	/* the daemon cannot serve it */
	hmmk_req_put(req);
	return ret;
}

static struct hmmk_req *hmmk_req_find(u64 id)
{
	struct hmmk_req *req;

	spin_lock(&hmmk_daemon.lock);
	list_for_each_entry(req, &hmmk_daemon.inflight, link) {
		if (req->id == id) {
			list_del_init(&req->link);
			req->state = HMMK_REQ_BUSY;
			spin_unlock(&hmmk_daemon.lock);
			return req;
		}
	}
	spin_unlock(&hmmk_daemon.lock);
	return NULL;
}

long hmmk_daemon_complete(struct hmmk_space *space, void __user *arg)
{
	struct hmmk_daemon_cmpl dc;
	struct hmmk_req *req;
	int result, ret = 0;
	void *p;

	if (!hmmk_is_daemon(space))
		return -EPERM;
	if (copy_from_user(&dc, arg, sizeof(dc)))
		return -EFAULT;
	if (dc.reserved0 || !hmmk_zero(dc.reserved, sizeof(dc.reserved)))
		return -EINVAL;
	req = hmmk_req_find(dc.id);	/* now holds the list ref */
	if (!req)
		return -ENOENT;

	result = dc.status ? -EIO : 0;
	if (!result && req->op == HMMK_OP_FILL) {
		p = kmap_local_page(req->page);
		if (copy_from_user(p, u64_to_user_ptr(dc.buf), PAGE_SIZE))
			ret = -EFAULT;
		kunmap_local(p);
		if (ret)
			result = -EIO;
	}
	hmmk_req_finish(req, result);
	return ret;
}
