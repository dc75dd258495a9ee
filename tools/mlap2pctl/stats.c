// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * stats: the module's counters and each local MLA's bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"

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

/* The module's counters (common/mlap2p_stats.h), in the module's order. */
static const struct {
	int attr;
	const char *name;
	bool bytes;
} stat_names[] = {
#define MLAP2P_STAT(name, attr, sysfs, bytes) { attr, #name, bytes },
#include "mlap2p_stats.h"
#undef MLAP2P_STAT
};

/* The index of the counter GET_STATS carries in @attr, or -1. */
static int stat_find(int attr)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(stat_names); i++)
		if (stat_names[i].attr == attr)
			return (int)i;
	return -1;
}

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
	__u32 k;
	int a;

	/* In MLAP2P_A_STAT_* order */
	for (a = 1; a <= MLAP2P_A_STAT_MAX; a++) {
		int i = stat_find(a);

		if (i < 0 || !s->have[a])
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
	__u32 k;
	int a;

	printf("{");
	for (a = 1; a <= MLAP2P_A_STAT_MAX; a++) {
		int i = stat_find(a);

		if (i < 0 || !s->have[a])
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

int cmd_stats(struct ctl *c, int argc, char **argv)
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
