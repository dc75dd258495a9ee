// SPDX-License-Identifier: GPL-2.0
/*
 * mlap2p per-file handle tables and their limits (the module parameters
 * max_regions_per_file and max_bytes_per_file_mb).  A local handle is a
 * small integer private to one open file; it holds one region reference.  Handles are created in
 * two steps: reserve (limits checked, id taken, slot empty), then commit
 * once the ioctl has told user space about it, so a failure in between
 * (a bad output pointer, say) leaves nothing behind.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/err.h>
#include <linux/fdtable.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/sched/signal.h>
#include <linux/xarray.h>

#include "mlap2p.h"

/* The per-file limits: module parameters, writable at run time. */
static unsigned int max_regions_per_file = 4096;
static unsigned int max_bytes_per_file_mb = 8192;

static int mlap2p_set_regions(const char *val, const struct kernel_param *kp)
{
	return param_set_uint_minmax(val, kp, 1, MLAP2P_HANDLE_MAX);
}

static int mlap2p_set_bytes(const char *val, const struct kernel_param *kp)
{
	return param_set_uint_minmax(val, kp, 1, UINT_MAX);
}

static const struct kernel_param_ops mlap2p_regions_ops = {
	.set	= mlap2p_set_regions,
	.get	= param_get_uint,
};

static const struct kernel_param_ops mlap2p_bytes_ops = {
	.set	= mlap2p_set_bytes,
	.get	= param_get_uint,
};

module_param_cb(max_regions_per_file, &mlap2p_regions_ops,
		&max_regions_per_file, 0644);
MODULE_PARM_DESC(max_regions_per_file,
		 "Handles one open file may hold (default 4096; -ENOSPC)");
module_param_cb(max_bytes_per_file_mb, &mlap2p_bytes_ops,
		&max_bytes_per_file_mb, 0644);
MODULE_PARM_DESC(max_bytes_per_file_mb,
		 "MiB one open file may allocate (default 8192; -ENOMEM)");

u32 mlap2p_limit_regions(void)
{
	return READ_ONCE(max_regions_per_file);
}

u64 mlap2p_limit_bytes(void)
{
	return (u64)READ_ONCE(max_bytes_per_file_mb) << 20;
}

void mlap2p_file_init(struct mlap2p_file *f)
{
	mutex_init(&f->lock);
	xa_init_flags(&f->handles, XA_FLAGS_ALLOC1);
}

/* Let go of @h's region: owner or importer accounting, then the reference. */
static void mlap2p_handle_drop(struct mlap2p_handle *h)
{
	if (h->owned)
		mlap2p_region_disown(h->region);
	else
		mlap2p_region_unimport(h->region);
	mlap2p_region_put(h->region);
	kfree(h);
}

/* The file's last reference is gone: no other thread can reach @f. */
void mlap2p_file_release(struct mlap2p_file *f)
{
	struct mlap2p_handle *h;
	unsigned long id;

	xa_for_each(&f->handles, id, h) {
		xa_erase(&f->handles, id);
		mlap2p_handle_drop(h);
	}
	xa_destroy(&f->handles);
	mutex_destroy(&f->lock);
}

/**
 * mlap2p_handle_reserve() - take a handle id within the file's limits
 * @f: the file
 * @owned_bytes: size of the region to be allocated, 0 for an import
 *
 * Return: a handle with ->id set and no region, ERR_PTR(-ENOSPC) when the
 * file holds max_regions_per_file handles, or ERR_PTR(-ENOMEM) when
 * @owned_bytes would take the file past max_bytes_per_file_mb or memory
 * is short.
 */
struct mlap2p_handle *mlap2p_handle_reserve(struct mlap2p_file *f,
					    u64 owned_bytes)
{
	struct xa_limit lim = XA_LIMIT(1, MLAP2P_HANDLE_MAX);
	u64 max_bytes = mlap2p_limit_bytes();
	struct mlap2p_handle *h;
	int ret;

	h = kzalloc(sizeof(*h), GFP_KERNEL_ACCOUNT);
	if (!h)
		return ERR_PTR(-ENOMEM);

	mutex_lock(&f->lock);
	if (f->nr_handles >= mlap2p_limit_regions()) {
		ret = -ENOSPC;
		goto out_unlock;
	}
	/* The limit may have been lowered below what the file holds. */
	if (owned_bytes > max_bytes - min(f->owned_bytes, max_bytes)) {
		ret = -ENOMEM;
		goto out_unlock;
	}
	/* A NULL entry reserves the id: lookups see nothing until commit. */
	ret = xa_alloc_cyclic(&f->handles, &h->id, NULL, lim, &f->next_id,
			      GFP_KERNEL_ACCOUNT);
	if (ret < 0) {
		ret = ret == -EBUSY ? -ENOSPC : ret;
		goto out_unlock;
	}
	h->bytes = owned_bytes;
	f->nr_handles++;
	f->owned_bytes += owned_bytes;
	mutex_unlock(&f->lock);
	return h;

out_unlock:
	mutex_unlock(&f->lock);
	kfree(h);
	return ERR_PTR(ret);
}

static void mlap2p_handle_unaccount(struct mlap2p_file *f,
				    const struct mlap2p_handle *h)
{
	lockdep_assert_held(&f->lock);
	f->nr_handles--;
	f->owned_bytes -= h->bytes;
}

/*
 * Give back a reserved handle that was never committed; its ->region (if
 * set) stays the caller's to put.
 */
void mlap2p_handle_cancel(struct mlap2p_file *f, struct mlap2p_handle *h)
{
	mutex_lock(&f->lock);
	xa_erase(&f->handles, h->id);
	mlap2p_handle_unaccount(f, h);
	mutex_unlock(&f->lock);
	kfree(h);
}

/*
 * Publish a reserved handle whose ->region, ->owned and ->rdonly are set.
 * From here the handle owns the region reference.  Storing into a reserved
 * slot needs no memory, so this cannot fail.
 */
void mlap2p_handle_commit(struct mlap2p_file *f, struct mlap2p_handle *h)
{
	mutex_lock(&f->lock);
	WARN_ON_ONCE(xa_is_err(xa_store(&f->handles, h->id, h, GFP_KERNEL)));
	mutex_unlock(&f->lock);
}

/**
 * mlap2p_handle_remove() - MEM_FREE (@owned) or IPC_CLOSE_HANDLE
 * @f: the file
 * @id: local handle
 * @owned: true for MEM_FREE
 *
 * Return: 0, -ENOENT for an unknown handle, -EINVAL for a handle of the
 * other kind.
 */
int mlap2p_handle_remove(struct mlap2p_file *f, u32 id, bool owned)
{
	struct mlap2p_handle *h;

	mutex_lock(&f->lock);
	h = xa_load(&f->handles, id);
	if (!h) {
		mutex_unlock(&f->lock);
		return -ENOENT;
	}
	if (h->owned != owned) {
		mutex_unlock(&f->lock);
		return -EINVAL;
	}
	xa_erase(&f->handles, id);
	mlap2p_handle_unaccount(f, h);
	mutex_unlock(&f->lock);

	/* Outside f->lock: the last put may free a large region. */
	mlap2p_handle_drop(h);
	return 0;
}

/**
 * mlap2p_handle_get() - the region behind a local handle
 * @f: the file
 * @id: local handle
 * @copy: filled with the handle's id and flags
 *
 * Return: the region with a new reference (the caller puts it), or
 * ERR_PTR(-ENOENT).
 */
struct mlap2p_region *mlap2p_handle_get(struct mlap2p_file *f, u32 id,
					struct mlap2p_handle *copy)
{
	struct mlap2p_handle *h;
	struct mlap2p_region *r;

	mutex_lock(&f->lock);
	h = xa_load(&f->handles, id);
	if (!h) {
		mutex_unlock(&f->lock);
		return ERR_PTR(-ENOENT);
	}
	/* The handle's own reference keeps the count above zero here. */
	r = h->region;
	kref_get(&r->ref);
	*copy = *h;
	mutex_unlock(&f->lock);
	return r;
}

/* iterate_fd() callback, under the fd table's spinlock: fd + 1 if ours. */
static int mlap2p_fd_match(const void *unused, struct file *file,
			   unsigned int fd)
{
	return file->f_op == &mlap2p_fops ? fd + 1 : 0;
}

/*
 * Add the region ids @f holds to @ids.  An id already there is stored
 * again in place, so the set holds each id once however many handles
 * (or files) name it, and it costs one xarray node per 64 ids at most.
 */
static int mlap2p_file_ids(struct mlap2p_file *f, struct xarray *ids)
{
	struct mlap2p_handle *h;
	unsigned long id;
	int ret = 0;

	mutex_lock(&f->lock);
	/* Committed handles only: reserved slots hold NULL. */
	xa_for_each(&f->handles, id, h) {
		u64 rid = h->region->id;

		/*
		 * Only a 32-bit kernel after 2^32 allocations has ids an
		 * index cannot hold: such a region stays hidden, never shown.
		 */
		if ((unsigned long)rid != rid)
			continue;
		ret = xa_err(xa_store(ids, rid, xa_mk_value(1),
				      GFP_KERNEL_ACCOUNT));
		if (ret)
			break;
	}
	mutex_unlock(&f->lock);
	return ret;
}

int mlap2p_current_region_ids(struct xarray *ids)
{
	struct xarray seen;
	struct file *file;
	unsigned int fd = 0;
	int next, ret = 0;

	xa_init(ids);
	if (!current->files)
		return 0;
	/*
	 * Each open file counts once, however many fds (dup(), SCM_RIGHTS)
	 * refer to it: a dup costs one lookup in @seen, not a walk of the
	 * file's handles.
	 */
	xa_init(&seen);
	while ((next = iterate_fd(current->files, fd, mlap2p_fd_match,
				  NULL)) > 0) {
		fd = next;
		/* The fd may have been closed or reused since; recheck. */
		file = fget(fd - 1);
		if (!file)
			continue;
		if (file->f_op == &mlap2p_fops) {
			ret = xa_insert(&seen, (unsigned long)file,
					xa_mk_value(1), GFP_KERNEL_ACCOUNT);
			if (!ret)
				ret = mlap2p_file_ids(file->private_data, ids);
			else if (ret == -EBUSY)
				ret = 0;	/* a file seen through another fd */
		}
		fput(file);
		if (ret)
			break;
		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			break;
		}
		cond_resched();
	}
	/* Only the file pointers' values were kept: no references to drop. */
	xa_destroy(&seen);
	if (ret)
		xa_destroy(ids);
	return ret;
}
