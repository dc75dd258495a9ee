/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A small generic netlink client for the genl selftests, on a raw
 * NETLINK_GENERIC socket rather than libnl: the tests must send exactly
 * the bytes they mean, malformed ones included, and read the kernel's
 * extended ack (its message, the offset of the attribute it blames, the
 * type of a missing one) without a library in between.
 *
 * Every function returns 0 (or a count) or -errno; a request returns the
 * kernel's error unchanged.  After each request gs->ext holds the extack
 * of its answer and gs->intr whether a dump was flagged NLM_F_DUMP_INTR.
 */
#ifndef MLAP2P_GENL_UTIL_H
#define MLAP2P_GENL_UTIL_H

#include "mlap2p_util.h"

#include <poll.h>
#include <sys/socket.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>

#ifndef SOL_NETLINK
#define SOL_NETLINK	270
#endif

#define GT_BUF		16384
#define GT_MAX_ATTR	64

/* A message being built: header, genl header, attributes. */
struct gt_msg {
	union {
		struct nlmsghdr nlh;
		char buf[GT_BUF];
	};
};

/* The extack of the last answer. */
struct gt_extack {
	char msg[256];		/* NLMSGERR_ATTR_MSG, "" if none */
	__u32 offs;		/* NLMSGERR_ATTR_OFFS, 0 if none */
	int miss_type;		/* NLMSGERR_ATTR_MISS_TYPE, -1 if none */
};

struct gt_sock {
	int fd;
	__u32 seq;
	__u16 family;		/* id of "mlap2p" */
	__u32 version;
	__u32 events_grp;	/* id of its "events" group, 0 if none */
	int nr_ops;		/* commands the family lists */
	struct gt_extack ext;
	bool intr;
};

/* Called for each data message of an answer; < 0 stops and fails. */
typedef int (*gt_cb)(const struct nlmsghdr *nlh, void *arg);

/* ------------------------------------------------------------------ */
/* Building                                                            */
/* ------------------------------------------------------------------ */

void gt_msg_init(struct gt_msg *m, __u16 type, __u16 flags, __u8 cmd);

struct nlattr *gt_put(struct gt_msg *m, __u16 type, const void *data,
		      size_t len);

void gt_put_u8(struct gt_msg *m, __u16 type, __u8 v);

void gt_put_u32(struct gt_msg *m, __u16 type, __u32 v);

void gt_put_u64(struct gt_msg *m, __u16 type, __u64 v);

struct nlattr *gt_nest_start(struct gt_msg *m, __u16 type);

void gt_nest_end(struct gt_msg *m, struct nlattr *nest);

/* Offset of @a from the start of the message (what extack reports). */
__u32 gt_offset(const struct gt_msg *m, const struct nlattr *a);

/* ------------------------------------------------------------------ */
/* Parsing                                                             */
/* ------------------------------------------------------------------ */

/*
 * Index the attributes in [@data, @data + @len) by type into @tb[0..max]
 * (later ones win).  -EPROTO if they do not tile the space exactly.
 */
int gt_parse(const void *data, int len, const struct nlattr **tb, int max);

const void *gt_data(const struct nlattr *a);

int gt_len(const struct nlattr *a);

/* The value of a u32/u64 attribute; @dflt when absent or the wrong size. */
__u32 gt_u32(const struct nlattr *a, __u32 dflt);

__u64 gt_u64(const struct nlattr *a, __u64 dflt);

int gt_parse_nested(const struct nlattr *nest, const struct nlattr **tb,
		    int max);

/* The genl attributes of a data message; its command in *@cmd. */
int gt_genl_attrs(const struct nlmsghdr *nlh, const struct nlattr **tb, int max,
		  __u8 *cmd);

/* ------------------------------------------------------------------ */
/* Talking                                                             */
/* ------------------------------------------------------------------ */

void gt_extack(struct gt_sock *s, const void *attrs, int len);

/* The error of an NLMSG_ERROR message, its extack noted in @s. */
int gt_error(struct gt_sock *s, const struct nlmsghdr *nlh);

/* The status a dump's NLMSG_DONE carries, its extack noted in @s. */
int gt_done(struct gt_sock *s, const struct nlmsghdr *nlh);

/*
 * A genl socket bound and with extended acks.  Each recv() waits at most
 * GT_RECV_TIMEOUT_S: no test hangs on an answer the kernel never sends.
 */
#define GT_RECV_TIMEOUT_S	10
int gt_open(struct gt_sock *s);

void gt_close(struct gt_sock *s);

/*
 * Send @m and read its answer: data messages go to @cb, the ack or DONE
 * ends it.  Returns the kernel's status (0 or -errno), the first negative
 * return of @cb once the answer is drained, or -ETIMEDOUT when no part of
 * the answer came for GT_RECV_TIMEOUT_S.  Threads may call it at once, each
 * on its own socket.
 */
int gt_request(struct gt_sock *s, struct gt_msg *m, gt_cb cb, void *arg);

/* Pick "events" out of CTRL_ATTR_MCAST_GROUPS. */
void gt_resolve_groups(struct gt_sock *s, const struct nlattr *groups);

int gt_count_nested(const struct nlattr *nest);

int gt_family_cb(const struct nlmsghdr *nlh, void *arg);

/* Look up "mlap2p": its id, version, events group and op count. */
int gt_resolve(struct gt_sock *s);

/* Open a socket and resolve the family on it. */
int gt_connect(struct gt_sock *s);

/* Start a request to the mlap2p family. */
void gt_cmd(struct gt_sock *s, struct gt_msg *m, __u8 cmd, __u16 flags);

/* Join the events group on @s; -errno as setsockopt() reports it. */
int gt_subscribe(struct gt_sock *s);

/*
 * The next multicast message on a subscribed socket, copied into @m, within
 * @timeout_ms.  Returns its command (> 0), -ETIMEDOUT or -errno.  Keeps a
 * small backlog so one recv() of several messages loses none; the backlog
 * is the thread's, so a thread reads events from one socket only.
 */
int gt_next_event(struct gt_sock *s, struct gt_msg *m, int timeout_ms);

/* ------------------------------------------------------------------ */
/* mlap2p replies                                                      */
/* ------------------------------------------------------------------ */

struct gt_region {
	__u64 id;
	__u64 size;
	__u32 device;
	__u32 owner_pid;
	__u32 importers;
	__u32 mappings;
	bool exported;
};

/* Decode a REGION nest; -EPROTO if an attribute is missing or odd. */
int gt_region_parse(const struct nlattr *nest, struct gt_region *r);

/* A list of regions from GET_REGION (dump or doit). */
struct gt_regions {
	struct gt_region r[4096];
	int nr;
	int bad;		/* messages that did not parse */
};

int gt_regions_cb(const struct nlmsghdr *nlh, void *arg);

/*
 * GET_REGION: a dump (@id 0), optionally of one MLA (@device not
 * MLAP2P_NO_MLA), or the doit for @id.
 */
int gt_get_regions(struct gt_sock *s, __u64 id, __u32 device,
		   struct gt_regions *l);

const struct gt_region *gt_regions_find(const struct gt_regions *l, __u64 id);

/* The GET_TOPO summary. */
struct gt_topo {
	__u32 family, num_devices, cores_per_device, lnc, pod_type;
	__u32 pod_nodes, node, generation;
	__u64 capacity;
	int missing;		/* attributes absent from the reply */
};

void gt_topo_parse(const struct nlattr **tb, struct gt_topo *t);

int gt_topo_cb(const struct nlmsghdr *nlh, void *arg);

int gt_get_topo(struct gt_sock *s, struct gt_topo *t);

/*
 * SET_TOPO with the fields of @t that are not KT_POISON32 (capacity:
 * not 0).  Build one with gt_topo_none() and set what should change.
 */
void gt_topo_none(struct gt_topo *t);

int gt_set_topo(struct gt_sock *s, const struct gt_topo *t);

/* Put back every field of @t (a GET_TOPO result) as it was. */
int gt_restore_topo(struct gt_sock *s, const struct gt_topo *t);

/* Skip unless the module has the genl family (GET_INFO feature bit). */
bool gt_module_has_genl(void);

/*
 * Become nobody in a forked child: no groups, uid and gid 65534, and with
 * them every capability.  0 or -errno.
 */
int gt_become_nobody(void);

#endif /* MLAP2P_GENL_UTIL_H */
