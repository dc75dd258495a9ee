/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * mlap2pctl's shared declarations: the state of one invocation, the
 * handler contract, the netlink and /dev/mlap2p helpers (genl.c), the
 * small parsers and printers (ctl.c) and what one area hands another
 * (the topology view, a region row).  One .c per area, as in iw.
 */
#ifndef MLAP2PCTL_CTL_H
#define MLAP2PCTL_CTL_H

#include <stdbool.h>
#include <stddef.h>

#include <netlink/genl/genl.h>

#include <linux/mlap2p.h>
#include "mlap2p_topo.h"

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

/* ctl.c: small helpers */
int nle_to_errno(int nle);
int parse_u64(const char *s, __u64 *out);
int parse_u32(const char *s, __u32 *out);
int parse_size(const char *s, __u64 *out);
const char *fmt_bytes(__u64 v, char *buf, size_t len);
const char *name_or_num(const char *name, __u32 v, char *buf, size_t len);
void take_json(struct ctl *c, int *argc, char **argv);

/* genl.c: generic netlink and /dev/mlap2p */
extern struct nla_policy top_policy[MLAP2P_A_MAX + 1];
extern struct nla_policy dev_policy[MLAP2P_A_DEV_MAX + 1];
extern struct nla_policy region_policy[MLAP2P_A_REGION_MAX + 1];
extern struct nla_policy stat_policy[MLAP2P_A_STAT_MAX + 1];

static inline __u32 get_u32(struct nlattr *a, __u32 dflt)
{
	return a ? nla_get_u32(a) : dflt;
}

static inline __u64 get_u64(struct nlattr *a, __u64 dflt)
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

int ctl_genl(struct ctl *c);
void ctl_genl_close(struct ctl *c);
int genl_request(struct ctl *c, __u8 cmd, int flags, fill_fn fill,
		 void *fill_arg, reply_fn reply, void *arg, bool *intr);
int dev_ioctl(struct ctl *c, unsigned long req, void *arg);

/* topo.c: the topology view, also read by draw.c and monitor.c */
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

void topo_summary_parse(struct nlattr **tb, struct topo_view *v);
struct topo_dev *topo_find(struct topo_view *v, __u32 mla);

/* draw.c: the picture under "topo" */
void draw_topo(const struct topo_view *v);

/* regions.c: one region, also read by monitor.c */
struct region_row {
	__u64 id, size;
	__u32 device, pid, importers, mappings;
	bool exported;
};

int region_parse(struct nlattr *nest, struct region_row *row);

/* The commands (ctl.c's table) */
int cmd_info(struct ctl *c, int argc, char **argv);
int cmd_monitor(struct ctl *c, int argc, char **argv);
int cmd_peer(struct ctl *c, int argc, char **argv);
int cmd_regions(struct ctl *c, int argc, char **argv);
int cmd_stats(struct ctl *c, int argc, char **argv);
int cmd_topo(struct ctl *c, int argc, char **argv);
int cmd_topo_set(struct ctl *c, int argc, char **argv);

#endif /* MLAP2PCTL_CTL_H */
