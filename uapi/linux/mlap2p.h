/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR MIT) */
/*
 * mlap2p: emulated ML-accelerator device memory, IPC handles and locality.
 *
 * This header is the one ABI between the mlap2p kernel module and user space
 * (libmlap2p, mlap2pctl, the selftests).  Rules:
 *
 *  - Only fixed-width __u8..__u64 types; every struct is a multiple of 8
 *    bytes with explicit padding.  Pointers travel as __u64.
 *  - Every flags, pad and reserved field must be zero on input; unknown flag
 *    bits and non-zero pad/reserved give -EINVAL.  Output fields that arrive
 *    non-zero are not an error (they are overwritten).
 *  - Unknown ioctl numbers give -ENOTTY.  Numbers are never reused; new
 *    behaviour gets a new number and, where it matters, a feature bit.
 *
 * Objects.  A *region* is a block of emulated device memory that lives on one
 * MLA (device).  A process names a region through a *local handle*, a small
 * integer private to the open file (struct file) that created it.  A region
 * is created by MLAP2P_IOC_MEM_ALLOC (an *owned* handle) or imported with
 * MLAP2P_IOC_IPC_OPEN_HANDLE (an *imported* handle).  Owned handles are
 * released by MEM_FREE, imported ones by IPC_CLOSE_HANDLE; using the wrong
 * call gives -EINVAL, an unknown handle gives -ENOENT.
 *
 * Lifetime.  A region lives while any handle or any mapping refers to it.
 * The owner freeing it (or exiting) never pulls pages from importers; the
 * last reference frees the pages.  A freed region can no longer be opened:
 * IPC_OPEN_HANDLE on a handle whose owner handle is gone gives -ENOENT, even
 * while importers still hold it.
 *
 * IPC handles.  MLAP2P_IOC_IPC_GET_HANDLE returns a 64-byte opaque blob (it
 * fits the seed's p2pConnectInfo.devIpc) carrying a 128-bit random secret.
 * The secret is compared in constant time.  Opening requires the same user
 * namespace and the same euid as the exporter, or CAP_IPC_OWNER (-EACCES
 * otherwise).  A malformed or forged handle gives -ENOENT.
 *
 * Limits (module parameters, reported by GET_INFO).  MEM_ALLOC gives -ENOSPC
 * when the MLA's capacity would be exceeded or the file already holds
 * max_regions_per_file handles (IPC_OPEN_HANDLE too), and -ENOMEM when the
 * file's owned regions would exceed max_bytes_per_file, when a caller
 * without CAP_IPC_LOCK would pass its RLIMIT_MEMLOCK (region pages are
 * charged to the allocating user's locked memory until the region's last
 * reference goes), or when memory runs out.
 * A failed call leaves no handle and no counter change behind.
 *
 * mmap.  Each handle has an opaque mmap cookie, valid only on the file that
 * holds the handle; pass it as the mmap offset.  Mappings must be MAP_SHARED
 * (-EINVAL otherwise), must lie inside the region (-EINVAL otherwise), are not
 * inherited over fork (VM_DONTCOPY) and are never dumped.  A handle opened
 * with MLAP2P_IPC_F_RDONLY maps read-only: PROT_WRITE mmap gives -EACCES and
 * mprotect(PROT_WRITE) fails with EACCES.  Pages read as zero the first time
 * any process sees them.
 *
 * Locality.  Cores are *global logical* core ids across the emulated pod:
 * core = node * cores_per_node + local core, where cores_per_node =
 * num_devices * cores_per_device / lnc.  Devices (MLAs) are global too:
 * mla = node * num_devices + local device.  docs/topology.md holds the rules.
 */
#ifndef _UAPI_LINUX_MLAP2P_H
#define _UAPI_LINUX_MLAP2P_H

#include <linux/const.h>
#include <linux/types.h>
#include <linux/ioctl.h>

#define MLAP2P_DEVICE_NAME	"mlap2p"
#define MLAP2P_DEVICE_PATH	"/dev/mlap2p"

#define MLAP2P_ABI_MAJOR	1
#define MLAP2P_ABI_MINOR	0

/* Feature bits reported by GET_INFO. */
#define MLAP2P_FEAT_IPC_HANDLE	_BITULL(0)	/* 64-byte IPC handles */
#define MLAP2P_FEAT_RDONLY	_BITULL(1)	/* MLAP2P_IPC_F_RDONLY */
#define MLAP2P_FEAT_HUGE_2M	_BITULL(2)	/* 2 MiB-contiguous backing */
#define MLAP2P_FEAT_LOCALITY	_BITULL(3)	/* CAN_ACCESS_PEER, DEV_INFO */
#define MLAP2P_FEAT_GENL	_BITULL(4)	/* generic netlink family */
#define MLAP2P_FEAT_REGION_INFO	_BITULL(5)	/* MLAP2P_IOC_REGION_INFO */

/* Instance families. */
#define MLAP2P_FAMILY_TRN1	1
#define MLAP2P_FAMILY_TRN2	2
#define MLAP2P_FAMILY_TRN3	3

/* Pod types: how nodes of a pod reach each other. */
#define MLAP2P_POD_NONE		0	/* a single node */
#define MLAP2P_POD_P2P		1	/* point-to-point links between nodes */
#define MLAP2P_POD_SWITCH	2	/* a switch (the Trn3 switch pod) */

/* Edge classes, nearest first.  NONE means "not reachable by P2P". */
#define MLAP2P_EDGE_NONE	0
#define MLAP2P_EDGE_LOCAL	1	/* same MLA */
#define MLAP2P_EDGE_D2D		2	/* peer MLA or torus neighbour */
#define MLAP2P_EDGE_RELAY	3	/* same node, through an intermediate MLA */
#define MLAP2P_EDGE_POD		4	/* another node of the same pod */

#define MLAP2P_NO_MLA		0xffffffffU	/* "no intermediate" */
#define MLAP2P_MAX_NEIGHBOURS	8
#define MLAP2P_IPC_HANDLE_SIZE	64

#define MLAP2P_IOC_MAGIC	0xB7

/* MLAP2P_IOC_GET_INFO: ABI version, features, topology summary, limits. */
struct mlap2p_info {
	__u32 abi_major;		/* out: MLAP2P_ABI_MAJOR */
	__u32 abi_minor;		/* out: MLAP2P_ABI_MINOR */
	__u64 features;			/* out: MLAP2P_FEAT_* */
	__u32 family;			/* out: MLAP2P_FAMILY_* */
	__u32 num_devices;		/* out: MLAs per node */
	__u32 cores_per_device;		/* out: physical cores per MLA */
	__u32 lnc;			/* out: logical core size, 1 or 2 */
	__u32 pod_type;			/* out: MLAP2P_POD_* */
	__u32 pod_nodes;		/* out: nodes in the pod (1 without a pod) */
	__u32 node;			/* out: the node this host is */
	__u32 cores_per_node;		/* out: logical cores per node */
	__u64 dev_capacity;		/* out: bytes of memory per MLA */
	__u64 max_bytes_per_file;	/* out: bytes one open file may hold */
	__u32 max_regions_per_file;	/* out: handles one open file may hold */
	__u32 topo_generation;		/* out: bumped on every topology change */
	__u64 reserved[4];		/* out: zero */
};

/* MLAP2P_IOC_DEV_INFO: one MLA. */
struct mlap2p_dev_info {
	__u32 device;			/* in: global MLA id */
	__u32 flags;			/* in: must be 0 */
	__u32 node;			/* out: node of the MLA */
	__u32 local_index;		/* out: index within its node */
	__u32 peer_mla;			/* out: peer MLA, or MLAP2P_NO_MLA */
	__u32 torus_x;			/* out: torus column, or MLAP2P_NO_MLA */
	__u32 torus_y;			/* out: torus row, or MLAP2P_NO_MLA */
	__u32 num_neighbours;		/* out: valid entries of neighbours[] */
	__u32 neighbours[MLAP2P_MAX_NEIGHBOURS]; /* out: D2D neighbour MLAs */
	__u32 first_core;		/* out: first global logical core */
	__u32 num_cores;		/* out: logical cores on the MLA */
	__u64 capacity;			/* out: bytes */
	__u64 used;			/* out: bytes held by live regions */
	__u64 reserved[2];		/* in: must be 0 */
};

/* MLAP2P_IOC_MEM_ALLOC: allocate a region on one MLA. */
#define MLAP2P_MEM_F_CONTIG	_BITUL(0)	/* 2 MiB-contiguous or -ENOMEM */
#define MLAP2P_MEM_F_ALL	(MLAP2P_MEM_F_CONTIG)

struct mlap2p_mem_alloc {
	__u64 size;			/* in: bytes, > 0; rounded up to pages */
	__u32 device;			/* in: global MLA id */
	__u32 flags;			/* in: MLAP2P_MEM_F_* */
	__u32 handle;			/* out: owned local handle */
	__u32 pad;			/* in: must be 0 */
	__u64 alloc_size;		/* out: rounded size */
	__u64 mmap_cookie;		/* out: mmap offset for this file */
	__u64 reserved[2];		/* in: must be 0 */
};

/* MLAP2P_IOC_MEM_FREE and MLAP2P_IOC_IPC_CLOSE_HANDLE. */
struct mlap2p_handle_op {
	__u32 handle;			/* in: local handle */
	__u32 flags;			/* in: must be 0 */
	__u64 reserved;			/* in: must be 0 */
};

/* MLAP2P_IOC_IPC_GET_HANDLE: export an owned region. */
#define MLAP2P_IPC_F_RDONLY	_BITUL(0)	/* importers map read-only */
#define MLAP2P_IPC_F_ALL	(MLAP2P_IPC_F_RDONLY)

struct mlap2p_ipc_get {
	__u32 handle;			/* in: owned local handle */
	__u32 flags;			/* in: MLAP2P_IPC_F_* */
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE]; /* out: opaque */
	__u64 reserved[2];		/* in: must be 0 */
};

/* MLAP2P_IOC_IPC_OPEN_HANDLE: import a region exported by any process. */
struct mlap2p_ipc_open {
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE]; /* in: from IPC_GET_HANDLE */
	__u32 flags;			/* in: must be 0 */
	__u32 handle;			/* out: imported local handle */
	__u32 device;			/* out: MLA the region lives on */
	__u32 access;			/* out: 1 if read-only */
	__u64 size;			/* out: region size */
	__u64 mmap_cookie;		/* out: mmap offset for this file */
	__u64 region_id;		/* out: global region id */
	__u64 reserved[2];		/* in: must be 0 */
};

/* MLAP2P_IOC_CAN_ACCESS_PEER: the real deviceCanAccessPeer. */
struct mlap2p_peer_query {
	__u32 core_a;			/* in: global logical core */
	__u32 core_b;			/* in: global logical core */
	__u32 flags;			/* in: must be 0 */
	__u32 access;			/* out: 1 if P2P can reach, else 0 */
	__u32 edge_class;		/* out: MLAP2P_EDGE_* */
	__u32 intermediate_mla;		/* out: relay MLA or MLAP2P_NO_MLA */
	__u32 mla_a;			/* out: MLA of core_a */
	__u32 mla_b;			/* out: MLA of core_b */
	__u64 reserved[2];		/* in: must be 0 */
};

/* MLAP2P_IOC_REGION_INFO: what a local handle refers to. */
#define MLAP2P_REGION_OWNED	1
#define MLAP2P_REGION_IMPORTED	2

struct mlap2p_region_info {
	__u32 handle;			/* in: local handle */
	__u32 flags;			/* in: must be 0 */
	__u32 kind;			/* out: MLAP2P_REGION_* */
	__u32 device;			/* out: MLA */
	__u64 size;			/* out: bytes */
	__u64 mmap_cookie;		/* out: mmap offset for this file */
	__u64 region_id;		/* out: global region id */
	__u32 importers;		/* out: imported handles, all files */
	__u32 mappings;			/* out: live VMAs, all processes */
	__u32 access;			/* out: 1 if read-only for this file */
	__u32 pad;			/* out: zero */
	__u64 reserved[2];		/* in: must be 0 */
};

#define MLAP2P_IOC_GET_INFO	    _IOR(MLAP2P_IOC_MAGIC, 0x00, struct mlap2p_info)
#define MLAP2P_IOC_DEV_INFO	    _IOWR(MLAP2P_IOC_MAGIC, 0x01, struct mlap2p_dev_info)
#define MLAP2P_IOC_MEM_ALLOC	    _IOWR(MLAP2P_IOC_MAGIC, 0x02, struct mlap2p_mem_alloc)
#define MLAP2P_IOC_MEM_FREE	    _IOW(MLAP2P_IOC_MAGIC, 0x03, struct mlap2p_handle_op)
#define MLAP2P_IOC_IPC_GET_HANDLE   _IOWR(MLAP2P_IOC_MAGIC, 0x04, struct mlap2p_ipc_get)
#define MLAP2P_IOC_IPC_OPEN_HANDLE  _IOWR(MLAP2P_IOC_MAGIC, 0x05, struct mlap2p_ipc_open)
#define MLAP2P_IOC_IPC_CLOSE_HANDLE _IOW(MLAP2P_IOC_MAGIC, 0x06, struct mlap2p_handle_op)
#define MLAP2P_IOC_CAN_ACCESS_PEER  _IOWR(MLAP2P_IOC_MAGIC, 0x07, struct mlap2p_peer_query)
#define MLAP2P_IOC_REGION_INFO	    _IOWR(MLAP2P_IOC_MAGIC, 0x08, struct mlap2p_region_info)

/*
 * Generic netlink family "mlap2p" (mlap2pctl).  Commands and attributes
 * start at 1.  Mutating commands need CAP_NET_ADMIN.  Every command is
 * validated strictly: unknown attributes and wrong lengths give -EINVAL,
 * values out of an attribute's range -ERANGE, each with an extack message
 * and the offset of the attribute; this comes before any capability check.
 * Capabilities are over the initial user namespace, of the sending task,
 * and also of the socket's opener when the request is sent without a
 * destination address (send(), write(); not sendto()/sendmsg() with one).
 *
 * GET_TOPO	doit: the summary: FAMILY, NUM_DEVICES, CORES_PER_DEVICE,
 *		LNC, POD_TYPE, POD_NODES, NODE, TOPO_GENERATION, CAPACITY.
 *		dumpit: one message per MLA of the pod, each one DEV nest
 *		(every DEV_* but DEV_PAD; DEV_LIVE_BYTES and DEV_HWM_BYTES as
 *		GET_STATS gives them), in MLA order; NLM_F_DUMP_INTR if
 *		the topology changed during the dump.
 * SET_TOPO	CAP_NET_ADMIN.  At least one of FAMILY, NUM_DEVICES,
 *		CORES_PER_DEVICE, LNC, POD_TYPE, POD_NODES, NODE, CAPACITY.
 *		A FAMILY other than the current one starts from that family's
 *		defaults, otherwise the current topology is the start; each
 *		attribute given then replaces one field.  The result is
 *		validated as a whole and applied at once, or nothing changes.
 *		-EBUSY while any region lives.  Sends EVENT_TOPO_CHANGE.
 * GET_REGION	doit: a REGION nest with REGION_ID (required) in, one REGION
 *		nest out.  dumpit: one REGION nest per live region, in id
 *		order; a REGION nest with REGION_DEVICE in the request keeps
 *		only that MLA's regions.  Without CAP_SYS_ADMIN a caller sees
 *		only regions that one of its open /dev/mlap2p files holds a
 *		handle to (owned or imported) when the request arrives; doit
 *		gives -ENOENT for the others.  Each open file counts once,
 *		however many fds refer to it, so the cost does not grow with
 *		dup().  A dump walks by region id, so a
 *		region live for the whole dump appears exactly once;
 *		NLM_F_DUMP_INTR says regions came or went meanwhile.
 * GET_STATS	doit: a STATS nest, then one DEV nest (DEV_MLA, DEV_CAPACITY,
 *		DEV_USED, DEV_LIVE_BYTES, DEV_HWM_BYTES) per MLA of this node,
 *		in MLA order.  DEV_USED is the capacity taken, including
 *		regions a MEM_ALLOC is still creating; DEV_LIVE_BYTES counts
 *		live regions only, as STAT_LIVE_BYTES does (summed over the
 *		pod's MLAs it is STAT_LIVE_BYTES), and DEV_HWM_BYTES is its
 *		high-water mark, which never goes down while the topology
 *		stays.  Every successful SET_TOPO (a new TOPO_GENERATION)
 *		sets every MLA's DEV_HWM_BYTES to 0, since MLA ids then name
 *		other devices.  The global STAT_HWM_* marks are kept.
 * EVENT_*	multicast to "events" (joining needs CAP_SYS_ADMIN), one
 *		message per event, sent by the call that caused it.
 *		EVENT_REGION_* carry a REGION nest as GET_REGION gives it,
 *		as of just after the event, and PID; EVENT_TOPO_CHANGE
 *		carries the GET_TOPO summary and PID.  Pids are as seen from
 *		the pid namespace of the process that caused the event.
 */
#define MLAP2P_GENL_NAME	"mlap2p"
#define MLAP2P_GENL_VERSION	1
#define MLAP2P_GENL_MCGRP_EVENTS "events"

enum {
	MLAP2P_CMD_UNSPEC,
	MLAP2P_CMD_GET_TOPO,		/* doit: summary; dumpit: per MLA */
	MLAP2P_CMD_SET_TOPO,		/* admin; -EBUSY while a region lives */
	MLAP2P_CMD_GET_REGION,		/* doit: one region; dumpit */
	MLAP2P_CMD_GET_STATS,		/* doit */
	MLAP2P_CMD_EVENT_REGION_NEW,	/* notifications, multicast "events" */
	MLAP2P_CMD_EVENT_REGION_FREE,
	MLAP2P_CMD_EVENT_REGION_EXPORT,
	MLAP2P_CMD_EVENT_REGION_OPEN,
	MLAP2P_CMD_EVENT_REGION_CLOSE,
	MLAP2P_CMD_EVENT_TOPO_CHANGE,

	__MLAP2P_CMD_MAX,
	MLAP2P_CMD_MAX = __MLAP2P_CMD_MAX - 1
};

/* Attributes; their types are given in each comment. */
enum {
	MLAP2P_A_UNSPEC,
	MLAP2P_A_FAMILY,		/* u32, MLAP2P_FAMILY_* */
	MLAP2P_A_NUM_DEVICES,		/* u32, MLAs per node */
	MLAP2P_A_CORES_PER_DEVICE,	/* u32 */
	MLAP2P_A_LNC,			/* u32, 1 or 2 */
	MLAP2P_A_POD_TYPE,		/* u32, MLAP2P_POD_* */
	MLAP2P_A_POD_NODES,		/* u32 */
	MLAP2P_A_NODE,			/* u32, this host's node */
	MLAP2P_A_TOPO_GENERATION,	/* u32 */
	MLAP2P_A_DEV,			/* nest, one MLA (MLAP2P_A_DEV_*) */
	MLAP2P_A_REGION,		/* nest, one region (MLAP2P_A_REGION_*) */
	MLAP2P_A_STATS,			/* nest, counters (MLAP2P_A_STAT_*) */
	MLAP2P_A_CAPACITY,		/* u64, bytes per MLA */
	MLAP2P_A_PAD,			/* pad for u64 attributes */
	MLAP2P_A_PID,			/* u32, events: the acting process */

	__MLAP2P_A_MAX,
	MLAP2P_A_MAX = __MLAP2P_A_MAX - 1
};

enum {
	MLAP2P_A_DEV_UNSPEC,
	MLAP2P_A_DEV_MLA,		/* u32, global MLA id */
	MLAP2P_A_DEV_NODE,		/* u32 */
	MLAP2P_A_DEV_PEER_MLA,		/* u32 */
	MLAP2P_A_DEV_TORUS_X,		/* u32 */
	MLAP2P_A_DEV_TORUS_Y,		/* u32 */
	MLAP2P_A_DEV_NEIGHBOURS,	/* binary, array of u32 MLA ids */
	MLAP2P_A_DEV_FIRST_CORE,	/* u32 */
	MLAP2P_A_DEV_NUM_CORES,		/* u32 */
	MLAP2P_A_DEV_CAPACITY,		/* u64 */
	MLAP2P_A_DEV_USED,		/* u64, capacity taken (incl. in-flight) */
	MLAP2P_A_DEV_PAD,
	MLAP2P_A_DEV_LIVE_BYTES,	/* u64, bytes of live regions */
	MLAP2P_A_DEV_HWM_BYTES,		/* u64, high-water mark of LIVE_BYTES */

	__MLAP2P_A_DEV_MAX,
	MLAP2P_A_DEV_MAX = __MLAP2P_A_DEV_MAX - 1
};

enum {
	MLAP2P_A_REGION_UNSPEC,
	MLAP2P_A_REGION_ID,		/* u64 */
	MLAP2P_A_REGION_DEVICE,		/* u32 */
	MLAP2P_A_REGION_SIZE,		/* u64 */
	MLAP2P_A_REGION_OWNER_PID,	/* u32, 0 once the owner freed it */
	MLAP2P_A_REGION_IMPORTERS,	/* u32 */
	MLAP2P_A_REGION_MAPPINGS,	/* u32 */
	MLAP2P_A_REGION_EXPORTED,	/* flag */
	MLAP2P_A_REGION_PAD,

	__MLAP2P_A_REGION_MAX,
	MLAP2P_A_REGION_MAX = __MLAP2P_A_REGION_MAX - 1
};

enum {
	MLAP2P_A_STAT_UNSPEC,
	MLAP2P_A_STAT_ALLOCS,		/* u64 */
	MLAP2P_A_STAT_FREES,		/* u64 */
	MLAP2P_A_STAT_EXPORTS,		/* u64 */
	MLAP2P_A_STAT_OPENS,		/* u64 */
	MLAP2P_A_STAT_CLOSES,		/* u64 */
	MLAP2P_A_STAT_REJECTED,		/* u64, forged/stale/denied handles */
	MLAP2P_A_STAT_LIVE_REGIONS,	/* u64 */
	MLAP2P_A_STAT_LIVE_BYTES,	/* u64 */
	MLAP2P_A_STAT_LIVE_MAPPINGS,	/* u64 */
	MLAP2P_A_STAT_HWM_BYTES,	/* u64, high-water mark of live bytes */
	MLAP2P_A_STAT_PAD,
	MLAP2P_A_STAT_HWM_REGIONS,	/* u64, high-water mark of LIVE_REGIONS */
	MLAP2P_A_STAT_HWM_MAPPINGS,	/* u64, high-water mark of LIVE_MAPPINGS */

	__MLAP2P_A_STAT_MAX,
	MLAP2P_A_STAT_MAX = __MLAP2P_A_STAT_MAX - 1
};

#endif /* _UAPI_LINUX_MLAP2P_H */
