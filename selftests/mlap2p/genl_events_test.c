// SPDX-License-Identifier: GPL-2.0
/*
 * genl_events_test: the "events" multicast group of the "mlap2p" genl
 * family.  A scripted region life (alloc, export, open, close, free) must
 * arrive as exactly those five events in that order, each naming the
 * region (id, MLA, size, owner pid) and the process that acted; the owner
 * exiting frees its region with an event too; a topology change sends its
 * summary; and only CAP_SYS_ADMIN may join the group.
 */
#include "genl_util.h"
#include "kselftest_harness.h"

#define EVENT_WAIT_MS	2000

FIXTURE(events) {
	struct gt_sock s;	/* requests */
	struct gt_sock ev;	/* subscribed */
	int fd;
	struct mlap2p_info info;
	struct gt_topo saved;
};

FIXTURE_SETUP(events)
{
	self->s.fd = -1;
	self->ev.fd = -1;
	self->fd = kt_dev_open();
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, kt_get_info(self->fd, &self->info));
	if (!(self->info.features & MLAP2P_FEAT_GENL))
		SKIP(return, "module built without the genl family");
	if (geteuid() != 0)
		SKIP(return, "joining the events group needs CAP_SYS_ADMIN");
	ASSERT_EQ(0, gt_connect(&self->s));
	ASSERT_EQ(0, gt_get_topo(&self->s, &self->saved));
	ASSERT_EQ(0, gt_connect(&self->ev));
	ASSERT_NE(0, self->ev.events_grp);
	ASSERT_EQ(0, gt_subscribe(&self->ev));
}

FIXTURE_TEARDOWN(events)
{
	struct gt_topo now;

	if (self->s.fd >= 0 && !gt_get_topo(&self->s, &now) &&
	    now.generation != self->saved.generation)
		EXPECT_EQ(0, gt_restore_topo(&self->s, &self->saved));
	gt_close(&self->ev);
	gt_close(&self->s);
	if (self->fd >= 0)
		close(self->fd);
}

struct event {
	int cmd;
	struct gt_region r;
	__u32 pid;
	struct gt_topo topo;
};

/* The next event, parsed; its cmd is -errno on timeout or failure. */
static void next_event(struct gt_sock *s, struct event *e)
{
	const struct nlattr *tb[MLAP2P_A_MAX + 1];
	static struct gt_msg m;

	memset(e, 0, sizeof(*e));
	e->cmd = gt_next_event(s, &m, EVENT_WAIT_MS);
	if (e->cmd < 0)
		return;
	if (gt_genl_attrs(&m.nlh, tb, MLAP2P_A_MAX, NULL)) {
		e->cmd = -EPROTO;
		return;
	}
	e->pid = gt_u32(tb[MLAP2P_A_PID], KT_POISON32);
	if (e->cmd == MLAP2P_CMD_EVENT_TOPO_CHANGE)
		gt_topo_parse(tb, &e->topo);
	else if (gt_region_parse(tb[MLAP2P_A_REGION], &e->r))
		e->cmd = -EPROTO;
}

/* Expect event @cmd about region @id from process @pid. */
#define EXPECT_EVENT(e, _cmd, _id, _pid) do {				\
		EXPECT_EQ(_cmd, (e)->cmd);				\
		EXPECT_EQ(_id, (e)->r.id);				\
		EXPECT_EQ((__u32)(_pid), (e)->pid);			\
	} while (0)

TEST_F(events, region_life_in_order)
{
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_region_info ri;
	struct mlap2p_mem_alloc a;
	struct mlap2p_ipc_open o;
	__u32 mla = kt_local_mla(&self->info) + 3;
	pid_t me = getpid();
	struct event e;
	int fd2;

	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, kt_alloc(self->fd, 3 << 20, mla, &a));
	ASSERT_EQ(0, kt_region_info(self->fd, a.handle, &ri));
	ASSERT_EQ(0, kt_export(self->fd, a.handle, 0, ipc));
	ASSERT_EQ(0, kt_import(fd2, ipc, &o));
	ASSERT_EQ(0, kt_close_handle(fd2, o.handle));
	ASSERT_EQ(0, kt_free(self->fd, a.handle));
	close(fd2);

	next_event(&self->ev, &e);
	EXPECT_EVENT(&e, MLAP2P_CMD_EVENT_REGION_NEW, ri.region_id, me);
	EXPECT_EQ(mla, e.r.device);
	EXPECT_EQ(a.alloc_size, e.r.size);
	EXPECT_EQ((__u32)me, e.r.owner_pid);
	EXPECT_FALSE(e.r.exported);

	next_event(&self->ev, &e);
	EXPECT_EVENT(&e, MLAP2P_CMD_EVENT_REGION_EXPORT, ri.region_id, me);
	EXPECT_TRUE(e.r.exported);
	EXPECT_EQ(a.alloc_size, e.r.size);

	next_event(&self->ev, &e);
	EXPECT_EVENT(&e, MLAP2P_CMD_EVENT_REGION_OPEN, ri.region_id, me);
	EXPECT_EQ(1, e.r.importers);

	next_event(&self->ev, &e);
	EXPECT_EVENT(&e, MLAP2P_CMD_EVENT_REGION_CLOSE, ri.region_id, me);
	EXPECT_EQ(0, e.r.importers);

	next_event(&self->ev, &e);
	EXPECT_EVENT(&e, MLAP2P_CMD_EVENT_REGION_FREE, ri.region_id, me);
	EXPECT_EQ(0, e.r.owner_pid);	/* the owner has let go */
	EXPECT_EQ(mla, e.r.device);

	/* Five events, no more. */
	next_event(&self->ev, &e);
	EXPECT_EQ(-ETIMEDOUT, e.cmd);
}

TEST_F(events, owner_exit_frees_with_an_event)
{
	struct mlap2p_mem_alloc a;
	struct event e;
	int status;
	pid_t pid;
	__u64 id;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int fd = kt_dev_open();

		close(self->fd);
		if (fd < 0 || kt_alloc(fd, 1 << 20,
				       kt_local_mla(&self->info), &a))
			_exit(1);
		_exit(0);	/* the file closes with the process */
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_EQ(0, WEXITSTATUS(status));

	next_event(&self->ev, &e);
	EXPECT_EVENT(&e, MLAP2P_CMD_EVENT_REGION_NEW, e.r.id, pid);
	id = e.r.id;
	next_event(&self->ev, &e);
	EXPECT_EVENT(&e, MLAP2P_CMD_EVENT_REGION_FREE, id, pid);
	next_event(&self->ev, &e);
	EXPECT_EQ(-ETIMEDOUT, e.cmd);
}

/*
 * IPC_GET_HANDLE with its argument in a read-only page: the copy out
 * fails (EFAULT) and nothing happens.  No export is counted, no event
 * goes out, GET_REGION does not call the region exported, and the
 * exporter's credentials are not pinned: another euid sharing the file
 * then exports it first (before, it got EACCES).
 */
TEST_F(events, failed_export_changes_nothing)
{
	const size_t page = kt_page_size();
	struct kt_counters before, now;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	static struct gt_regions l;
	struct mlap2p_region_info ri;
	struct mlap2p_mem_alloc a;
	struct mlap2p_ipc_get *g;
	struct event e;
	pid_t pid;

	ASSERT_EQ(0, kt_alloc(self->fd, page,
				  kt_local_mla(&self->info), &a));
	ASSERT_EQ(0, kt_region_info(self->fd, a.handle, &ri));
	next_event(&self->ev, &e);
	EXPECT_EVENT(&e, MLAP2P_CMD_EVENT_REGION_NEW, ri.region_id, getpid());
	ASSERT_EQ(0, kt_counters_read(&before));

	g = mmap(NULL, page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, g);
	kt_ipc_get_args(g, a.handle, 0);
	ASSERT_EQ(0, mprotect(g, page, PROT_READ));
	EXPECT_EQ(-EFAULT, kt_ioctl(self->fd, MLAP2P_IOC_IPC_GET_HANDLE,
					g));
	munmap(g, page);

	ASSERT_EQ(0, kt_counters_read(&now));
	EXPECT_EQ(before.exports, now.exports);
	ASSERT_EQ(0, gt_get_regions(&self->s, ri.region_id, MLAP2P_NO_MLA,
				    &l));
	ASSERT_EQ(1, l.nr);
	EXPECT_FALSE(l.r[0].exported);

	/* Nobody, sharing the file, is the first exporter. */
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(kt_become_nobody() ? 10 :
		      kt_export(self->fd, a.handle, 0, ipc) ? 11 : 0);
	EXPECT_EQ(0, kt_wait(pid));
	/* Root's export now meets nobody's pinned euid. */
	EXPECT_EQ(-EACCES, kt_export(self->fd, a.handle, 0, ipc));

	/* The only EXPORT event is nobody's. */
	next_event(&self->ev, &e);
	EXPECT_EVENT(&e, MLAP2P_CMD_EVENT_REGION_EXPORT, ri.region_id, pid);
	ASSERT_EQ(0, kt_counters_read(&now));
	EXPECT_EQ(before.exports + 1, now.exports);
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
	next_event(&self->ev, &e);
	EXPECT_EVENT(&e, MLAP2P_CMD_EVENT_REGION_FREE, ri.region_id, getpid());
}

TEST_F(events, topology_change)
{
	struct gt_topo t;
	struct event e;

	gt_topo_none(&t);
	t.capacity = self->saved.capacity / 2;
	ASSERT_EQ(0, gt_set_topo(&self->s, &t));

	next_event(&self->ev, &e);
	EXPECT_EQ(MLAP2P_CMD_EVENT_TOPO_CHANGE, e.cmd);
	EXPECT_EQ((__u32)getpid(), e.pid);
	EXPECT_EQ(0, e.topo.missing);
	EXPECT_EQ(self->saved.generation + 1, e.topo.generation);
	EXPECT_EQ(t.capacity, e.topo.capacity);
	EXPECT_EQ(self->saved.family, e.topo.family);

	/* A rejected change sends nothing. */
	gt_topo_none(&t);
	t.lnc = 3;
	EXPECT_EQ(-ERANGE, gt_set_topo(&self->s, &t));
	next_event(&self->ev, &e);
	EXPECT_EQ(-ETIMEDOUT, e.cmd);
}

TEST_F(events, joining_needs_cap_sys_admin)
{
	int status;
	pid_t pid;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct gt_sock s;

		if (gt_become_nobody() || gt_connect(&s))
			_exit(10);
		_exit(gt_subscribe(&s) == -EPERM ? 0 : 11);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
}

KT_TEST_MAIN
