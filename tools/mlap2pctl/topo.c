// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * topo, topo set and peer: the topology fetched (a summary and a
 * per-MLA dump, consistent by generation), printed as a table or JSON,
 * changed, and the edge between two cores.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

/* ------------------------------------------------------------------ */
/* Topology: fetching                                                  */
/* ------------------------------------------------------------------ */


void topo_summary_parse(struct nlattr **tb, struct topo_view *v)
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

struct topo_dev *topo_find(struct topo_view *v, __u32 mla)
{
	struct topo_dev key = { .mla = mla };

	if (!v->nr_devs)
		return NULL;
	return bsearch(&key, v->devs, v->nr_devs, sizeof(key), cmp_dev);
}

/* ------------------------------------------------------------------ */
/* Topology: printing                                                  */
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
/* Commands: topo, topo set, peer                                      */
/* ------------------------------------------------------------------ */

int cmd_topo(struct ctl *c, int argc, char **argv)
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

int cmd_topo_set(struct ctl *c, int argc, char **argv)
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

/*
 * What the seed's p2p.cc prints (NCCL_DEBUG=INFO) when rank 0 on core_a
 * sends to rank 1 on core_b, each its own process, with a rank 2 on the
 * relay MLA's first core when the pair needs one: the line libmlap2p
 * prints for the same pair.  -errno when there is no P2P line to print.
 */
static int peer_seed_line(struct ctl *c, const struct mlap2p_peer_query *q,
			  char *buf, size_t len)
{
	struct mlap2p_info info = { 0 };
	__u32 lpm;
	int ret;

	if (!q->access) {
		snprintf(buf, len, "no P2P: selectTransport falls through to NET");
		return 0;
	}
	if (q->edge_class != MLAP2P_EDGE_RELAY) {
		snprintf(buf, len, "Channel 00 : 0[%u] -> 1[%u] via P2P/IPC",
			 q->core_a, q->core_b);
		return 0;
	}
	ret = dev_ioctl(c, MLAP2P_IOC_GET_INFO, &info);
	if (ret)
		return ret;
	lpm = info.num_devices ? info.cores_per_node / info.num_devices : 0;
	if (!lpm || q->intermediate_mla == MLAP2P_NO_MLA)
		return -EINVAL;
	/* The intermediate's busId is its device, the core, in hex. */
	snprintf(buf, len, "Channel 00 : 0[%u] -> 1[%u] via P2P/indirect/2[%x] (rank 2 on core %u)",
		 q->core_a, q->core_b, q->intermediate_mla * lpm,
		 q->intermediate_mla * lpm);
	return 0;
}

int cmd_peer(struct ctl *c, int argc, char **argv)
{
	struct mlap2p_peer_query q = { 0 };
	char via[32], seed[128];
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
		printf("]");
		if (!peer_seed_line(c, &q, seed, sizeof(seed)))
			printf(",\"seed\":\"%s\"", seed);
		printf("}\n");
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
	return peer_seed_line(c, &q, seed, sizeof(seed)) ? 0 :
	       (printf("seed: %s\n", seed), 0);
}
