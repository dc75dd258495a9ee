// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * mlap2pctl: look at and configure the mlap2p module.
 *
 * Talks to the generic netlink family "mlap2p" (topology, regions, stats,
 * events) with libnl-genl-3, and to /dev/mlap2p for what only the ioctl ABI
 * answers (GET_INFO, CAN_ACCESS_PEER).  Modelled on iw: one command table
 * drives both dispatch and the usage text, handlers return 0, -errno or
 * CMD_USAGE, and main() turns that into the message and the exit status:
 *
 *	0  success
 *	1  failure: "mlap2pctl: <command>: <strerror>", then the kernel's
 *	   extack text as "kernel reports: <text>" when there is one
 *	2  usage error
 *
 * libnl's own error codes (-NLE_*) are turned into -errno in exactly one
 * place, nle_to_errno(); the kernel's nlmsgerr.error is passed on unchanged.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/netlink.h>
#include <netlink/netlink.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>

#include <linux/mlap2p.h>
#include "mlap2p_topo.h"

/* The version: Makefile.common's, via -D or the library's version.h. */
#ifndef MLAP2P_VERSION
#include <mlap2p/version.h>
#define MLAP2P_VERSION MLAP2P_VERSION_STRING
#endif
#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

/* Handler results besides 0 and -errno. */
#define CMD_USAGE	1	/* bad arguments: print the command's usage */

/* How often a dump is retried when the kernel flags it inconsistent. */
#define DUMP_RETRIES	5

struct ctl {
	const char *cmd;	/* "topo set", for messages */
	bool json;
	int verbose;		/* -v: more columns; -vv: libnl debug */
	struct nl_sock *sk;	/* requests, NULL until first needed */
	int family;		/* genl family id */
	int dev_fd;		/* /dev/mlap2p, -1 until first needed */
	const char *hint;	/* second line for the error message */
	char extack[256];	/* the kernel's text for the last failure */
	int miss_type;		/* NLMSGERR_ATTR_MISS_TYPE, or -1 */
};

/* ------------------------------------------------------------------ */
/* Errors and small helpers                                            */
/* ------------------------------------------------------------------ */

/*
 * The one place libnl's -NLE_* codes become -errno.  Anything libnl does
 * not tell us more about becomes -EIO; protocol confusion -EPROTO.
 */
static int nle_to_errno(int nle)
{
	switch (nle < 0 ? -nle : nle) {
	case NLE_SUCCESS:		return 0;
	case NLE_INTR:			return -EINTR;
	case NLE_BAD_SOCK:		return -EBADF;
	case NLE_AGAIN:			return -EAGAIN;
	case NLE_NOMEM:			return -ENOMEM;
	case NLE_EXIST:			return -EEXIST;
	case NLE_INVAL:			return -EINVAL;
	case NLE_RANGE:			return -ERANGE;
	case NLE_MSGSIZE:		return -EMSGSIZE;
	case NLE_OPNOTSUPP:		return -EOPNOTSUPP;
	case NLE_AF_NOSUPPORT:		return -EAFNOSUPPORT;
	case NLE_OBJ_NOTFOUND:		return -ENOENT;
	case NLE_NOATTR:		return -ENODATA;
	case NLE_MISSING_ATTR:		return -ENODATA;
	case NLE_BUSY:			return -EBUSY;
	case NLE_NOACCESS:		return -EACCES;
	case NLE_PERM:			return -EPERM;
	case NLE_NODEV:			return -ENODEV;
	case NLE_DUMP_INTR:		return -EINTR;
	case NLE_MSG_OVERFLOW:		return -EOVERFLOW;
	case NLE_AF_MISMATCH:
	case NLE_SEQ_MISMATCH:
	case NLE_MSG_TRUNC:
	case NLE_MSG_TOOSHORT:
	case NLE_MSGTYPE_NOSUPPORT:
	case NLE_OBJ_MISMATCH:
	case NLE_PROTO_MISMATCH:
	case NLE_PARSE_ERR:
	case NLE_ATTRSIZE:		return -EPROTO;
	default:			return -EIO;
	}
}

/* A decimal or 0x-hex number with nothing after it; no sign. */
static int parse_u64(const char *s, __u64 *out)
{
	unsigned long long v;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_u32(const char *s, __u32 *out)
{
	__u64 v;

	if (parse_u64(s, &v) || v > UINT32_MAX)
		return -EINVAL;
	*out = (__u32)v;
	return 0;
}

/* A byte count with an optional K, M or G suffix (binary units). */
static int parse_size(const char *s, __u64 *out)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno)
		return -EINVAL;
	switch (*end) {
	case '\0':
		break;
	case 'k': case 'K':
		shift = 10;
		break;
	case 'm': case 'M':
		shift = 20;
		break;
	case 'g': case 'G':
		shift = 30;
		break;
	default:
		return -EINVAL;
	}
	if (*end && end[1] && strcmp(end + 1, "iB") && strcmp(end + 1, "B"))
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (__u64)v << shift;
	return 0;
}

/* "64 MiB", "1.5 GiB", "4096 B"; @buf holds at least 32 bytes. */
static const char *fmt_bytes(__u64 v, char *buf, size_t len)
{
	static const char * const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	unsigned int u = 0;
	__u64 whole = v;

	while (whole >= 1024 && u + 1 < ARRAY_SIZE(unit)) {
		whole >>= 10;
		u++;
	}
	if (u == 0 || (v & ((1ULL << (10 * u)) - 1)) == 0)
		snprintf(buf, len, "%" PRIu64 " %s", (uint64_t)whole, unit[u]);
	else
		snprintf(buf, len, "%.1f %s", (double)v / (1ULL << (10 * u)),
			 unit[u]);
	return buf;
}

static const char *name_or_num(const char *name, __u32 v, char *buf,
			       size_t len)
{
	if (name)
		return name;
	snprintf(buf, len, "%u", v);
	return buf;
}

/* ------------------------------------------------------------------ */
/* Generic netlink plumbing                                            */
/* ------------------------------------------------------------------ */

/* Attribute layouts we accept from the kernel (libnl policies). */
static struct nla_policy top_policy[MLAP2P_A_MAX + 1] = {
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

static struct nla_policy dev_policy[MLAP2P_A_DEV_MAX + 1] = {
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

static struct nla_policy region_policy[MLAP2P_A_REGION_MAX + 1] = {
	[MLAP2P_A_REGION_ID]		= { .type = NLA_U64 },
	[MLAP2P_A_REGION_DEVICE]	= { .type = NLA_U32 },
	[MLAP2P_A_REGION_SIZE]		= { .type = NLA_U64 },
	[MLAP2P_A_REGION_OWNER_PID]	= { .type = NLA_U32 },
	[MLAP2P_A_REGION_IMPORTERS]	= { .type = NLA_U32 },
	[MLAP2P_A_REGION_MAPPINGS]	= { .type = NLA_U32 },
	[MLAP2P_A_REGION_EXPORTED]	= { .type = NLA_FLAG },
};

static struct nla_policy stat_policy[MLAP2P_A_STAT_MAX + 1] = {
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

static __u32 get_u32(struct nlattr *a, __u32 dflt)
{
	return a ? nla_get_u32(a) : dflt;
}

static __u64 get_u64(struct nlattr *a, __u64 dflt)
{
	return a ? nla_get_u64(a) : dflt;
}

/*
 * Called once per reply message with its header (for the command and for
 * repeated attributes) and its parsed top-level attributes.
 */
typedef int (*reply_fn)(struct ctl *c, struct genlmsghdr *g,
			struct nlattr **tb, void *arg);
/* Adds a request's attributes; returns 0 or -EMSGSIZE. */
typedef int (*fill_fn)(struct nl_msg *msg, void *arg);

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

static void ctl_genl_close(struct ctl *c)
{
	nl_socket_free(c->sk);
	c->sk = NULL;
}

/* Connect and resolve the family, once.  0 or -errno. */
static int ctl_genl(struct ctl *c)
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
static int genl_request(struct ctl *c, __u8 cmd, int flags, fill_fn fill,
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

static int dev_ioctl(struct ctl *c, unsigned long req, void *arg)
{
	int ret = ctl_dev(c);

	if (ret)
		return ret;
	return ioctl(c->dev_fd, req, arg) ? -errno : 0;
}

/* ------------------------------------------------------------------ */
/* Topology: fetching                                                  */
/* ------------------------------------------------------------------ */

struct topo_dev {
	__u32 mla;
	struct mlap2p_topo_dev d;
	__u64 capacity;
	__u64 used;
};

struct topo_view {
	struct mlap2p_topo t;
	__u32 generation;
	__u64 capacity;
	struct topo_dev *devs;	/* sorted by MLA */
	__u32 nr_devs;
	__u32 cap_devs;
};

static void topo_summary_parse(struct nlattr **tb, struct topo_view *v)
{
	v->t.family = get_u32(tb[MLAP2P_A_FAMILY], 0);
	v->t.num_devices = get_u32(tb[MLAP2P_A_NUM_DEVICES], 0);
	v->t.cores_per_device = get_u32(tb[MLAP2P_A_CORES_PER_DEVICE], 0);
	v->t.lnc = get_u32(tb[MLAP2P_A_LNC], 0);
	v->t.pod_type = get_u32(tb[MLAP2P_A_POD_TYPE], 0);
	v->t.pod_nodes = get_u32(tb[MLAP2P_A_POD_NODES], 0);
	v->t.node = get_u32(tb[MLAP2P_A_NODE], 0);
	v->generation = get_u32(tb[MLAP2P_A_TOPO_GENERATION], 0);
	v->capacity = get_u64(tb[MLAP2P_A_CAPACITY], 0);
}

static int topo_summary_reply(struct ctl *c, struct genlmsghdr *g,
			      struct nlattr **tb, void *arg)
{
	(void)c;
	(void)g;
	topo_summary_parse(tb, arg);
	return 0;
}

static int topo_dev_reply(struct ctl *c, struct genlmsghdr *g,
			  struct nlattr **tb, void *arg)
{
	struct nlattr *d[MLAP2P_A_DEV_MAX + 1];
	struct topo_view *v = arg;
	struct topo_dev *td;
	int ret, n;

	(void)c;
	(void)g;
	if (!tb[MLAP2P_A_DEV])
		return 0;
	ret = nla_parse_nested(d, MLAP2P_A_DEV_MAX, tb[MLAP2P_A_DEV],
			       dev_policy);
	if (ret < 0)
		return nle_to_errno(ret);
	if (!d[MLAP2P_A_DEV_MLA])
		return -EPROTO;
	if (v->nr_devs == v->cap_devs) {
		__u32 cap = v->cap_devs ? 2 * v->cap_devs : 64;
		struct topo_dev *p = realloc(v->devs, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		v->devs = p;
		v->cap_devs = cap;
	}
	td = &v->devs[v->nr_devs++];
	memset(td, 0, sizeof(*td));
	td->mla = nla_get_u32(d[MLAP2P_A_DEV_MLA]);
	td->d.node = get_u32(d[MLAP2P_A_DEV_NODE], 0);
	td->d.peer_mla = get_u32(d[MLAP2P_A_DEV_PEER_MLA], MLAP2P_NO_MLA);
	td->d.torus_x = get_u32(d[MLAP2P_A_DEV_TORUS_X], MLAP2P_NO_MLA);
	td->d.torus_y = get_u32(d[MLAP2P_A_DEV_TORUS_Y], MLAP2P_NO_MLA);
	if (d[MLAP2P_A_DEV_NEIGHBOURS]) {
		n = nla_len(d[MLAP2P_A_DEV_NEIGHBOURS]) / 4;
		memcpy(td->d.neighbours, nla_data(d[MLAP2P_A_DEV_NEIGHBOURS]),
		       (size_t)n * 4);
		td->d.num_neighbours = (__u32)n;
	}
	td->d.first_core = get_u32(d[MLAP2P_A_DEV_FIRST_CORE], 0);
	td->d.num_cores = get_u32(d[MLAP2P_A_DEV_NUM_CORES], 0);
	td->capacity = get_u64(d[MLAP2P_A_DEV_CAPACITY], 0);
	td->used = get_u64(d[MLAP2P_A_DEV_USED], 0);
	return 0;
}

static int cmp_dev(const void *a, const void *b)
{
	const struct topo_dev *x = a, *y = b;

	return x->mla < y->mla ? -1 : x->mla > y->mla;
}

/*
 * Summary plus per-MLA dump.  A topology change between the two (or inside
 * the dump, which the kernel flags) restarts the whole fetch.
 */
static int topo_fetch(struct ctl *c, struct topo_view *v)
{
	__u32 gen;
	int ret, try;
	bool intr;

	for (try = 0; try < DUMP_RETRIES; try++) {
		v->nr_devs = 0;
		ret = genl_request(c, MLAP2P_CMD_GET_TOPO, 0, NULL, NULL,
				   topo_summary_reply, v, NULL);
		if (ret)
			return ret;
		gen = v->generation;
		ret = genl_request(c, MLAP2P_CMD_GET_TOPO, NLM_F_DUMP, NULL,
				   NULL, topo_dev_reply, v, &intr);
		if (ret)
			return ret;
		ret = genl_request(c, MLAP2P_CMD_GET_TOPO, 0, NULL, NULL,
				   topo_summary_reply, v, NULL);
		if (ret)
			return ret;
		if (gen == v->generation && !intr)
			break;
	}
	if (try == DUMP_RETRIES)
		fprintf(stderr, "mlap2pctl: %s: topology kept changing; "
			"showing the last view\n", c->cmd);
	qsort(v->devs, v->nr_devs, sizeof(*v->devs), cmp_dev);
	return 0;
}

static struct topo_dev *topo_find(struct topo_view *v, __u32 mla)
{
	struct topo_dev key = { .mla = mla };

	if (!v->nr_devs)
		return NULL;
	return bsearch(&key, v->devs, v->nr_devs, sizeof(key), cmp_dev);
}

/* ------------------------------------------------------------------ */
/* Topology: printing and drawing                                      */
/* ------------------------------------------------------------------ */

static void print_topo_summary(const struct topo_view *v)
{
	char b1[16], b2[16], b3[32];

	printf("family %s, %u MLAs per node, %u cores per MLA, LNC %u "
	       "(%u logical cores per node)\n",
	       name_or_num(mlap2p_topo_family_name(v->t.family), v->t.family,
			   b1, sizeof(b1)),
	       v->t.num_devices, v->t.cores_per_device, v->t.lnc,
	       mlap2p_topo_cores_per_node(&v->t));
	printf("pod %s, %u node%s, this host is node %u; "
	       "%s per MLA; generation %u\n",
	       name_or_num(mlap2p_topo_pod_name(v->t.pod_type), v->t.pod_type,
			   b2, sizeof(b2)),
	       v->t.pod_nodes, v->t.pod_nodes == 1 ? "" : "s", v->t.node,
	       fmt_bytes(v->capacity, b3, sizeof(b3)), v->generation);
}

static void print_mla(char *buf, size_t len, __u32 mla)
{
	if (mla == MLAP2P_NO_MLA)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%u", mla);
}

static void print_topo_table(struct ctl *c, const struct topo_view *v)
{
	char peer[16], x[16], y[16], cores[32], cap[32], used[32], nb[96];
	__u32 i, k;
	size_t o;

	printf("\n%5s %5s %5s %3s %3s %-9s %10s %10s  %s\n", "MLA", "node",
	       "peer", "x", "y", "cores", "capacity", "used", "neighbours");
	for (i = 0; i < v->nr_devs; i++) {
		const struct topo_dev *td = &v->devs[i];

		if (!c->verbose && td->d.node != v->t.node)
			continue;
		print_mla(peer, sizeof(peer), td->d.peer_mla);
		print_mla(x, sizeof(x), td->d.torus_x);
		print_mla(y, sizeof(y), td->d.torus_y);
		if (td->d.num_cores > 1)
			snprintf(cores, sizeof(cores), "%u-%u",
				 td->d.first_core,
				 td->d.first_core + td->d.num_cores - 1);
		else
			snprintf(cores, sizeof(cores), "%u",
				 td->d.first_core);
		for (k = 0, o = 0, nb[0] = '\0';
		     k < td->d.num_neighbours && o < sizeof(nb); k++)
			o += snprintf(nb + o, sizeof(nb) - o, "%s%u",
				      k ? " " : "", td->d.neighbours[k]);
		printf("%5u %5u %5s %3s %3s %-9s %10s %10s  %s\n", td->mla,
		       td->d.node, peer, x, y, cores,
		       fmt_bytes(td->capacity, cap, sizeof(cap)),
		       fmt_bytes(td->used, used, sizeof(used)), nb);
	}
	if (!c->verbose && v->t.pod_nodes > 1)
		printf("(MLAs of this node only; -v lists the whole pod)\n");
}

/* Decimal digits of @v. */
static int digits(__u32 v)
{
	int n = 1;

	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

/* "[ 5 ]" or "[ 5*]": '*' marks an MLA holding memory; @w digits wide. */
static void cell(const struct topo_view *v, __u32 mla, int w)
{
	struct topo_dev *td = topo_find((struct topo_view *)v, mla);

	printf("[%*u%c]", w, mla, td && td->used ? '*' : ' ');
}

/* Column of the middle of cell @i of a row of cells @w digits wide. */
static int cell_mid(int indent, __u32 i, int w)
{
	return indent + (int)i * (w + 5) + 1 + w / 2;
}

/*
 * A line with @mark under the middle of each cell of a row of @n cells;
 * @text[i], if given, starts there instead.  No trailing blanks.
 */
static void marks(int indent, __u32 n, int w, const char *mark)
{
	char line[MLAP2P_TOPO_MAX_DEVICES * 10];
	int end = 0, col;
	__u32 i;

	memset(line, ' ', sizeof(line));
	for (i = 0; i < n; i++) {
		col = cell_mid(indent, i, w);
		if (col + 3 >= (int)sizeof(line))
			break;
		if (!strcmp(mark, "x"))
			end = col + snprintf(line + col, 4, "x%u", i);
		else
			end = col + snprintf(line + col, 2, "%s", mark);
		line[end] = ' ';
	}
	printf("%.*s\n", end, line);
}

/* This node's MLAs laid out on their torus coordinates. */
static bool draw_torus(const struct topo_view *v)
{
	__u32 base = v->t.node * v->t.num_devices, w = 0, h = 0, i, x, y;
	__u32 grid[16 * 16];
	int dw = digits(base + v->t.num_devices - 1);

	for (i = 0; i < ARRAY_SIZE(grid); i++)
		grid[i] = MLAP2P_NO_MLA;
	for (i = 0; i < v->t.num_devices; i++) {
		struct topo_dev *td = topo_find((struct topo_view *)v, base + i);

		if (!td || td->d.torus_x >= 16 || td->d.torus_y >= 16)
			return false;
		w = td->d.torus_x + 1 > w ? td->d.torus_x + 1 : w;
		h = td->d.torus_y + 1 > h ? td->d.torus_y + 1 : h;
		grid[td->d.torus_y * 16 + td->d.torus_x] = td->mla;
	}
	if (!w || w * h != v->t.num_devices)
		return false;

	printf("\nnode %u: %ux%u torus; rows and columns wrap around "
	       "(* = memory in use)\n\n", v->t.node, w, h);
	marks(8, w, dw, "x");
	marks(8, w, dw, "^");
	for (y = 0; y < h; y++) {
		if (y)
			marks(8, w, dw, "|");
		printf("  y%-2u <-", y);
		for (x = 0; x < w; x++) {
			if (grid[y * 16 + x] == MLAP2P_NO_MLA)
				return false;
			cell(v, grid[y * 16 + x], dw);
			printf(x + 1 < w ? "--" : "->\n");
		}
	}
	marks(8, w, dw, "v");
	return true;
}

static bool is_neighbour(const struct topo_dev *td, __u32 mla)
{
	__u32 k;

	for (k = 0; k < td->d.num_neighbours; k++)
		if (td->d.neighbours[k] == mla)
			return true;
	return false;
}

/* This node's MLAs as a ring folded in two rows. */
static bool draw_ring(const struct topo_view *v)
{
	__u32 n = v->t.num_devices, base = v->t.node * n, half, i;
	int dw = digits(base + n - 1);

	if (n < 4 || n % 2)
		return false;
	for (i = 0; i < n; i++) {
		struct topo_dev *td = topo_find((struct topo_view *)v, base + i);

		if (!td || !is_neighbour(td, base + (i + 1) % n))
			return false;
	}
	half = n / 2;
	printf("\nnode %u: ring of %u MLAs (* = memory in use)\n\n  ",
	       v->t.node, n);
	for (i = 0; i < half; i++) {
		cell(v, base + i, dw);
		printf(i + 1 < half ? "--" : "\n");
	}
	printf("%*s|%*s|\n  ", cell_mid(2, 0, dw), "",
	       cell_mid(2, half - 1, dw) - cell_mid(2, 0, dw) - 1, "");
	for (i = 0; i < half; i++) {
		cell(v, base + n - 1 - i, dw);
		printf(i + 1 < half ? "--" : "\n");
	}
	return true;
}

static void draw_pod(const struct topo_view *v)
{
	__u32 n, nodes = v->t.pod_nodes, per = v->t.num_devices;

	if (v->t.pod_type == MLAP2P_POD_NONE)
		return;
	printf("\npod: %u nodes (* = this host)\n\n",
	       nodes);
	if (v->t.pod_type == MLAP2P_POD_SWITCH) {
		printf("  [switch]\n");
		for (n = 0; n < nodes; n++)
			printf("    %s-- node %u%c  MLAs %u-%u\n",
			       n + 1 < nodes ? "|" : "`", n,
			       n == v->t.node ? '*' : ' ', n * per,
			       n * per + per - 1);
		return;
	}
	/* Point-to-point: a ring of nodes, MLA i linked to MLA i next door. */
	printf("  nodes ");
	for (n = 0; n < nodes; n++)
		printf("%u%s%s%s", n, n == v->t.node ? "*" : "",
		       n + 1 < nodes ? " = " : "", n % 16 == 15 ? "\n  " : "");
	if (nodes > 2)
		printf(" = 0\n  (a ring; MLA i links MLA i of the next node)\n");
	else
		printf("\n  (MLA i links MLA i of the other node)\n");
}

static void draw_topo(const struct topo_view *v)
{
	if (!draw_torus(v) && !draw_ring(v))
		printf("\n(no picture for this wiring)\n");
	draw_pod(v);
}

static void json_topo(const struct topo_view *v)
{
	__u32 i, k;

	printf("{\"family\":\"%s\",\"num_devices\":%u,\"cores_per_device\":%u,"
	       "\"lnc\":%u,\"pod\":\"%s\",\"pod_nodes\":%u,\"node\":%u,"
	       "\"cores_per_node\":%u,\"capacity\":%" PRIu64
	       ",\"generation\":%u,\"devices\":[",
	       mlap2p_topo_family_name(v->t.family) ?: "unknown",
	       v->t.num_devices, v->t.cores_per_device, v->t.lnc,
	       mlap2p_topo_pod_name(v->t.pod_type) ?: "unknown",
	       v->t.pod_nodes, v->t.node, mlap2p_topo_cores_per_node(&v->t),
	       (uint64_t)v->capacity, v->generation);
	for (i = 0; i < v->nr_devs; i++) {
		const struct topo_dev *td = &v->devs[i];

		printf("%s{\"mla\":%u,\"node\":%u", i ? "," : "", td->mla,
		       td->d.node);
		if (td->d.peer_mla != MLAP2P_NO_MLA)
			printf(",\"peer\":%u", td->d.peer_mla);
		if (td->d.torus_x != MLAP2P_NO_MLA)
			printf(",\"x\":%u,\"y\":%u", td->d.torus_x,
			       td->d.torus_y);
		printf(",\"first_core\":%u,\"cores\":%u,\"capacity\":%" PRIu64
		       ",\"used\":%" PRIu64 ",\"neighbours\":[",
		       td->d.first_core, td->d.num_cores,
		       (uint64_t)td->capacity, (uint64_t)td->used);
		for (k = 0; k < td->d.num_neighbours; k++)
			printf("%s%u", k ? "," : "", td->d.neighbours[k]);
		printf("]}");
	}
	printf("]}\n");
}

/* ------------------------------------------------------------------ */
/* Commands                                                            */
/* ------------------------------------------------------------------ */

/* Accept a command-local "--json" (as in "topo --json"). */
static void take_json(struct ctl *c, int *argc, char **argv)
{
	int i, j;

	for (i = j = 0; i < *argc; i++) {
		if (!strcmp(argv[i], "--json"))
			c->json = true;
		else
			argv[j++] = argv[i];
	}
	*argc = j;
}

static int cmd_topo(struct ctl *c, int argc, char **argv)
{
	struct topo_view v = { 0 };
	int ret;

	take_json(c, &argc, argv);
	if (argc)
		return CMD_USAGE;
	ret = topo_fetch(c, &v);
	if (ret)
		goto out;
	if (c->json) {
		json_topo(&v);
	} else {
		print_topo_summary(&v);
		print_topo_table(c, &v);
		draw_topo(&v);
	}
out:
	free(v.devs);
	return ret;
}

/* The keys of "topo set", in the order the usage text gives them. */
enum {
	KEY_FAMILY, KEY_LNC, KEY_DEVICES, KEY_CORES, KEY_POD, KEY_POD_NODES,
	KEY_NODE, KEY_CAPACITY, NR_KEYS
};

static const struct {
	const char *name;
	int attr;
} topo_keys[NR_KEYS] = {
	[KEY_FAMILY]	= { "family",		MLAP2P_A_FAMILY },
	[KEY_LNC]	= { "lnc",		MLAP2P_A_LNC },
	[KEY_DEVICES]	= { "devices",		MLAP2P_A_NUM_DEVICES },
	[KEY_CORES]	= { "cores_per_device",	MLAP2P_A_CORES_PER_DEVICE },
	[KEY_POD]	= { "pod",		MLAP2P_A_POD_TYPE },
	[KEY_POD_NODES]	= { "pod_nodes",	MLAP2P_A_POD_NODES },
	[KEY_NODE]	= { "node",		MLAP2P_A_NODE },
	[KEY_CAPACITY]	= { "capacity",		MLAP2P_A_CAPACITY },
};

struct topo_set {
	bool given[NR_KEYS];
	__u32 val[NR_KEYS];
	__u64 capacity;
};

static int topo_set_fill(struct nl_msg *msg, void *arg)
{
	struct topo_set *s = arg;
	int k;

	for (k = 0; k < NR_KEYS; k++) {
		if (!s->given[k])
			continue;
		if (k == KEY_CAPACITY) {
			if (nla_put_u64(msg, topo_keys[k].attr, s->capacity))
				return -EMSGSIZE;
		} else if (nla_put_u32(msg, topo_keys[k].attr, s->val[k])) {
			return -EMSGSIZE;
		}
	}
	return 0;
}

static int topo_set_parse(struct ctl *c, const char *arg, struct topo_set *s)
{
	const char *eq = strchr(arg, '=');
	const char *val = eq ? eq + 1 : NULL;
	size_t klen = eq ? (size_t)(eq - arg) : 0;
	int k, ret;

	for (k = 0; k < NR_KEYS; k++)
		if (eq && strlen(topo_keys[k].name) == klen &&
		    !strncmp(arg, topo_keys[k].name, klen))
			break;
	if (k == NR_KEYS) {
		fprintf(stderr, "mlap2pctl: %s: unknown setting '%s'\n",
			c->cmd, arg);
		return CMD_USAGE;
	}
	if (s->given[k]) {
		fprintf(stderr, "mlap2pctl: %s: %s given twice\n", c->cmd,
			topo_keys[k].name);
		return CMD_USAGE;
	}
	switch (k) {
	case KEY_FAMILY:
		ret = mlap2p_topo_parse_family(val, &s->val[k]);
		break;
	case KEY_POD:
		ret = mlap2p_topo_parse_pod(val, &s->val[k]);
		break;
	case KEY_CAPACITY:
		ret = parse_size(val, &s->capacity);
		break;
	default:
		ret = parse_u32(val, &s->val[k]);
		break;
	}
	if (ret) {
		fprintf(stderr, "mlap2pctl: %s: bad value for %s: '%s'\n",
			c->cmd, topo_keys[k].name, val);
		return CMD_USAGE;
	}
	s->given[k] = true;
	return 0;
}

static int cmd_topo_set(struct ctl *c, int argc, char **argv)
{
	struct topo_set s = { 0 };
	int i, ret;

	if (!argc)
		return CMD_USAGE;
	for (i = 0; i < argc; i++) {
		ret = topo_set_parse(c, argv[i], &s);
		if (ret)
			return ret;
	}
	return genl_request(c, MLAP2P_CMD_SET_TOPO, 0, topo_set_fill, &s,
			    NULL, NULL, NULL);
}

static int cmd_peer(struct ctl *c, int argc, char **argv)
{
	struct mlap2p_peer_query q = { 0 };
	char via[32];
	const char *edge;
	int ret;

	if (argc != 2 || parse_u32(argv[0], &q.core_a) ||
	    parse_u32(argv[1], &q.core_b))
		return CMD_USAGE;
	ret = dev_ioctl(c, MLAP2P_IOC_CAN_ACCESS_PEER, &q);
	if (ret)
		return ret;
	edge = mlap2p_topo_edge_name(q.edge_class) ?: "?";

	if (c->json) {
		printf("{\"core_a\":%u,\"core_b\":%u,\"mla_a\":%u,"
		       "\"mla_b\":%u,\"edge\":\"%s\",\"access\":%s,\"path\":[",
		       q.core_a, q.core_b, q.mla_a, q.mla_b, edge,
		       q.access ? "true" : "false");
		if (q.edge_class == MLAP2P_EDGE_RELAY &&
		    q.intermediate_mla != MLAP2P_NO_MLA)
			printf("%u,%u,%u", q.mla_a, q.intermediate_mla,
			       q.mla_b);
		else if (q.edge_class == MLAP2P_EDGE_LOCAL)
			printf("%u", q.mla_a);
		else if (q.edge_class != MLAP2P_EDGE_NONE)
			printf("%u,%u", q.mla_a, q.mla_b);
		printf("]}\n");
		return 0;
	}

	printf("core %u (MLA %u) -> core %u (MLA %u): %s\n", q.core_a,
	       q.mla_a, q.core_b, q.mla_b, edge);
	switch (q.edge_class) {
	case MLAP2P_EDGE_LOCAL:
		printf("path: MLA %u (same MLA)\n", q.mla_a);
		break;
	case MLAP2P_EDGE_RELAY:
		print_mla(via, sizeof(via), q.intermediate_mla);
		printf("path: MLA %u -> MLA %s -> MLA %u (relay through MLA "
		       "%s)\n", q.mla_a, via, q.mla_b, via);
		break;
	case MLAP2P_EDGE_NONE:
		printf("path: none\n");
		break;
	default:
		printf("path: MLA %u -> MLA %u\n", q.mla_a, q.mla_b);
		break;
	}
	printf("p2p: %s\n", q.access ? "yes" : "no");
	return 0;
}

static const struct {
	__u64 bit;
	const char *name;
} features[] = {
	{ MLAP2P_FEAT_IPC_HANDLE,	"ipc-handle" },
	{ MLAP2P_FEAT_RDONLY,		"rdonly" },
	{ MLAP2P_FEAT_HUGE_2M,		"huge-2m" },
	{ MLAP2P_FEAT_LOCALITY,		"locality" },
	{ MLAP2P_FEAT_GENL,		"genl" },
	{ MLAP2P_FEAT_REGION_INFO,	"region-info" },
};

static void print_features(struct ctl *c, __u64 f)
{
	bool first = true;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(features); i++) {
		if (!(f & features[i].bit))
			continue;
		printf(c->json ? "%s\"%s\"" : "%s%s", first ? "" :
		       c->json ? "," : " ", features[i].name);
		first = false;
		f &= ~features[i].bit;
	}
	if (f)
		printf(c->json ? "%s\"0x%" PRIx64 "\"" : "%s0x%" PRIx64,
		       first ? "" : c->json ? "," : " ", (uint64_t)f);
}

static int cmd_info(struct ctl *c, int argc, char **argv)
{
	struct mlap2p_info in = { 0 };
	char b1[16], b2[16], b3[32], b4[32];
	const char *genl;
	int ret;

	(void)argv;
	if (argc)
		return CMD_USAGE;
	ret = dev_ioctl(c, MLAP2P_IOC_GET_INFO, &in);
	if (ret)
		return ret;
	genl = (in.features & MLAP2P_FEAT_GENL) && !ctl_genl(c) ?
	       "yes" : "no";
	c->hint = NULL;

	if (c->json) {
		printf("{\"abi\":\"%u.%u\",\"features\":[", in.abi_major,
		       in.abi_minor);
		print_features(c, in.features);
		printf("],\"genl\":%s,\"family\":\"%s\",\"num_devices\":%u,"
		       "\"cores_per_device\":%u,\"lnc\":%u,\"pod\":\"%s\","
		       "\"pod_nodes\":%u,\"node\":%u,\"cores_per_node\":%u,"
		       "\"dev_capacity\":%" PRIu64
		       ",\"max_bytes_per_file\":%" PRIu64
		       ",\"max_regions_per_file\":%u,\"generation\":%u}\n",
		       genl[0] == 'y' ? "true" : "false",
		       mlap2p_topo_family_name(in.family) ?: "unknown",
		       in.num_devices, in.cores_per_device, in.lnc,
		       mlap2p_topo_pod_name(in.pod_type) ?: "unknown",
		       in.pod_nodes, in.node, in.cores_per_node,
		       (uint64_t)in.dev_capacity,
		       (uint64_t)in.max_bytes_per_file,
		       in.max_regions_per_file, in.topo_generation);
		return 0;
	}

	printf("abi          %u.%u\n", in.abi_major, in.abi_minor);
	printf("features     ");
	print_features(c, in.features);
	printf("\ngenl         %s (family \"%s\")\n", genl, MLAP2P_GENL_NAME);
	printf("family       %s, %u MLAs per node, %u cores per MLA, LNC %u\n",
	       name_or_num(mlap2p_topo_family_name(in.family), in.family,
			   b1, sizeof(b1)),
	       in.num_devices, in.cores_per_device, in.lnc);
	printf("cores        %u logical cores per node\n", in.cores_per_node);
	printf("pod          %s, %u node%s, this host is node %u\n",
	       name_or_num(mlap2p_topo_pod_name(in.pod_type), in.pod_type,
			   b2, sizeof(b2)),
	       in.pod_nodes, in.pod_nodes == 1 ? "" : "s", in.node);
	printf("capacity     %s per MLA\n",
	       fmt_bytes(in.dev_capacity, b3, sizeof(b3)));
	printf("limits       %u regions and %s per open file\n",
	       in.max_regions_per_file,
	       fmt_bytes(in.max_bytes_per_file, b4, sizeof(b4)));
	printf("generation   %u\n", in.topo_generation);
	return 0;
}

struct region_row {
	__u64 id, size;
	__u32 device, pid, importers, mappings;
	bool exported;
};

struct region_list {
	struct region_row *rows;
	size_t nr, cap;
};

static int region_parse(struct nlattr *nest, struct region_row *row)
{
	struct nlattr *r[MLAP2P_A_REGION_MAX + 1];
	int ret;

	ret = nla_parse_nested(r, MLAP2P_A_REGION_MAX, nest, region_policy);
	if (ret < 0)
		return nle_to_errno(ret);
	if (!r[MLAP2P_A_REGION_ID])
		return -EPROTO;
	memset(row, 0, sizeof(*row));
	row->id = nla_get_u64(r[MLAP2P_A_REGION_ID]);
	row->device = get_u32(r[MLAP2P_A_REGION_DEVICE], 0);
	row->size = get_u64(r[MLAP2P_A_REGION_SIZE], 0);
	row->pid = get_u32(r[MLAP2P_A_REGION_OWNER_PID], 0);
	row->importers = get_u32(r[MLAP2P_A_REGION_IMPORTERS], 0);
	row->mappings = get_u32(r[MLAP2P_A_REGION_MAPPINGS], 0);
	row->exported = r[MLAP2P_A_REGION_EXPORTED] != NULL;
	return 0;
}

static int region_reply(struct ctl *c, struct genlmsghdr *g,
			struct nlattr **tb, void *arg)
{
	struct region_list *l = arg;

	(void)c;
	(void)g;
	if (!tb[MLAP2P_A_REGION])
		return 0;
	if (l->nr == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		struct region_row *p = realloc(l->rows, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		l->rows = p;
		l->cap = cap;
	}
	return region_parse(tb[MLAP2P_A_REGION], &l->rows[l->nr++]);
}

/* "id=N" selects one region (GET_REGION doit), "device=N" one MLA's. */
struct region_filter {
	bool by_id, by_device;
	__u64 id;
	__u32 device;
};

static int region_filter_fill(struct nl_msg *msg, void *arg)
{
	struct region_filter *f = arg;
	struct nlattr *nest;

	if (!f->by_id && !f->by_device)
		return 0;
	nest = nla_nest_start(msg, MLAP2P_A_REGION);
	if (!nest)
		return -EMSGSIZE;
	if (f->by_id && nla_put_u64(msg, MLAP2P_A_REGION_ID, f->id))
		return -EMSGSIZE;
	if (f->by_device && nla_put_u32(msg, MLAP2P_A_REGION_DEVICE,
					f->device))
		return -EMSGSIZE;
	nla_nest_end(msg, nest);
	return 0;
}

static int region_filter_parse(int argc, char **argv, struct region_filter *f)
{
	__u32 v;
	int i;

	for (i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "id=", 3) && !f->by_id &&
		    !parse_u64(argv[i] + 3, &f->id)) {
			f->by_id = true;
		} else if (!strncmp(argv[i], "device=", 7) && !f->by_device &&
			   !parse_u32(argv[i] + 7, &v)) {
			f->device = v;
			f->by_device = true;
		} else {
			return CMD_USAGE;
		}
	}
	return 0;
}

static void print_regions(struct ctl *c, const struct region_list *l)
{
	char size[32];
	size_t i;

	if (c->json)
		printf("[");
	else
		printf("%8s %5s %10s %8s %9s %8s %s\n", "id", "MLA", "size",
		       "pid", "importers", "mappings", "exported");
	for (i = 0; i < l->nr; i++) {
		const struct region_row *r = &l->rows[i];

		if (c->json) {
			printf("%s{\"id\":%" PRIu64 ",\"device\":%u,\"size\":%"
			       PRIu64 ",\"owner_pid\":%u,\"importers\":%u,"
			       "\"mappings\":%u,\"exported\":%s}",
			       i ? "," : "", (uint64_t)r->id, r->device,
			       (uint64_t)r->size, r->pid, r->importers,
			       r->mappings, r->exported ? "true" : "false");
			continue;
		}
		printf("%8" PRIu64 " %5u %10s %8u %9u %8u %s\n",
		       (uint64_t)r->id, r->device,
		       fmt_bytes(r->size, size, sizeof(size)), r->pid,
		       r->importers, r->mappings, r->exported ? "yes" : "no");
	}
	if (c->json)
		printf("]\n");
}

static int cmd_regions(struct ctl *c, int argc, char **argv)
{
	struct region_filter f = { 0 };
	struct region_list l = { 0 };
	bool intr = false;
	int ret, try;

	ret = region_filter_parse(argc, argv, &f);
	if (ret)
		return ret;
	for (try = 0; try < DUMP_RETRIES; try++) {
		l.nr = 0;
		ret = genl_request(c, MLAP2P_CMD_GET_REGION,
				   f.by_id ? 0 : NLM_F_DUMP,
				   region_filter_fill, &f, region_reply, &l,
				   &intr);
		if (ret || !intr)
			break;
	}
	if (!ret && intr)
		fprintf(stderr, "mlap2pctl: %s: regions kept changing during "
			"the dump; showing the last one\n", c->cmd);
	if (!ret)
		print_regions(c, &l);
	free(l.rows);
	return ret;
}

struct stats {
	__u64 v[MLAP2P_A_STAT_MAX + 1];
	bool have[MLAP2P_A_STAT_MAX + 1];
	struct {
		__u32 mla;
		__u64 capacity, used, live, hwm;
		bool have_hwm;	/* a module without DEV_HWM_BYTES */
	} dev[MLAP2P_TOPO_MAX_DEVICES];
	__u32 nr_devs;
};

static const struct {
	int attr;
	const char *name;
	bool bytes;
} stat_names[] = {
	{ MLAP2P_A_STAT_ALLOCS,		"allocs",	 false },
	{ MLAP2P_A_STAT_FREES,		"frees",	 false },
	{ MLAP2P_A_STAT_EXPORTS,	"exports",	 false },
	{ MLAP2P_A_STAT_OPENS,		"opens",	 false },
	{ MLAP2P_A_STAT_CLOSES,		"closes",	 false },
	{ MLAP2P_A_STAT_REJECTED,	"rejected",	 false },
	{ MLAP2P_A_STAT_LIVE_REGIONS,	"live_regions",	 false },
	{ MLAP2P_A_STAT_LIVE_BYTES,	"live_bytes",	 true },
	{ MLAP2P_A_STAT_LIVE_MAPPINGS,	"live_mappings", false },
	{ MLAP2P_A_STAT_HWM_BYTES,	"hwm_bytes",	 true },
	{ MLAP2P_A_STAT_HWM_REGIONS,	"hwm_regions",	 false },
	{ MLAP2P_A_STAT_HWM_MAPPINGS,	"hwm_mappings",	 false },
};

static int stats_dev(struct stats *s, struct nlattr *nest)
{
	struct nlattr *d[MLAP2P_A_DEV_MAX + 1];
	int ret;

	ret = nla_parse_nested(d, MLAP2P_A_DEV_MAX, nest, dev_policy);
	if (ret < 0)
		return nle_to_errno(ret);
	if (!d[MLAP2P_A_DEV_MLA] || s->nr_devs == ARRAY_SIZE(s->dev))
		return -EPROTO;
	s->dev[s->nr_devs].mla = nla_get_u32(d[MLAP2P_A_DEV_MLA]);
	s->dev[s->nr_devs].capacity = get_u64(d[MLAP2P_A_DEV_CAPACITY], 0);
	s->dev[s->nr_devs].used = get_u64(d[MLAP2P_A_DEV_USED], 0);
	/* Older modules: only the capacity taken. */
	s->dev[s->nr_devs].live = get_u64(d[MLAP2P_A_DEV_LIVE_BYTES],
					  s->dev[s->nr_devs].used);
	s->dev[s->nr_devs].hwm = get_u64(d[MLAP2P_A_DEV_HWM_BYTES], 0);
	s->dev[s->nr_devs].have_hwm = d[MLAP2P_A_DEV_HWM_BYTES] != NULL;
	s->nr_devs++;
	return 0;
}

/*
 * One STATS nest, then one DEV nest (MLA, capacity, used, live bytes and
 * their high-water mark) per local MLA.
 */
static int stats_reply(struct ctl *c, struct genlmsghdr *g,
		       struct nlattr **tb, void *arg)
{
	struct nlattr *st[MLAP2P_A_STAT_MAX + 1];
	struct stats *s = arg;
	struct nlattr *a;
	int ret, rem, i;

	(void)c;
	if (tb[MLAP2P_A_STATS]) {
		ret = nla_parse_nested(st, MLAP2P_A_STAT_MAX,
				       tb[MLAP2P_A_STATS], stat_policy);
		if (ret < 0)
			return nle_to_errno(ret);
		for (i = 1; i <= MLAP2P_A_STAT_MAX; i++) {
			if (i == MLAP2P_A_STAT_PAD || !st[i])
				continue;
			s->v[i] = nla_get_u64(st[i]);
			s->have[i] = true;
		}
	}
	nla_for_each_attr(a, genlmsg_attrdata(g, 0), genlmsg_attrlen(g, 0),
			  rem) {
		if (nla_type(a) != MLAP2P_A_DEV)
			continue;
		ret = stats_dev(s, a);
		if (ret)
			return ret;
	}
	return 0;
}

static void print_stats(const struct stats *s)
{
	char b1[32], b2[32], b3[32];
	size_t i;
	__u32 k;

	for (i = 0; i < ARRAY_SIZE(stat_names); i++) {
		int a = stat_names[i].attr;

		if (!s->have[a])
			continue;
		if (stat_names[i].bytes)
			printf("%-14s %s\n", stat_names[i].name,
			       fmt_bytes(s->v[a], b1, sizeof(b1)));
		else
			printf("%-14s %" PRIu64 "\n", stat_names[i].name,
			       (uint64_t)s->v[a]);
	}
	if (!s->nr_devs)
		return;
	printf("\n%5s %10s %10s %10s\n", "MLA", "live", "hwm", "capacity");
	for (k = 0; k < s->nr_devs; k++)
		printf("%5u %10s %10s %10s\n", s->dev[k].mla,
		       fmt_bytes(s->dev[k].live, b1, sizeof(b1)),
		       s->dev[k].have_hwm ?
		       fmt_bytes(s->dev[k].hwm, b2, sizeof(b2)) : "-",
		       fmt_bytes(s->dev[k].capacity, b3, sizeof(b3)));
}

static void json_stats(const struct stats *s)
{
	const char *sep = "";
	size_t i;
	__u32 k;

	printf("{");
	for (i = 0; i < ARRAY_SIZE(stat_names); i++) {
		int a = stat_names[i].attr;

		if (!s->have[a])
			continue;
		printf("%s\"%s\":%" PRIu64, sep, stat_names[i].name,
		       (uint64_t)s->v[a]);
		sep = ",";
	}
	printf("%s\"devices\":[", sep);
	for (k = 0; k < s->nr_devs; k++) {
		printf("%s{\"mla\":%u,\"capacity\":%" PRIu64 ",\"used\":%"
		       PRIu64 ",\"live\":%" PRIu64, k ? "," : "",
		       s->dev[k].mla, (uint64_t)s->dev[k].capacity,
		       (uint64_t)s->dev[k].used, (uint64_t)s->dev[k].live);
		if (s->dev[k].have_hwm)
			printf(",\"hwm\":%" PRIu64, (uint64_t)s->dev[k].hwm);
		printf("}");
	}
	printf("]}\n");
}

static int cmd_stats(struct ctl *c, int argc, char **argv)
{
	struct stats s;
	int ret;

	(void)argv;
	if (argc)
		return CMD_USAGE;
	memset(&s, 0, sizeof(s));
	ret = genl_request(c, MLAP2P_CMD_GET_STATS, 0, NULL, NULL,
			   stats_reply, &s, NULL);
	if (ret)
		return ret;
	if (c->json)
		json_stats(&s);
	else
		print_stats(&s);
	return 0;
}

/* ------------------------------------------------------------------ */
/* monitor                                                             */
/* ------------------------------------------------------------------ */

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static const char * const event_names[MLAP2P_CMD_MAX + 1] = {
	[MLAP2P_CMD_EVENT_REGION_NEW]		= "region-new",
	[MLAP2P_CMD_EVENT_REGION_FREE]		= "region-free",
	[MLAP2P_CMD_EVENT_REGION_EXPORT]	= "region-export",
	[MLAP2P_CMD_EVENT_REGION_OPEN]		= "region-open",
	[MLAP2P_CMD_EVENT_REGION_CLOSE]		= "region-close",
	[MLAP2P_CMD_EVENT_TOPO_CHANGE]		= "topo-change",
};

static int print_event(struct ctl *c, __u8 cmd, struct nlattr **tb,
		       void *arg)
{
	const char *name = cmd <= MLAP2P_CMD_MAX ? event_names[cmd] : NULL;
	struct region_row r;
	struct topo_view v;
	__u32 pid = get_u32(tb[MLAP2P_A_PID], 0);
	int ret;

	(void)arg;
	if (!name)
		return 0;	/* not an event we know: newer kernel */

	if (cmd == MLAP2P_CMD_EVENT_TOPO_CHANGE) {
		memset(&v, 0, sizeof(v));
		topo_summary_parse(tb, &v);
		printf(c->json ?
		       "{\"event\":\"%s\",\"generation\":%u,\"family\":\"%s\","
		       "\"num_devices\":%u,\"cores_per_device\":%u,\"lnc\":%u,"
		       "\"pod\":\"%s\",\"pod_nodes\":%u,\"node\":%u,"
		       "\"capacity\":%" PRIu64 ",\"pid\":%u}\n" :
		       "%s generation=%u family=%s devices=%u "
		       "cores_per_device=%u lnc=%u pod=%s pod_nodes=%u "
		       "node=%u capacity=%" PRIu64 " pid=%u\n",
		       name, v.generation,
		       mlap2p_topo_family_name(v.t.family) ?: "unknown",
		       v.t.num_devices, v.t.cores_per_device, v.t.lnc,
		       mlap2p_topo_pod_name(v.t.pod_type) ?: "unknown",
		       v.t.pod_nodes, v.t.node, (uint64_t)v.capacity, pid);
		return 0;
	}
	if (!tb[MLAP2P_A_REGION])
		return 0;
	ret = region_parse(tb[MLAP2P_A_REGION], &r);
	if (ret)
		return 0;	/* skip what we cannot read, keep going */
	printf(c->json ?
	       "{\"event\":\"%s\",\"id\":%" PRIu64 ",\"device\":%u,"
	       "\"size\":%" PRIu64 ",\"owner_pid\":%u,\"pid\":%u}\n" :
	       "%s id=%" PRIu64 " device=%u size=%" PRIu64
	       " owner_pid=%u pid=%u\n",
	       name, (uint64_t)r.id, r.device, (uint64_t)r.size, r.pid, pid);
	return 0;
}

static int monitor_valid(struct nl_msg *msg, void *arg)
{
	struct genlmsghdr *g = nlmsg_data(nlmsg_hdr(msg));
	struct nlattr *tb[MLAP2P_A_MAX + 1];
	struct ctl *c = arg;

	if (nla_parse(tb, MLAP2P_A_MAX, genlmsg_attrdata(g, 0),
		      genlmsg_attrlen(g, 0), top_policy) < 0)
		return NL_SKIP;
	print_event(c, g->cmd, tb, NULL);
	return NL_SKIP;
}

/* Events are unsolicited: no sequence number to match. */
static int no_seq_check(struct nl_msg *msg, void *arg)
{
	(void)msg;
	(void)arg;
	return NL_OK;
}

static int cmd_monitor(struct ctl *c, int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct pollfd pfd;
	struct nl_cb *cb;
	int grp, ret;

	(void)argv;
	if (argc)
		return CMD_USAGE;
	ret = ctl_genl(c);
	if (ret)
		return ret;
	ret = genl_ctrl_resolve_grp(c->sk, MLAP2P_GENL_NAME,
				    MLAP2P_GENL_MCGRP_EVENTS);
	if (ret < 0)
		return nle_to_errno(ret);
	grp = ret;

	/* The request socket becomes the event socket: no more requests. */
	ret = nl_socket_add_membership(c->sk, grp);
	if (ret < 0)
		return nle_to_errno(ret);
	cb = nl_cb_alloc(c->verbose > 1 ? NL_CB_DEBUG : NL_CB_DEFAULT);
	if (!cb)
		return -ENOMEM;
	nl_cb_set(cb, NL_CB_SEQ_CHECK, NL_CB_CUSTOM, no_seq_check, NULL);
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, monitor_valid, c);

	/* No SA_RESTART: SIGINT must break poll(). */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);

	pfd.fd = nl_socket_get_fd(c->sk);
	pfd.events = POLLIN;
	ret = 0;
	while (!stop) {
		if (poll(&pfd, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			break;
		}
		ret = nl_recvmsgs(c->sk, cb);
		if (ret == -NLE_NOMEM) {
			/* ENOBUFS: the kernel dropped events for us. */
			fprintf(stderr, "mlap2pctl: %s: events lost "
				"(receive buffer overrun)\n", c->cmd);
			ret = 0;
			continue;
		}
		if (ret < 0) {
			ret = nle_to_errno(ret);
			break;
		}
		ret = 0;
	}
	nl_cb_put(cb);
	return ret;
}

/* ------------------------------------------------------------------ */
/* The command table, usage and main                                   */
/* ------------------------------------------------------------------ */

struct cmd {
	const char *name;	/* first word */
	const char *sub;	/* second word, or NULL */
	const char *args;	/* usage of the arguments */
	const char *help;
	int (*handler)(struct ctl *c, int argc, char **argv);
};

static const struct cmd cmds[] = {
	{ "info", NULL, "",
	  "ABI version, features, topology summary and per-file limits.",
	  cmd_info },
	{ "topo", NULL, "[--json]",
	  "The topology: a summary, one row per MLA and a picture of the\n"
	  "torus or ring and the pod.",
	  cmd_topo },
	{ "topo", "set", "key=value...",
	  "Change the topology (CAP_NET_ADMIN; only while no region lives).\n"
	  "Keys: family=trn1|trn2|trn3 lnc=1|2 devices=N cores_per_device=N\n"
	  "pod=none|p2p|switch pod_nodes=N node=N capacity=SIZE[K|M|G].\n"
	  "A new family starts from its defaults; other keys left out keep\n"
	  "their value.  All or nothing.",
	  cmd_topo_set },
	{ "peer", NULL, "CORE_A CORE_B",
	  "Edge class and path between two global logical cores.",
	  cmd_peer },
	{ "regions", NULL, "[id=ID] [device=MLA]",
	  "Live regions: id, MLA, size, owner pid, importers, mappings,\n"
	  "exported; all, one by id, or those on one MLA.  Without\n"
	  "CAP_SYS_ADMIN only regions this process holds a handle to.",
	  cmd_regions },
	{ "stats", NULL, "",
	  "The module's counters.",
	  cmd_stats },
	{ "monitor", NULL, "",
	  "Print events (region new/free/export/open/close, topology\n"
	  "change) one line each until interrupted.",
	  cmd_monitor },
};

static void print_cmd_usage(FILE *f, const struct cmd *cmd, bool help)
{
	const char *p, *nl;

	fprintf(f, "  %s%s%s%s%s\n", cmd->name, cmd->sub ? " " : "",
		cmd->sub ?: "", *cmd->args ? " " : "", cmd->args);
	if (!help)
		return;
	for (p = cmd->help; *p; p = nl + (*nl == '\n')) {
		nl = p + strcspn(p, "\n");
		fprintf(f, "\t%.*s\n", (int)(nl - p), p);
	}
}

static void usage(FILE *f)
{
	size_t i;

	fprintf(f,
		"Usage: mlap2pctl [--json] [-v] <command> [arguments]\n"
		"       mlap2pctl --version | --help\n\n"
		"Options:\n"
		"  --json     machine-readable output (monitor: one object a "
		"line)\n"
		"  -v         more detail; twice: libnl message debugging\n\n"
		"Commands:\n");
	for (i = 0; i < ARRAY_SIZE(cmds); i++)
		print_cmd_usage(f, &cmds[i], true);
	fprintf(f, "\nExit status: 0 success, 1 failure, 2 usage error.\n");
}

static const struct cmd *find_cmd(int argc, char **argv, int *used)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cmds); i++) {
		if (strcmp(cmds[i].name, argv[0]) || !cmds[i].sub)
			continue;
		if (argc > 1 && !strcmp(cmds[i].sub, argv[1])) {
			*used = 2;
			return &cmds[i];
		}
	}
	for (i = 0; i < ARRAY_SIZE(cmds); i++) {
		if (!strcmp(cmds[i].name, argv[0]) && !cmds[i].sub) {
			*used = 1;
			return &cmds[i];
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct ctl c = { .dev_fd = -1, .miss_type = -1 };
	const struct cmd *cmd;
	char name[64];
	int used, ret;

	for (argc--, argv++; argc && argv[0][0] == '-'; argc--, argv++) {
		if (!strcmp(argv[0], "--json")) {
			c.json = true;
		} else if (!strcmp(argv[0], "-v")) {
			c.verbose++;
		} else if (!strcmp(argv[0], "-vv")) {
			c.verbose += 2;
		} else if (!strcmp(argv[0], "--version")) {
			printf("mlap2pctl %s\n", MLAP2P_VERSION);
			return 0;
		} else if (!strcmp(argv[0], "-h") ||
			   !strcmp(argv[0], "--help")) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "mlap2pctl: unknown option '%s'\n",
				argv[0]);
			usage(stderr);
			return 2;
		}
	}
	if (!argc) {
		usage(stderr);
		return 2;
	}
	cmd = find_cmd(argc, argv, &used);
	if (!cmd) {
		fprintf(stderr, "mlap2pctl: unknown command '%s'\n", argv[0]);
		usage(stderr);
		return 2;
	}
	snprintf(name, sizeof(name), "%s%s%s", cmd->name, cmd->sub ? " " : "",
		 cmd->sub ?: "");
	c.cmd = name;

	ret = cmd->handler(&c, argc - used, argv + used);
	if (ret == CMD_USAGE) {
		fprintf(stderr, "Usage:\n");
		print_cmd_usage(stderr, cmd, true);
		ret = 2;
	} else if (ret < 0) {
		fprintf(stderr, "mlap2pctl: %s: %s\n", c.cmd, strerror(-ret));
		if (c.extack[0])
			fprintf(stderr, "kernel reports: %s\n", c.extack);
		else if (c.miss_type >= 0)
			fprintf(stderr, "kernel reports: missing attribute "
				"%d\n", c.miss_type);
		if (c.hint)
			fprintf(stderr, "mlap2pctl: %s\n", c.hint);
		ret = 1;
	}
	if (fflush(stdout) && !ret) {
		fprintf(stderr, "mlap2pctl: %s: %s\n", c.cmd, strerror(errno));
		ret = 1;
	}
	if (c.sk)
		ctl_genl_close(&c);
	if (c.dev_fd >= 0)
		close(c.dev_fd);
	return ret;
}
