// SPDX-License-Identifier: GPL-2.0
/*
 * mlap2p mmap: map a region through the per-file cookie of a local handle.
 *
 * Mappings are shared only, lie inside the region, are not inherited over
 * fork and are never dumped; read-only handles lose VM_MAYWRITE so
 * mprotect() cannot upgrade them (and MADV_DOFORK cannot make them
 * inherited: see mlap2p_vm_open()).  Pages are the region's own zeroed
 * order-0 pages, inserted lazily by the fault handler.  Each VMA holds a
 * region reference from ->mmap (or ->open, when the mm core copies a VMA
 * on split) until ->close.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/err.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/sched.h>

#include "mlap2p.h"

static void mlap2p_vma_flags(struct vm_area_struct *vma, vm_flags_t set,
			     vm_flags_t clear)
{
#ifdef MLAP2P_HAVE_VM_FLAGS_SET
	vm_flags_set(vma, set);
	vm_flags_clear(vma, clear);
#else
	vma->vm_flags = (vma->vm_flags | set) & ~clear;
#endif
}

static vm_fault_t mlap2p_vm_fault(struct vm_fault *vmf)
{
	struct mlap2p_region *r = vmf->vma->vm_private_data;
	unsigned long idx = vmf->pgoff & MLAP2P_COOKIE_PGMASK;
	struct page *page;

	/* A fork copy, detached by mlap2p_vm_open(): no mapping here. */
	if (!r)
		return VM_FAULT_SIGSEGV;
	/* ->mmap bounds the VMA and VM_DONTEXPAND keeps it so. */
	if (idx >= r->nr_pages)
		return VM_FAULT_SIGBUS;
	page = r->pages[idx];
	get_page(page);
	vmf->page = page;
	return 0;
}

/*
 * A VMA was copied: a split or mremap() in the same mm, or fork() into a
 * child's mm when MADV_DOFORK has cleared VM_DONTCOPY.  Mappings are not
 * inherited, so a copy into another mm is detached from the region: it
 * holds no reference, is not counted and faults with SIGSEGV.  (Only
 * dup_mmap() copies a VMA of ours into an mm that is not current's.)
 */
static void mlap2p_vm_open(struct vm_area_struct *vma)
{
	struct mlap2p_region *r = vma->vm_private_data;

	if (!r)
		return;
	if (vma->vm_mm != current->mm) {
		vma->vm_private_data = NULL;
		return;
	}
	kref_get(&r->ref);
	mlap2p_region_map(r);
}

static void mlap2p_vm_close(struct vm_area_struct *vma)
{
	struct mlap2p_region *r = vma->vm_private_data;

	if (r)
		mlap2p_region_unmap(r);
}

static const struct vm_operations_struct mlap2p_vm_ops = {
	.open	= mlap2p_vm_open,
	.close	= mlap2p_vm_close,
	.fault	= mlap2p_vm_fault,
};

/**
 * mlap2p_mmap() - f_op->mmap of /dev/mlap2p
 * @file: the open file whose handle the cookie names
 * @vma: the new mapping; vm_pgoff is cookie + offset in pages
 *
 * Return: 0, -EINVAL for a private mapping, an unknown cookie or a range
 * outside the region, -EACCES for a writable mapping of a read-only handle.
 */
int mlap2p_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct mlap2p_file *f = file->private_data;
	unsigned long len = vma->vm_end - vma->vm_start;
	unsigned long id = vma->vm_pgoff >> MLAP2P_COOKIE_PGSHIFT;
	u64 off = (u64)(vma->vm_pgoff & MLAP2P_COOKIE_PGMASK) << PAGE_SHIFT;
	struct mlap2p_region *r;
	struct mlap2p_handle h;
	int ret;

	/* MAP_SHARED; VM_SHARED itself is clear on a read-only fd. */
	if (!(vma->vm_flags & VM_MAYSHARE))
		return -EINVAL;
	if (id > MLAP2P_HANDLE_MAX)
		return -EINVAL;
	r = mlap2p_handle_get(f, id, &h);
	if (IS_ERR(r))
		return -EINVAL;

	if (off >= r->size || len > r->size - off) {
		ret = -EINVAL;
		goto out_put;
	}
	if (h.rdonly) {
		if (vma->vm_flags & VM_WRITE) {
			ret = -EACCES;
			goto out_put;
		}
		mlap2p_vma_flags(vma, 0, VM_MAYWRITE);
	}
	mlap2p_vma_flags(vma, VM_DONTCOPY | VM_DONTEXPAND | VM_DONTDUMP, 0);
	vma->vm_ops = &mlap2p_vm_ops;
	/* The reference from mlap2p_handle_get() now belongs to the VMA. */
	vma->vm_private_data = r;
	mlap2p_region_map(r);
	return 0;

out_put:
	mlap2p_region_put(r);
	return ret;
}
