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
 *
 * This file: the small helpers, the command table, usage and main.  One
 * file per area beside it (ctl.h declares what they share): genl.c the
 * netlink requests and /dev/mlap2p, topo.c topo, topo set and peer, draw.c
 * the topology picture, info.c, regions.c, stats.c and monitor.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"

/* The version: Makefile.common's, via -D or the library's version.h. */
#ifndef MLAP2P_VERSION
#include <mlap2p/version.h>
#define MLAP2P_VERSION MLAP2P_VERSION_STRING
#endif

/* ------------------------------------------------------------------ */
/* Errors and small helpers                                            */
/* ------------------------------------------------------------------ */

/*
 * The one place libnl's -NLE_* codes become -errno.  Anything libnl does
 * not tell us more about becomes -EIO; protocol confusion -EPROTO.
 */
int nle_to_errno(int nle)
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
int parse_u64(const char *s, __u64 *out)
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

int parse_u32(const char *s, __u32 *out)
{
	__u64 v;

	if (parse_u64(s, &v) || v > UINT32_MAX)
		return -EINVAL;
	*out = (__u32)v;
	return 0;
}

/* A byte count with an optional K, M or G suffix (binary units). */
int parse_size(const char *s, __u64 *out)
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
const char *fmt_bytes(__u64 v, char *buf, size_t len)
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

const char *name_or_num(const char *name, __u32 v, char *buf, size_t len)
{
	if (name)
		return name;
	snprintf(buf, len, "%u", v);
	return buf;
}

/* Accept a command-local "--json" (as in "topo --json"). */
void take_json(struct ctl *c, int *argc, char **argv)
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
	  "Edge class and path between two global logical cores, and the\n"
	  "seed's NCCL_DEBUG=INFO line for rank 0 on CORE_A sending to\n"
	  "rank 1 on CORE_B in another process.",
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
