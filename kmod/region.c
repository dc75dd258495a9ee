// SPDX-License-Identifier: GPL-2.0
/*
 * mlap2p region core: emulated device memory, its lifetime, IPC export and
 * import, and the global state every region is accounted against (the
 * topology, per-MLA usage and the counters).  No user-space access here.
 *
 * A region is created unpublished (capacity reserved, pages allocated) so
 * the ioctl layer can hand results back to user space before anything else
 * can see it; publishing gives it its id and puts it on the list and the id
 * hash.  Its memory goes back to the system only when the last reference is
 * put.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/build_bug.h>
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/gfp.h>
#include <linux/hashtable.h>
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/pid.h>
#include <linux/random.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/sched/user.h>
#include <linux/slab.h>
#include <linux/stddef.h>
#include <linux/string.h>
#include <linux/user_namespace.h>
#ifdef MLAP2P_HAVE_CRYPTO_UTILS_H
#include <crypto/utils.h>
#else
#include <crypto/algapi.h>
#endif

#include "mlap2p.h"

/* See the lock order in mlap2p.h.  Protects everything below. */
static DEFINE_MUTEX(mlap2p_lock);
static LIST_HEAD(mlap2p_regions);	/* published, in id order */
static DEFINE_HASHTABLE(mlap2p_region_hash, 8);
static u64 mlap2p_next_id = 1;
static unsigned int mlap2p_nr_regions;	/* including unpublished ones */
static u32 mlap2p_regions_seq;		/* bumped when the list changes */
static struct mlap2p_config mlap2p_cfg;
static u64 mlap2p_used[MLAP2P_MAX_MLAS];	/* reserved, incl. unpublished */
static u64 mlap2p_live[MLAP2P_MAX_MLAS];	/* published regions only */
static u64 mlap2p_hwm[MLAP2P_MAX_MLAS];		/* of mlap2p_live, per topology */
static struct mlap2p_stats mlap2p_stats;

#define MLAP2P_STAT(name, attr, sysfs, bytes)				\
	{ #name, offsetof(struct mlap2p_stats, name), sysfs, attr },

const struct mlap2p_stat_desc mlap2p_stat_descs[] = {
#include "mlap2p_stats.h"
};

#undef MLAP2P_STAT

/* Every counter listed once: as many entries as fields. */
static_assert(ARRAY_SIZE(mlap2p_stat_descs) == MLAP2P_NR_STATS);
static_assert(sizeof(struct mlap2p_stats) % sizeof(u64) == 0);

/*
 * Published region @r became live.  The live counts and their high-water
 * marks move together under mlap2p_lock, so a mark is never below its
 * count.  Unpublished regions (a MEM_ALLOC that may still fail) are in
 * mlap2p_used only: a failed call leaves no mark behind.
 */
static void mlap2p_stats_add_live(const struct mlap2p_region *r)
{
	lockdep_assert_held(&mlap2p_lock);
	mlap2p_stats.live_regions++;
	mlap2p_stats.hwm_regions = max(mlap2p_stats.hwm_regions,
				       mlap2p_stats.live_regions);
	mlap2p_stats.live_bytes += r->size;
	mlap2p_stats.hwm_bytes = max(mlap2p_stats.hwm_bytes,
				     mlap2p_stats.live_bytes);
	mlap2p_live[r->device] += r->size;
	mlap2p_hwm[r->device] = max(mlap2p_hwm[r->device],
				    mlap2p_live[r->device]);
}

/*
 * Reserve @r->size bytes on @r->device.  -EINVAL for an MLA outside the
 * topology, -ENOSPC when the MLA is full.
 */
static int mlap2p_region_reserve(struct mlap2p_region *r)
{
	u32 mlas;
	int ret = 0;

	mutex_lock(&mlap2p_lock);
	mlas = mlap2p_topo_total_mlas(&mlap2p_cfg.topo);
	if (r->device >= mlas || r->device >= MLAP2P_MAX_MLAS) {
		ret = -EINVAL;
		goto out_unlock;
	}
	if (r->size > mlap2p_cfg.dev_capacity - mlap2p_used[r->device]) {
		ret = -ENOSPC;
		goto out_unlock;
	}
	mlap2p_used[r->device] += r->size;
	mlap2p_nr_regions++;
out_unlock:
	mutex_unlock(&mlap2p_lock);
	return ret;
}

/*
 * Fill @pages[0..@want) from one physically contiguous block, zeroed.
 * Returns false if the allocator has no such block to spare.
 */
static bool mlap2p_alloc_contig(struct page **pages, unsigned long want)
{
	const gfp_t gfp = GFP_KERNEL_ACCOUNT | __GFP_ZERO | __GFP_NOWARN |
			  __GFP_NORETRY;
	unsigned int order = get_order(want << PAGE_SHIFT);
	struct page *page;
	unsigned long i;

	page = alloc_pages(gfp, order);
	if (!page)
		return false;
	/* Independent order-0 pages, so each can be mapped and freed alone. */
	split_page(page, order);
	for (i = 0; i < want; i++)
		pages[i] = page + i;
	for (; i < (1UL << order); i++)
		__free_page(page + i);
	return true;
}

/* Single zeroed pages; a clean -ENOMEM rather than the OOM killer. */
static int mlap2p_alloc_single(struct page **pages, unsigned long want)
{
	const gfp_t gfp = GFP_KERNEL_ACCOUNT | __GFP_ZERO | __GFP_NOWARN |
			  __GFP_RETRY_MAYFAIL;
	unsigned long i;

	for (i = 0; i < want; i++) {
		pages[i] = alloc_page(gfp);
		if (!pages[i])
			return -ENOMEM;
	}
	return 0;
}

/*
 * Back @r with 2 MiB chunks; where the allocator cannot give one, fall back
 * to single pages for that chunk unless @contig.  On failure the pages
 * allocated so far stay in @r->pages for the release to free.
 */
static int mlap2p_region_alloc_pages(struct mlap2p_region *r, bool contig)
{
	unsigned long i, want;
	int ret;

	r->pages = kvcalloc(r->nr_pages, sizeof(*r->pages), GFP_KERNEL_ACCOUNT);
	if (!r->pages)
		return -ENOMEM;

	for (i = 0; i < r->nr_pages; i += want) {
		want = min(r->nr_pages - i, MLAP2P_CHUNK_PAGES);
		if (fatal_signal_pending(current))
			return -EINTR;
		if (mlap2p_alloc_contig(r->pages + i, want)) {
			r->nr_contig += want;
			continue;
		}
		if (contig)
			return -ENOMEM;
		ret = mlap2p_alloc_single(r->pages + i, want);
		if (ret)
			return ret;
		cond_resched();
	}
	return 0;
}

/*
 * Region pages cannot be swapped or reclaimed, as io_uring's registered
 * buffers and RDMA registrations cannot: charge them, like those, to the
 * allocating user's locked_vm against current's RLIMIT_MEMLOCK, unless it
 * has CAP_IPC_LOCK.  The user is the real uid's (current_user()), shared
 * by every process and file of that user.  -ENOMEM past the limit.
 */
static int mlap2p_region_charge(struct mlap2p_region *r)
{
	unsigned long limit;
	struct user_struct *user;
	long cur, next;

	if (capable(CAP_IPC_LOCK))
		return 0;
	limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	user = current_user();
	cur = atomic_long_read(&user->locked_vm);
	do {
		if (r->nr_pages > limit ||
		    (unsigned long)cur > limit - r->nr_pages)
			return -ENOMEM;
		next = cur + r->nr_pages;
	} while (!atomic_long_try_cmpxchg(&user->locked_vm, &cur, next));
	r->user = get_uid(user);
	return 0;
}

static void mlap2p_region_uncharge(struct mlap2p_region *r)
{
	if (!r->user)
		return;
	atomic_long_sub(r->nr_pages, &r->user->locked_vm);
	free_uid(r->user);
}

/**
 * mlap2p_region_create() - allocate an unpublished region
 * @device: global MLA id
 * @size: bytes, non-zero and a multiple of PAGE_SIZE
 * @flags: MLAP2P_MEM_F_*
 *
 * Return: the region with one reference, or ERR_PTR(-EINVAL) for a bad
 * MLA, -ENOSPC when the MLA is full, -ENOMEM (no memory, or the caller's
 * RLIMIT_MEMLOCK would be exceeded) or -EINTR.
 */
struct mlap2p_region *mlap2p_region_create(u32 device, u64 size, u32 flags)
{
	struct mlap2p_region *r;
	unsigned int i;
	int ret;

	r = kzalloc(sizeof(*r), GFP_KERNEL_ACCOUNT);
	if (!r)
		return ERR_PTR(-ENOMEM);
	kref_init(&r->ref);
	mutex_init(&r->exp_lock);
	/* Each secret is unused until an export of its kind validates it. */
	for (i = 0; i < ARRAY_SIZE(r->exp); i++)
		get_random_bytes(r->exp[i].secret, sizeof(r->exp[i].secret));
	INIT_LIST_HEAD(&r->node);
	INIT_HLIST_NODE(&r->hnode);
	r->device = device;
	r->size = size;
	r->nr_pages = size >> PAGE_SHIFT;

	ret = mlap2p_region_reserve(r);
	if (ret) {
		kfree(r);
		return ERR_PTR(ret);
	}
	/* From here the release undoes what is done. */
	ret = mlap2p_region_charge(r);
	if (!ret)
		ret = mlap2p_region_alloc_pages(r, flags & MLAP2P_MEM_F_CONTIG);
	if (ret) {
		mlap2p_region_put(r);
		return ERR_PTR(ret);
	}
	return r;
}

static void mlap2p_region_release(struct kref *ref)
{
	struct mlap2p_region *r = container_of(ref, struct mlap2p_region, ref);
	unsigned long i;

	mutex_lock(&mlap2p_lock);
	if (r->published) {
		list_del(&r->node);
		hash_del(&r->hnode);
		mlap2p_regions_seq++;
		mlap2p_stats.live_regions--;
		mlap2p_stats.live_bytes -= r->size;
		mlap2p_live[r->device] -= r->size;
	}
	mlap2p_used[r->device] -= r->size;
	mlap2p_nr_regions--;
	mutex_unlock(&mlap2p_lock);

	if (r->pages) {
		for (i = 0; i < r->nr_pages && r->pages[i]; i++) {
			__free_page(r->pages[i]);
			if (!((i + 1) % MLAP2P_CHUNK_PAGES))
				cond_resched();
		}
		kvfree(r->pages);
	}
	mlap2p_region_uncharge(r);
	if (r->exp_ns)
		put_user_ns(r->exp_ns);
	put_pid(r->owner);
	mutex_destroy(&r->exp_lock);
	kfree(r);
}

/* Drop one reference; the last one frees the region.  Not under mlap2p_lock. */
void mlap2p_region_put(struct mlap2p_region *r)
{
	kref_put(&r->ref, mlap2p_region_release);
}

/*
 * Make a new region visible: owned by current's thread group, openable.
 * The id is taken here, under the lock that links the region at the tail,
 * so the list stays in id order however creations and publications of
 * concurrent callers interleave (mlap2p_region_for_each() relies on it).
 */
void mlap2p_region_publish(struct mlap2p_region *r)
{
	mutex_lock(&mlap2p_lock);
	r->id = mlap2p_next_id++;
	r->published = true;
	r->owned = true;
	r->owner = get_pid(task_tgid(current));
	list_add_tail(&r->node, &mlap2p_regions);
	hash_add(mlap2p_region_hash, &r->hnode, r->id);
	mlap2p_regions_seq++;
	mlap2p_stats_add_live(r);
	mlap2p_stats.live_handles++;
	mlap2p_stats.allocs++;
	mutex_unlock(&mlap2p_lock);
	mlap2p_genl_notify(MLAP2P_CMD_EVENT_REGION_NEW, r);
}

/*
 * The owner handle is gone (MEM_FREE or the owner's file closed).  The
 * region can no longer be opened; importers and mappings keep it alive.
 */
void mlap2p_region_disown(struct mlap2p_region *r)
{
	struct pid *owner;

	mutex_lock(&mlap2p_lock);
	r->owned = false;
	owner = r->owner;
	r->owner = NULL;
	mlap2p_stats.live_handles--;
	mlap2p_stats.frees++;
	mutex_unlock(&mlap2p_lock);
	put_pid(owner);
	mlap2p_genl_notify(MLAP2P_CMD_EVENT_REGION_FREE, r);
}

static void mlap2p_blob_fill(struct mlap2p_ipc_blob *b,
			     const struct mlap2p_region *r, u32 flags)
{
	memset(b, 0, sizeof(*b));
	b->magic = MLAP2P_IPC_MAGIC;
	b->version = MLAP2P_IPC_VERSION;
	b->flags = flags;
	b->region_id = r->id;
	memcpy(b->secret, r->exp[flags & MLAP2P_IPC_F_RDONLY].secret,
	       sizeof(b->secret));
}

/**
 * mlap2p_region_export_begin() - what an export of @r would return
 * @r: the region, referenced by the caller's owned handle
 * @flags: MLAP2P_IPC_F_*, already validated
 * @blob: filled with the handle
 *
 * Each export kind (read-write, read-only) has its own 128-bit secret,
 * drawn when the region is created and valid from its first export on;
 * every export of that kind returns the same handle.  The first
 * exporter's user namespace and euid are what importers are checked
 * against, so an export under other credentials is refused.
 *
 * Nothing changes here: the caller copies @blob out, then commits with
 * mlap2p_region_export_commit() or gives up with
 * mlap2p_region_export_abort().  @r->exp_lock, held in between, keeps
 * other exports of @r from passing the credential check meanwhile.
 *
 * Return: 0 with @r->exp_lock held; otherwise -EINTR (fatal signal while
 * waiting for another export), -ENOENT if the owner handle went away
 * meanwhile, or -EACCES.
 */
int mlap2p_region_export_begin(struct mlap2p_region *r, u32 flags,
			       struct mlap2p_ipc_blob *blob)
{
	int ret = 0;

	if (mutex_lock_killable(&r->exp_lock))
		return -EINTR;
	mutex_lock(&mlap2p_lock);
	if (!r->owned)
		ret = -ENOENT;
	else if (r->exp_ns && (r->exp_ns != current_user_ns() ||
			       !uid_eq(r->exp_euid, current_euid())))
		ret = -EACCES;
	else
		mlap2p_blob_fill(blob, r, flags);
	mutex_unlock(&mlap2p_lock);
	if (ret)
		mutex_unlock(&r->exp_lock);
	return ret;
}

void mlap2p_region_export_abort(struct mlap2p_region *r)
{
	mutex_unlock(&r->exp_lock);
}

/**
 * mlap2p_region_export_commit() - make the export of a begin take effect
 * @r: the region, with @r->exp_lock held by mlap2p_region_export_begin()
 * @flags: as given to it
 *
 * Validates the handle, records the exporter's credentials on a first
 * export, counts it and sends the event.  Releases @r->exp_lock.
 *
 * Return: 0, or -ENOENT if the owner handle went away since the begin
 * (the handle copied out then names nothing openable).
 */
int mlap2p_region_export_commit(struct mlap2p_region *r, u32 flags)
{
	int ret = 0;

	mutex_lock(&mlap2p_lock);
	if (!r->owned) {
		ret = -ENOENT;
		goto out_unlock;
	}
	if (!r->exp_ns) {
		r->exp_ns = get_user_ns(current_user_ns());
		r->exp_euid = current_euid();
	}
	r->exp[flags & MLAP2P_IPC_F_RDONLY].valid = true;
	mlap2p_stats.exports++;
out_unlock:
	mutex_unlock(&mlap2p_lock);
	mutex_unlock(&r->exp_lock);
	if (!ret)
		mlap2p_genl_notify(MLAP2P_CMD_EVENT_REGION_EXPORT, r);
	return ret;
}

static bool mlap2p_blob_well_formed(const struct mlap2p_ipc_blob *b)
{
	return b->magic == MLAP2P_IPC_MAGIC &&
	       b->version == MLAP2P_IPC_VERSION &&
	       !(b->flags & ~MLAP2P_IPC_F_ALL) &&
	       !memchr_inv(b->zero, 0, sizeof(b->zero));
}

static struct mlap2p_region *mlap2p_region_find(u64 id)
{
	struct mlap2p_region *r;

	lockdep_assert_held(&mlap2p_lock);
	hash_for_each_possible(mlap2p_region_hash, r, hnode, id)
		if (r->id == id)
			return r;
	return NULL;
}

/* May current open what was exported under @ns and @euid? */
static bool mlap2p_may_import(struct user_namespace *ns, kuid_t euid)
{
	if (ns == current_user_ns() && uid_eq(euid, current_euid()))
		return true;
	return ns_capable(ns, CAP_IPC_OWNER);
}

/**
 * mlap2p_region_open() - look up the region an IPC handle names
 * @blob: the handle as user space passed it
 * @rdonly: set to whether the handle grants read-only access
 *
 * The secret is checked (in constant time) before the credentials, so a
 * caller without the secret learns nothing about the exporter.
 *
 * Return: the region with a new reference, ERR_PTR(-ENOENT) for a
 * malformed, forged or stale handle (or a region whose owner freed it), or
 * ERR_PTR(-EACCES) for a caller the exporter's credentials do not admit.
 */
struct mlap2p_region *mlap2p_region_open(const struct mlap2p_ipc_blob *blob,
					 bool *rdonly)
{
	unsigned int kind = blob->flags & MLAP2P_IPC_F_RDONLY;
	struct user_namespace *ns = NULL;
	struct mlap2p_region *r = NULL;
	kuid_t euid;

	if (!mlap2p_blob_well_formed(blob))
		goto out_reject;

	mutex_lock(&mlap2p_lock);
	r = mlap2p_region_find(blob->region_id);
	if (r && r->owned && r->exp[kind].valid &&
	    !crypto_memneq(r->exp[kind].secret, blob->secret,
			   sizeof(blob->secret)) &&
	    kref_get_unless_zero(&r->ref)) {
		ns = get_user_ns(r->exp_ns);
		euid = r->exp_euid;
	} else {
		r = NULL;
	}
	mutex_unlock(&mlap2p_lock);
	if (!r)
		goto out_reject;

	/* Outside mlap2p_lock: capability checks may audit. */
	if (!mlap2p_may_import(ns, euid)) {
		put_user_ns(ns);
		mlap2p_region_put(r);
		mlap2p_stats_rejected();
		return ERR_PTR(-EACCES);
	}
	put_user_ns(ns);
	*rdonly = kind;
	return r;

out_reject:
	mlap2p_stats_rejected();
	return ERR_PTR(-ENOENT);
}

/* A new imported handle refers to @r. */
void mlap2p_region_import(struct mlap2p_region *r)
{
	mutex_lock(&mlap2p_lock);
	r->importers++;
	mlap2p_stats.live_handles++;
	mlap2p_stats.opens++;
	mutex_unlock(&mlap2p_lock);
	mlap2p_genl_notify(MLAP2P_CMD_EVENT_REGION_OPEN, r);
}

/* An imported handle of @r is gone; the caller still holds its reference. */
void mlap2p_region_unimport(struct mlap2p_region *r)
{
	mutex_lock(&mlap2p_lock);
	r->importers--;
	mlap2p_stats.live_handles--;
	mlap2p_stats.closes++;
	mutex_unlock(&mlap2p_lock);
	mlap2p_genl_notify(MLAP2P_CMD_EVENT_REGION_CLOSE, r);
}

/*
 * A new VMA maps @r.  The caller has already taken the reference the VMA
 * will own; mlap2p_region_unmap() counts it out and puts it.
 */
void mlap2p_region_map(struct mlap2p_region *r)
{
	mutex_lock(&mlap2p_lock);
	r->mappings++;
	mlap2p_stats.live_mappings++;
	mlap2p_stats.hwm_mappings = max(mlap2p_stats.hwm_mappings,
					mlap2p_stats.live_mappings);
	mutex_unlock(&mlap2p_lock);
}

void mlap2p_region_unmap(struct mlap2p_region *r)
{
	mutex_lock(&mlap2p_lock);
	r->mappings--;
	mlap2p_stats.live_mappings--;
	mutex_unlock(&mlap2p_lock);
	mlap2p_region_put(r);
}

static void mlap2p_region_view_locked(const struct mlap2p_region *r,
				      struct mlap2p_region_view *v)
{
	lockdep_assert_held(&mlap2p_lock);
	v->id = r->id;
	v->size = r->size;
	v->device = r->device;
	v->owner_pid = r->owner ? pid_vnr(r->owner) : 0;
	v->importers = r->importers;
	v->mappings = r->mappings;
	v->exported = r->exp[0].valid || r->exp[1].valid;
}

void mlap2p_region_view(const struct mlap2p_region *r,
			struct mlap2p_region_view *v)
{
	mutex_lock(&mlap2p_lock);
	mlap2p_region_view_locked(r, v);
	mutex_unlock(&mlap2p_lock);
}

/* The view of live region @id; -ENOENT if there is none. */
int mlap2p_region_view_id(u64 id, struct mlap2p_region_view *v)
{
	struct mlap2p_region *r;
	int ret = -ENOENT;

	mutex_lock(&mlap2p_lock);
	r = mlap2p_region_find(id);
	if (r && kref_read(&r->ref)) {
		mlap2p_region_view_locked(r, v);
		ret = 0;
	}
	mutex_unlock(&mlap2p_lock);
	return ret;
}

int mlap2p_region_for_each(u64 from_id, u32 *seq,
			   int (*fn)(const struct mlap2p_region_view *v,
				     void *arg),
			   void *arg)
{
	struct mlap2p_region_view v;
	struct mlap2p_region *r;
	int ret = 0;

	mutex_lock(&mlap2p_lock);
	if (seq)
		*seq = mlap2p_regions_seq;
	list_for_each_entry(r, &mlap2p_regions, node) {
		/* Dying regions (count already zero) are not live. */
		if (r->id < from_id || !kref_read(&r->ref))
			continue;
		mlap2p_region_view_locked(r, &v);
		ret = fn(&v, arg);
		if (ret)
			break;
	}
	mutex_unlock(&mlap2p_lock);
	return ret;
}

void mlap2p_config_get(struct mlap2p_config *c)
{
	mutex_lock(&mlap2p_lock);
	*c = mlap2p_cfg;
	mutex_unlock(&mlap2p_lock);
}

int mlap2p_config_set(const struct mlap2p_topo *t, u64 dev_capacity)
{
	int ret = 0;

	if (mlap2p_topo_validate(t) ||
	    mlap2p_topo_total_mlas(t) > MLAP2P_MAX_MLAS)
		return -EINVAL;
	if (dev_capacity && (dev_capacity < PAGE_SIZE ||
			     dev_capacity > MLAP2P_CAPACITY_MAX))
		return -EINVAL;

	mutex_lock(&mlap2p_lock);
	if (mlap2p_nr_regions) {
		ret = -EBUSY;
		goto out_unlock;
	}
	mlap2p_cfg.topo = *t;
	if (dev_capacity)
		mlap2p_cfg.dev_capacity = dev_capacity;
	mlap2p_cfg.generation++;
	/* MLA ids now name other devices; mlap2p_live[] is all 0 here. */
	memset(mlap2p_hwm, 0, sizeof(mlap2p_hwm));
out_unlock:
	mutex_unlock(&mlap2p_lock);
	return ret;
}

int mlap2p_topo_set(const struct mlap2p_topo *t)
{
	return mlap2p_config_set(t, 0);
}

/*
 * Topology facts, capacity and usage of global MLA @mla, read together;
 * -EINVAL if there is no such MLA.
 */
int mlap2p_dev_usage(u32 mla, struct mlap2p_topo_dev *dev,
		     struct mlap2p_dev_usage *u)
{
	int ret;

	mutex_lock(&mlap2p_lock);
	ret = mlap2p_topo_dev(&mlap2p_cfg.topo, mla, dev);
	if (!ret && mla >= MLAP2P_MAX_MLAS)
		ret = -EINVAL;
	if (!ret) {
		u->capacity = mlap2p_cfg.dev_capacity;
		u->used = mlap2p_used[mla];
		u->live = mlap2p_live[mla];
		u->hwm = mlap2p_hwm[mla];
	}
	mutex_unlock(&mlap2p_lock);
	return ret;
}

/*
 * For DEV_INFO: topology facts and capacity of global MLA @mla, and in
 * @used the bytes its live regions hold (not the capacity reserved by
 * allocations still in progress); -EINVAL if there is no such MLA.
 */
int mlap2p_dev_query(u32 mla, struct mlap2p_topo_dev *dev, u64 *capacity,
		     u64 *used)
{
	struct mlap2p_dev_usage u;
	int ret;

	ret = mlap2p_dev_usage(mla, dev, &u);
	if (!ret) {
		*capacity = u.capacity;
		*used = u.live;
	}
	return ret;
}

void mlap2p_stats_read(struct mlap2p_stats *s)
{
	mutex_lock(&mlap2p_lock);
	*s = mlap2p_stats;
	mutex_unlock(&mlap2p_lock);
}

void mlap2p_stats_rejected(void)
{
	mutex_lock(&mlap2p_lock);
	mlap2p_stats.rejected++;
	mutex_unlock(&mlap2p_lock);
}
