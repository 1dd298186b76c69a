/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hmmk: the differences between the kernels hmmk.ko is built for
 * (Debian 6.1 and 6.12).  Only this file looks at LINUX_VERSION_CODE.
 */
#ifndef HMMK_COMPAT_H
#define HMMK_COMPAT_H

#include <linux/version.h>
#include <linux/mm.h>
#include <linux/fs.h>

/* 6.3 made vma->vm_flags const and added vm_flags_set / vm_flags_clear. */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 3, 0)
static inline void hmmk_vm_flags_set(struct vm_area_struct *vma,
				     vm_flags_t flags)
{
	vma->vm_flags |= flags;
}

static inline void hmmk_vm_flags_clear(struct vm_area_struct *vma,
				       vm_flags_t flags)
{
	vma->vm_flags &= ~flags;
}
#else
#define hmmk_vm_flags_set	vm_flags_set
#define hmmk_vm_flags_clear	vm_flags_clear
#endif

/*
 * release_fault_lock() (mmap_lock or the per-VMA lock, whichever the fault
 * holds) is in 6.12, not in 6.1, where faults always hold mmap_lock.
 */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 5, 0)
static inline void hmmk_release_fault_lock(struct vm_fault *vmf)
{
	mmap_read_unlock(vmf->vma->vm_mm);
}
#else
#define hmmk_release_fault_lock	release_fault_lock
#endif

/* no_llseek was removed in 6.12; noop_llseek exists in both. */
#define hmmk_llseek		noop_llseek

#endif /* HMMK_COMPAT_H */
