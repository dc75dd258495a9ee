// SPDX-License-Identifier: GPL-2.0
/*
 * lifetime_test: who keeps a region alive, and proof that nothing leaks.
 *
 * The module's sysfs counters (/sys/class/misc/mlap2p/) are read before
 * and after each scenario.  The live_* counters must come back to their
 * baseline once every handle, mapping and file is gone, however they went
 * (MEM_FREE and IPC_CLOSE, close(), exit(), SIGKILL); the cumulative ones
 * must balance (as many frees as allocs, closes as opens).  DEV_INFO.used
 * follows the same rule per MLA.
 */
#include "mlap2p_util.h"
#include "kselftest_harness.h"

FIXTURE(life) {
	int fd;
	struct mlap2p_info info;
	size_t page;
	__u32 mla;
	struct kt_counters base;
	__u64 base_used;
};

FIXTURE_SETUP(life)
{
	struct mlap2p_dev_info d;

	self->fd = kt_dev_open();
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, kt_get_info(self->fd, &self->info));
	self->page = kt_page_size();
	self->mla = kt_local_mla(&self->info);
	ASSERT_EQ(0, kt_counters_read(&self->base))
		TH_LOG("no counters under %s", KT_SYSFS_DIR);
	ASSERT_EQ(0, kt_dev_info(self->fd, self->mla, &d));
	self->base_used = d.used;
}

FIXTURE_TEARDOWN(life)
{
	if (self->fd > 0)
		close(self->fd);
}

static __u64 dev_used(int fd, __u32 mla)
{
	struct mlap2p_dev_info d;

	return kt_dev_info(fd, mla, &d) ? ~0ULL : d.used;
}

/* Live counters at baseline, cumulative ones balanced against it. */
static void expect_baseline(struct __test_metadata *_metadata,
			    const struct kt_counters *base)
{
	struct kt_counters now;

	EXPECT_TRUE(kt_counters_settle(base, &now, 2000)) {
		kt_counters_log("baseline", base);
		kt_counters_log("now", &now);
	}
	EXPECT_EQ(now.allocs - base->allocs, now.frees - base->frees);
	EXPECT_EQ(now.opens - base->opens, now.closes - base->closes);
	EXPECT_LE(now.live_bytes, now.hwm_bytes);
	EXPECT_LE(base->hwm_bytes, now.hwm_bytes);
}

/* Each operation moves exactly the counters it should. */
TEST_F(life, counters_follow_each_operation)
{
	const size_t len = 3 * self->page;
	const struct kt_counters *b = &self->base;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct kt_counters c;
	struct mlap2p_mem_alloc a;
	struct mlap2p_ipc_open o;
	void *p1, *p2;
	int fd2;

	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);

	ASSERT_EQ(0, kt_alloc(self->fd, len, self->mla, &a));
	ASSERT_EQ(0, kt_counters_read(&c));
	EXPECT_EQ(b->live_regions + 1, c.live_regions);
	EXPECT_EQ(b->live_bytes + len, c.live_bytes);
	EXPECT_EQ(b->live_handles + 1, c.live_handles);
	EXPECT_EQ(b->live_mappings, c.live_mappings);
	EXPECT_EQ(b->allocs + 1, c.allocs);
	EXPECT_LE(c.live_bytes, c.hwm_bytes);
	EXPECT_EQ(self->base_used + len, dev_used(self->fd, self->mla));

	ASSERT_EQ(0, kt_export(self->fd, a.handle, 0, ipc));
	ASSERT_EQ(0, kt_counters_read(&c));
	EXPECT_EQ(b->exports + 1, c.exports);

	ASSERT_EQ(0, kt_import(fd2, ipc, &o));
	ASSERT_EQ(0, kt_counters_read(&c));
	EXPECT_EQ(b->live_regions + 1, c.live_regions);
	EXPECT_EQ(b->live_bytes + len, c.live_bytes);
	EXPECT_EQ(b->live_handles + 2, c.live_handles);
	EXPECT_EQ(b->opens + 1, c.opens);

	p1 = kt_map(self->fd, a.mmap_cookie, len, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, p1);
	p2 = kt_map(fd2, o.mmap_cookie, len, PROT_READ);
	ASSERT_NE(MAP_FAILED, p2);
	ASSERT_EQ(0, kt_counters_read(&c));
	EXPECT_EQ(b->live_mappings + 2, c.live_mappings);
	munmap(p2, len);
	ASSERT_EQ(0, kt_counters_read(&c));
	EXPECT_EQ(b->live_mappings + 1, c.live_mappings);

	ASSERT_EQ(0, kt_close_handle(fd2, o.handle));
	ASSERT_EQ(0, kt_counters_read(&c));
	EXPECT_EQ(b->live_handles + 1, c.live_handles);
	EXPECT_EQ(b->closes + 1, c.closes);

	/* Freed but still mapped: the region and its bytes stay. */
	ASSERT_EQ(0, kt_free(self->fd, a.handle));
	ASSERT_EQ(0, kt_counters_read(&c));
	EXPECT_EQ(b->frees + 1, c.frees);
	EXPECT_EQ(b->live_handles, c.live_handles);
	EXPECT_EQ(b->live_regions + 1, c.live_regions);
	EXPECT_EQ(b->live_bytes + len, c.live_bytes);
	EXPECT_EQ(self->base_used + len, dev_used(self->fd, self->mla));

	munmap(p1, len);
	ASSERT_EQ(0, kt_counters_read(&c));
	EXPECT_TRUE(kt_live_equal(b, &c));
	EXPECT_EQ(b->allocs + 1, c.allocs);
	EXPECT_EQ(b->frees + 1, c.frees);
	EXPECT_EQ(b->exports + 1, c.exports);
	EXPECT_EQ(b->opens + 1, c.opens);
	EXPECT_EQ(b->closes + 1, c.closes);
	EXPECT_EQ(b->rejected, c.rejected);
	EXPECT_EQ(self->base_used, dev_used(self->fd, self->mla));
	close(fd2);
}

TEST_F(life, hwm_bytes_keeps_the_peak)
{
	const size_t len = 64 * self->page;
	struct kt_counters c;
	struct mlap2p_mem_alloc a;

	ASSERT_EQ(0, kt_alloc(self->fd, len, self->mla, &a));
	ASSERT_EQ(0, kt_counters_read(&c));
	EXPECT_LE(self->base.live_bytes + len, c.hwm_bytes);
	EXPECT_LE(self->base.hwm_bytes, c.hwm_bytes);
	ASSERT_EQ(0, kt_free(self->fd, a.handle));
	ASSERT_EQ(0, kt_counters_read(&c));
	EXPECT_LE(self->base.live_bytes + len, c.hwm_bytes);
	EXPECT_EQ(self->base.live_bytes, c.live_bytes);
}

/*
 * Build a busy file set: owned regions (some exported), imports of them on
 * a second file, mappings through both.  Returns 0 or a step number.
 */
static int populate(int fd, int fd2, __u32 mla, size_t page, void **maps,
		    size_t *lens, int *nmaps)
{
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_mem_alloc a;
	struct mlap2p_ipc_open o;
	int k;

	*nmaps = 0;
	for (k = 0; k < 8; k++) {
		size_t len = (size_t)(k + 1) * page;

		if (kt_alloc(fd, len, mla, &a))
			return 1;
		if (k % 2)
			continue;
		if (kt_export(fd, a.handle, k % 4 ? MLAP2P_IPC_F_RDONLY : 0,
			      ipc))
			return 2;
		if (kt_import(fd2, ipc, &o))
			return 3;
		maps[*nmaps] = kt_map(fd2, o.mmap_cookie, len, PROT_READ);
		if (maps[*nmaps] == MAP_FAILED)
			return 4;
		lens[(*nmaps)++] = len;
		maps[*nmaps] = kt_map(fd, a.mmap_cookie, len,
				      PROT_READ | PROT_WRITE);
		if (maps[*nmaps] == MAP_FAILED)
			return 5;
		lens[(*nmaps)++] = len;
	}
	return 0;
}

/* close() without a single MEM_FREE or IPC_CLOSE, then munmap. */
TEST_F(life, closing_files_releases_everything)
{
	void *maps[16];
	size_t lens[16];
	int fd2, fd3, n, k;

	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	fd3 = kt_dev_open();
	ASSERT_LE(0, fd3);
	ASSERT_EQ(0, populate(fd2, fd3, self->mla, self->page, maps, lens,
			      &n));
	close(fd2);
	close(fd3);
	/* The mappings still hold their regions... */
	for (k = 0; k < n; k++) {
		EXPECT_EQ(-1, kt_first_nonzero(maps[k], lens[k]));
	}
	/* ...until they go too. */
	for (k = 0; k < n; k++)
		munmap(maps[k], lens[k]);
	expect_baseline(_metadata, &self->base);
	EXPECT_EQ(self->base_used, dev_used(self->fd, self->mla));
}

/* A dup()ed descriptor is the same file: the last close releases. */
TEST_F(life, last_close_of_a_dup_releases)
{
	struct mlap2p_region_info r;
	struct mlap2p_mem_alloc a;
	struct kt_counters c;
	int fd2, dupfd;

	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	dupfd = dup(fd2);
	ASSERT_LE(0, dupfd);
	ASSERT_EQ(0, kt_alloc(fd2, self->page, self->mla, &a));
	close(fd2);
	ASSERT_EQ(0, kt_region_info(dupfd, a.handle, &r));
	ASSERT_EQ(0, kt_counters_read(&c));
	EXPECT_EQ(self->base.live_regions + 1, c.live_regions);
	close(dupfd);
	expect_baseline(_metadata, &self->base);
}

/*
 * Handles belong to the file, not the process: a child that inherits the
 * descriptor uses the parent's handles (but not its mappings).
 */
TEST_F(life, handles_belong_to_the_file)
{
	struct mlap2p_region_info r;
	struct mlap2p_mem_alloc a;
	pid_t pid;

	ASSERT_EQ(0, kt_alloc(self->fd, self->page, self->mla, &a));
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		if (kt_region_info(self->fd, a.handle, &r))
			_exit(1);
		_exit(kt_free(self->fd, a.handle) ? 2 : 0);
	}
	ASSERT_EQ(0, kt_wait(pid));
	EXPECT_EQ(-ENOENT, kt_region_info(self->fd, a.handle, &r));
	expect_baseline(_metadata, &self->base);
}

/*
 * A process that dies holding everything (owned and imported handles,
 * mappings, two files) leaves nothing behind: once by exit(), once by
 * SIGKILL.
 */
static void die_holding_everything(struct __test_metadata *_metadata,
				   FIXTURE_DATA(life) *self, bool kill)
{
	void *maps[16];
	size_t lens[16];
	int status, n;
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int fd2 = kt_dev_open(), fd3 = kt_dev_open();
		int ret;

		if (fd2 < 0 || fd3 < 0)
			_exit(10);
		ret = populate(fd2, fd3, self->mla, self->page, maps, lens,
			       &n);
		if (ret)
			_exit(10 + ret);
		if (kill)
			raise(SIGKILL);
		_exit(0);
	}
	status = kt_wait(pid);
	EXPECT_EQ(kill ? 128 + SIGKILL : 0, status);
	expect_baseline(_metadata, &self->base);
	EXPECT_EQ(self->base_used, dev_used(self->fd, self->mla));
}

TEST_F(life, process_exit_releases_everything)
{
	die_holding_everything(_metadata, self, false);
}

TEST_F(life, sigkill_releases_everything)
{
	die_holding_everything(_metadata, self, true);
}

/*
 * An importer in another process outlives both the owner's MEM_FREE and
 * its file; the last importer's exit frees the region.
 */
TEST_F(life, last_importer_exit_frees_the_region)
{
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_mem_alloc a;
	struct kt_counters c;
	int go[2], ready[2];
	pid_t pid;
	char ch;

	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(ready));
	ASSERT_EQ(0, kt_alloc(self->fd, 2 * self->page, self->mla, &a));
	ASSERT_EQ(0, kt_export(self->fd, a.handle, 0, ipc));
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct mlap2p_ipc_open o;
		int fd = kt_dev_open();
		void *m;

		close(self->fd);
		if (fd < 0 || kt_import(fd, ipc, &o))
			_exit(10);
		m = kt_map(fd, o.mmap_cookie, o.size, PROT_READ);
		if (m == MAP_FAILED)
			_exit(11);
		if (write(ready[1], "r", 1) != 1)
			_exit(12);
		/* Hold on until the parent has let go of everything. */
		if (read(go[0], &ch, 1) != 1)
			_exit(13);
		_exit(kt_first_nonzero(m, o.size) == -1 ? 0 : 14);
	}
	close(go[0]);
	close(ready[1]);
	ASSERT_EQ(1, read(ready[0], &ch, 1));
	ASSERT_EQ(0, kt_free(self->fd, a.handle));
	close(self->fd);
	self->fd = -1;
	ASSERT_EQ(0, kt_counters_read(&c));
	EXPECT_EQ(self->base.live_regions + 1, c.live_regions);
	EXPECT_EQ(self->base.live_handles + 1, c.live_handles);
	EXPECT_EQ(self->base.live_mappings + 1, c.live_mappings);
	ASSERT_EQ(1, write(go[1], "g", 1));
	EXPECT_EQ(0, kt_wait(pid));
	close(go[1]);
	close(ready[0]);
	expect_baseline(_metadata, &self->base);
}

KT_TEST_MAIN
