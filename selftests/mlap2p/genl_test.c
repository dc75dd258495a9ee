// SPDX-License-Identifier: GPL-2.0
/*
 * genl_test: the "mlap2p" generic netlink family, its topology and stats
 * commands: family resolution; GET_TOPO against GET_INFO and DEV_INFO;
 * GET_STATS following allocations; threads asking at once getting their
 * own answers; SET_TOPO applying all or nothing, its merge rule, and every
 * rejection with its errno and extack: nothing to set, out-of-range values
 * (-ERANGE), wrong lengths and unknown attributes (-EINVAL), inconsistent
 * topologies (-EINVAL, the blamed attribute's offset), no CAP_NET_ADMIN
 * over the initial user namespace (-EPERM and its message) and live
 * regions (-EBUSY).
 *
 * The fixture saves the topology and every test that changes it puts it
 * back in the teardown.  Region tests are in genl_region_test.c, events in
 * genl_events_test.c.
 */
#include "genl_util.h"
#include "kselftest_harness.h"

#include <pthread.h>

FIXTURE(genl) {
	struct gt_sock s;
	int fd;
	struct mlap2p_info info;
	struct gt_topo saved;
};

FIXTURE_SETUP(genl)
{
	self->s.fd = -1;
	self->fd = kt_dev_open();
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, kt_get_info(self->fd, &self->info));
	if (!(self->info.features & MLAP2P_FEAT_GENL))
		SKIP(return, "module built without the genl family");
	ASSERT_EQ(0, gt_connect(&self->s));
	ASSERT_EQ(0, gt_get_topo(&self->s, &self->saved));
	ASSERT_EQ(0, self->saved.missing);
}

FIXTURE_TEARDOWN(genl)
{
	struct gt_topo now;

	/* Any change, capacity included, bumped the generation. */
	if (self->s.fd >= 0 && !gt_get_topo(&self->s, &now) &&
	    now.generation != self->saved.generation)
		EXPECT_EQ(0, gt_restore_topo(&self->s, &self->saved));
	gt_close(&self->s);
	if (self->fd >= 0)
		close(self->fd);
}

/* ------------------------------------------------------------------ */
/* Family                                                              */
/* ------------------------------------------------------------------ */

TEST_F(genl, family_resolves)
{
	EXPECT_NE(0, self->s.family);
	EXPECT_EQ(MLAP2P_GENL_VERSION, self->s.version);
	EXPECT_NE(0, self->s.events_grp);
	/* GET_TOPO, SET_TOPO, GET_REGION, GET_STATS. */
	EXPECT_EQ(4, self->s.nr_ops);
}

TEST_F(genl, unknown_command_rejected)
{
	struct gt_msg m;

	gt_cmd(&self->s, &m, MLAP2P_CMD_EVENT_REGION_NEW, 0);
	EXPECT_EQ(-EOPNOTSUPP, gt_request(&self->s, &m, NULL, NULL));
	gt_cmd(&self->s, &m, MLAP2P_CMD_MAX + 1, 0);
	EXPECT_EQ(-EOPNOTSUPP, gt_request(&self->s, &m, NULL, NULL));
}

TEST_F(genl, reserved_header_field_rejected)
{
	struct gt_msg m;

	gt_cmd(&self->s, &m, MLAP2P_CMD_GET_TOPO, 0);
	((struct genlmsghdr *)NLMSG_DATA(&m.nlh))->reserved = 1;
	EXPECT_EQ(-EINVAL, gt_request(&self->s, &m, NULL, NULL));
}

/* One thread asking @cmd over and over, each time on a new socket. */
struct genl_asker {
	__u8 cmd;
	int ret, rounds, answers;
};

#define GENL_ASK_ROUNDS	200

/* A data message must answer the asker's own command. */
static int genl_asker_cb(const struct nlmsghdr *nlh, void *arg)
{
	const struct nlattr *tb[MLAP2P_A_MAX + 1];
	struct genl_asker *a = arg;
	__u8 cmd;

	if (gt_genl_attrs(nlh, tb, MLAP2P_A_MAX, &cmd) || cmd != a->cmd)
		return -EPROTO;
	a->answers++;
	return 0;
}

static void *genl_ask(void *arg)
{
	struct genl_asker *a = arg;
	struct gt_sock s;
	struct gt_msg m;

	for (; a->rounds < GENL_ASK_ROUNDS; a->rounds++) {
		a->ret = gt_connect(&s);
		if (a->ret)
			break;
		gt_cmd(&s, &m, a->cmd, 0);
		a->ret = gt_request(&s, &m, genl_asker_cb, a);
		gt_close(&s);
		if (a->ret)
			break;
	}
	return NULL;
}

/*
 * Two threads resolving the family and asking at once, each on its own
 * socket, each get their own answers: all of them, none of the other's.
 * (The fuzzer's threads do this; with one receive buffer for all, one of
 * them waited for an ack the other had read.)
 */
TEST_F(genl, threads_get_their_own_answers)
{
	struct genl_asker a[2] = {
		{ .cmd = MLAP2P_CMD_GET_TOPO },
		{ .cmd = MLAP2P_CMD_GET_STATS },
	};
	pthread_t tid[2];
	int i;

	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, pthread_create(&tid[i], NULL, genl_ask, &a[i]));
	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, pthread_join(tid[i], NULL));
	for (i = 0; i < 2; i++) {
		EXPECT_EQ(0, a[i].ret) {
			TH_LOG("thread %d, round %d", i, a[i].rounds);
		}
		EXPECT_EQ(GENL_ASK_ROUNDS, a[i].rounds);
		EXPECT_EQ(GENL_ASK_ROUNDS, a[i].answers);
	}
}

/* ------------------------------------------------------------------ */
/* GET_TOPO                                                            */
/* ------------------------------------------------------------------ */

TEST_F(genl, get_topo_matches_get_info)
{
	const struct mlap2p_info *in = &self->info;
	const struct gt_topo *t = &self->saved;

	EXPECT_EQ(in->family, t->family);
	EXPECT_EQ(in->num_devices, t->num_devices);
	EXPECT_EQ(in->cores_per_device, t->cores_per_device);
	EXPECT_EQ(in->lnc, t->lnc);
	EXPECT_EQ(in->pod_type, t->pod_type);
	EXPECT_EQ(in->pod_nodes, t->pod_nodes);
	EXPECT_EQ(in->node, t->node);
	EXPECT_EQ(in->topo_generation, t->generation);
	EXPECT_EQ(in->dev_capacity, t->capacity);
}

struct topo_dump {
	int fd;
	__u32 next;		/* MLA expected next */
	int bad;
	__u64 used_total;
};

/* Each DEV nest must equal DEV_INFO for the same MLA, in MLA order. */
static int topo_dump_cb(const struct nlmsghdr *nlh, void *arg)
{
	const struct nlattr *tb[MLAP2P_A_MAX + 1], *d[MLAP2P_A_DEV_MAX + 1];
	struct topo_dump *td = arg;
	struct mlap2p_dev_info di;
	__u32 mla, k;
	__u8 cmd;

	if (gt_genl_attrs(nlh, tb, MLAP2P_A_MAX, &cmd) ||
	    cmd != MLAP2P_CMD_GET_TOPO || !tb[MLAP2P_A_DEV] ||
	    gt_parse_nested(tb[MLAP2P_A_DEV], d, MLAP2P_A_DEV_MAX))
		goto bad;
	mla = gt_u32(d[MLAP2P_A_DEV_MLA], KT_POISON32);
	if (mla != td->next++ || kt_dev_info(td->fd, mla, &di))
		goto bad;
	if (gt_u32(d[MLAP2P_A_DEV_NODE], 0) != di.node ||
	    gt_u32(d[MLAP2P_A_DEV_PEER_MLA], 0) != di.peer_mla ||
	    gt_u32(d[MLAP2P_A_DEV_TORUS_X], 0) != di.torus_x ||
	    gt_u32(d[MLAP2P_A_DEV_TORUS_Y], 0) != di.torus_y ||
	    gt_u32(d[MLAP2P_A_DEV_FIRST_CORE], 0) != di.first_core ||
	    gt_u32(d[MLAP2P_A_DEV_NUM_CORES], 0) != di.num_cores ||
	    gt_u64(d[MLAP2P_A_DEV_CAPACITY], 0) != di.capacity ||
	    gt_u64(d[MLAP2P_A_DEV_USED], 1) != di.used ||
	    !d[MLAP2P_A_DEV_LIVE_BYTES] || !d[MLAP2P_A_DEV_HWM_BYTES] ||
	    gt_u64(d[MLAP2P_A_DEV_LIVE_BYTES], 0) >
	    gt_u64(d[MLAP2P_A_DEV_HWM_BYTES], 0) ||
	    !d[MLAP2P_A_DEV_NEIGHBOURS] ||
	    gt_len(d[MLAP2P_A_DEV_NEIGHBOURS]) != (int)(4 * di.num_neighbours))
		goto bad;
	for (k = 0; k < di.num_neighbours; k++) {
		__u32 nb;

		memcpy(&nb, (const char *)gt_data(d[MLAP2P_A_DEV_NEIGHBOURS]) +
		       4 * k, sizeof(nb));
		if (nb != di.neighbours[k])
			goto bad;
	}
	td->used_total += di.used;
	return 0;
bad:
	td->bad++;
	return 0;
}

static int dump_topo(struct gt_sock *s, struct topo_dump *td)
{
	struct gt_msg m;

	gt_cmd(s, &m, MLAP2P_CMD_GET_TOPO, NLM_F_DUMP);
	return gt_request(s, &m, topo_dump_cb, td);
}

TEST_F(genl, get_topo_dump_matches_dev_info)
{
	struct topo_dump td = { .fd = self->fd };

	ASSERT_EQ(0, dump_topo(&self->s, &td));
	EXPECT_EQ(0, td.bad);
	EXPECT_EQ(kt_total_mlas(&self->info), td.next);
	EXPECT_FALSE(self->s.intr);
}

TEST_F(genl, get_topo_dump_shows_usage)
{
	struct topo_dump td = { .fd = self->fd };
	struct mlap2p_mem_alloc a;

	ASSERT_EQ(0, kt_alloc(self->fd, 3 << 20,
			      kt_local_mla(&self->info), &a));
	ASSERT_EQ(0, dump_topo(&self->s, &td));
	EXPECT_EQ(0, td.bad);
	EXPECT_EQ(a.alloc_size, td.used_total);
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
}

TEST_F(genl, get_topo_rejects_attributes)
{
	struct gt_msg m;

	gt_cmd(&self->s, &m, MLAP2P_CMD_GET_TOPO, 0);
	gt_put_u32(&m, MLAP2P_A_FAMILY, MLAP2P_FAMILY_TRN2);
	EXPECT_EQ(-EINVAL, gt_request(&self->s, &m, NULL, NULL));
	EXPECT_NE(0, self->s.ext.msg[0]);

	gt_cmd(&self->s, &m, MLAP2P_CMD_GET_TOPO, NLM_F_DUMP);
	gt_put_u32(&m, MLAP2P_A_NODE, 0);
	EXPECT_EQ(-EINVAL, gt_request(&self->s, &m, NULL, NULL));
	EXPECT_NE(0, self->s.ext.msg[0]);
}

/* ------------------------------------------------------------------ */
/* GET_STATS                                                           */
/* ------------------------------------------------------------------ */

#define MAX_DEVS	64	/* MLAP2P_TOPO_MAX_DEVICES: MLAs per node */

struct stats {
	__u64 v[MLAP2P_A_STAT_MAX + 1];
	int have;		/* of ALLOCS..HWM_BYTES */
	int have_hwm;		/* of HWM_REGIONS, HWM_MAPPINGS */
	__u64 dev_used[MAX_DEVS];
	__u64 dev_live[MAX_DEVS];
	__u64 dev_hwm[MAX_DEVS];
	__u32 dev_mla[MAX_DEVS];
	int nr_devs;
};

static int stats_cb(const struct nlmsghdr *nlh, void *arg)
{
	const struct nlattr *tb[MLAP2P_A_MAX + 1], *st[MLAP2P_A_STAT_MAX + 1];
	const struct genlmsghdr *g = NLMSG_DATA(nlh);
	const struct nlattr *a, *d[MLAP2P_A_DEV_MAX + 1];
	struct stats *s = arg;
	int i, len;

	if (gt_genl_attrs(nlh, tb, MLAP2P_A_MAX, NULL) || !tb[MLAP2P_A_STATS] ||
	    gt_parse_nested(tb[MLAP2P_A_STATS], st, MLAP2P_A_STAT_MAX))
		return -EPROTO;
	for (i = MLAP2P_A_STAT_ALLOCS; i <= MLAP2P_A_STAT_HWM_BYTES; i++) {
		if (st[i] && gt_len(st[i]) == 8) {
			s->v[i] = gt_u64(st[i], 0);
			s->have++;
		}
	}
	for (i = MLAP2P_A_STAT_HWM_REGIONS; i <= MLAP2P_A_STAT_HWM_MAPPINGS;
	     i++) {
		if (st[i] && gt_len(st[i]) == 8) {
			s->v[i] = gt_u64(st[i], 0);
			s->have_hwm++;
		}
	}
	/* The DEV nests repeat: walk them rather than index them. */
	a = (const struct nlattr *)((const char *)g + GENL_HDRLEN);
	len = (int)(nlh->nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN);
	for (; len >= NLA_HDRLEN; len -= NLA_ALIGN(a->nla_len),
	     a = (const void *)((const char *)a + NLA_ALIGN(a->nla_len))) {
		if ((a->nla_type & NLA_TYPE_MASK) != MLAP2P_A_DEV)
			continue;
		if (s->nr_devs == MAX_DEVS ||
		    gt_parse_nested(a, d, MLAP2P_A_DEV_MAX) ||
		    !d[MLAP2P_A_DEV_MLA] || !d[MLAP2P_A_DEV_USED] ||
		    !d[MLAP2P_A_DEV_CAPACITY] ||
		    gt_len(d[MLAP2P_A_DEV_LIVE_BYTES]) != 8 ||
		    gt_len(d[MLAP2P_A_DEV_HWM_BYTES]) != 8)
			return -EPROTO;
		s->dev_mla[s->nr_devs] = gt_u32(d[MLAP2P_A_DEV_MLA], 0);
		s->dev_used[s->nr_devs] = gt_u64(d[MLAP2P_A_DEV_USED], 0);
		s->dev_live[s->nr_devs] = gt_u64(d[MLAP2P_A_DEV_LIVE_BYTES], 0);
		s->dev_hwm[s->nr_devs] = gt_u64(d[MLAP2P_A_DEV_HWM_BYTES], 0);
		s->nr_devs++;
	}
	return 0;
}

static int get_stats(struct gt_sock *gs, struct stats *s)
{
	struct gt_msg m;

	memset(s, 0, sizeof(*s));
	gt_cmd(gs, &m, MLAP2P_CMD_GET_STATS, 0);
	return gt_request(gs, &m, stats_cb, s);
}

/* A STAT_* attribute and the sysfs counter it reports. */
static const struct {
	int attr;
	size_t off;
} stat_sysfs[] = {
#define STAT_SYSFS(a, f) \
	{ MLAP2P_A_STAT_##a, offsetof(struct kt_counters, f) }
	STAT_SYSFS(ALLOCS, allocs), STAT_SYSFS(FREES, frees),
	STAT_SYSFS(EXPORTS, exports), STAT_SYSFS(OPENS, opens),
	STAT_SYSFS(CLOSES, closes), STAT_SYSFS(REJECTED, rejected),
	STAT_SYSFS(LIVE_REGIONS, live_regions),
	STAT_SYSFS(LIVE_BYTES, live_bytes),
	STAT_SYSFS(LIVE_MAPPINGS, live_mappings),
	STAT_SYSFS(HWM_BYTES, hwm_bytes),
#undef STAT_SYSFS
};

/*
 * GET_STATS again; of the event counters (ALLOCS to REJECTED) exactly
 * @attr moved since @prev, by one; and every counter equals its sysfs
 * file (when sysfs is there).  @prev becomes the new reading.
 */
static void stats_step(struct __test_metadata *_metadata, struct gt_sock *gs,
		       struct stats *prev, int attr)
{
	struct kt_counters c;
	struct stats now;
	size_t k;
	int i;

	ASSERT_EQ(0, get_stats(gs, &now));
	for (i = MLAP2P_A_STAT_ALLOCS; i <= MLAP2P_A_STAT_REJECTED; i++) {
		EXPECT_EQ(prev->v[i] + (i == attr), now.v[i]) {
			TH_LOG("counter %d, after a step that moves %d", i,
			       attr);
		}
	}
	if (!kt_counters_read(&c)) {
		for (k = 0; k < sizeof(stat_sysfs) / sizeof(stat_sysfs[0]);
		     k++) {
			__u64 v;

			memcpy(&v, (const char *)&c + stat_sysfs[k].off,
			       sizeof(v));
			EXPECT_EQ(v, now.v[stat_sysfs[k].attr]) {
				TH_LOG("counter %d against sysfs",
				       stat_sysfs[k].attr);
			}
		}
	}
	*prev = now;
}

/*
 * Each call moves its own counter by one and no other: allocate, export,
 * open, a rejected open, close, free.
 */
TEST_F(genl, get_stats_follows_alloc_and_free)
{
	__u32 mla = kt_local_mla(&self->info), i;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct stats before, st;
	struct mlap2p_mem_alloc a;
	struct mlap2p_ipc_open o, refused;
	int fd2;

	ASSERT_EQ(0, get_stats(&self->s, &before));
	EXPECT_EQ(10, before.have);
	EXPECT_EQ(2, before.have_hwm);
	EXPECT_EQ((int)self->info.num_devices, before.nr_devs);
	for (i = 0; i < (__u32)before.nr_devs; i++)
		EXPECT_EQ(mla + i, before.dev_mla[i]);
	st = before;
	stats_step(_metadata, &self->s, &st, 0);

	ASSERT_EQ(0, kt_alloc(self->fd, 1 << 20, mla + 1, &a));
	stats_step(_metadata, &self->s, &st, MLAP2P_A_STAT_ALLOCS);
	EXPECT_EQ(before.v[MLAP2P_A_STAT_LIVE_REGIONS] + 1,
		  st.v[MLAP2P_A_STAT_LIVE_REGIONS]);
	EXPECT_EQ(before.v[MLAP2P_A_STAT_LIVE_BYTES] + a.alloc_size,
		  st.v[MLAP2P_A_STAT_LIVE_BYTES]);
	EXPECT_LE(st.v[MLAP2P_A_STAT_LIVE_BYTES], st.v[MLAP2P_A_STAT_HWM_BYTES]);
	EXPECT_EQ(before.dev_used[1] + a.alloc_size, st.dev_used[1]);

	ASSERT_EQ(0, kt_export(self->fd, a.handle, 0, ipc));
	stats_step(_metadata, &self->s, &st, MLAP2P_A_STAT_EXPORTS);

	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, kt_import(fd2, ipc, &o));
	stats_step(_metadata, &self->s, &st, MLAP2P_A_STAT_OPENS);

	ipc[MLAP2P_IPC_HANDLE_SIZE / 2 - 1] ^= 1;	/* in the secret */
	EXPECT_EQ(-ENOENT, kt_import(fd2, ipc, &refused));
	stats_step(_metadata, &self->s, &st, MLAP2P_A_STAT_REJECTED);

	ASSERT_EQ(0, kt_close_handle(fd2, o.handle));
	close(fd2);
	stats_step(_metadata, &self->s, &st, MLAP2P_A_STAT_CLOSES);

	ASSERT_EQ(0, kt_free(self->fd, a.handle));
	stats_step(_metadata, &self->s, &st, MLAP2P_A_STAT_FREES);
	EXPECT_EQ(before.v[MLAP2P_A_STAT_LIVE_REGIONS],
		  st.v[MLAP2P_A_STAT_LIVE_REGIONS]);
	EXPECT_EQ(before.v[MLAP2P_A_STAT_LIVE_BYTES],
		  st.v[MLAP2P_A_STAT_LIVE_BYTES]);
	EXPECT_EQ(before.dev_used[1], st.dev_used[1]);
}

static __u64 max_u64(__u64 a, __u64 b)
{
	return a > b ? a : b;
}

/*
 * Every local MLA but @i0 and @i1 (indices into the DEV nests) is as in
 * @base; on every MLA live bytes equal the capacity taken (nothing is
 * being created) and never exceed the high-water mark.
 */
static void stats_others_same(struct __test_metadata *_metadata,
			      const struct stats *base, const struct stats *now,
			      int i0, int i1)
{
	int i;

	ASSERT_EQ(base->nr_devs, now->nr_devs);
	for (i = 0; i < now->nr_devs; i++) {
		EXPECT_EQ(now->dev_used[i], now->dev_live[i]);
		EXPECT_LE(now->dev_live[i], now->dev_hwm[i]);
		if (i == i0 || i == i1)
			continue;
		EXPECT_EQ(base->dev_live[i], now->dev_live[i]);
		EXPECT_EQ(base->dev_hwm[i], now->dev_hwm[i]);
	}
}

/* DEV nest @i of @s has @live bytes live and the mark @hwm. */
static void expect_mla(struct __test_metadata *_metadata,
		       const struct stats *s, int i, __u64 live, __u64 hwm)
{
	EXPECT_EQ(live, s->dev_live[i]) {
		TH_LOG("live bytes, DEV nest %d", i);
	}
	EXPECT_EQ(hwm, s->dev_hwm[i]) {
		TH_LOG("high-water mark, DEV nest %d", i);
	}
}

/* The global high-water marks of @a and @b are the same. */
static void expect_marks_same(struct __test_metadata *_metadata,
			      const struct stats *a, const struct stats *b)
{
	int i;

	for (i = MLAP2P_A_STAT_HWM_BYTES; i <= MLAP2P_A_STAT_HWM_MAPPINGS;
	     i++) {
		if (i == MLAP2P_A_STAT_PAD)
			continue;
		EXPECT_EQ(a->v[i], b->v[i]) {
			TH_LOG("STAT attribute %d", i);
		}
	}
}

/*
 * Per-MLA live bytes and high-water marks: 3 pages on the first local
 * MLA, 5 on the second, a mapping, then both freed.  Other tests may have
 * left higher marks, so each mark is the baseline's or the new live
 * value, whichever is higher; once set it never goes down.  The global
 * HWM_REGIONS and HWM_MAPPINGS follow the same rule.
 */
TEST_F(genl, get_stats_per_mla_live_and_hwm)
{
	__u32 mla = kt_local_mla(&self->info);
	size_t pg = kt_page_size();
	struct mlap2p_mem_alloc a, b;
	struct stats base, s1, s2, s3, s4;
	__u64 hwm0, hwm1;
	void *p;

	if (self->info.num_devices < 2)
		SKIP(return, "needs two MLAs per node");
	ASSERT_EQ(0, get_stats(&self->s, &base));
	ASSERT_EQ((int)self->info.num_devices, base.nr_devs);
	stats_others_same(_metadata, &base, &base, -1, -1);
	EXPECT_LE(base.v[MLAP2P_A_STAT_LIVE_REGIONS],
		  base.v[MLAP2P_A_STAT_HWM_REGIONS]);
	EXPECT_LE(base.v[MLAP2P_A_STAT_LIVE_MAPPINGS],
		  base.v[MLAP2P_A_STAT_HWM_MAPPINGS]);

	ASSERT_EQ(0, kt_alloc(self->fd, 3 * pg, mla, &a));
	ASSERT_EQ(3 * pg, a.alloc_size);
	ASSERT_EQ(0, get_stats(&self->s, &s1));
	hwm0 = max_u64(base.dev_hwm[0], base.dev_live[0] + 3 * pg);
	expect_mla(_metadata, &s1, 0, base.dev_live[0] + 3 * pg, hwm0);
	stats_others_same(_metadata, &base, &s1, 0, -1);
	EXPECT_EQ(max_u64(base.v[MLAP2P_A_STAT_HWM_REGIONS],
			  base.v[MLAP2P_A_STAT_LIVE_REGIONS] + 1),
		  s1.v[MLAP2P_A_STAT_HWM_REGIONS]);

	ASSERT_EQ(0, kt_alloc(self->fd, 5 * pg, mla + 1, &b));
	ASSERT_EQ(5 * pg, b.alloc_size);
	p = kt_map(self->fd, b.mmap_cookie, 5 * pg, PROT_READ);
	ASSERT_NE(MAP_FAILED, p);
	ASSERT_EQ(0, get_stats(&self->s, &s2));
	hwm1 = max_u64(base.dev_hwm[1], base.dev_live[1] + 5 * pg);
	expect_mla(_metadata, &s2, 0, base.dev_live[0] + 3 * pg, hwm0);
	expect_mla(_metadata, &s2, 1, base.dev_live[1] + 5 * pg, hwm1);
	stats_others_same(_metadata, &base, &s2, 0, 1);
	EXPECT_EQ(max_u64(base.v[MLAP2P_A_STAT_HWM_REGIONS],
			  base.v[MLAP2P_A_STAT_LIVE_REGIONS] + 2),
		  s2.v[MLAP2P_A_STAT_HWM_REGIONS]);
	EXPECT_EQ(max_u64(base.v[MLAP2P_A_STAT_HWM_MAPPINGS],
			  base.v[MLAP2P_A_STAT_LIVE_MAPPINGS] + 1),
		  s2.v[MLAP2P_A_STAT_HWM_MAPPINGS]);

	/* Freeing the first region lowers its MLA's live bytes, not the mark. */
	ASSERT_EQ(0, kt_free(self->fd, a.handle));
	ASSERT_EQ(0, get_stats(&self->s, &s3));
	expect_mla(_metadata, &s3, 0, base.dev_live[0], hwm0);
	expect_mla(_metadata, &s3, 1, base.dev_live[1] + 5 * pg, hwm1);
	stats_others_same(_metadata, &base, &s3, 0, 1);
	expect_marks_same(_metadata, &s2, &s3);

	/* The mapping keeps the second one live after its free. */
	ASSERT_EQ(0, kt_free(self->fd, b.handle));
	ASSERT_EQ(0, get_stats(&self->s, &s4));
	EXPECT_EQ(base.dev_live[1] + 5 * pg, s4.dev_live[1]);
	ASSERT_EQ(0, munmap(p, 5 * pg));
	ASSERT_EQ(0, get_stats(&self->s, &s4));
	expect_mla(_metadata, &s4, 0, base.dev_live[0], hwm0);
	expect_mla(_metadata, &s4, 1, base.dev_live[1], hwm1);
	stats_others_same(_metadata, &base, &s4, 0, 1);
	expect_marks_same(_metadata, &s2, &s4);
	EXPECT_EQ(base.v[MLAP2P_A_STAT_LIVE_BYTES],
		  s4.v[MLAP2P_A_STAT_LIVE_BYTES]);
}

/*
 * SET_TOPO sets every per-MLA mark to 0 (MLA ids may name other devices
 * now); the global marks stay.  From 0 the marks are exact: 2 pages on the
 * second MLA, freed, leave 2 pages there and 0 everywhere else.
 */
TEST_F(genl, set_topo_resets_per_mla_hwm)
{
	__u32 mla = kt_local_mla(&self->info);
	size_t pg = kt_page_size();
	struct stats before, now;
	struct mlap2p_mem_alloc a;
	struct gt_topo t;
	int i, ret;

	if (self->info.num_devices < 2)
		SKIP(return, "needs two MLAs per node");
	/* A mark to reset, in case nothing set one yet. */
	ASSERT_EQ(0, kt_alloc(self->fd, pg, mla, &a));
	ASSERT_EQ(0, kt_free(self->fd, a.handle));
	ASSERT_EQ(0, get_stats(&self->s, &before));
	ASSERT_LE(pg, before.dev_hwm[0]);

	gt_topo_none(&t);
	t.family = self->saved.family;	/* the same: nothing else changes */
	ret = gt_set_topo(&self->s, &t);
	if (ret == -EBUSY)
		SKIP(return, "another process holds regions");
	ASSERT_EQ(0, ret);
	ASSERT_EQ(0, get_stats(&self->s, &now));
	ASSERT_EQ(before.nr_devs, now.nr_devs);
	for (i = 0; i < now.nr_devs; i++)
		expect_mla(_metadata, &now, i, 0, 0);
	expect_marks_same(_metadata, &before, &now);

	ASSERT_EQ(0, kt_alloc(self->fd, 2 * pg, mla + 1, &a));
	ASSERT_EQ(0, kt_free(self->fd, a.handle));
	ASSERT_EQ(0, get_stats(&self->s, &now));
	for (i = 0; i < now.nr_devs; i++)
		expect_mla(_metadata, &now, i, 0, i == 1 ? 2 * pg : 0);
}

TEST_F(genl, get_stats_rejects_attributes)
{
	struct gt_msg m;

	gt_cmd(&self->s, &m, MLAP2P_CMD_GET_STATS, 0);
	gt_put_u32(&m, MLAP2P_A_STATS, 0);
	EXPECT_EQ(-EINVAL, gt_request(&self->s, &m, NULL, NULL));
	EXPECT_NE(0, self->s.ext.msg[0]);
}

/* ------------------------------------------------------------------ */
/* SET_TOPO                                                            */
/* ------------------------------------------------------------------ */

TEST_F(genl, set_topo_changes_one_field)
{
	struct mlap2p_info in;
	struct gt_topo t, now;

	if (self->saved.family != MLAP2P_FAMILY_TRN2)
		SKIP(return, "needs the trn2 default topology");
	gt_topo_none(&t);
	t.lnc = self->saved.lnc == 1 ? 2 : 1;
	ASSERT_EQ(0, gt_set_topo(&self->s, &t));

	ASSERT_EQ(0, gt_get_topo(&self->s, &now));
	EXPECT_EQ(t.lnc, now.lnc);
	EXPECT_EQ(self->saved.family, now.family);
	EXPECT_EQ(self->saved.num_devices, now.num_devices);
	EXPECT_EQ(self->saved.cores_per_device, now.cores_per_device);
	EXPECT_EQ(self->saved.capacity, now.capacity);
	EXPECT_EQ(self->saved.generation + 1, now.generation);

	/* The ioctl side answers from the same configuration. */
	ASSERT_EQ(0, kt_get_info(self->fd, &in));
	EXPECT_EQ(t.lnc, in.lnc);
	EXPECT_EQ(now.generation, in.topo_generation);
	EXPECT_EQ(in.num_devices * in.cores_per_device / in.lnc,
		  in.cores_per_node);
}

TEST_F(genl, set_topo_new_family_starts_from_defaults)
{
	struct gt_topo t, now;

	gt_topo_none(&t);
	t.family = MLAP2P_FAMILY_TRN3;
	t.pod_type = MLAP2P_POD_SWITCH;
	t.pod_nodes = 4;
	t.node = 2;
	t.capacity = 64 << 20;
	ASSERT_EQ(0, gt_set_topo(&self->s, &t));
	ASSERT_EQ(0, gt_get_topo(&self->s, &now));
	EXPECT_EQ(MLAP2P_FAMILY_TRN3, now.family);
	EXPECT_EQ(16, now.num_devices);		/* trn3's defaults */
	EXPECT_EQ(8, now.cores_per_device);
	EXPECT_EQ(2, now.lnc);
	EXPECT_EQ(MLAP2P_POD_SWITCH, now.pod_type);
	EXPECT_EQ(4, now.pod_nodes);
	EXPECT_EQ(2, now.node);
	EXPECT_EQ(64 << 20, now.capacity);

	/* The same family again keeps the fields not given. */
	gt_topo_none(&t);
	t.family = MLAP2P_FAMILY_TRN3;
	t.node = 3;
	ASSERT_EQ(0, gt_set_topo(&self->s, &t));
	ASSERT_EQ(0, gt_get_topo(&self->s, &now));
	EXPECT_EQ(4, now.pod_nodes);
	EXPECT_EQ(3, now.node);
	EXPECT_EQ(MLAP2P_POD_SWITCH, now.pod_type);
}

TEST_F(genl, set_topo_nothing_to_set)
{
	struct gt_topo t;

	gt_topo_none(&t);
	EXPECT_EQ(-EINVAL, gt_set_topo(&self->s, &t));
	EXPECT_STREQ("no topology attribute given", self->s.ext.msg);
}

/* Send SET_TOPO with one attribute of @len bytes from @v. */
static int set_raw(struct gt_sock *s, __u16 type, const void *v, size_t len,
		   __u32 *offs)
{
	struct gt_msg m;
	struct nlattr *a;
	int ret;

	gt_cmd(s, &m, MLAP2P_CMD_SET_TOPO, 0);
	a = gt_put(&m, type, v, len);
	ret = gt_request(s, &m, NULL, NULL);
	*offs = gt_offset(&m, a);
	return ret;
}

TEST_F(genl, set_topo_out_of_range)
{
	static const struct {
		__u16 type;
		__u32 v;
	} bad[] = {
		{ MLAP2P_A_FAMILY, 0 },
		{ MLAP2P_A_FAMILY, MLAP2P_FAMILY_TRN3 + 1 },
		{ MLAP2P_A_NUM_DEVICES, 0 },
		{ MLAP2P_A_NUM_DEVICES, 65 },
		{ MLAP2P_A_CORES_PER_DEVICE, 0 },
		{ MLAP2P_A_CORES_PER_DEVICE, 17 },
		{ MLAP2P_A_LNC, 0 },
		{ MLAP2P_A_LNC, 3 },
		{ MLAP2P_A_POD_TYPE, MLAP2P_POD_SWITCH + 1 },
		{ MLAP2P_A_POD_NODES, 0 },
		{ MLAP2P_A_POD_NODES, 65 },
		{ MLAP2P_A_NODE, 64 },
	};
	struct gt_topo now;
	__u32 offs;
	__u64 cap;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT_EQ(-ERANGE, set_raw(&self->s, bad[i].type, &bad[i].v,
					   sizeof(bad[i].v), &offs)) {
			TH_LOG("attribute %u = %u", bad[i].type, bad[i].v);
		}
		EXPECT_NE(0, self->s.ext.msg[0]);
		EXPECT_EQ(offs, self->s.ext.offs);
	}
	cap = 4095;
	EXPECT_EQ(-ERANGE, set_raw(&self->s, MLAP2P_A_CAPACITY, &cap,
				   sizeof(cap), &offs));
	EXPECT_EQ(offs, self->s.ext.offs);
	cap = 1ULL << 40;
	EXPECT_EQ(-ERANGE, set_raw(&self->s, MLAP2P_A_CAPACITY, &cap,
				   sizeof(cap), &offs));

	ASSERT_EQ(0, gt_get_topo(&self->s, &now));
	EXPECT_EQ(self->saved.generation, now.generation);
}

TEST_F(genl, set_topo_malformed_attributes)
{
	__u64 wide = 1;
	__u8 narrow = 1;
	__u32 offs, v = 1;

	/* A u32 attribute of 1 and 8 bytes, a u64 of 4. */
	EXPECT_EQ(-EINVAL, set_raw(&self->s, MLAP2P_A_LNC, &narrow,
				   sizeof(narrow), &offs));
	EXPECT_NE(0, self->s.ext.msg[0]);
	EXPECT_EQ(offs, self->s.ext.offs);
	EXPECT_EQ(-EINVAL, set_raw(&self->s, MLAP2P_A_LNC, &wide,
				   sizeof(wide), &offs));
	EXPECT_EQ(offs, self->s.ext.offs);
	EXPECT_EQ(-EINVAL, set_raw(&self->s, MLAP2P_A_CAPACITY, &v,
				   sizeof(v), &offs));
	EXPECT_EQ(offs, self->s.ext.offs);

	/* Attributes SET_TOPO does not take, in and beyond its range. */
	EXPECT_EQ(-EINVAL, set_raw(&self->s, MLAP2P_A_TOPO_GENERATION, &v,
				   sizeof(v), &offs));
	EXPECT_NE(0, self->s.ext.msg[0]);
	EXPECT_EQ(-EINVAL, set_raw(&self->s, MLAP2P_A_PID, &v, sizeof(v),
				   &offs));
	EXPECT_NE(0, self->s.ext.msg[0]);
	EXPECT_EQ(-EINVAL, set_raw(&self->s, 0x3ff, &v, sizeof(v), &offs));
}

/* SET_TOPO of one field that makes the topology invalid. */
static int set_one(struct gt_sock *s, int attr, __u32 v, __u32 *offs)
{
	return set_raw(s, (__u16)attr, &v, sizeof(v), offs);
}

TEST_F(genl, set_topo_inconsistent_blames_the_attribute)
{
	struct gt_topo now;
	__u32 offs;

	if (self->saved.family != MLAP2P_FAMILY_TRN2 ||
	    self->saved.pod_type != MLAP2P_POD_NONE)
		SKIP(return, "needs the trn2 default topology");

	/* trn2 is a 4x4 torus: 16 MLAs, nothing else. */
	EXPECT_EQ(-EINVAL, set_one(&self->s, MLAP2P_A_NUM_DEVICES, 8, &offs));
	EXPECT_EQ(offs, self->s.ext.offs);
	EXPECT_NE(NULL, strstr(self->s.ext.msg, "MLA count"));

	/* A pod needs two nodes or more. */
	EXPECT_EQ(-EINVAL, set_one(&self->s, MLAP2P_A_POD_TYPE,
				   MLAP2P_POD_P2P, &offs));
	EXPECT_EQ(offs, self->s.ext.offs);
	EXPECT_NE(NULL, strstr(self->s.ext.msg, "pod"));

	/* trn2 has no switch pod. */
	EXPECT_EQ(-EINVAL, set_one(&self->s, MLAP2P_A_POD_TYPE,
				   MLAP2P_POD_SWITCH, &offs));
	EXPECT_EQ(offs, self->s.ext.offs);

	/* Without a pod there is only node 0, and only one node. */
	EXPECT_EQ(-EINVAL, set_one(&self->s, MLAP2P_A_NODE, 1, &offs));
	EXPECT_EQ(offs, self->s.ext.offs);
	EXPECT_NE(NULL, strstr(self->s.ext.msg, "node"));
	EXPECT_EQ(-EINVAL, set_one(&self->s, MLAP2P_A_POD_NODES, 2, &offs));
	EXPECT_EQ(offs, self->s.ext.offs);

	/* Seven cores do not split into logical cores of two. */
	EXPECT_EQ(-EINVAL, set_one(&self->s, MLAP2P_A_CORES_PER_DEVICE, 7,
				   &offs));
	EXPECT_EQ(offs, self->s.ext.offs);

	/* Nothing changed. */
	ASSERT_EQ(0, gt_get_topo(&self->s, &now));
	EXPECT_EQ(self->saved.generation, now.generation);
	EXPECT_EQ(0, memcmp(&now, &self->saved,
			    offsetof(struct gt_topo, missing)));
}

TEST_F(genl, set_topo_is_all_or_nothing)
{
	struct gt_topo t, now;

	/* One good field, one that breaks the whole: neither applies. */
	gt_topo_none(&t);
	t.capacity = self->saved.capacity / 2;
	t.node = 5;
	EXPECT_EQ(-EINVAL, gt_set_topo(&self->s, &t));
	EXPECT_NE(0, self->s.ext.msg[0]);
	ASSERT_EQ(0, gt_get_topo(&self->s, &now));
	EXPECT_EQ(self->saved.capacity, now.capacity);
	EXPECT_EQ(self->saved.node, now.node);
	EXPECT_EQ(self->saved.generation, now.generation);
}

TEST_F(genl, set_topo_busy_while_a_region_lives)
{
	struct mlap2p_mem_alloc a;
	struct mlap2p_ipc_open o;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct gt_topo t, now;
	int fd2;

	ASSERT_EQ(0, kt_alloc(self->fd, 1 << 20,
			      kt_local_mla(&self->info), &a));
	gt_topo_none(&t);
	t.capacity = self->saved.capacity / 2;
	EXPECT_EQ(-EBUSY, gt_set_topo(&self->s, &t));
	EXPECT_NE(NULL, strstr(self->s.ext.msg, "regions are live"));

	/* Still busy when only an importer holds it. */
	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, kt_export(self->fd, a.handle, 0, ipc));
	ASSERT_EQ(0, kt_import(fd2, ipc, &o));
	ASSERT_EQ(0, kt_free(self->fd, a.handle));
	EXPECT_EQ(-EBUSY, gt_set_topo(&self->s, &t));
	ASSERT_EQ(0, gt_get_topo(&self->s, &now));
	EXPECT_EQ(self->saved.generation, now.generation);

	/* The last reference gone, it applies. */
	ASSERT_EQ(0, kt_close_handle(fd2, o.handle));
	close(fd2);
	EXPECT_EQ(0, gt_set_topo(&self->s, &t));
	ASSERT_EQ(0, gt_get_topo(&self->s, &now));
	EXPECT_EQ(t.capacity, now.capacity);
}

#define NEEDS_NET_ADMIN	"changing the topology needs CAP_NET_ADMIN"

/*
 * Who the child becomes: nobody (no capabilities at all), or root of a new
 * user namespace (every capability, but only over that namespace, while
 * the family lives in the initial network namespace, owned by the initial
 * user namespace).
 */
enum unpriv { AS_NOBODY, AS_USERNS_ROOT };

/*
 * In a child without CAP_NET_ADMIN over the initial user namespace: what
 * SET_TOPO and the getters answer.  A refused SET_TOPO says why, and
 * blames no attribute.
 */
static int unprivileged_child(enum unpriv how)
{
	struct gt_sock s;
	struct gt_topo t;
	struct gt_msg m;
	int ret;

	if (how == AS_NOBODY && gt_become_nobody())
		return 10;
	if (how == AS_USERNS_ROOT) {
		ret = kt_enter_userns_root(16);
		if (ret)
			return ret;
	}
	if (gt_connect(&s))
		return 11;
	if (gt_get_topo(&s, &t) || t.missing)
		return 12;
	gt_topo_none(&t);
	t.lnc = 1;
	ret = gt_set_topo(&s, &t);
	if (ret != -EPERM)
		return kt_child_fail(13, "SET_TOPO: %d", ret);
	if (strcmp(s.ext.msg, NEEDS_NET_ADMIN) || s.ext.offs)
		return kt_child_fail(15, "extack \"%s\" offset %u",
					 s.ext.msg, s.ext.offs);
	/*
	 * The attribute policy is checked before the capability: an
	 * out-of-range value is ERANGE here too (mlap2p(4) says so).
	 */
	gt_topo_none(&t);
	t.lnc = 3;
	ret = gt_set_topo(&s, &t);
	if (ret != -ERANGE)
		return kt_child_fail(16, "SET_TOPO lnc=3: %d", ret);
	gt_cmd(&s, &m, MLAP2P_CMD_GET_STATS, 0);
	if (gt_request(&s, &m, NULL, NULL))
		return 14;
	gt_close(&s);
	return 0;
}

static void set_topo_refused(struct __test_metadata *_metadata,
			     FIXTURE_DATA(genl) *self, enum unpriv how)
{
	struct gt_topo now;
	pid_t pid;
	int ret;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(unprivileged_child(how));
	ret = kt_wait(pid);
	if (how == AS_USERNS_ROOT && ret == KT_KSFT_SKIP)
		SKIP(return, "no user namespaces here");
	EXPECT_EQ(0, ret);
	ASSERT_EQ(0, gt_get_topo(&self->s, &now));
	EXPECT_EQ(self->saved.generation, now.generation);
}

TEST_F(genl, set_topo_needs_cap_net_admin)
{
	if (geteuid() != 0)
		SKIP(return, "needs root to drop to nobody");
	set_topo_refused(_metadata, self, AS_NOBODY);
}

/* CAP_NET_ADMIN over a child user namespace is not enough. */
TEST_F(genl, set_topo_needs_cap_net_admin_in_the_initial_userns)
{
	if (geteuid() != 0)
		SKIP(return, "needs root to map uid 0 into a user namespace");
	set_topo_refused(_metadata, self, AS_USERNS_ROOT);
}

KT_TEST_MAIN
