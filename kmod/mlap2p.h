/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mlap2p module internals: regions, per-file handle tables, the live
 * topology and the counters.  Nothing here is ABI; uapi/linux/mlap2p.h is.
 *
 * Objects and references
 *
 *   struct mlap2p_region   emulated device memory on one MLA.  Refcounted
 *                          (kref): one reference per local handle (owned or
 *                          imported, in any file) and one per VMA.  The last
 *                          put frees the pages.  The owner freeing its handle
 *                          only marks the region "not owned" (no new opens);
 *                          importers keep their pages.
 *   struct mlap2p_file     one per open /dev/mlap2p: an xarray of local
 *                          handles.  VMAs pin the struct file (vm_file), so
 *                          a file is released only after its last mapping.
 *   struct mlap2p_handle   a local handle: one region reference plus how
 *                          this file may use it (owned, read-only).
 *
 * Locks, outermost first
 *
 *   mlap2p_region.exp_lock mutex; held by IPC_GET_HANDLE from the check
 *                          of the exporter's credentials, over the copy
 *                          of the handle to user space, to the commit.
 *                          Nothing takes it under mmap_lock.
 *   mmap_lock              taken by the mm core around ->mmap and vm_ops.
 *   mlap2p_file.lock       mutex; the file's handle table and limits.
 *   mlap2p_lock            mutex in region.c; the region list and hash,
 *                          every "protected by mlap2p_lock" field, the
 *                          topology, per-MLA usage and the counters.
 *
 * Rules that keep this order: no copy_{to,from}_user (which may take
 * mmap_lock) while holding mlap2p_file.lock or mlap2p_lock; never put a region while holding
 * mlap2p_lock (its release takes mlap2p_lock); references found by a global
 * lookup are taken with kref_get_unless_zero() under mlap2p_lock.  No
 * spinlocks are taken by this module, so every path may sleep.
 */
#ifndef MLAP2P_KMOD_H
#define MLAP2P_KMOD_H

#include <linux/bits.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/string.h>
#include <linux/types.h>
#include <linux/uidgid.h>
#include <linux/xarray.h>
#include <linux/mlap2p.h>
#include <asm/page.h>

#include "compat.h"
#include "mlap2p_topo.h"

struct file;
struct page;
struct pid;
struct user_namespace;
struct user_struct;
struct vm_area_struct;

/* Backing chunks: 2 MiB physically contiguous when the allocator can. */
#define MLAP2P_CHUNK_SHIFT	21
#define MLAP2P_CHUNK_ORDER	(MLAP2P_CHUNK_SHIFT - PAGE_SHIFT)
#define MLAP2P_CHUNK_PAGES	BIT(MLAP2P_CHUNK_ORDER)

/*
 * mmap cookies: local handle id << MLAP2P_COOKIE_SHIFT.  Each handle owns a
 * 64 GiB window of the file's offset space, so the region and the offset
 * inside it follow from vm_pgoff alone.  Handle ids stay below
 * MLAP2P_HANDLE_MAX so cookies are positive loff_t values; per-MLA
 * capacity stays below the window so no region outgrows it.
 */
#define MLAP2P_COOKIE_SHIFT	36
#define MLAP2P_COOKIE_PGSHIFT	(MLAP2P_COOKIE_SHIFT - PAGE_SHIFT)
#define MLAP2P_COOKIE_PGMASK	((1UL << MLAP2P_COOKIE_PGSHIFT) - 1)
#define MLAP2P_HANDLE_MAX	((1U << (63 - MLAP2P_COOKIE_SHIFT)) - 1)
#define MLAP2P_CAPACITY_MAX	BIT_ULL(MLAP2P_COOKIE_SHIFT)

/* Global MLA ids run over every node of the pod. */
#define MLAP2P_MAX_MLAS	(MLAP2P_TOPO_MAX_DEVICES * MLAP2P_TOPO_MAX_POD_NODES)

/*
 * The 64-byte IPC handle.  Only this module reads it; user space treats it
 * as opaque.  Anything but the exact layout (magic, version, known flags,
 * zero tail) is rejected as forged.
 */
#define MLAP2P_IPC_MAGIC	0x50414c4dU	/* "MLAP" */
#define MLAP2P_IPC_VERSION	1
#define MLAP2P_SECRET_SIZE	16

struct mlap2p_ipc_blob {
	u32 magic;
	u16 version;
	u16 flags;			/* MLAP2P_IPC_F_* it was exported with */
	u64 region_id;
	u8 secret[MLAP2P_SECRET_SIZE];
	u8 zero[32];
};

/* One export kind of a region: read-write (0) or read-only (1). */
struct mlap2p_export {
	u8 secret[MLAP2P_SECRET_SIZE];
	bool valid;
};

struct mlap2p_region {
	struct kref ref;
	struct mutex exp_lock;		/* one IPC_GET_HANDLE at a time */
	/* Immutable after mlap2p_region_create(), @id after publication. */
	u64 id;				/* 0 until published */
	u64 size;			/* bytes, a multiple of PAGE_SIZE */
	u32 device;			/* global MLA id */
	unsigned long nr_pages;
	unsigned long nr_contig;	/* pages that came in 2 MiB chunks */
	struct page **pages;		/* order-0 pages, zeroed */
	struct user_struct *user;	/* nr_pages charged to its locked_vm */

	/* Protected by mlap2p_lock. */
	struct list_head node;		/* mlap2p_regions, by id */
	struct hlist_node hnode;	/* id hash for IPC_OPEN_HANDLE */
	bool published;			/* on the list and in the hash */
	bool owned;			/* the owner handle still exists */
	struct pid *owner;		/* owner's thread group, NULL once freed */
	u32 importers;			/* imported handles, all files */
	u32 mappings;			/* live VMAs, all processes */
	/* [0] read-write, [1] read-only; the secrets are immutable. */
	struct mlap2p_export exp[2];
	struct user_namespace *exp_ns;	/* exporter's user ns, NULL until exported */
	kuid_t exp_euid;		/* exporter's euid */
};

struct mlap2p_handle {
	struct mlap2p_region *region;	/* one reference, owned by the handle */
	u64 bytes;			/* counted against max_bytes_per_file */
	u32 id;
	bool owned;			/* MEM_ALLOC, else IPC_OPEN_HANDLE */
	bool rdonly;			/* mappings are read-only */
};

struct mlap2p_file {
	struct mutex lock;		/* protects the fields below */
	struct xarray handles;		/* id -> handle; NULL while reserved */
	u32 next_id;			/* cyclic allocation cursor */
	u32 nr_handles;			/* including reserved slots */
	u64 owned_bytes;		/* bytes of owned regions, incl. reserved */
};

/*
 * Counters, protected by mlap2p_lock.  live_* are current values; the rest
 * count events since load.  allocs/frees count owner handles (MEM_ALLOC,
 * MEM_FREE or the owner's file closing), opens/closes imported handles.
 * Each field has its line in common/mlap2p_stats.h.
 */
struct mlap2p_stats {
	u64 live_regions;
	u64 live_bytes;
	u64 live_mappings;
	u64 live_handles;
	u64 allocs;
	u64 frees;
	u64 exports;
	u64 opens;
	u64 closes;
	u64 rejected;			/* forged, stale or denied IPC handles */
	u64 hwm_bytes;			/* high-water mark of live_bytes */
	u64 hwm_regions;		/* of live_regions (genl only) */
	u64 hwm_mappings;		/* of live_mappings (genl only) */
};

/*
 * The list of the counters (region.c, from common/mlap2p_stats.h, which
 * mlap2pctl reads too), one entry per field of struct mlap2p_stats (a
 * build-time check counts them): the field, its file in
 * /sys/class/misc/mlap2p/ if @sysfs, and the MLAP2P_A_STAT_* attribute
 * GET_STATS carries it in, or 0.  main.c makes the sysfs files and genl.c
 * the STATS nest from it, so a new counter is a field and a line there.
 * The selftests' sysfs reader (selftests/mlap2p/mlap2p_util.c) lists them
 * on its own, so that a renamed file fails a test.
 */
struct mlap2p_stat_desc {
	const char *name;
	size_t offset;
	bool sysfs;
	int attr;
};

#define MLAP2P_NR_STATS	(sizeof(struct mlap2p_stats) / sizeof(u64))

extern const struct mlap2p_stat_desc mlap2p_stat_descs[MLAP2P_NR_STATS];

static inline u64 mlap2p_stat_get(const struct mlap2p_stats *s,
				  const struct mlap2p_stat_desc *d)
{
	u64 val;

	memcpy(&val, (const u8 *)s + d->offset, sizeof(val));
	return val;
}

/*
 * One MLA's memory, read at once.  @used is reserved capacity, including
 * regions still being created; @live counts published regions only (as
 * live_bytes does) and @hwm is its high-water mark since the last
 * topology change.
 */
struct mlap2p_dev_usage {
	u64 capacity;
	u64 used;
	u64 live;
	u64 hwm;
};

/* The configuration the locality ioctls and genl answer from. */
struct mlap2p_config {
	struct mlap2p_topo topo;
	u64 dev_capacity;		/* bytes per MLA */
	u32 generation;			/* bumped on every change */
};

/* A consistent copy of a region's reportable state (for genl). */
struct mlap2p_region_view {
	u64 id;
	u64 size;
	u32 device;
	u32 owner_pid;			/* in the caller's pid ns; 0 once freed */
	u32 importers;
	u32 mappings;
	bool exported;
};

/* main.c: the feature bits GET_INFO reports. */
u64 mlap2p_features(void);

/* main.c: the file operations, to recognise /dev/mlap2p files. */
extern const struct file_operations mlap2p_fops;

/* ioctl.c */
long mlap2p_ioctl(struct file *file, unsigned int cmd, unsigned long arg);

/* mmap.c */
int mlap2p_mmap(struct file *file, struct vm_area_struct *vma);

static inline u64 mlap2p_cookie(u32 handle_id)
{
	return (u64)handle_id << MLAP2P_COOKIE_SHIFT;
}

/* region.c: regions.  Never call a *_put() with mlap2p_lock held. */
struct mlap2p_region *mlap2p_region_create(u32 device, u64 size, u32 flags);
void mlap2p_region_put(struct mlap2p_region *r);
void mlap2p_region_publish(struct mlap2p_region *r);
void mlap2p_region_disown(struct mlap2p_region *r);
int mlap2p_region_export_begin(struct mlap2p_region *r, u32 flags,
			       struct mlap2p_ipc_blob *blob);
void mlap2p_region_export_abort(struct mlap2p_region *r);
int mlap2p_region_export_commit(struct mlap2p_region *r, u32 flags);
struct mlap2p_region *mlap2p_region_open(const struct mlap2p_ipc_blob *blob,
					 bool *rdonly);
void mlap2p_region_import(struct mlap2p_region *r);
void mlap2p_region_unimport(struct mlap2p_region *r);
void mlap2p_region_map(struct mlap2p_region *r);
void mlap2p_region_unmap(struct mlap2p_region *r);

/*
 * For genl.  mlap2p_region_view() is a consistent snapshot of one region
 * (takes mlap2p_lock); mlap2p_region_view_id() the same by region id
 * (-ENOENT if no live region has it).  mlap2p_region_for_each() walks the
 * live regions with id >= @from_id in id order, setting *@seq (if not
 * NULL) to a counter bumped whenever a region comes or goes, read under
 * the same lock (for genl_dump_check_consistent()).  @fn runs with
 * mlap2p_lock held: it may sleep, but must not take mlap2p_lock or a file
 * lock, touch user memory or put a region.  A non-zero return from @fn
 * stops the walk and is returned.
 */
void mlap2p_region_view(const struct mlap2p_region *r,
			struct mlap2p_region_view *v);
int mlap2p_region_view_id(u64 id, struct mlap2p_region_view *v);
int mlap2p_region_for_each(u64 from_id, u32 *seq,
			   int (*fn)(const struct mlap2p_region_view *v,
				     void *arg),
			   void *arg);

/* region.c: configuration, per-MLA usage and counters. */
void mlap2p_config_get(struct mlap2p_config *c);
/*
 * Replace the topology and, if @dev_capacity is non-zero, the per-MLA
 * capacity.  -EINVAL if invalid, -EBUSY while any region exists; otherwise
 * atomic, and bumps the generation.
 */
int mlap2p_config_set(const struct mlap2p_topo *t, u64 dev_capacity);
int mlap2p_topo_set(const struct mlap2p_topo *t);
int mlap2p_dev_query(u32 mla, struct mlap2p_topo_dev *dev, u64 *capacity,
		     u64 *used);
int mlap2p_dev_usage(u32 mla, struct mlap2p_topo_dev *dev,
		     struct mlap2p_dev_usage *u);
void mlap2p_stats_read(struct mlap2p_stats *s);
void mlap2p_stats_rejected(void);

/* handle.c: the current per-file limits (module parameters). */
u32 mlap2p_limit_regions(void);
u64 mlap2p_limit_bytes(void);

/* handle.c: per-file handle tables. */
void mlap2p_file_init(struct mlap2p_file *f);
void mlap2p_file_release(struct mlap2p_file *f);
struct mlap2p_handle *mlap2p_handle_reserve(struct mlap2p_file *f,
					    u64 owned_bytes);
void mlap2p_handle_cancel(struct mlap2p_file *f, struct mlap2p_handle *h);
void mlap2p_handle_commit(struct mlap2p_file *f, struct mlap2p_handle *h);
int mlap2p_handle_remove(struct mlap2p_file *f, u32 id, bool owned);
struct mlap2p_region *mlap2p_handle_get(struct mlap2p_file *f, u32 id,
					struct mlap2p_handle *copy);
/*
 * For genl's unprivileged GET_REGION: the ids of the regions that
 * current's open /dev/mlap2p files hold handles to (owned or imported), as
 * the indices of @ids, which this initialises and the caller destroys
 * (xa_destroy()).  Each open file is read once however many fds refer to
 * it, and the set holds each id once, so neither the cost nor the memory
 * grows with dup()s, and no allocation is larger than an xarray node.
 * Takes file locks: call it without mlap2p_lock held.  Returns 0, -ENOMEM
 * or -EINTR (fatal signal); on error @ids is empty.
 */
int mlap2p_current_region_ids(struct xarray *ids);

/*
 * genl.c: the generic netlink family, always built in: init returns 0 or
 * the error of genl_register_family(), which fails the load.  notify is
 * called in process context of the acting process, without any mlap2p
 * lock held, with @r referenced; cmd is an MLAP2P_CMD_EVENT_REGION_*
 * value: NEW after MEM_ALLOC, EXPORT after IPC_GET_HANDLE, OPEN and CLOSE
 * for imported handles, FREE when the owner handle goes (MEM_FREE or the
 * owner's file released; by then the view's owner_pid is 0, and the
 * region may live on for importers and mappings).
 */
int mlap2p_genl_init(void);
void mlap2p_genl_exit(void);
void mlap2p_genl_notify(u8 cmd, const struct mlap2p_region *r);

#endif /* MLAP2P_KMOD_H */
