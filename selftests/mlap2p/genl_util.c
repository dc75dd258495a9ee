// SPDX-License-Identifier: GPL-2.0
/*
 * The raw generic netlink client of the genl selftests (genl_util.h says
 * what each function does), compiled once.
 */
#include "genl_util.h"
#include "kselftest.h"

#include <sys/time.h>

void gt_msg_init(struct gt_msg *m, __u16 type, __u16 flags, __u8 cmd)
{
	struct genlmsghdr *g;

	memset(m->buf, 0, NLMSG_HDRLEN + GENL_HDRLEN);
	m->nlh.nlmsg_len = NLMSG_HDRLEN + GENL_HDRLEN;
	m->nlh.nlmsg_type = type;
	m->nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
	g = NLMSG_DATA(&m->nlh);
	g->cmd = cmd;
	g->version = MLAP2P_GENL_VERSION;
}

struct nlattr *gt_put(struct gt_msg *m, __u16 type, const void *data,
		      size_t len)
{
	struct nlattr *a = (struct nlattr *)(m->buf + m->nlh.nlmsg_len);
	size_t total = NLA_ALIGN(NLA_HDRLEN + len);

	if (m->nlh.nlmsg_len + total > sizeof(m->buf))
		abort();
	a->nla_type = type;
	a->nla_len = (__u16)(NLA_HDRLEN + len);
	if (len)
		memcpy((char *)a + NLA_HDRLEN, data, len);
	memset((char *)a + NLA_HDRLEN + len, 0, total - NLA_HDRLEN - len);
	m->nlh.nlmsg_len += (__u32)total;
	return a;
}

void gt_put_u8(struct gt_msg *m, __u16 type, __u8 v)
{
	gt_put(m, type, &v, sizeof(v));
}

void gt_put_u32(struct gt_msg *m, __u16 type, __u32 v)
{
	gt_put(m, type, &v, sizeof(v));
}

void gt_put_u64(struct gt_msg *m, __u16 type, __u64 v)
{
	gt_put(m, type, &v, sizeof(v));
}

struct nlattr *gt_nest_start(struct gt_msg *m, __u16 type)
{
	return gt_put(m, type | NLA_F_NESTED, NULL, 0);
}

void gt_nest_end(struct gt_msg *m, struct nlattr *nest)
{
	nest->nla_len = (__u16)(m->buf + m->nlh.nlmsg_len - (char *)nest);
}

__u32 gt_offset(const struct gt_msg *m, const struct nlattr *a)
{
	return (__u32)((const char *)a - m->buf);
}

int gt_parse(const void *data, int len, const struct nlattr **tb, int max)
{
	const struct nlattr *a = data;
	int type;

	memset(tb, 0, sizeof(*tb) * (size_t)(max + 1));
	while (len >= NLA_HDRLEN) {
		if (a->nla_len < NLA_HDRLEN || a->nla_len > len)
			return -EPROTO;
		type = a->nla_type & NLA_TYPE_MASK;
		if (type <= max)
			tb[type] = a;
		len -= NLA_ALIGN(a->nla_len);
		a = (const struct nlattr *)((const char *)a +
					    NLA_ALIGN(a->nla_len));
	}
	return len > 0 && len < NLA_HDRLEN ? -EPROTO : 0;
}

const void *gt_data(const struct nlattr *a)
{
	return (const char *)a + NLA_HDRLEN;
}

int gt_len(const struct nlattr *a)
{
	return a->nla_len - NLA_HDRLEN;
}

__u32 gt_u32(const struct nlattr *a, __u32 dflt)
{
	__u32 v;

	if (!a || gt_len(a) != sizeof(v))
		return dflt;
	memcpy(&v, gt_data(a), sizeof(v));
	return v;
}

__u64 gt_u64(const struct nlattr *a, __u64 dflt)
{
	__u64 v;

	if (!a || gt_len(a) != sizeof(v))
		return dflt;
	memcpy(&v, gt_data(a), sizeof(v));
	return v;
}

int gt_parse_nested(const struct nlattr *nest, const struct nlattr **tb,
		    int max)
{
	return gt_parse(gt_data(nest), gt_len(nest), tb, max);
}

int gt_genl_attrs(const struct nlmsghdr *nlh, const struct nlattr **tb, int max,
		  __u8 *cmd)
{
	const struct genlmsghdr *g = NLMSG_DATA(nlh);

	if (nlh->nlmsg_len < NLMSG_HDRLEN + GENL_HDRLEN)
		return -EPROTO;
	if (cmd)
		*cmd = g->cmd;
	return gt_parse((const char *)g + GENL_HDRLEN,
			(int)(nlh->nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN),
			tb, max);
}

void gt_extack(struct gt_sock *s, const void *attrs, int len)
{
	const struct nlattr *tb[NLMSGERR_ATTR_MAX + 1];

	if (len <= 0 || gt_parse(attrs, len, tb, NLMSGERR_ATTR_MAX))
		return;
	if (tb[NLMSGERR_ATTR_MSG])
		snprintf(s->ext.msg, sizeof(s->ext.msg), "%.*s",
			 gt_len(tb[NLMSGERR_ATTR_MSG]),
			 (const char *)gt_data(tb[NLMSGERR_ATTR_MSG]));
	s->ext.offs = gt_u32(tb[NLMSGERR_ATTR_OFFS], 0);
	if (tb[NLMSGERR_ATTR_MISS_TYPE])
		s->ext.miss_type = (int)gt_u32(tb[NLMSGERR_ATTR_MISS_TYPE], 0);
}

int gt_error(struct gt_sock *s, const struct nlmsghdr *nlh)
{
	const struct nlmsgerr *e = NLMSG_DATA(nlh);
	size_t off = sizeof(*e);

	if (nlh->nlmsg_len < NLMSG_HDRLEN + sizeof(*e))
		return -EPROTO;
	if (nlh->nlmsg_flags & NLM_F_ACK_TLVS) {
		if (!(nlh->nlmsg_flags & NLM_F_CAPPED))
			off += e->msg.nlmsg_len - NLMSG_HDRLEN;
		gt_extack(s, (const char *)e + NLMSG_ALIGN(off),
			  (int)(nlh->nlmsg_len - NLMSG_HDRLEN -
				NLMSG_ALIGN(off)));
	}
	return e->error;
}

int gt_done(struct gt_sock *s, const struct nlmsghdr *nlh)
{
	int status = 0;

	if (nlh->nlmsg_len >= NLMSG_HDRLEN + sizeof(status))
		memcpy(&status, NLMSG_DATA(nlh), sizeof(status));
	if (nlh->nlmsg_flags & NLM_F_ACK_TLVS)
		gt_extack(s, (const char *)NLMSG_DATA(nlh) +
			     NLMSG_ALIGN(sizeof(status)),
			  (int)(nlh->nlmsg_len - NLMSG_HDRLEN -
				NLMSG_ALIGN(sizeof(status))));
	return status;
}

int gt_open(struct gt_sock *s)
{
	struct timeval tmo = { .tv_sec = GT_RECV_TIMEOUT_S };
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	int one = 1;

	memset(s, 0, sizeof(*s));
	s->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (s->fd < 0)
		return -errno;
	if (bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    setsockopt(s->fd, SOL_NETLINK, NETLINK_EXT_ACK, &one,
		       sizeof(one)) ||
	    setsockopt(s->fd, SOL_SOCKET, SO_RCVTIMEO, &tmo, sizeof(tmo))) {
		int err = -errno;

		close(s->fd);
		s->fd = -1;
		return err;
	}
	s->seq = (__u32)time(NULL);
	return 0;
}

void gt_close(struct gt_sock *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

int gt_request(struct gt_sock *s, struct gt_msg *m, gt_cb cb, void *arg)
{
	/*
	 * One per thread: with one for all, a thread could parse another's
	 * answer, miss the ack of its own and wait for it forever.
	 */
	static __thread char buf[65536];
	int cb_err = 0, ret;
	ssize_t n;

	memset(&s->ext, 0, sizeof(s->ext));
	s->ext.miss_type = -1;
	s->intr = false;
	m->nlh.nlmsg_seq = ++s->seq;
	if (send(s->fd, m->buf, m->nlh.nlmsg_len, 0) < 0)
		return -errno;

	for (;;) {
		struct nlmsghdr *nlh;

		n = recv(s->fd, buf, sizeof(buf), 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			/* SO_RCVTIMEO: the kernel owes an answer and sent none. */
			if (errno == EAGAIN)
				return -ETIMEDOUT;
			return -errno;
		}
		for (nlh = (struct nlmsghdr *)buf; NLMSG_OK(nlh, (__u32)n);
		     nlh = NLMSG_NEXT(nlh, n)) {
			if (nlh->nlmsg_seq != s->seq)
				continue;	/* a stale answer */
			if (nlh->nlmsg_flags & NLM_F_DUMP_INTR)
				s->intr = true;
			if (nlh->nlmsg_type == NLMSG_ERROR) {
				ret = gt_error(s, nlh);
				return ret ? ret : cb_err;
			}
			if (nlh->nlmsg_type == NLMSG_DONE) {
				ret = gt_done(s, nlh);
				return ret ? ret : cb_err;
			}
			if (cb && !cb_err) {
				ret = cb(nlh, arg);
				if (ret < 0)
					cb_err = ret;
			}
			/* A doit answer without NLM_F_ACK would end here. */
		}
	}
}

void gt_resolve_groups(struct gt_sock *s, const struct nlattr *groups)
{
	const struct nlattr *a = gt_data(groups);
	int len = gt_len(groups);

	while (len >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN) {
		const struct nlattr *g[CTRL_ATTR_MCAST_GRP_MAX + 1];

		if (!gt_parse_nested(a, g, CTRL_ATTR_MCAST_GRP_MAX) &&
		    g[CTRL_ATTR_MCAST_GRP_NAME] &&
		    !strcmp(gt_data(g[CTRL_ATTR_MCAST_GRP_NAME]),
			    MLAP2P_GENL_MCGRP_EVENTS))
			s->events_grp = gt_u32(g[CTRL_ATTR_MCAST_GRP_ID], 0);
		len -= NLA_ALIGN(a->nla_len);
		a = (const struct nlattr *)((const char *)a +
					    NLA_ALIGN(a->nla_len));
	}
}

int gt_count_nested(const struct nlattr *nest)
{
	const struct nlattr *a = gt_data(nest);
	int len = gt_len(nest), n = 0;

	while (len >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN) {
		n++;
		len -= NLA_ALIGN(a->nla_len);
		a = (const struct nlattr *)((const char *)a +
					    NLA_ALIGN(a->nla_len));
	}
	return n;
}

int gt_family_cb(const struct nlmsghdr *nlh, void *arg)
{
	const struct nlattr *tb[CTRL_ATTR_MAX + 1];
	struct gt_sock *s = arg;
	__u16 id;

	if (gt_genl_attrs(nlh, tb, CTRL_ATTR_MAX, NULL) ||
	    !tb[CTRL_ATTR_FAMILY_ID] || gt_len(tb[CTRL_ATTR_FAMILY_ID]) != 2)
		return -EPROTO;
	memcpy(&id, gt_data(tb[CTRL_ATTR_FAMILY_ID]), sizeof(id));
	s->family = id;
	s->version = gt_u32(tb[CTRL_ATTR_VERSION], 0);
	if (tb[CTRL_ATTR_MCAST_GROUPS])
		gt_resolve_groups(s, tb[CTRL_ATTR_MCAST_GROUPS]);
	if (tb[CTRL_ATTR_OPS])
		s->nr_ops = gt_count_nested(tb[CTRL_ATTR_OPS]);
	return 0;
}

int gt_resolve(struct gt_sock *s)
{
	struct gt_msg m;

	gt_msg_init(&m, GENL_ID_CTRL, 0, CTRL_CMD_GETFAMILY);
	((struct genlmsghdr *)NLMSG_DATA(&m.nlh))->version = 1;
	gt_put(&m, CTRL_ATTR_FAMILY_NAME, MLAP2P_GENL_NAME,
	       sizeof(MLAP2P_GENL_NAME));
	return gt_request(s, &m, gt_family_cb, s);
}

int gt_connect(struct gt_sock *s)
{
	int ret = gt_open(s);

	if (ret)
		return ret;
	ret = gt_resolve(s);
	if (ret)
		gt_close(s);
	return ret;
}

void gt_cmd(struct gt_sock *s, struct gt_msg *m, __u8 cmd, __u16 flags)
{
	gt_msg_init(m, s->family, flags, cmd);
}

int gt_subscribe(struct gt_sock *s)
{
	int grp = (int)s->events_grp;

	if (setsockopt(s->fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &grp,
		       sizeof(grp)))
		return -errno;
	return 0;
}

int gt_next_event(struct gt_sock *s, struct gt_msg *m, int timeout_ms)
{
	static __thread char buf[65536];
	static __thread ssize_t len, pos;
	struct pollfd pfd = { .fd = s->fd, .events = POLLIN };
	struct nlmsghdr *nlh;
	int ret;

	for (;;) {
		while (pos < len) {
			nlh = (struct nlmsghdr *)(buf + pos);
			if (!NLMSG_OK(nlh, (__u32)(len - pos))) {
				pos = len;
				break;
			}
			pos += NLMSG_ALIGN(nlh->nlmsg_len);
			if (nlh->nlmsg_type != s->family ||
			    nlh->nlmsg_len > sizeof(m->buf))
				continue;
			memcpy(m->buf, nlh, nlh->nlmsg_len);
			return ((struct genlmsghdr *)NLMSG_DATA(nlh))->cmd;
		}
		ret = poll(&pfd, 1, timeout_ms);
		if (ret < 0 && errno == EINTR)
			continue;
		if (ret < 0)
			return -errno;
		if (ret == 0)
			return -ETIMEDOUT;
		len = recv(s->fd, buf, sizeof(buf), 0);
		if (len < 0) {
			ret = -errno;
			len = 0;
			return ret;
		}
		pos = 0;
	}
}

int gt_region_parse(const struct nlattr *nest, struct gt_region *r)
{
	const struct nlattr *tb[MLAP2P_A_REGION_MAX + 1];
	int i;

	if (!nest || gt_parse_nested(nest, tb, MLAP2P_A_REGION_MAX))
		return -EPROTO;
	for (i = MLAP2P_A_REGION_ID; i <= MLAP2P_A_REGION_MAPPINGS; i++)
		if (!tb[i])
			return -EPROTO;
	if (gt_len(tb[MLAP2P_A_REGION_ID]) != 8 ||
	    gt_len(tb[MLAP2P_A_REGION_SIZE]) != 8 ||
	    (tb[MLAP2P_A_REGION_EXPORTED] &&
	     gt_len(tb[MLAP2P_A_REGION_EXPORTED])))
		return -EPROTO;
	r->id = gt_u64(tb[MLAP2P_A_REGION_ID], 0);
	r->size = gt_u64(tb[MLAP2P_A_REGION_SIZE], 0);
	r->device = gt_u32(tb[MLAP2P_A_REGION_DEVICE], KT_POISON32);
	r->owner_pid = gt_u32(tb[MLAP2P_A_REGION_OWNER_PID], KT_POISON32);
	r->importers = gt_u32(tb[MLAP2P_A_REGION_IMPORTERS], KT_POISON32);
	r->mappings = gt_u32(tb[MLAP2P_A_REGION_MAPPINGS], KT_POISON32);
	r->exported = tb[MLAP2P_A_REGION_EXPORTED] != NULL;
	return 0;
}

int gt_regions_cb(const struct nlmsghdr *nlh, void *arg)
{
	const struct nlattr *tb[MLAP2P_A_MAX + 1];
	struct gt_regions *l = arg;
	__u8 cmd;

	if (gt_genl_attrs(nlh, tb, MLAP2P_A_MAX, &cmd) ||
	    cmd != MLAP2P_CMD_GET_REGION || l->nr == 4096 ||
	    gt_region_parse(tb[MLAP2P_A_REGION], &l->r[l->nr])) {
		l->bad++;
		return 0;
	}
	l->nr++;
	return 0;
}

int gt_get_regions(struct gt_sock *s, __u64 id, __u32 device,
		   struct gt_regions *l)
{
	struct gt_msg m;
	struct nlattr *nest;

	l->nr = 0;
	l->bad = 0;
	gt_cmd(s, &m, MLAP2P_CMD_GET_REGION, id ? 0 : NLM_F_DUMP);
	if (id || device != MLAP2P_NO_MLA) {
		nest = gt_nest_start(&m, MLAP2P_A_REGION);
		if (id)
			gt_put_u64(&m, MLAP2P_A_REGION_ID, id);
		if (device != MLAP2P_NO_MLA)
			gt_put_u32(&m, MLAP2P_A_REGION_DEVICE, device);
		gt_nest_end(&m, nest);
	}
	return gt_request(s, &m, gt_regions_cb, l);
}

const struct gt_region *gt_regions_find(const struct gt_regions *l, __u64 id)
{
	int i;

	for (i = 0; i < l->nr; i++)
		if (l->r[i].id == id)
			return &l->r[i];
	return NULL;
}

void gt_topo_parse(const struct nlattr **tb, struct gt_topo *t)
{
	static const int want[] = {
		MLAP2P_A_FAMILY, MLAP2P_A_NUM_DEVICES,
		MLAP2P_A_CORES_PER_DEVICE, MLAP2P_A_LNC, MLAP2P_A_POD_TYPE,
		MLAP2P_A_POD_NODES, MLAP2P_A_NODE, MLAP2P_A_TOPO_GENERATION,
		MLAP2P_A_CAPACITY,
	};
	size_t i;

	t->missing = 0;
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!tb[want[i]])
			t->missing++;
	t->family = gt_u32(tb[MLAP2P_A_FAMILY], KT_POISON32);
	t->num_devices = gt_u32(tb[MLAP2P_A_NUM_DEVICES], KT_POISON32);
	t->cores_per_device = gt_u32(tb[MLAP2P_A_CORES_PER_DEVICE],
				     KT_POISON32);
	t->lnc = gt_u32(tb[MLAP2P_A_LNC], KT_POISON32);
	t->pod_type = gt_u32(tb[MLAP2P_A_POD_TYPE], KT_POISON32);
	t->pod_nodes = gt_u32(tb[MLAP2P_A_POD_NODES], KT_POISON32);
	t->node = gt_u32(tb[MLAP2P_A_NODE], KT_POISON32);
	t->generation = gt_u32(tb[MLAP2P_A_TOPO_GENERATION], KT_POISON32);
	t->capacity = gt_u64(tb[MLAP2P_A_CAPACITY], KT_POISON64);
}

int gt_topo_cb(const struct nlmsghdr *nlh, void *arg)
{
	const struct nlattr *tb[MLAP2P_A_MAX + 1];
	__u8 cmd;

	if (gt_genl_attrs(nlh, tb, MLAP2P_A_MAX, &cmd) ||
	    cmd != MLAP2P_CMD_GET_TOPO)
		return -EPROTO;
	gt_topo_parse(tb, arg);
	return 0;
}

int gt_get_topo(struct gt_sock *s, struct gt_topo *t)
{
	struct gt_msg m;

	memset(t, 0xcc, sizeof(*t));
	gt_cmd(s, &m, MLAP2P_CMD_GET_TOPO, 0);
	return gt_request(s, &m, gt_topo_cb, t);
}

void gt_topo_none(struct gt_topo *t)
{
	memset(t, 0xcc, sizeof(*t));
	t->capacity = 0;
}

int gt_set_topo(struct gt_sock *s, const struct gt_topo *t)
{
	const struct {
		int attr;
		__u32 v;
	} f[] = {
		{ MLAP2P_A_FAMILY, t->family },
		{ MLAP2P_A_NUM_DEVICES, t->num_devices },
		{ MLAP2P_A_CORES_PER_DEVICE, t->cores_per_device },
		{ MLAP2P_A_LNC, t->lnc },
		{ MLAP2P_A_POD_TYPE, t->pod_type },
		{ MLAP2P_A_POD_NODES, t->pod_nodes },
		{ MLAP2P_A_NODE, t->node },
	};
	struct gt_msg m;
	size_t i;

	gt_cmd(s, &m, MLAP2P_CMD_SET_TOPO, 0);
	for (i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (f[i].v != KT_POISON32)
			gt_put_u32(&m, (__u16)f[i].attr, f[i].v);
	if (t->capacity)
		gt_put_u64(&m, MLAP2P_A_CAPACITY, t->capacity);
	return gt_request(s, &m, NULL, NULL);
}

int gt_restore_topo(struct gt_sock *s, const struct gt_topo *t)
{
	struct gt_topo all = *t;

	return gt_set_topo(s, &all);
}

bool gt_module_has_genl(void)
{
	struct mlap2p_info info;
	int fd = kt_dev_open();
	bool ok;

	if (fd < 0)
		return false;
	ok = !kt_get_info(fd, &info) && (info.features & MLAP2P_FEAT_GENL);
	close(fd);
	return ok;
}

int gt_become_nobody(void)
{
	if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) ||
	    setresuid(65534, 65534, 65534))
		return -errno;
	return 0;
}
