// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Generic netlink plumbing: the attribute policies, one request and its
 * replies (genl_request), and /dev/mlap2p for what only the ioctl ABI
 * answers.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/netlink.h>
#include <netlink/netlink.h>
#include <netlink/genl/ctrl.h>

#include "ctl.h"

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

/* Attribute layouts we accept from the kernel (libnl policies). */
struct nla_policy top_policy[MLAP2P_A_MAX + 1] = {
	[MLAP2P_A_FAMILY]		= { .type = NLA_U32 },
	[MLAP2P_A_NUM_DEVICES]		= { .type = NLA_U32 },
	[MLAP2P_A_CORES_PER_DEVICE]	= { .type = NLA_U32 },
	[MLAP2P_A_LNC]			= { .type = NLA_U32 },
	[MLAP2P_A_POD_TYPE]		= { .type = NLA_U32 },
	[MLAP2P_A_POD_NODES]		= { .type = NLA_U32 },
	[MLAP2P_A_NODE]			= { .type = NLA_U32 },
	[MLAP2P_A_TOPO_GENERATION]	= { .type = NLA_U32 },
	[MLAP2P_A_DEV]			= { .type = NLA_NESTED },
	[MLAP2P_A_REGION]		= { .type = NLA_NESTED },
	[MLAP2P_A_STATS]		= { .type = NLA_NESTED },
	[MLAP2P_A_CAPACITY]		= { .type = NLA_U64 },
	[MLAP2P_A_PID]			= { .type = NLA_U32 },
};

struct nla_policy dev_policy[MLAP2P_A_DEV_MAX + 1] = {
	[MLAP2P_A_DEV_MLA]		= { .type = NLA_U32 },
	[MLAP2P_A_DEV_NODE]		= { .type = NLA_U32 },
	[MLAP2P_A_DEV_PEER_MLA]		= { .type = NLA_U32 },
	[MLAP2P_A_DEV_TORUS_X]		= { .type = NLA_U32 },
	[MLAP2P_A_DEV_TORUS_Y]		= { .type = NLA_U32 },
	[MLAP2P_A_DEV_NEIGHBOURS]	= { .type = NLA_UNSPEC,
					    .maxlen = MLAP2P_MAX_NEIGHBOURS * 4 },
	[MLAP2P_A_DEV_FIRST_CORE]	= { .type = NLA_U32 },
	[MLAP2P_A_DEV_NUM_CORES]	= { .type = NLA_U32 },
	[MLAP2P_A_DEV_CAPACITY]		= { .type = NLA_U64 },
	[MLAP2P_A_DEV_USED]		= { .type = NLA_U64 },
	[MLAP2P_A_DEV_LIVE_BYTES]	= { .type = NLA_U64 },
	[MLAP2P_A_DEV_HWM_BYTES]	= { .type = NLA_U64 },
};

struct nla_policy region_policy[MLAP2P_A_REGION_MAX + 1] = {
	[MLAP2P_A_REGION_ID]		= { .type = NLA_U64 },
	[MLAP2P_A_REGION_DEVICE]	= { .type = NLA_U32 },
	[MLAP2P_A_REGION_SIZE]		= { .type = NLA_U64 },
	[MLAP2P_A_REGION_OWNER_PID]	= { .type = NLA_U32 },
	[MLAP2P_A_REGION_IMPORTERS]	= { .type = NLA_U32 },
	[MLAP2P_A_REGION_MAPPINGS]	= { .type = NLA_U32 },
	[MLAP2P_A_REGION_EXPORTED]	= { .type = NLA_FLAG },
};

struct nla_policy stat_policy[MLAP2P_A_STAT_MAX + 1] = {
	[MLAP2P_A_STAT_ALLOCS]		= { .type = NLA_U64 },
	[MLAP2P_A_STAT_FREES]		= { .type = NLA_U64 },
	[MLAP2P_A_STAT_EXPORTS]		= { .type = NLA_U64 },
	[MLAP2P_A_STAT_OPENS]		= { .type = NLA_U64 },
	[MLAP2P_A_STAT_CLOSES]		= { .type = NLA_U64 },
	[MLAP2P_A_STAT_REJECTED]	= { .type = NLA_U64 },
	[MLAP2P_A_STAT_LIVE_REGIONS]	= { .type = NLA_U64 },
	[MLAP2P_A_STAT_LIVE_BYTES]	= { .type = NLA_U64 },
	[MLAP2P_A_STAT_LIVE_MAPPINGS]	= { .type = NLA_U64 },
	[MLAP2P_A_STAT_HWM_BYTES]	= { .type = NLA_U64 },
	[MLAP2P_A_STAT_HWM_REGIONS]	= { .type = NLA_U64 },
	[MLAP2P_A_STAT_HWM_MAPPINGS]	= { .type = NLA_U64 },
};

struct request {
	struct ctl *c;
	int err;		/* 1 while waiting, then 0 or -errno */
	bool intr;		/* NLM_F_DUMP_INTR seen */
	reply_fn reply;
	void *arg;
};

/* Pull NLMSGERR_ATTR_MSG and _MISS_TYPE out of an ack or DONE message. */
static void parse_extack(struct ctl *c, struct nlattr *attrs, int len)
{
	struct nlattr *tb[NLMSGERR_ATTR_MAX + 1];

	if (len <= 0 || nla_parse(tb, NLMSGERR_ATTR_MAX, attrs, len, NULL))
		return;
	if (tb[NLMSGERR_ATTR_MSG])
		snprintf(c->extack, sizeof(c->extack), "%.*s",
			 nla_len(tb[NLMSGERR_ATTR_MSG]),
			 (const char *)nla_data(tb[NLMSGERR_ATTR_MSG]));
	if (tb[NLMSGERR_ATTR_MISS_TYPE])
		c->miss_type = (int)nla_get_u32(tb[NLMSGERR_ATTR_MISS_TYPE]);
}

static int on_error(struct sockaddr_nl *who, struct nlmsgerr *e, void *arg)
{
	struct nlmsghdr *nlh = (struct nlmsghdr *)((char *)e - NLMSG_HDRLEN);
	struct request *r = arg;
	int off = sizeof(*e);

	(void)who;
	r->err = e->error < 0 ? e->error : -EPROTO;
	if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS))
		return NL_STOP;
	if (!(nlh->nlmsg_flags & NLM_F_CAPPED))
		off += e->msg.nlmsg_len - NLMSG_HDRLEN;
	parse_extack(r->c, (struct nlattr *)((char *)e + NLMSG_ALIGN(off)),
		     (int)nlh->nlmsg_len - NLMSG_HDRLEN - NLMSG_ALIGN(off));
	return NL_STOP;
}

/* NLMSG_DONE ends a dump; it carries the dump's final status. */
static int on_finish(struct nl_msg *msg, void *arg)
{
	struct nlmsghdr *nlh = nlmsg_hdr(msg);
	struct request *r = arg;
	int status = 0;

	if (nlmsg_datalen(nlh) >= (int)sizeof(status))
		memcpy(&status, nlmsg_data(nlh), sizeof(status));
	r->err = status < 0 ? status : 0;
	if (status < 0 && (nlh->nlmsg_flags & NLM_F_ACK_TLVS))
		parse_extack(r->c, (struct nlattr *)((char *)nlmsg_data(nlh) +
						     NLMSG_ALIGN(sizeof(status))),
			     nlmsg_datalen(nlh) - NLMSG_ALIGN(sizeof(status)));
	return NL_STOP;
}

static int on_ack(struct nl_msg *msg, void *arg)
{
	struct request *r = arg;

	(void)msg;
	r->err = 0;
	return NL_STOP;
}

static int on_dump_intr(struct nl_msg *msg, void *arg)
{
	struct request *r = arg;

	(void)msg;
	r->intr = true;
	return NL_OK;
}

static int on_valid(struct nl_msg *msg, void *arg)
{
	struct genlmsghdr *g = nlmsg_data(nlmsg_hdr(msg));
	struct nlattr *tb[MLAP2P_A_MAX + 1];
	struct request *r = arg;
	int ret;

	ret = nla_parse(tb, MLAP2P_A_MAX, genlmsg_attrdata(g, 0),
			genlmsg_attrlen(g, 0), top_policy);
	if (ret < 0) {
		r->err = nle_to_errno(ret);
		return NL_STOP;
	}
	if (r->reply) {
		ret = r->reply(r->c, g, tb, r->arg);
		if (ret < 0) {
			r->err = ret;
			return NL_STOP;
		}
	}
	return NL_SKIP;
}

void ctl_genl_close(struct ctl *c)
{
	nl_socket_free(c->sk);
	c->sk = NULL;
}

/* Connect and resolve the family, once.  0 or -errno. */
int ctl_genl(struct ctl *c)
{
	int one = 1, ret;

	if (c->sk)
		return 0;
	c->sk = nl_socket_alloc();
	if (!c->sk)
		return -ENOMEM;
	ret = genl_connect(c->sk);
	if (ret < 0)
		goto out_free;
	/* Best effort: without it we only lose the kernel's text. */
	setsockopt(nl_socket_get_fd(c->sk), SOL_NETLINK, NETLINK_EXT_ACK,
		   &one, sizeof(one));
	ret = genl_ctrl_resolve(c->sk, MLAP2P_GENL_NAME);
	if (ret < 0) {
		if (ret == -NLE_OBJ_NOTFOUND)
			c->hint = "generic netlink family \"" MLAP2P_GENL_NAME
				  "\" not found; is the mlap2p module loaded?";
		goto out_free;
	}
	c->family = ret;
	if (c->verbose > 1)
		fprintf(stderr, "mlap2pctl: family %s has id %d\n",
			MLAP2P_GENL_NAME, c->family);
	return 0;

out_free:
	ctl_genl_close(c);
	return nle_to_errno(ret);
}

/* The callbacks of one request; -vv adds libnl's message dump. */
static struct nl_cb *request_cb(struct ctl *c, struct request *r)
{
	struct nl_cb *cb = nl_cb_alloc(c->verbose > 1 ? NL_CB_DEBUG :
							 NL_CB_DEFAULT);

	if (!cb)
		return NULL;
	nl_cb_err(cb, NL_CB_CUSTOM, on_error, r);
	nl_cb_set(cb, NL_CB_FINISH, NL_CB_CUSTOM, on_finish, r);
	nl_cb_set(cb, NL_CB_ACK, NL_CB_CUSTOM, on_ack, r);
	nl_cb_set(cb, NL_CB_DUMP_INTR, NL_CB_CUSTOM, on_dump_intr, r);
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, on_valid, r);
	return cb;
}

/*
 * Send one request and feed every reply to @reply until the ack or DONE.
 * Returns 0 or -errno; *@intr (if given) says the kernel flagged a dump
 * as interrupted by concurrent changes.
 */
int genl_request(struct ctl *c, __u8 cmd, int flags, fill_fn fill,
		 void *fill_arg, reply_fn reply, void *arg, bool *intr)
{
	struct request r = { .c = c, .err = 1, .reply = reply, .arg = arg };
	struct nl_msg *msg;
	struct nl_cb *cb;
	int ret;

	ret = ctl_genl(c);
	if (ret)
		return ret;
	c->extack[0] = '\0';
	c->miss_type = -1;

	msg = nlmsg_alloc();
	if (!msg)
		return -ENOMEM;
	cb = request_cb(c, &r);
	if (!cb) {
		ret = -ENOMEM;
		goto out_free_msg;
	}
	if (!genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, c->family, 0, flags,
			 cmd, MLAP2P_GENL_VERSION)) {
		ret = -EMSGSIZE;
		goto out_put_cb;
	}
	if (fill) {
		ret = fill(msg, fill_arg);
		if (ret)
			goto out_put_cb;
	}
	ret = nl_send_auto(c->sk, msg);
	if (ret < 0) {
		ret = nle_to_errno(ret);
		goto out_put_cb;
	}
	while (r.err > 0) {
		ret = nl_recvmsgs(c->sk, cb);
		if (ret < 0 && r.err > 0)
			r.err = nle_to_errno(ret);
	}
	ret = r.err;
	if (intr)
		*intr = r.intr;

out_put_cb:
	nl_cb_put(cb);
out_free_msg:
	nlmsg_free(msg);
	return ret;
}

/* ------------------------------------------------------------------ */
/* /dev/mlap2p                                                         */
/* ------------------------------------------------------------------ */

static int ctl_dev(struct ctl *c)
{
	if (c->dev_fd >= 0)
		return 0;
	c->dev_fd = open(MLAP2P_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (c->dev_fd < 0) {
		int err = -errno;

		if (err == -ENOENT)
			c->hint = MLAP2P_DEVICE_PATH
				  " is missing; is the mlap2p module loaded?";
		return err;
	}
	return 0;
}

int dev_ioctl(struct ctl *c, unsigned long req, void *arg)
{
	int ret = ctl_dev(c);

	if (ret)
		return ret;
	return ioctl(c->dev_fd, req, arg) ? -errno : 0;
}
