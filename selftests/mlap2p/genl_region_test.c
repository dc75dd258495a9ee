// SPDX-License-Identifier: GPL-2.0
/*
 * genl_region_test: GET_REGION of the "mlap2p" genl family.  One region by
 * id (doit) with every field following export, import and mmap; the
 * request's rejections (no selector, no id, id 0, wrong sizes, attributes
 * it does not take, an id that is not live); dumps in id order with the
 * per-MLA filter; what a caller without CAP_SYS_ADMIN sees (only regions
 * its own files hold, owned or imported); and dumps that stay consistent
 * while other processes allocate and free as fast as they can.
 */
#include "genl_util.h"
#include "kselftest_harness.h"

#include <sys/prctl.h>

FIXTURE(region) {
	struct gt_sock s;
	int fd;
	struct mlap2p_info info;
	__u32 mla;
};

FIXTURE_SETUP(region)
{
	self->s.fd = -1;
	self->fd = kt_dev_open();
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, kt_get_info(self->fd, &self->info));
	if (!(self->info.features & MLAP2P_FEAT_GENL))
		SKIP(return, "module built without the genl family");
	if (geteuid() != 0)
		SKIP(return, "needs root (CAP_SYS_ADMIN sees every region)");
	ASSERT_EQ(0, gt_connect(&self->s));
	self->mla = kt_local_mla(&self->info);
}

FIXTURE_TEARDOWN(region)
{
	gt_close(&self->s);
	if (self->fd >= 0)
		close(self->fd);
}

static struct gt_regions list;

TEST_F(region, get_one_follows_its_life)
{
	struct mlap2p_mem_alloc a;
	struct mlap2p_ipc_open o;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	const struct gt_region *r;
	struct mlap2p_region_info ri;
	void *p;
	int fd2;

	ASSERT_EQ(0, kt_alloc(self->fd, 5 << 20, self->mla + 2, &a));
	ASSERT_EQ(0, kt_region_info(self->fd, a.handle, &ri));

	ASSERT_EQ(0, gt_get_regions(&self->s, ri.region_id, MLAP2P_NO_MLA,
				    &list));
	ASSERT_EQ(1, list.nr);
	EXPECT_EQ(0, list.bad);
	r = &list.r[0];
	EXPECT_EQ(ri.region_id, r->id);
	EXPECT_EQ(self->mla + 2, r->device);
	EXPECT_EQ(a.alloc_size, r->size);
	EXPECT_EQ((__u32)getpid(), r->owner_pid);
	EXPECT_EQ(0, r->importers);
	EXPECT_EQ(0, r->mappings);
	EXPECT_FALSE(r->exported);

	/* Exported, imported by another file, mapped there. */
	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, kt_export(self->fd, a.handle, 0, ipc));
	ASSERT_EQ(0, kt_import(fd2, ipc, &o));
	p = kt_map(fd2, o.mmap_cookie, 1 << 20, PROT_READ);
	ASSERT_NE(MAP_FAILED, p);
	ASSERT_EQ(0, gt_get_regions(&self->s, ri.region_id, MLAP2P_NO_MLA,
				    &list));
	ASSERT_EQ(1, list.nr);
	EXPECT_TRUE(list.r[0].exported);
	EXPECT_EQ(1, list.r[0].importers);
	EXPECT_EQ(1, list.r[0].mappings);

	/* The owner lets go: still live, owner pid 0. */
	ASSERT_EQ(0, kt_free(self->fd, a.handle));
	ASSERT_EQ(0, gt_get_regions(&self->s, ri.region_id, MLAP2P_NO_MLA,
				    &list));
	ASSERT_EQ(1, list.nr);
	EXPECT_EQ(0, list.r[0].owner_pid);

	/* The last references go: no such region. */
	munmap(p, 1 << 20);
	ASSERT_EQ(0, kt_close_handle(fd2, o.handle));
	close(fd2);
	EXPECT_EQ(-ENOENT, gt_get_regions(&self->s, ri.region_id,
					  MLAP2P_NO_MLA, &list));
	EXPECT_STREQ("no such region", self->s.ext.msg);
}

TEST_F(region, get_one_rejections)
{
	struct nlattr *nest, *a;
	struct gt_msg m;
	__u32 small = 1;
	__u64 id = 1;

	/* No selector at all: the missing attribute is named. */
	gt_cmd(&self->s, &m, MLAP2P_CMD_GET_REGION, 0);
	EXPECT_EQ(-EINVAL, gt_request(&self->s, &m, NULL, NULL));
	EXPECT_EQ(MLAP2P_A_REGION, self->s.ext.miss_type);

	/* A selector without an id. */
	gt_cmd(&self->s, &m, MLAP2P_CMD_GET_REGION, 0);
	nest = gt_nest_start(&m, MLAP2P_A_REGION);
	gt_put_u32(&m, MLAP2P_A_REGION_DEVICE, self->mla);
	gt_nest_end(&m, nest);
	EXPECT_EQ(-EINVAL, gt_request(&self->s, &m, NULL, NULL));
	EXPECT_EQ(MLAP2P_A_REGION_ID, self->s.ext.miss_type);
	EXPECT_STREQ("region id missing", self->s.ext.msg);

	/* Id 0 is below the policy's minimum. */
	gt_cmd(&self->s, &m, MLAP2P_CMD_GET_REGION, 0);
	nest = gt_nest_start(&m, MLAP2P_A_REGION);
	a = gt_put(&m, MLAP2P_A_REGION_ID, &(__u64){ 0 }, 8);
	gt_nest_end(&m, nest);
	EXPECT_EQ(-ERANGE, gt_request(&self->s, &m, NULL, NULL));
	EXPECT_EQ(gt_offset(&m, a), self->s.ext.offs);

	/* A 4-byte id. */
	gt_cmd(&self->s, &m, MLAP2P_CMD_GET_REGION, 0);
	nest = gt_nest_start(&m, MLAP2P_A_REGION);
	a = gt_put(&m, MLAP2P_A_REGION_ID, &small, sizeof(small));
	gt_nest_end(&m, nest);
	EXPECT_EQ(-EINVAL, gt_request(&self->s, &m, NULL, NULL));
	EXPECT_EQ(gt_offset(&m, a), self->s.ext.offs);
	EXPECT_NE(0, self->s.ext.msg[0]);

	/* A selector attribute only replies carry. */
	gt_cmd(&self->s, &m, MLAP2P_CMD_GET_REGION, 0);
	nest = gt_nest_start(&m, MLAP2P_A_REGION);
	gt_put_u64(&m, MLAP2P_A_REGION_ID, id);
	gt_put_u64(&m, MLAP2P_A_REGION_SIZE, 4096);
	gt_nest_end(&m, nest);
	EXPECT_EQ(-EINVAL, gt_request(&self->s, &m, NULL, NULL));
	EXPECT_NE(0, self->s.ext.msg[0]);

	/* The selector as a u32 instead of a nest. */
	gt_cmd(&self->s, &m, MLAP2P_CMD_GET_REGION, 0);
	a = gt_put(&m, MLAP2P_A_REGION, &small, sizeof(small));
	EXPECT_EQ(-EINVAL, gt_request(&self->s, &m, NULL, NULL));
	EXPECT_EQ(gt_offset(&m, a), self->s.ext.offs);

	/* A top-level attribute GET_REGION does not take. */
	gt_cmd(&self->s, &m, MLAP2P_CMD_GET_REGION, NLM_F_DUMP);
	gt_put_u32(&m, MLAP2P_A_FAMILY, MLAP2P_FAMILY_TRN2);
	EXPECT_EQ(-EINVAL, gt_request(&self->s, &m, NULL, NULL));
	EXPECT_NE(0, self->s.ext.msg[0]);

	/* An MLA id past every pod, in a dump's selector. */
	gt_cmd(&self->s, &m, MLAP2P_CMD_GET_REGION, NLM_F_DUMP);
	nest = gt_nest_start(&m, MLAP2P_A_REGION);
	gt_put_u32(&m, MLAP2P_A_REGION_DEVICE, 1U << 20);
	gt_nest_end(&m, nest);
	EXPECT_EQ(-ERANGE, gt_request(&self->s, &m, NULL, NULL));

	/* An id nobody has. */
	EXPECT_EQ(-ENOENT, gt_get_regions(&self->s, 1ULL << 62, MLAP2P_NO_MLA,
					  &list));
	EXPECT_STREQ("no such region", self->s.ext.msg);
}

TEST_F(region, dump_in_id_order_with_mla_filter)
{
	struct mlap2p_mem_alloc a[4];
	struct mlap2p_region_info ri;
	__u64 ids[4];
	int i, found;

	for (i = 0; i < 4; i++) {
		ASSERT_EQ(0, kt_alloc(self->fd, (i + 1) << 20,
				      self->mla + (i & 1), &a[i]));
		ASSERT_EQ(0, kt_region_info(self->fd, a[i].handle, &ri));
		ids[i] = ri.region_id;
	}
	ASSERT_EQ(0, gt_get_regions(&self->s, 0, MLAP2P_NO_MLA, &list));
	EXPECT_EQ(0, list.bad);
	for (i = 1; i < list.nr; i++)
		EXPECT_LT(list.r[i - 1].id, list.r[i].id);
	for (i = 0; i < 4; i++) {
		const struct gt_region *r = gt_regions_find(&list, ids[i]);

		ASSERT_NE(NULL, r);
		EXPECT_EQ(a[i].alloc_size, r->size);
		EXPECT_EQ(self->mla + (i & 1), r->device);
	}

	ASSERT_EQ(0, gt_get_regions(&self->s, 0, self->mla + 1, &list));
	found = 0;
	for (i = 0; i < list.nr; i++) {
		EXPECT_EQ(self->mla + 1, list.r[i].device);
		found += list.r[i].id == ids[1] || list.r[i].id == ids[3];
	}
	EXPECT_EQ(2, found);

	for (i = 0; i < 4; i++)
		EXPECT_EQ(0, kt_free(self->fd, a[i].handle));
	ASSERT_EQ(0, gt_get_regions(&self->s, 0, MLAP2P_NO_MLA, &list));
	for (i = 0; i < 4; i++)
		EXPECT_EQ(NULL, gt_regions_find(&list, ids[i]));
}

/* ------------------------------------------------------------------ */
/* Unprivileged callers                                                */
/* ------------------------------------------------------------------ */

/* As nobody: every region seen must be one of @mine[0..@n). */
static int dump_sees_only(const __u64 *mine, int n)
{
	static struct gt_regions l;
	struct gt_sock s;
	int i, k, hits = 0;

	if (gt_connect(&s))
		return 30;
	if (gt_get_regions(&s, 0, MLAP2P_NO_MLA, &l) || l.bad)
		return 31;
	for (i = 0; i < l.nr; i++) {
		for (k = 0; k < n && l.r[i].id != mine[k]; k++)
			;
		if (k == n)
			return 32;	/* someone else's region */
		hits++;
	}
	gt_close(&s);
	return hits == n ? 0 : 33;
}

/* Can nobody GET_REGION @id?  0: yes, -ENOENT: hidden. */
static int get_one(__u64 id)
{
	static struct gt_regions l;
	struct gt_sock s;
	int ret;

	if (gt_connect(&s))
		return -EIO;
	ret = gt_get_regions(&s, id, MLAP2P_NO_MLA, &l);
	gt_close(&s);
	return ret;
}

/*
 * The exporter child: as nobody, allocate a region, send its id and IPC
 * handle to the importer, check what it sees, wait for the importer.
 */
static int exporter(int wr, int rd, __u32 mla, __u64 root_id)
{
	struct mlap2p_mem_alloc a;
	struct mlap2p_region_info ri;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	char done;
	int fd, ret;

	if (gt_become_nobody())
		return 20;
	fd = kt_dev_open();
	if (fd < 0 || kt_alloc(fd, 1 << 20, mla, &a) ||
	    kt_region_info(fd, a.handle, &ri) ||
	    kt_export(fd, a.handle, 0, ipc))
		return 21;
	if (write(wr, &ri.region_id, 8) != 8 || write(wr, ipc, sizeof(ipc)) !=
	    sizeof(ipc))
		return 22;
	ret = dump_sees_only(&ri.region_id, 1);
	if (ret)
		return ret;
	if (get_one(root_id) != -ENOENT || get_one(ri.region_id))
		return 23;
	/* Hold the region until the importer has looked. */
	if (read(rd, &done, 1) != 1)
		return 24;
	return 0;
}

/* The importer child: as nobody, open the handle, see it and only it. */
static int importer(int rd, int wr, __u64 root_id)
{
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_ipc_open o;
	__u64 id;
	int fd, ret;

	if (gt_become_nobody())
		return 40;
	if (read(rd, &id, 8) != 8 || read(rd, ipc, sizeof(ipc)) != sizeof(ipc))
		return 41;
	/* Nothing of ours yet: an empty list. */
	ret = dump_sees_only(NULL, 0);
	if (ret)
		return ret + 10;
	fd = kt_dev_open();
	if (fd < 0 || kt_import(fd, ipc, &o))
		return 42;
	ret = dump_sees_only(&id, 1);
	if (ret)
		return ret + 20;
	if (get_one(root_id) != -ENOENT || get_one(id))
		return 43;
	ret = write(wr, "x", 1) == 1 ? 0 : 44;
	close(fd);
	return ret;
}

TEST_F(region, unprivileged_sees_only_its_own)
{
	int to_imp[2], to_exp[2], status;
	struct mlap2p_mem_alloc a;
	struct mlap2p_region_info ri;
	pid_t exp_pid, imp_pid;

	/* Root's region, which nobody must not see. */
	ASSERT_EQ(0, kt_alloc(self->fd, 1 << 20, self->mla, &a));
	ASSERT_EQ(0, kt_region_info(self->fd, a.handle, &ri));
	ASSERT_EQ(0, pipe(to_imp));
	ASSERT_EQ(0, pipe(to_exp));

	exp_pid = fork();
	ASSERT_LE(0, exp_pid);
	if (exp_pid == 0) {
		close(self->fd);
		close(to_imp[0]);
		close(to_exp[1]);
		_exit(exporter(to_imp[1], to_exp[0], self->mla,
			       ri.region_id));
	}
	imp_pid = fork();
	ASSERT_LE(0, imp_pid);
	if (imp_pid == 0) {
		close(self->fd);
		close(to_imp[1]);
		close(to_exp[0]);
		_exit(importer(to_imp[0], to_exp[1], ri.region_id));
	}
	close(to_imp[0]);
	close(to_imp[1]);
	close(to_exp[0]);
	close(to_exp[1]);

	ASSERT_EQ(imp_pid, waitpid(imp_pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	ASSERT_EQ(exp_pid, waitpid(exp_pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));

	/* Root sees its own region still. */
	ASSERT_EQ(0, gt_get_regions(&self->s, ri.region_id, MLAP2P_NO_MLA,
				    &list));
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
}

/*
 * As nobody: one page, exported and imported until the file is full, the
 * fd dup()ed DUPS times, then GET_REGION (doit and dump).  The request
 * reads each open file once, not once per fd, and holds each region id
 * once: it succeeds, sees exactly the one region, and (run_tests.sh
 * checks) leaves no WARNING in the kernel log.  Once it grew one array
 * by every handle of every fd: 141 fds x 4096 handles x 8 bytes went over
 * KMALLOC_MAX_SIZE, the page allocator warned and the request failed with
 * ENOMEM.
 */
#define DUPS	200

static int dups_child(__u32 mla, unsigned long max_handles)
{
	static struct gt_regions l;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_region_info ri;
	struct mlap2p_mem_alloc a;
	struct mlap2p_ipc_open o;
	unsigned long i;
	struct gt_sock s;
	int fd, ret;

	if (gt_become_nobody())
		return 40;
	fd = kt_dev_open();
	if (fd < 0 || kt_alloc(fd, 4096, mla, &a) ||
	    kt_region_info(fd, a.handle, &ri) ||
	    kt_export(fd, a.handle, 0, ipc))
		return 41;
	for (i = 1; i < max_handles; i++)
		if (kt_import(fd, ipc, &o))
			return 42;
	/* The file is full: the import limit holds. */
	if (kt_import(fd, ipc, &o) != -ENOSPC)
		return 43;
	for (i = 0; i < DUPS; i++)
		if (dup(fd) < 0)
			return 44;
	if (gt_connect(&s))
		return 45;
	ret = gt_get_regions(&s, ri.region_id, MLAP2P_NO_MLA, &l);
	if (ret)
		return ksft_print_msg("doit: %d\n", ret), 46;
	if (l.nr != 1 || l.bad || l.r[0].id != ri.region_id ||
	    l.r[0].importers != max_handles - 1)
		return 47;
	ret = gt_get_regions(&s, 0, MLAP2P_NO_MLA, &l);
	if (ret)
		return ksft_print_msg("dump: %d\n", ret), 48;
	if (l.nr != 1 || l.bad || l.r[0].id != ri.region_id)
		return 49;
	gt_close(&s);
	return 0;
}

TEST_F_TIMEOUT(region, fd_dups_cost_nothing, 120)
{
	unsigned long max_handles;
	struct mlap2p_mem_alloc a;
	pid_t pid;

	ASSERT_EQ(0, kt_param_read("max_regions_per_file", &max_handles));
	if (max_handles > 4096)
		SKIP(return, "max_regions_per_file %lu: the test wants <= 4096",
		     max_handles);
	/* A region of root's, which nobody must not see. */
	ASSERT_EQ(0, kt_alloc(self->fd, 4096, self->mla, &a));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		close(self->fd);
		_exit(dups_child(self->mla, max_handles));
	}
	EXPECT_EQ(0, kt_wait(pid));
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
}

/* ------------------------------------------------------------------ */
/* Consistency under churn                                             */
/* ------------------------------------------------------------------ */

#define CHURNERS	3
#define STABLE		600
#define DUMPS		100

/* Allocate and free in a loop until killed. */
static void churn(__u32 mla, unsigned int seed)
{
	struct mlap2p_mem_alloc a[8];
	int fd, i;

	/* Die with the test, however it ends. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() == 1)
		_exit(51);
	fd = kt_dev_open();
	if (fd < 0)
		_exit(50);
	for (;;) {
		for (i = 0; i < 8; i++)
			if (kt_alloc(fd, 4096 << (seed++ % 4), mla + (i % 2),
				     &a[i]))
				a[i].handle = 0;
		for (i = 0; i < 8; i++)
			if (a[i].handle)
				kt_free(fd, a[i].handle);
	}
}

TEST_F_TIMEOUT(region, dump_consistent_under_churn, 120)
{
	static struct mlap2p_mem_alloc a[STABLE];
	struct mlap2p_region_info ri;
	pid_t pids[CHURNERS];
	static __u64 ids[STABLE];
	int i, k, d, intr = 0, seen_max = 0;

	/* Enough regions that a dump takes several passes. */
	for (i = 0; i < STABLE; i++) {
		ASSERT_EQ(0, kt_alloc(self->fd, 4096, self->mla, &a[i]));
		ASSERT_EQ(0, kt_region_info(self->fd, a[i].handle, &ri));
		ids[i] = ri.region_id;
	}
	for (i = 0; i < CHURNERS; i++) {
		pids[i] = fork();
		ASSERT_LE(0, pids[i]);
		if (pids[i] == 0) {
			close(self->fd);
			churn(self->mla + 2 * i, (unsigned int)i);
		}
	}

	for (d = 0; d < DUMPS; d++) {
		ASSERT_EQ(0, gt_get_regions(&self->s, 0, MLAP2P_NO_MLA,
					    &list));
		ASSERT_EQ(0, list.bad);
		intr += self->s.intr;
		seen_max = list.nr > seen_max ? list.nr : seen_max;
		/* Ids strictly ascending: nothing twice, nothing reordered. */
		for (k = 1; k < list.nr; k++) {
			ASSERT_LT(list.r[k - 1].id, list.r[k].id) {
				TH_LOG("dump %d: id %llu then %llu", d,
				       (unsigned long long)list.r[k - 1].id,
				       (unsigned long long)list.r[k].id);
			}
		}
		/* Regions live for the whole dump are in it, intact. */
		for (i = 0; i < STABLE; i++) {
			const struct gt_region *r =
				gt_regions_find(&list, ids[i]);

			ASSERT_NE(NULL, r) {
				TH_LOG("dump %d lost region %llu", d,
				       (unsigned long long)ids[i]);
			}
			EXPECT_EQ(a[i].alloc_size, r->size);
			EXPECT_EQ((__u32)getpid(), r->owner_pid);
		}
		for (k = 0; k < list.nr; k++)
			EXPECT_NE(0, list.r[k].size);
	}

	for (i = 0; i < CHURNERS; i++) {
		kill(pids[i], SIGKILL);
		waitpid(pids[i], NULL, 0);
	}
	for (i = 0; i < STABLE; i++)
		EXPECT_EQ(0, kt_free(self->fd, a[i].handle));
	TH_LOG("%d dumps, %d flagged NLM_F_DUMP_INTR, up to %d regions",
	       DUMPS, intr, seen_max);
}

/*
 * A dump read in small pieces: the kernel fills the next pass while the
 * previous one is read, so a region created between two reads must flag
 * the passes after it NLM_F_DUMP_INTR, while the cursor keeps every region
 * that lived throughout in the dump exactly once.
 */
struct slow_dump {
	struct gt_regions *l;
	int intr_msgs;
	int msgs;
};

static int slow_dump(struct gt_sock *s, struct slow_dump *sd,
		     void (*between)(void *), void *arg)
{
	/* One pass per recv(): the kernel's dump skbs are at most 32 KiB. */
	static char buf[32768];
	struct gt_msg m;
	int reads = 0;
	ssize_t n;

	gt_cmd(s, &m, MLAP2P_CMD_GET_REGION, NLM_F_DUMP);
	m.nlh.nlmsg_seq = ++s->seq;
	if (send(s->fd, m.buf, m.nlh.nlmsg_len, 0) < 0)
		return -errno;
	for (;;) {
		struct nlmsghdr *nlh;

		n = recv(s->fd, buf, sizeof(buf), 0);
		if (n < 0)
			return -errno;
		if (reads++ == 0 && between)
			between(arg);
		for (nlh = (struct nlmsghdr *)buf; NLMSG_OK(nlh, (__u32)n);
		     nlh = NLMSG_NEXT(nlh, n)) {
			if (nlh->nlmsg_seq != s->seq)
				continue;
			if (nlh->nlmsg_type == NLMSG_ERROR)
				return gt_error(s, nlh);
			sd->intr_msgs += !!(nlh->nlmsg_flags & NLM_F_DUMP_INTR);
			if (nlh->nlmsg_type == NLMSG_DONE)
				return reads;
			sd->msgs++;
			gt_regions_cb(nlh, sd->l);
		}
	}
}

struct churn_once {
	int fd;
	__u32 mla;
};

static void alloc_and_free(void *arg)
{
	struct churn_once *c = arg;
	struct mlap2p_mem_alloc a;

	if (!kt_alloc(c->fd, 4096, c->mla, &a))
		kt_free(c->fd, a.handle);
}

#define MANY	1500

TEST_F_TIMEOUT(region, dump_flags_a_change_between_passes, 120)
{
	static struct mlap2p_mem_alloc a[MANY];
	struct slow_dump quiet = { .l = &list }, busy;
	static struct gt_regions busy_list;
	struct mlap2p_region_info ri;
	static __u64 ids[MANY];
	struct gt_sock s2;
	int i, reads;

	for (i = 0; i < MANY; i++) {
		ASSERT_EQ(0, kt_alloc(self->fd, 4096, self->mla, &a[i]));
		ASSERT_EQ(0, kt_region_info(self->fd, a[i].handle, &ri));
		ids[i] = ri.region_id;
	}

	/* Nothing changes: several passes, none flagged. */
	list.nr = list.bad = 0;
	reads = slow_dump(&self->s, &quiet, NULL, NULL);
	ASSERT_LT(2, reads);
	EXPECT_EQ(0, quiet.intr_msgs);
	EXPECT_EQ(quiet.msgs, list.nr);

	/* A region comes and goes after the first read (a fresh socket). */
	ASSERT_EQ(0, gt_connect(&s2));
	memset(&busy, 0, sizeof(busy));
	busy.l = &busy_list;
	reads = slow_dump(&s2, &busy, alloc_and_free,
			  &(struct churn_once){ self->fd, self->mla });
	gt_close(&s2);
	ASSERT_LT(2, reads);
	EXPECT_LT(0, busy.intr_msgs);

	/* Either way every region that lived throughout is there, once. */
	for (i = 1; i < busy_list.nr; i++)
		EXPECT_LT(busy_list.r[i - 1].id, busy_list.r[i].id);
	for (i = 0; i < MANY; i++) {
		ASSERT_NE(NULL, gt_regions_find(&list, ids[i]));
		ASSERT_NE(NULL, gt_regions_find(&busy_list, ids[i]));
	}
	for (i = 0; i < MANY; i++)
		EXPECT_EQ(0, kt_free(self->fd, a[i].handle));
}

KT_TEST_MAIN
