// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * monitor: the events multicast group, one line per event until
 * SIGINT or SIGTERM.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <netlink/genl/ctrl.h>

#include "ctl.h"

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

int cmd_monitor(struct ctl *c, int argc, char **argv)
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
