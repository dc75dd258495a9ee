// SPDX-License-Identifier: GPL-2.0
/*
 * mlap2p generic netlink family "mlap2p": topology get, dump and set, region
 * get and dump, the counters, and the "events" multicast group.  The
 * contract of every command is written down in uapi/linux/mlap2p.h.
 *
 * Validation.  resv_start_op stays 0, so every op is validated strictly by
 * the core: unknown attributes, wrong lengths and values outside the
 * policies' ranges are rejected with an extack message before a handler
 * runs.  Ops that take no attributes have no policy, so the core rejects
 * any attribute sent to them.  Handlers add an extack message to every
 * rejection of their own.
 *
 * Credentials.  Handlers run in the sending task's context.
 * netlink_capable() checks the sender's capability over the initial user
 * namespace and, only when the request was sent without a destination
 * address (send(), write(): no NETLINK_SKB_DST), the socket opener's as
 * well; with sendto()/sendmsg() naming an address the sender alone counts.
 *
 * Who sees which region.  CAP_SYS_ADMIN (as above) sees every region.  Anyone else
 * sees the regions that one of its open /dev/mlap2p files holds a handle
 * to, owned or imported, collected from the caller's file table when the
 * request arrives (in .start for a dump) into an xarray set of region ids:
 * each open file is read once however many fds name it, and no
 * allocation is larger than an xarray node (mlap2p_current_region_ids()).
 *
 * Dumps keep a cursor: the next MLA, or the next region id (regions are
 * walked in id order, see mlap2p_region_gather()).
 * Each message is stamped with a sequence number, the topology generation
 * or the region list's change counter, so a change between or during the
 * passes of a dump sets NLM_F_DUMP_INTR on a later message or on DONE.
 * The cursor alone already makes every object that lives through the
 * whole dump appear exactly once.
 *
 * Locking.  State is read through region.c's accessors, which take
 * mlap2p_lock; the region walk callback runs under it and only copies
 * views into the dump's own memory.  The caller's handle tables are read by
 * mlap2p_current_region_ids() before any region call, which keeps the lock
 * order of mlap2p.h.  The one lock here, mlap2p_genl_set_lock, is taken
 * outside all of those.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/capability.h>
#include <linux/errno.h>
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/xarray.h>
#include <net/genetlink.h>
#include <net/net_namespace.h>
#include <net/netlink.h>

#include "mlap2p.h"

enum mlap2p_genl_mcgrp {
	MLAP2P_MCGRP_EVENTS,
};

static struct genl_family mlap2p_genl_family;

/* ------------------------------------------------------------------ */
/* Policies                                                            */
/* ------------------------------------------------------------------ */

/* Not const: 6.1's nla_policy points to it without const. */
static struct netlink_range_validation mlap2p_capacity_range = {
	.min = PAGE_SIZE,
	.max = MLAP2P_CAPACITY_MAX,
};

/* SET_TOPO: ranges the rule tables never exceed; the rest is validated. */
static const struct nla_policy mlap2p_set_topo_policy[MLAP2P_A_CAPACITY + 1] = {
	[MLAP2P_A_FAMILY] = NLA_POLICY_RANGE(NLA_U32, MLAP2P_FAMILY_TRN1,
					     MLAP2P_FAMILY_TRN3),
	[MLAP2P_A_NUM_DEVICES] = NLA_POLICY_RANGE(NLA_U32, 1,
						  MLAP2P_TOPO_MAX_DEVICES),
	[MLAP2P_A_CORES_PER_DEVICE] =
		NLA_POLICY_RANGE(NLA_U32, 1, MLAP2P_TOPO_MAX_CORES_PER_DEV),
	[MLAP2P_A_LNC] = NLA_POLICY_RANGE(NLA_U32, 1, 2),
	[MLAP2P_A_POD_TYPE] = NLA_POLICY_MAX(NLA_U32, MLAP2P_POD_SWITCH),
	[MLAP2P_A_POD_NODES] = NLA_POLICY_RANGE(NLA_U32, 1,
						MLAP2P_TOPO_MAX_POD_NODES),
	[MLAP2P_A_NODE] = NLA_POLICY_MAX(NLA_U32,
					 MLAP2P_TOPO_MAX_POD_NODES - 1),
	[MLAP2P_A_CAPACITY] = NLA_POLICY_FULL_RANGE(NLA_U64,
						    &mlap2p_capacity_range),
};

/* GET_REGION: the selector nest. */
static const struct nla_policy
mlap2p_region_sel_policy[MLAP2P_A_REGION_DEVICE + 1] = {
	[MLAP2P_A_REGION_ID] = NLA_POLICY_MIN(NLA_U64, 1),
	[MLAP2P_A_REGION_DEVICE] = NLA_POLICY_MAX(NLA_U32,
						  MLAP2P_MAX_MLAS - 1),
};

static const struct nla_policy mlap2p_get_region_policy[MLAP2P_A_REGION + 1] = {
	[MLAP2P_A_REGION] = NLA_POLICY_NESTED(mlap2p_region_sel_policy),
};

/* ------------------------------------------------------------------ */
/* Message bodies                                                      */
/* ------------------------------------------------------------------ */

static int mlap2p_genl_put_summary(struct sk_buff *skb,
				   const struct mlap2p_config *c)
{
	const struct mlap2p_topo *t = &c->topo;

	if (nla_put_u32(skb, MLAP2P_A_FAMILY, t->family) ||
	    nla_put_u32(skb, MLAP2P_A_NUM_DEVICES, t->num_devices) ||
	    nla_put_u32(skb, MLAP2P_A_CORES_PER_DEVICE, t->cores_per_device) ||
	    nla_put_u32(skb, MLAP2P_A_LNC, t->lnc) ||
	    nla_put_u32(skb, MLAP2P_A_POD_TYPE, t->pod_type) ||
	    nla_put_u32(skb, MLAP2P_A_POD_NODES, t->pod_nodes) ||
	    nla_put_u32(skb, MLAP2P_A_NODE, t->node) ||
	    nla_put_u32(skb, MLAP2P_A_TOPO_GENERATION, c->generation) ||
	    nla_put_u64_64bit(skb, MLAP2P_A_CAPACITY, c->dev_capacity,
			      MLAP2P_A_PAD))
		return -EMSGSIZE;
	return 0;
}

/* DEV_CAPACITY, DEV_USED, DEV_LIVE_BYTES and DEV_HWM_BYTES of one MLA. */
static int mlap2p_genl_put_dev_usage(struct sk_buff *skb,
				     const struct mlap2p_dev_usage *u)
{
	if (nla_put_u64_64bit(skb, MLAP2P_A_DEV_CAPACITY, u->capacity,
			      MLAP2P_A_DEV_PAD) ||
	    nla_put_u64_64bit(skb, MLAP2P_A_DEV_USED, u->used,
			      MLAP2P_A_DEV_PAD) ||
	    nla_put_u64_64bit(skb, MLAP2P_A_DEV_LIVE_BYTES, u->live,
			      MLAP2P_A_DEV_PAD) ||
	    nla_put_u64_64bit(skb, MLAP2P_A_DEV_HWM_BYTES, u->hwm,
			      MLAP2P_A_DEV_PAD))
		return -EMSGSIZE;
	return 0;
}

static int mlap2p_genl_put_dev(struct sk_buff *skb, u32 mla,
			       const struct mlap2p_topo_dev *d,
			       const struct mlap2p_dev_usage *u)
{
	struct nlattr *nest;

	nest = nla_nest_start(skb, MLAP2P_A_DEV);
	if (!nest)
		return -EMSGSIZE;
	if (nla_put_u32(skb, MLAP2P_A_DEV_MLA, mla) ||
	    nla_put_u32(skb, MLAP2P_A_DEV_NODE, d->node) ||
	    nla_put_u32(skb, MLAP2P_A_DEV_PEER_MLA, d->peer_mla) ||
	    nla_put_u32(skb, MLAP2P_A_DEV_TORUS_X, d->torus_x) ||
	    nla_put_u32(skb, MLAP2P_A_DEV_TORUS_Y, d->torus_y) ||
	    nla_put(skb, MLAP2P_A_DEV_NEIGHBOURS,
		    d->num_neighbours * sizeof(d->neighbours[0]),
		    d->neighbours) ||
	    nla_put_u32(skb, MLAP2P_A_DEV_FIRST_CORE, d->first_core) ||
	    nla_put_u32(skb, MLAP2P_A_DEV_NUM_CORES, d->num_cores) ||
	    mlap2p_genl_put_dev_usage(skb, u)) {
		nla_nest_cancel(skb, nest);
		return -EMSGSIZE;
	}
	nla_nest_end(skb, nest);
	return 0;
}

static int mlap2p_genl_put_region(struct sk_buff *skb,
				  const struct mlap2p_region_view *v)
{
	struct nlattr *nest;

	nest = nla_nest_start(skb, MLAP2P_A_REGION);
	if (!nest)
		return -EMSGSIZE;
	if (nla_put_u64_64bit(skb, MLAP2P_A_REGION_ID, v->id,
			      MLAP2P_A_REGION_PAD) ||
	    nla_put_u32(skb, MLAP2P_A_REGION_DEVICE, v->device) ||
	    nla_put_u64_64bit(skb, MLAP2P_A_REGION_SIZE, v->size,
			      MLAP2P_A_REGION_PAD) ||
	    nla_put_u32(skb, MLAP2P_A_REGION_OWNER_PID, v->owner_pid) ||
	    nla_put_u32(skb, MLAP2P_A_REGION_IMPORTERS, v->importers) ||
	    nla_put_u32(skb, MLAP2P_A_REGION_MAPPINGS, v->mappings) ||
	    (v->exported && nla_put_flag(skb, MLAP2P_A_REGION_EXPORTED))) {
		nla_nest_cancel(skb, nest);
		return -EMSGSIZE;
	}
	nla_nest_end(skb, nest);
	return 0;
}

/* Start a dump message answering @cb, stamped for consistency. */
static void *mlap2p_genl_dump_put(struct sk_buff *skb,
				  struct netlink_callback *cb, u8 cmd)
{
	void *hdr;

	hdr = genlmsg_put(skb, NETLINK_CB(cb->skb).portid, cb->nlh->nlmsg_seq,
			  &mlap2p_genl_family, NLM_F_MULTI, cmd);
	if (hdr)
		genl_dump_check_consistent(cb, hdr);
	return hdr;
}

/* ------------------------------------------------------------------ */
/* GET_TOPO                                                            */
/* ------------------------------------------------------------------ */

static int mlap2p_genl_get_topo(struct sk_buff *skb, struct genl_info *info)
{
	struct mlap2p_config cfg;
	struct sk_buff *msg;
	void *hdr;

	mlap2p_config_get(&cfg);
	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	hdr = genlmsg_put_reply(msg, info, &mlap2p_genl_family, 0,
				MLAP2P_CMD_GET_TOPO);
	if (!hdr || mlap2p_genl_put_summary(msg, &cfg)) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);
}

struct mlap2p_topo_dump {
	u32 next_mla;
};

static struct mlap2p_topo_dump *
mlap2p_topo_dump_ctx(struct netlink_callback *cb)
{
	BUILD_BUG_ON(sizeof(struct mlap2p_topo_dump) > sizeof(cb->ctx));
	return (struct mlap2p_topo_dump *)cb->ctx;
}

/* One message per MLA of the pod, from ctx->next_mla on. */
static int mlap2p_genl_dump_topo(struct sk_buff *skb,
				 struct netlink_callback *cb)
{
	struct mlap2p_topo_dump *ctx = mlap2p_topo_dump_ctx(cb);
	struct mlap2p_dev_usage usage;
	struct mlap2p_topo_dev dev;
	struct mlap2p_config cfg;
	int ret = 0;
	u32 total;
	void *hdr;

	mlap2p_config_get(&cfg);
	cb->seq = cfg.generation;
	total = mlap2p_topo_total_mlas(&cfg.topo);
	for (; ctx->next_mla < total; ctx->next_mla++) {
		/* Fails only if the topology shrank since: DUMP_INTR. */
		if (mlap2p_dev_usage(ctx->next_mla, &dev, &usage))
			break;
		hdr = mlap2p_genl_dump_put(skb, cb, MLAP2P_CMD_GET_TOPO);
		if (!hdr) {
			ret = -EMSGSIZE;
			break;
		}
		ret = mlap2p_genl_put_dev(skb, ctx->next_mla, &dev, &usage);
		if (ret) {
			genlmsg_cancel(skb, hdr);
			break;
		}
		genlmsg_end(skb, hdr);
	}
	/* A change during this pass flags the next message or DONE. */
	mlap2p_config_get(&cfg);
	cb->seq = cfg.generation;
	if (ret && !skb->len)
		return ret;
	return skb->len;
}

/* ------------------------------------------------------------------ */
/* SET_TOPO                                                            */
/* ------------------------------------------------------------------ */

/* The u32 fields SET_TOPO may replace besides the family. */
static const struct {
	int attr;
	size_t offset;
} mlap2p_topo_fields[] = {
	{ MLAP2P_A_NUM_DEVICES, offsetof(struct mlap2p_topo, num_devices) },
	{ MLAP2P_A_CORES_PER_DEVICE,
	  offsetof(struct mlap2p_topo, cores_per_device) },
	{ MLAP2P_A_LNC, offsetof(struct mlap2p_topo, lnc) },
	{ MLAP2P_A_POD_TYPE, offsetof(struct mlap2p_topo, pod_type) },
	{ MLAP2P_A_POD_NODES, offsetof(struct mlap2p_topo, pod_nodes) },
	{ MLAP2P_A_NODE, offsetof(struct mlap2p_topo, node) },
};

static u32 mlap2p_topo_field_get(const struct mlap2p_topo *t, size_t i)
{
	u32 v;

	memcpy(&v, (const u8 *)t + mlap2p_topo_fields[i].offset, sizeof(v));
	return v;
}

static void mlap2p_topo_field_set(struct mlap2p_topo *t, size_t i, u32 v)
{
	memcpy((u8 *)t + mlap2p_topo_fields[i].offset, &v, sizeof(v));
}

/* Why attribute @a (MLAP2P_A_*) alone can make a topology invalid. */
static void mlap2p_genl_topo_msg(struct netlink_ext_ack *extack, int attr,
				 const struct nlattr *a)
{
	switch (attr) {
	case MLAP2P_A_NUM_DEVICES:
		NL_SET_ERR_MSG_ATTR(extack, a,
				    "MLA count not valid for this family (torus size, pairs)");
		break;
	case MLAP2P_A_CORES_PER_DEVICE:
		NL_SET_ERR_MSG_ATTR(extack, a,
				    "cores per MLA must be a multiple of the LNC");
		break;
	case MLAP2P_A_LNC:
		NL_SET_ERR_MSG_ATTR(extack, a,
				    "LNC not allowed for this family or does not divide the cores");
		break;
	case MLAP2P_A_POD_TYPE:
		NL_SET_ERR_MSG_ATTR(extack, a,
				    "pod type not allowed for this family, or pod_nodes does not fit it");
		break;
	case MLAP2P_A_POD_NODES:
		NL_SET_ERR_MSG_ATTR(extack, a,
				    "pod_nodes must be 1 without a pod and 2 or more with one");
		break;
	default:
		NL_SET_ERR_MSG_ATTR(extack, a, "node must be below pod_nodes");
		break;
	}
}

/*
 * @t failed validation.  Point extack at an attribute that alone makes it
 * fail: one whose field, put back to its value in @base, makes the rest
 * valid.  Otherwise a general message.
 */
static void mlap2p_genl_topo_blame(struct genl_info *info,
				   const struct mlap2p_topo *base,
				   const struct mlap2p_topo *t)
{
	struct mlap2p_topo try;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(mlap2p_topo_fields); i++) {
		int attr = mlap2p_topo_fields[i].attr;

		if (!info->attrs[attr])
			continue;
		try = *t;
		mlap2p_topo_field_set(&try, i, mlap2p_topo_field_get(base, i));
		if (!mlap2p_topo_validate(&try)) {
			mlap2p_genl_topo_msg(info->extack, attr,
					     info->attrs[attr]);
			return;
		}
	}
	NL_SET_ERR_MSG_ATTR(info->extack, info->attrs[MLAP2P_A_FAMILY],
			    "topology not valid (see docs/topology.md)");
}

/*
 * Build the requested topology in @t: a new family starts from its
 * defaults, otherwise the current topology does; each attribute replaces
 * one field.  @base gets the starting point.
 */
static bool mlap2p_genl_topo_build(struct genl_info *info,
				   struct mlap2p_topo *base,
				   struct mlap2p_topo *t)
{
	struct mlap2p_config cfg;
	bool any = false;
	size_t i;

	mlap2p_config_get(&cfg);
	*base = cfg.topo;
	if (info->attrs[MLAP2P_A_FAMILY]) {
		u32 fam = nla_get_u32(info->attrs[MLAP2P_A_FAMILY]);

		/* In range by policy, so the defaults exist. */
		if (fam != base->family)
			mlap2p_topo_defaults(base, fam);
		any = true;
	}
	*t = *base;
	for (i = 0; i < ARRAY_SIZE(mlap2p_topo_fields); i++) {
		struct nlattr *a = info->attrs[mlap2p_topo_fields[i].attr];

		if (!a)
			continue;
		mlap2p_topo_field_set(t, i, nla_get_u32(a));
		any = true;
	}
	return any || info->attrs[MLAP2P_A_CAPACITY];
}

static void mlap2p_genl_notify_topo(void);

/*
 * Serialises SET_TOPO from reading the current topology to sending the
 * event, so two requests never merge into the same old topology and the
 * events go out in generation order.
 */
static DEFINE_MUTEX(mlap2p_genl_set_lock);

static int mlap2p_genl_set_topo(struct sk_buff *skb, struct genl_info *info)
{
	struct mlap2p_topo base, t;
	u64 capacity = 0;
	int ret;

	/*
	 * What GENL_ADMIN_PERM would check (the family lives in init_net
	 * only, so over the initial user namespace; see "Credentials"
	 * above), but here it can say why.  The core has validated the
	 * attributes by now, so a bad value gives EINVAL or ERANGE even to
	 * a caller without the capability (documented).
	 */
	if (!netlink_capable(skb, CAP_NET_ADMIN)) {
		NL_SET_ERR_MSG(info->extack,
			       "changing the topology needs CAP_NET_ADMIN");
		return -EPERM;
	}

	mutex_lock(&mlap2p_genl_set_lock);
	if (!mlap2p_genl_topo_build(info, &base, &t)) {
		NL_SET_ERR_MSG(info->extack, "no topology attribute given");
		ret = -EINVAL;
		goto out_unlock;
	}
	if (mlap2p_topo_validate(&t)) {
		mlap2p_genl_topo_blame(info, &base, &t);
		ret = -EINVAL;
		goto out_unlock;
	}
	if (info->attrs[MLAP2P_A_CAPACITY])
		capacity = nla_get_u64(info->attrs[MLAP2P_A_CAPACITY]);

	ret = mlap2p_config_set(&t, capacity);
	if (ret == -EBUSY)
		NL_SET_ERR_MSG(info->extack,
			       "regions are live; the topology changes only while none exists");
	else if (ret)
		NL_SET_ERR_MSG(info->extack, "topology or capacity not valid");
	else
		mlap2p_genl_notify_topo();
out_unlock:
	mutex_unlock(&mlap2p_genl_set_lock);
	return ret;
}

/* ------------------------------------------------------------------ */
/* GET_REGION                                                          */
/* ------------------------------------------------------------------ */

/* What a GET_REGION request asks for and who asks. */
struct mlap2p_region_sel {
	u64 id;			/* 0: any */
	struct xarray held;	/* unless @all: ids of the caller's regions */
	u32 device;		/* MLAP2P_NO_MLA: any */
	bool all;		/* CAP_SYS_ADMIN: every region is visible */
};

static int mlap2p_region_sel_parse(struct nlattr *nest,
				   struct mlap2p_region_sel *sel,
				   struct netlink_ext_ack *extack)
{
	struct nlattr *tb[ARRAY_SIZE(mlap2p_region_sel_policy)];
	int ret;

	sel->id = 0;
	sel->device = MLAP2P_NO_MLA;
	if (!nest)
		return 0;
	ret = nla_parse_nested(tb, ARRAY_SIZE(tb) - 1, nest,
			       mlap2p_region_sel_policy, extack);
	if (ret)
		return ret;
	if (tb[MLAP2P_A_REGION_ID])
		sel->id = nla_get_u64(tb[MLAP2P_A_REGION_ID]);
	if (tb[MLAP2P_A_REGION_DEVICE])
		sel->device = nla_get_u32(tb[MLAP2P_A_REGION_DEVICE]);
	return 0;
}

/* Who asks: @skb is the request.  Call in the requester's context. */
static int mlap2p_region_sel_who(struct sk_buff *skb,
				 struct mlap2p_region_sel *sel)
{
	sel->all = netlink_capable(skb, CAP_SYS_ADMIN);
	if (sel->all) {
		xa_init(&sel->held);
		return 0;
	}
	return mlap2p_current_region_ids(&sel->held);
}

static bool mlap2p_region_sel_match(struct mlap2p_region_sel *sel,
				    const struct mlap2p_region_view *v)
{
	if (sel->id && v->id != sel->id)
		return false;
	if (sel->device != MLAP2P_NO_MLA && v->device != sel->device)
		return false;
	if (sel->all)
		return true;
	/* See mlap2p_current_region_ids(): such ids are never in the set. */
	return (unsigned long)v->id == v->id && xa_load(&sel->held, v->id);
}

static int mlap2p_genl_get_region(struct sk_buff *skb, struct genl_info *info)
{
	struct nlattr *nest = info->attrs[MLAP2P_A_REGION];
	struct mlap2p_region_sel sel = { };
	struct mlap2p_region_view v;
	struct sk_buff *msg;
	bool found;
	void *hdr;
	int ret;

	if (GENL_REQ_ATTR_CHECK(info, MLAP2P_A_REGION))
		return -EINVAL;
	ret = mlap2p_region_sel_parse(nest, &sel, info->extack);
	if (ret)
		return ret;
	if (!sel.id) {
		NL_SET_ERR_ATTR_MISS(info->extack, nest, MLAP2P_A_REGION_ID);
		NL_SET_ERR_MSG(info->extack, "region id missing");
		return -EINVAL;
	}
	ret = mlap2p_region_sel_who(skb, &sel);
	if (ret)
		return ret;
	found = !mlap2p_region_view_id(sel.id, &v) &&
		mlap2p_region_sel_match(&sel, &v);
	xa_destroy(&sel.held);
	if (!found) {
		NL_SET_ERR_MSG_ATTR(info->extack, nest, "no such region");
		return -ENOENT;
	}

	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	hdr = genlmsg_put_reply(msg, info, &mlap2p_genl_family, 0,
				MLAP2P_CMD_GET_REGION);
	if (!hdr || mlap2p_genl_put_region(msg, &v)) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);
}

/*
 * A dump pass walks the live regions at or above the cursor, in id order,
 * and copies the first MLAP2P_DUMP_BATCH it may show; then sends them as
 * far as they fit and moves the cursor past the last one sent.  No region
 * that lives through the dump can be passed over, and none is sent twice.
 */
#define MLAP2P_DUMP_BATCH	256

struct mlap2p_region_dump {
	struct mlap2p_region_sel sel;
	u64 next_id;		/* the cursor: ids below it are done */
	bool end;		/* the last pass sent everything left */
	u32 seq;		/* the region list's, read with the walk */
	unsigned int nr;	/* views the last walk kept, in id order */
	struct mlap2p_region_view batch[MLAP2P_DUMP_BATCH];
};

/* cb->ctx holds only a pointer: the state is too big for it. */
static struct mlap2p_region_dump **
mlap2p_region_dump_ctx(struct netlink_callback *cb)
{
	BUILD_BUG_ON(sizeof(struct mlap2p_region_dump *) > sizeof(cb->ctx));
	return (struct mlap2p_region_dump **)cb->ctx;
}

/* Region walk callback, under mlap2p_lock: keep the next batch. */
static int mlap2p_region_gather(const struct mlap2p_region_view *v,
				void *arg)
{
	struct mlap2p_region_dump *d = arg;

	if (!mlap2p_region_sel_match(&d->sel, v))
		return 0;
	d->batch[d->nr++] = *v;
	return d->nr == MLAP2P_DUMP_BATCH;	/* full: stop the walk */
}

static void mlap2p_region_dump_free(struct mlap2p_region_dump *d)
{
	if (d)
		xa_destroy(&d->sel.held);
	kvfree(d);
}

static int mlap2p_genl_region_start(struct netlink_callback *cb)
{
	struct nlattr *tb[ARRAY_SIZE(mlap2p_get_region_policy)];
	struct mlap2p_region_dump *d;
	int ret;

	d = kvzalloc(sizeof(*d), GFP_KERNEL);
	if (!d)
		return -ENOMEM;
	xa_init(&d->sel.held);
	/* The core validated the request already; this only finds the nest. */
	ret = nlmsg_parse(cb->nlh, GENL_HDRLEN, tb, ARRAY_SIZE(tb) - 1,
			  mlap2p_get_region_policy, cb->extack);
	if (!ret)
		ret = mlap2p_region_sel_parse(tb[MLAP2P_A_REGION], &d->sel,
					      cb->extack);
	if (!ret)
		ret = mlap2p_region_sel_who(cb->skb, &d->sel);
	if (ret) {
		mlap2p_region_dump_free(d);
		return ret;
	}
	d->next_id = 1;
	*mlap2p_region_dump_ctx(cb) = d;
	return 0;
}

static int mlap2p_genl_region_done(struct netlink_callback *cb)
{
	mlap2p_region_dump_free(*mlap2p_region_dump_ctx(cb));
	return 0;
}

static int mlap2p_genl_dump_region(struct sk_buff *skb,
				   struct netlink_callback *cb)
{
	struct mlap2p_region_dump *d = *mlap2p_region_dump_ctx(cb);
	unsigned int i;
	void *hdr;
	int ret;

	if (d->end)
		return 0;
	d->nr = 0;
	ret = mlap2p_region_for_each(d->next_id, &d->seq,
				     mlap2p_region_gather, d);
	if (ret < 0)
		return ret;

	/* +1: a zero seq would switch the consistency check off. */
	cb->seq = d->seq + 1;
	for (i = 0; i < d->nr; i++) {
		hdr = mlap2p_genl_dump_put(skb, cb, MLAP2P_CMD_GET_REGION);
		if (!hdr)
			break;
		if (mlap2p_genl_put_region(skb, &d->batch[i])) {
			genlmsg_cancel(skb, hdr);
			break;
		}
		genlmsg_end(skb, hdr);
		d->next_id = d->batch[i].id + 1;
	}
	if (i == d->nr && d->nr < MLAP2P_DUMP_BATCH)
		d->end = true;
	if (!i && d->nr)
		return -EMSGSIZE;	/* not even one fits an empty skb */
	return skb->len;
}

/* ------------------------------------------------------------------ */
/* GET_STATS                                                           */
/* ------------------------------------------------------------------ */

/* The STATS nest: every counter of mlap2p_stat_descs[] with an attribute. */
static int mlap2p_genl_put_stats(struct sk_buff *skb,
				 const struct mlap2p_stats *s)
{
	const struct mlap2p_stat_desc *d;
	struct nlattr *nest;
	size_t i;

	nest = nla_nest_start(skb, MLAP2P_A_STATS);
	if (!nest)
		return -EMSGSIZE;
	for (i = 0; i < MLAP2P_NR_STATS; i++) {
		d = &mlap2p_stat_descs[i];
		if (!d->attr)
			continue;
		if (nla_put_u64_64bit(skb, d->attr, mlap2p_stat_get(s, d),
				      MLAP2P_A_STAT_PAD)) {
			nla_nest_cancel(skb, nest);
			return -EMSGSIZE;
		}
	}
	nla_nest_end(skb, nest);
	return 0;
}

/* One DEV nest (MLA, capacity, used, live, high-water mark) per local MLA. */
static int mlap2p_genl_put_usage(struct sk_buff *skb,
				 const struct mlap2p_config *cfg)
{
	u32 first = cfg->topo.node * cfg->topo.num_devices, mla;
	struct mlap2p_dev_usage usage;
	struct mlap2p_topo_dev dev;
	struct nlattr *nest;

	for (mla = first; mla < first + cfg->topo.num_devices; mla++) {
		if (mlap2p_dev_usage(mla, &dev, &usage))
			break;	/* the topology changed meanwhile */
		nest = nla_nest_start(skb, MLAP2P_A_DEV);
		if (!nest)
			return -EMSGSIZE;
		if (nla_put_u32(skb, MLAP2P_A_DEV_MLA, mla) ||
		    mlap2p_genl_put_dev_usage(skb, &usage)) {
			nla_nest_cancel(skb, nest);
			return -EMSGSIZE;
		}
		nla_nest_end(skb, nest);
	}
	return 0;
}

/* Payload of a GET_STATS reply for @num_devices MLAs per node. */
static size_t mlap2p_genl_stats_size(u32 num_devices)
{
	size_t dev = nla_total_size(0) + nla_total_size(sizeof(u32)) +
		     4 * nla_total_size_64bit(sizeof(u64));

	return nla_total_size(0) +
	       MLAP2P_NR_STATS * nla_total_size_64bit(sizeof(u64)) +
	       num_devices * dev;
}

static int mlap2p_genl_get_stats(struct sk_buff *skb, struct genl_info *info)
{
	struct mlap2p_config cfg;
	struct mlap2p_stats s;
	struct sk_buff *msg;
	void *hdr;

	mlap2p_stats_read(&s);
	mlap2p_config_get(&cfg);
	/* Up to 64 MLAs' DEV nests may not fit NLMSG_GOODSIZE. */
	msg = genlmsg_new(mlap2p_genl_stats_size(cfg.topo.num_devices),
			  GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	hdr = genlmsg_put_reply(msg, info, &mlap2p_genl_family, 0,
				MLAP2P_CMD_GET_STATS);
	if (!hdr || mlap2p_genl_put_stats(msg, &s) ||
	    mlap2p_genl_put_usage(msg, &cfg)) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);
}

/* ------------------------------------------------------------------ */
/* Events                                                              */
/* ------------------------------------------------------------------ */

static bool mlap2p_genl_listened(void)
{
	return genl_has_listeners(&mlap2p_genl_family, &init_net,
				  MLAP2P_MCGRP_EVENTS);
}

/* Finish @msg (started with @hdr) with the acting pid and send it. */
static void mlap2p_genl_send_event(struct sk_buff *msg, void *hdr)
{
	if (nla_put_u32(msg, MLAP2P_A_PID, task_tgid_vnr(current))) {
		nlmsg_free(msg);
		return;
	}
	genlmsg_end(msg, hdr);
	genlmsg_multicast(&mlap2p_genl_family, msg, 0, MLAP2P_MCGRP_EVENTS,
			  GFP_KERNEL);
}

/**
 * mlap2p_genl_notify() - multicast one region event
 * @cmd: MLAP2P_CMD_EVENT_REGION_*
 * @r: the region, referenced by the caller
 *
 * Process context, no mlap2p lock held.  Costs nothing without listeners.
 */
void mlap2p_genl_notify(u8 cmd, const struct mlap2p_region *r)
{
	struct mlap2p_region_view v;
	struct sk_buff *msg;
	void *hdr;

	if (!mlap2p_genl_listened())
		return;
	mlap2p_region_view(r, &v);
	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg)
		return;
	hdr = genlmsg_put(msg, 0, 0, &mlap2p_genl_family, 0, cmd);
	if (!hdr || mlap2p_genl_put_region(msg, &v)) {
		nlmsg_free(msg);
		return;
	}
	mlap2p_genl_send_event(msg, hdr);
}

static void mlap2p_genl_notify_topo(void)
{
	struct mlap2p_config cfg;
	struct sk_buff *msg;
	void *hdr;

	if (!mlap2p_genl_listened())
		return;
	mlap2p_config_get(&cfg);
	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg)
		return;
	hdr = genlmsg_put(msg, 0, 0, &mlap2p_genl_family, 0,
			  MLAP2P_CMD_EVENT_TOPO_CHANGE);
	if (!hdr || mlap2p_genl_put_summary(msg, &cfg)) {
		nlmsg_free(msg);
		return;
	}
	mlap2p_genl_send_event(msg, hdr);
}

/* ------------------------------------------------------------------ */
/* The family                                                          */
/* ------------------------------------------------------------------ */

/*
 * GET_TOPO and GET_STATS take no attributes: without a policy the core
 * rejects any.  (A policy with maxattr 0 would instead skip validation.)
 */
static const struct genl_ops mlap2p_genl_ops[] = {
	{
		.cmd		= MLAP2P_CMD_GET_TOPO,
		.doit		= mlap2p_genl_get_topo,
		.dumpit		= mlap2p_genl_dump_topo,
	},
	{
		/* No GENL_ADMIN_PERM: the handler checks, with a message. */
		.cmd		= MLAP2P_CMD_SET_TOPO,
		.doit		= mlap2p_genl_set_topo,
		.policy		= mlap2p_set_topo_policy,
		.maxattr	= ARRAY_SIZE(mlap2p_set_topo_policy) - 1,
	},
	{
		.cmd		= MLAP2P_CMD_GET_REGION,
		.doit		= mlap2p_genl_get_region,
		.start		= mlap2p_genl_region_start,
		.dumpit		= mlap2p_genl_dump_region,
		.done		= mlap2p_genl_region_done,
		.policy		= mlap2p_get_region_policy,
		.maxattr	= ARRAY_SIZE(mlap2p_get_region_policy) - 1,
	},
	{
		.cmd		= MLAP2P_CMD_GET_STATS,
		.doit		= mlap2p_genl_get_stats,
	},
};

/* Events name other users' processes: joining needs CAP_SYS_ADMIN. */
static const struct genl_multicast_group mlap2p_genl_mcgrps[] = {
	[MLAP2P_MCGRP_EVENTS] = {
		.name	= MLAP2P_GENL_MCGRP_EVENTS,
		.flags	= GENL_MCAST_CAP_SYS_ADMIN,
	},
};

/* Handlers lock for themselves: no need for the genl mutex. */
static struct genl_family mlap2p_genl_family __ro_after_init = {
	.name		= MLAP2P_GENL_NAME,
	.version	= MLAP2P_GENL_VERSION,
	.module		= THIS_MODULE,
	.parallel_ops	= true,
	.ops		= mlap2p_genl_ops,
	.n_ops		= ARRAY_SIZE(mlap2p_genl_ops),
	.mcgrps		= mlap2p_genl_mcgrps,
	.n_mcgrps	= ARRAY_SIZE(mlap2p_genl_mcgrps),
};

/**
 * mlap2p_genl_init() - register the "mlap2p" family
 *
 * Return: 0 or the error of genl_register_family().
 */
int mlap2p_genl_init(void)
{
	return genl_register_family(&mlap2p_genl_family);
}

void mlap2p_genl_exit(void)
{
	genl_unregister_family(&mlap2p_genl_family);
}

MODULE_ALIAS_GENL_FAMILY(MLAP2P_GENL_NAME);
