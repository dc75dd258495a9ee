// SPDX-License-Identifier: GPL-2.0
/*
 * ipc_test: IPC handles between files and between processes.
 *
 * Forged handles (random bytes, every single bit of a valid handle
 * flipped), handles of freed regions, exporting an imported handle
 * (-EINVAL), credentials (another uid gets -EACCES; CAP_IPC_OWNER may open
 * another uid's region; a second export under another euid or user
 * namespace gets -EACCES), and data moving
 * through a region shared by two processes: the exporter's pattern read by
 * a freshly forked importer that answers back, the owner exiting under an
 * importer's mapping, read-only imports, several importers at once.
 *
 * A peer process gets the 64-byte handle over a pipe, as a runtime would
 * pass it through its bootstrap network; it opens /dev/mlap2p itself
 * rather than using the parent's file.
 */
#include "mlap2p_util.h"
#include "kselftest_harness.h"

#include <sys/random.h>

FIXTURE(ipc) {
	int fd;
	struct mlap2p_info info;
	size_t page;
	__u32 mla;
	bool counters;
	struct kt_counters base;
};

FIXTURE_SETUP(ipc)
{
	self->fd = kt_dev_open();
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, kt_get_info(self->fd, &self->info));
	self->page = kt_page_size();
	self->mla = kt_local_mla(&self->info);
	self->counters = kt_counters_read(&self->base) == 0;
}

FIXTURE_TEARDOWN(ipc)
{
	if (self->fd > 0)
		close(self->fd);
}

/* ------------------------------------------------------------------ */
/* A forked peer connected by two pipes                               */
/* ------------------------------------------------------------------ */

struct peer {
	pid_t pid;
	int rd;		/* parent reads what the child writes */
	int wr;		/* parent writes what the child reads */
};

typedef int (*peer_fn)(int rd, int wr, void *arg);

/*
 * Fork a child running @fn(rd, wr, @arg); its exit status is @fn's return.
 * The child drops the parent's device file first (@parent_fd, if >= 0) so
 * it works only through files it opens itself.
 */
static int peer_start(struct peer *p, int parent_fd, peer_fn fn, void *arg)
{
	int down[2], up[2];

	if (pipe2(down, O_CLOEXEC) || pipe2(up, O_CLOEXEC))
		return -errno;
	fflush(stdout);
	fflush(stderr);
	p->pid = fork();
	if (p->pid < 0)
		return -errno;
	if (p->pid == 0) {
		if (parent_fd >= 0)
			close(parent_fd);
		close(down[1]);
		close(up[0]);
		_exit(fn(down[0], up[1], arg));
	}
	close(down[0]);
	close(up[1]);
	p->rd = up[0];
	p->wr = down[1];
	return 0;
}

/* Close the pipes (a waiting child sees EOF) and reap the child. */
static int peer_finish(struct peer *p)
{
	close(p->rd);
	close(p->wr);
	return kt_wait(p->pid);
}

static int send_byte(int fd, char c)
{
	return kt_write_full(fd, &c, 1);
}

/* Wait for one byte; -EPIPE if the other side went away. */
static int recv_byte(int fd, char *c)
{
	return kt_read_full(fd, c, 1);
}

/* Export @handle of @fd and an allocation of @len filled from @seed. */
static int make_region(int fd, __u32 mla, size_t len, uint32_t seed,
		       __u32 ipc_flags, struct mlap2p_mem_alloc *a,
		       __u8 ipc[MLAP2P_IPC_HANDLE_SIZE])
{
	void *p;
	int ret;

	ret = kt_alloc(fd, len, mla, a);
	if (ret)
		return ret;
	p = kt_map(fd, a->mmap_cookie, len, PROT_READ | PROT_WRITE);
	if (p == MAP_FAILED)
		return -errno;
	kt_fill(p, len, seed);
	munmap(p, len);
	return kt_export(fd, a->handle, ipc_flags, ipc);
}

static void assert_counters_back(struct __test_metadata *_metadata,
				 const struct kt_counters *base)
{
	struct kt_counters now;

	EXPECT_TRUE(kt_counters_settle(base, &now, 2000)) {
		kt_counters_log("baseline", base);
		kt_counters_log("now", &now);
	}
}

/* ------------------------------------------------------------------ */
/* Forged and stale handles                                           */
/* ------------------------------------------------------------------ */

TEST_F(ipc, random_bytes_are_not_a_handle)
{
	__u8 blob[MLAP2P_IPC_HANDLE_SIZE];
	struct kt_counters now;
	struct mlap2p_ipc_open o;
	const int n = 256;
	int k;

	memset(blob, 0, sizeof(blob));
	EXPECT_EQ(-ENOENT, kt_import(self->fd, blob, &o));
	memset(blob, 0xff, sizeof(blob));
	EXPECT_EQ(-ENOENT, kt_import(self->fd, blob, &o));
	for (k = 0; k < n; k++) {
		ASSERT_EQ((ssize_t)sizeof(blob),
			  getrandom(blob, sizeof(blob), 0));
		EXPECT_EQ(-ENOENT, kt_import(self->fd, blob, &o))
			TH_LOG("random handle %d", k);
	}
	if (self->counters) {
		ASSERT_EQ(0, kt_counters_read(&now));
		EXPECT_EQ(self->base.rejected + n + 2, now.rejected);
		EXPECT_EQ(self->base.opens, now.opens);
	}
}

/*
 * A valid handle with any one of its 512 bits flipped opens nothing: the
 * secret's bits are among them, and the rest name another region, another
 * kind or a malformed blob.  The region is exported read-write and
 * read-only so a flip cannot land on the other valid handle either.
 */
TEST_F(ipc, every_single_bit_flip_is_refused)
{
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE], ro[MLAP2P_IPC_HANDLE_SIZE];
	__u8 bad[MLAP2P_IPC_HANDLE_SIZE];
	struct kt_counters now;
	struct mlap2p_mem_alloc a;
	struct mlap2p_ipc_open o;
	int bit, fd2, ret, opened = 0;

	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, make_region(self->fd, self->mla, self->page, 1, 0, &a,
				 ipc));
	ASSERT_EQ(0, kt_export(self->fd, a.handle, MLAP2P_IPC_F_RDONLY,
			       ro));

	for (bit = 0; bit < MLAP2P_IPC_HANDLE_SIZE * 8; bit++) {
		memcpy(bad, ipc, sizeof(bad));
		bad[bit / 8] ^= (__u8)(1U << (bit % 8));
		ret = kt_import(fd2, bad, &o);
		EXPECT_EQ(-ENOENT, ret) TH_LOG("bit %d flipped", bit);
		if (ret == 0) {
			opened++;
			kt_close_handle(fd2, o.handle);
		}
	}
	/* The genuine handles still open. */
	ASSERT_EQ(0, kt_import(fd2, ipc, &o));
	EXPECT_EQ(0U, o.access);
	EXPECT_EQ(0, kt_close_handle(fd2, o.handle));
	ASSERT_EQ(0, kt_import(fd2, ro, &o));
	EXPECT_EQ(1U, o.access);
	EXPECT_EQ(0, kt_close_handle(fd2, o.handle));

	if (self->counters) {
		ASSERT_EQ(0, kt_counters_read(&now));
		EXPECT_EQ(self->base.rejected + 512 - opened, now.rejected);
	}
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
	close(fd2);
}

TEST_F(ipc, handle_of_a_freed_region)
{
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_mem_alloc a;
	struct mlap2p_ipc_open o;
	int fd2;

	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, make_region(self->fd, self->mla, self->page, 2, 0, &a,
				 ipc));
	ASSERT_EQ(0, kt_free(self->fd, a.handle));
	EXPECT_EQ(-ENOENT, kt_import(fd2, ipc, &o));
	EXPECT_EQ(-ENOENT, kt_import(self->fd, ipc, &o));
	close(fd2);
}

/*
 * Once the owner handle is gone the region cannot be opened again, even
 * though an importer still holds (and maps) it.
 */
TEST_F(ipc, freed_region_stays_closed_while_imported)
{
	const size_t len = 4 * self->page;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_region_info r;
	struct mlap2p_mem_alloc a;
	struct mlap2p_ipc_open o, o2;
	void *p;
	int fd2;

	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, make_region(self->fd, self->mla, len, 3, 0, &a, ipc));
	ASSERT_EQ(0, kt_import(fd2, ipc, &o));
	ASSERT_EQ(0, kt_free(self->fd, a.handle));

	EXPECT_EQ(-ENOENT, kt_import(fd2, ipc, &o2));
	/* The importer keeps what it had. */
	ASSERT_EQ(0, kt_region_info(fd2, o.handle, &r));
	EXPECT_EQ(1U, r.importers);
	EXPECT_EQ((__u64)len, r.size);
	p = kt_map(fd2, o.mmap_cookie, len, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(-1, kt_check(p, len, 3));
	munmap(p, len);
	EXPECT_EQ(0, kt_close_handle(fd2, o.handle));
	close(fd2);
	if (self->counters)
		assert_counters_back(_metadata, &self->base);
}

/* Closing the owner's file is a MEM_FREE of everything it owned. */
TEST_F(ipc, owner_file_close_ends_new_opens)
{
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_mem_alloc a;
	struct mlap2p_ipc_open o;
	int fd2;

	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, make_region(fd2, self->mla, self->page, 4, 0, &a, ipc));
	close(fd2);
	EXPECT_EQ(-ENOENT, kt_import(self->fd, ipc, &o));
	if (self->counters)
		assert_counters_back(_metadata, &self->base);
}

/*
 * Only the owner exports: an imported handle gives -EINVAL, in another file
 * or in the owner's own, either kind, and still once the owner is gone.
 * Nothing is exported and the import stays as it was.
 */
TEST_F(ipc, imported_handle_cannot_be_exported)
{
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE], again[MLAP2P_IPC_HANDLE_SIZE];
	struct kt_counters before, now;
	struct mlap2p_region_info r;
	struct mlap2p_mem_alloc a;
	struct mlap2p_ipc_open o, o_own;
	int fd2;

	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, make_region(self->fd, self->mla, self->page, 9, 0, &a,
				 ipc));
	ASSERT_EQ(0, kt_import(fd2, ipc, &o));
	ASSERT_EQ(0, kt_import(self->fd, ipc, &o_own));
	if (self->counters)
		ASSERT_EQ(0, kt_counters_read(&before));

	EXPECT_EQ(-EINVAL, kt_export(fd2, o.handle, 0, again));
	EXPECT_EQ(-EINVAL, kt_export(fd2, o.handle, MLAP2P_IPC_F_RDONLY,
				     again));
	EXPECT_EQ(-EINVAL, kt_export(self->fd, o_own.handle, 0, again));
	if (self->counters) {
		ASSERT_EQ(0, kt_counters_read(&now));
		EXPECT_EQ(before.exports, now.exports);
	}
	ASSERT_EQ(0, kt_region_info(fd2, o.handle, &r));
	EXPECT_EQ((__u32)MLAP2P_REGION_IMPORTED, r.kind);
	EXPECT_EQ(2U, r.importers);

	/* The owner handle of the same region, same flags, does export. */
	ASSERT_EQ(0, kt_export(self->fd, a.handle, 0, again));
	EXPECT_EQ(0, memcmp(ipc, again, sizeof(ipc)));

	/* With the owner gone the importer holds the region, still -EINVAL. */
	ASSERT_EQ(0, kt_free(self->fd, a.handle));
	EXPECT_EQ(-EINVAL, kt_export(fd2, o.handle, 0, again));

	EXPECT_EQ(0, kt_close_handle(self->fd, o_own.handle));
	EXPECT_EQ(0, kt_close_handle(fd2, o.handle));
	close(fd2);
	if (self->counters)
		assert_counters_back(_metadata, &self->base);
}

/* ------------------------------------------------------------------ */
/* Credentials                                                        */
/* ------------------------------------------------------------------ */

struct nobody_import {
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	__u8 ro[MLAP2P_IPC_HANDLE_SIZE];
	int inherited_fd;
};

/* As nobody: both handles must give -EACCES. */
static int child_nobody_import(int rd, int wr, void *arg)
{
	struct nobody_import *ni = arg;
	struct mlap2p_ipc_open o;
	int fd, ret;

	(void)rd;
	(void)wr;
	if (kt_become_nobody())
		return kt_child_fail(10, "cannot become nobody: %s",
					 strerror(errno));
	if (geteuid() != 65534)
		return kt_child_fail(11, "euid %d", (int)geteuid());
	fd = kt_dev_open();
	if (fd < 0) {
		/* A restricted node: ask with the file root opened. */
		ksft_print_msg("nobody cannot open %s (%s): using root's file\n",
			       MLAP2P_DEVICE_PATH, strerror(errno));
		fd = ni->inherited_fd;
	}
	ret = kt_import(fd, ni->ipc, &o);
	if (ret != -EACCES)
		return kt_child_fail(12, "read-write handle: %d", ret);
	ret = kt_import(fd, ni->ro, &o);
	if (ret != -EACCES)
		return kt_child_fail(13, "read-only handle: %d", ret);
	return 0;
}

TEST_F(ipc, other_uid_gets_eacces)
{
	struct nobody_import ni;
	struct kt_counters now;
	struct mlap2p_region_info r;
	struct mlap2p_mem_alloc a;
	struct peer p;

	if (geteuid() != 0)
		SKIP(return, "needs root to switch to uid 65534");
	ASSERT_EQ(0, make_region(self->fd, self->mla, self->page, 5, 0, &a,
				 ni.ipc));
	ASSERT_EQ(0, kt_export(self->fd, a.handle, MLAP2P_IPC_F_RDONLY,
			       ni.ro));
	/* The child keeps the parent's file only as a fallback. */
	ni.inherited_fd = fcntl(self->fd, F_DUPFD_CLOEXEC, 0);
	ASSERT_LE(0, ni.inherited_fd);

	ASSERT_EQ(0, peer_start(&p, self->fd, child_nobody_import, &ni));
	EXPECT_EQ(0, peer_finish(&p));
	close(ni.inherited_fd);

	ASSERT_EQ(0, kt_region_info(self->fd, a.handle, &r));
	EXPECT_EQ(0U, r.importers);
	if (self->counters) {
		ASSERT_EQ(0, kt_counters_read(&now));
		EXPECT_EQ(self->base.rejected + 2, now.rejected);
		EXPECT_EQ(self->base.opens, now.opens);
	}
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
}

/*
 * Same euid, another user namespace: a child unshares one, maps its uid 0
 * to the parent's uid 0 (so the kuid matches the exporter's) and still gets
 * -EACCES, having no CAP_IPC_OWNER over the exporter's namespace.
 */
static int child_other_userns(int rd, int wr, void *arg)
{
	const __u8 *ipc = arg;
	struct mlap2p_ipc_open o;
	int fd, ret;

	(void)rd;
	(void)wr;
	ret = kt_enter_userns_root(10);
	if (ret)
		return ret;
	fd = kt_dev_open();
	if (fd < 0)
		return kt_child_fail(13, "open: %s", strerror(errno));
	ret = kt_import(fd, ipc, &o);
	if (ret != -EACCES)
		return kt_child_fail(14, "import: %d", ret);
	return 0;
}

TEST_F(ipc, other_user_namespace_gets_eacces)
{
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_mem_alloc a;
	struct peer p;
	int ret;

	if (geteuid() != 0)
		SKIP(return, "needs root to map uid 0 into a user namespace");
	ASSERT_EQ(0, make_region(self->fd, self->mla, self->page, 8, 0, &a,
				 ipc));
	ASSERT_EQ(0, peer_start(&p, self->fd, child_other_userns, ipc));
	ret = peer_finish(&p);
	if (ret == KT_KSFT_SKIP)
		SKIP(goto out, "no user namespaces here");
	EXPECT_EQ(0, ret);
out:
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
}

/*
 * A region answers to the credentials of its first export.  The child
 * shares the parent's file (a file shared by fork shares its handles) and
 * has other credentials: another euid (nobody), or euid 0 in another user
 * namespace.  Region a was exported by the parent first, region b not yet.
 */
enum other_creds { AS_NOBODY, AS_OTHER_USERNS };

struct second_export {
	enum other_creds how;
	int fd;			/* the parent's file */
	__u32 a, b;		/* its owned handles */
	__u8 ipc_b[MLAP2P_IPC_HANDLE_SIZE];
};

static int child_second_export(int rd, int wr, void *arg)
{
	struct second_export *se = arg;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	int ret;

	(void)rd;
	if (se->how == AS_NOBODY) {
		if (kt_become_nobody())
			return kt_child_fail(10, "cannot become nobody: %s",
						 strerror(errno));
		if (geteuid() != 65534)
			return kt_child_fail(11, "euid %d",
						 (int)geteuid());
	} else {
		ret = kt_enter_userns_root(12);
		if (ret)
			return ret;
	}
	/* Either kind: the first export fixed the credentials. */
	ret = kt_export(se->fd, se->a, 0, ipc);
	if (ret != -EACCES)
		return kt_child_fail(15, "second export: %d", ret);
	ret = kt_export(se->fd, se->a, MLAP2P_IPC_F_RDONLY, ipc);
	if (ret != -EACCES)
		return kt_child_fail(16, "second read-only export: %d",
					 ret);
	/* The same file and credentials export a region not yet exported. */
	ret = kt_export(se->fd, se->b, 0, ipc);
	if (ret)
		return kt_child_fail(17, "first export: %d", ret);
	if (kt_write_full(wr, ipc, sizeof(ipc)))
		return kt_child_fail(18, "write handle");
	return 0;
}

static void second_export_refused(struct __test_metadata *_metadata,
				  FIXTURE_DATA(ipc) *self,
				  enum other_creds how)
{
	__u8 ipc_a[MLAP2P_IPC_HANDLE_SIZE], again[MLAP2P_IPC_HANDLE_SIZE];
	struct kt_counters before, now;
	struct mlap2p_mem_alloc a, b;
	struct mlap2p_ipc_open o;
	struct second_export se;
	struct peer p;
	int ret;

	ASSERT_EQ(0, make_region(self->fd, self->mla, self->page, 10, 0, &a,
				 ipc_a));
	ASSERT_EQ(0, kt_alloc(self->fd, self->page, self->mla, &b));
	if (self->counters)
		ASSERT_EQ(0, kt_counters_read(&before));
	se.how = how;
	se.fd = self->fd;
	se.a = a.handle;
	se.b = b.handle;

	ASSERT_EQ(0, peer_start(&p, -1, child_second_export, &se));
	ret = kt_read_full(p.rd, se.ipc_b, sizeof(se.ipc_b));
	if (ret) {
		ret = peer_finish(&p);
		if (ret == KT_KSFT_SKIP)
			SKIP(goto out, "no user namespaces here");
		ASSERT_EQ(0, ret);
	}
	EXPECT_EQ(0, peer_finish(&p));

	/* Only the child's export of b counted. */
	if (self->counters) {
		ASSERT_EQ(0, kt_counters_read(&now));
		EXPECT_EQ(before.exports + 1, now.exports);
	}
	/* a is still the parent's: same handle, and it opens. */
	ASSERT_EQ(0, kt_export(self->fd, a.handle, 0, again));
	EXPECT_EQ(0, memcmp(ipc_a, again, sizeof(again)));
	ASSERT_EQ(0, kt_import(self->fd, ipc_a, &o));
	EXPECT_EQ(0, kt_close_handle(self->fd, o.handle));
	/* b is the child's now: the parent is the other one. */
	EXPECT_EQ(-EACCES, kt_export(self->fd, b.handle, 0, again));
	EXPECT_EQ(-EACCES, kt_export(self->fd, b.handle,
				     MLAP2P_IPC_F_RDONLY, again));
	if (self->counters) {
		ASSERT_EQ(0, kt_counters_read(&now));
		EXPECT_EQ(before.exports + 2, now.exports);
	}
out:
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
	EXPECT_EQ(0, kt_free(self->fd, b.handle));
}

TEST_F(ipc, second_export_by_other_euid_gets_eacces)
{
	if (geteuid() != 0)
		SKIP(return, "needs root to switch to uid 65534");
	second_export_refused(_metadata, self, AS_NOBODY);
}

TEST_F(ipc, second_export_from_other_user_namespace_gets_eacces)
{
	if (geteuid() != 0)
		SKIP(return, "needs root to map uid 0 into a user namespace");
	second_export_refused(_metadata, self, AS_OTHER_USERNS);
}

/*
 * nobody exports a region; root (CAP_IPC_OWNER in the exporter's user
 * namespace) may open it anyway and sees nobody's data.
 */
static int child_nobody_export(int rd, int wr, void *arg)
{
	const size_t len = kt_page_size();
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_mem_alloc a;
	__u32 mla = *(__u32 *)arg;
	char c;
	int fd, ret;

	if (kt_become_nobody())
		return kt_child_fail(10, "cannot become nobody: %s",
					 strerror(errno));
	fd = kt_dev_open();
	if (fd < 0)
		return KT_KSFT_SKIP;
	ret = make_region(fd, mla, len, 6, 0, &a, ipc);
	if (ret)
		return kt_child_fail(11, "make_region: %d", ret);
	if (kt_write_full(wr, ipc, sizeof(ipc)))
		return kt_child_fail(12, "write handle");
	/* Hold the region until the parent is done. */
	recv_byte(rd, &c);
	return 0;
}

TEST_F(ipc, cap_ipc_owner_opens_another_uid)
{
	const size_t len = self->page;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_ipc_open o;
	struct peer p;
	int ret;
	void *m;

	if (geteuid() != 0)
		SKIP(return, "needs root (CAP_IPC_OWNER) and uid 65534");
	ASSERT_EQ(0, peer_start(&p, self->fd, child_nobody_export,
				&self->mla));
	if (kt_read_full(p.rd, ipc, sizeof(ipc))) {
		ret = peer_finish(&p);
		if (ret == KT_KSFT_SKIP)
			SKIP(return, "nobody cannot open %s",
			     MLAP2P_DEVICE_PATH);
		ASSERT_EQ(0, ret);
	}
	ASSERT_EQ(0, kt_import(self->fd, ipc, &o));
	m = kt_map(self->fd, o.mmap_cookie, len, PROT_READ);
	ASSERT_NE(MAP_FAILED, m);
	EXPECT_EQ(-1, kt_check(m, len, 6));
	munmap(m, len);
	EXPECT_EQ(0, kt_close_handle(self->fd, o.handle));
	EXPECT_EQ(0, send_byte(p.wr, 'q'));
	EXPECT_EQ(0, peer_finish(&p));
}

/* ------------------------------------------------------------------ */
/* Data between processes                                             */
/* ------------------------------------------------------------------ */

#define XFER_LEN	(64 * 1024)
#define XFER_SEED	0x5eed0001U
#define ANSWER_SEED	0xa5a5f00dU

/*
 * The importer: open the device, import the handle from the pipe, check
 * the exporter's pattern in the first half, write the answer into the
 * second half, report, and wait to be released.
 */
static int child_answer(int rd, int wr, void *arg)
{
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_ipc_open o;
	char *m;
	long off;
	char c;
	int fd, ret;

	(void)arg;
	fd = kt_dev_open();
	if (fd < 0)
		return kt_child_fail(10, "open: %s", strerror(errno));
	if (kt_read_full(rd, ipc, sizeof(ipc)))
		return kt_child_fail(11, "no handle");
	ret = kt_import(fd, ipc, &o);
	if (ret)
		return kt_child_fail(12, "import: %d", ret);
	if (o.size != XFER_LEN || o.access != 0)
		return kt_child_fail(13, "size %llu access %u",
					 (unsigned long long)o.size, o.access);
	m = kt_map(fd, o.mmap_cookie, XFER_LEN, PROT_READ | PROT_WRITE);
	if (m == MAP_FAILED)
		return kt_child_fail(14, "mmap: %s", strerror(errno));
	off = kt_check(m, XFER_LEN / 2, XFER_SEED);
	if (off >= 0)
		return kt_child_fail(15, "pattern differs at %ld", off);
	kt_fill(m + XFER_LEN / 2, XFER_LEN / 2, ANSWER_SEED);
	if (send_byte(wr, 'a'))
		return kt_child_fail(16, "write answer");
	/* Stay mapped until the parent has looked. */
	if (recv_byte(rd, &c))
		return kt_child_fail(17, "parent went away");
	munmap(m, XFER_LEN);
	if (kt_close_handle(fd, o.handle))
		return kt_child_fail(18, "close handle");
	close(fd);
	return 0;
}

TEST_F(ipc, another_process_reads_and_answers)
{
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_region_info r;
	struct mlap2p_mem_alloc a;
	struct peer p;
	char *m, c;

	ASSERT_EQ(0, kt_alloc(self->fd, XFER_LEN, self->mla, &a));
	m = kt_map(self->fd, a.mmap_cookie, XFER_LEN,
		   PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, m);
	kt_fill(m, XFER_LEN / 2, XFER_SEED);
	ASSERT_EQ(0, kt_export(self->fd, a.handle, 0, ipc));

	ASSERT_EQ(0, peer_start(&p, self->fd, child_answer, NULL));
	ASSERT_EQ(0, kt_write_full(p.wr, ipc, sizeof(ipc)));
	ASSERT_EQ(0, recv_byte(p.rd, &c)) {
		TH_LOG("child exited with %d", peer_finish(&p));
	}
	EXPECT_EQ('a', c);

	/* The answer is in our own mapping, and the peer is counted. */
	EXPECT_EQ(-1, kt_check(m + XFER_LEN / 2, XFER_LEN / 2,
			       ANSWER_SEED));
	ASSERT_EQ(0, kt_region_info(self->fd, a.handle, &r));
	EXPECT_EQ(1U, r.importers);
	EXPECT_EQ(2U, r.mappings);

	EXPECT_EQ(0, send_byte(p.wr, 'q'));
	EXPECT_EQ(0, peer_finish(&p));
	ASSERT_EQ(0, kt_region_info(self->fd, a.handle, &r));
	EXPECT_EQ(0U, r.importers);
	EXPECT_EQ(1U, r.mappings);
	munmap(m, XFER_LEN);
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
	if (self->counters)
		assert_counters_back(_metadata, &self->base);
}

/* The owner: allocate, map, fill, export, send, wait, then just exit. */
static int child_owner(int rd, int wr, void *arg)
{
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_mem_alloc a;
	__u32 mla = *(__u32 *)arg;
	void *m;
	char c;
	int fd, ret;

	fd = kt_dev_open();
	if (fd < 0)
		return kt_child_fail(10, "open: %s", strerror(errno));
	ret = kt_alloc(fd, XFER_LEN, mla, &a);
	if (ret)
		return kt_child_fail(11, "alloc: %d", ret);
	m = kt_map(fd, a.mmap_cookie, XFER_LEN, PROT_READ | PROT_WRITE);
	if (m == MAP_FAILED)
		return kt_child_fail(12, "mmap: %s", strerror(errno));
	kt_fill(m, XFER_LEN, XFER_SEED);
	ret = kt_export(fd, a.handle, 0, ipc);
	if (ret)
		return kt_child_fail(13, "export: %d", ret);
	if (kt_write_full(wr, ipc, sizeof(ipc)))
		return kt_child_fail(14, "write handle");
	if (recv_byte(rd, &c))
		return kt_child_fail(15, "parent went away");
	/* Exit holding the handle, the file and the mapping. */
	return 0;
}

TEST_F(ipc, owner_exit_leaves_importer_mapped)
{
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_region_info r;
	struct kt_counters mid;
	struct mlap2p_ipc_open o, o2;
	struct peer p;
	char *m, *m2;

	ASSERT_EQ(0, peer_start(&p, self->fd, child_owner, &self->mla));
	ASSERT_EQ(0, kt_read_full(p.rd, ipc, sizeof(ipc))) {
		TH_LOG("owner exited with %d", peer_finish(&p));
	}
	ASSERT_EQ(0, kt_import(self->fd, ipc, &o));
	m = kt_map(self->fd, o.mmap_cookie, XFER_LEN,
		   PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, m);
	ASSERT_EQ(0, kt_region_info(self->fd, o.handle, &r));
	EXPECT_EQ(2U, r.mappings);

	/* The owner exits with everything still open. */
	EXPECT_EQ(0, send_byte(p.wr, 'x'));
	ASSERT_EQ(0, peer_finish(&p));

	/* Our mapping and data are intact, and still writable. */
	EXPECT_EQ(-1, kt_check(m, XFER_LEN, XFER_SEED));
	kt_fill(m, XFER_LEN, ANSWER_SEED);
	EXPECT_EQ(-1, kt_check(m, XFER_LEN, ANSWER_SEED));
	ASSERT_EQ(0, kt_region_info(self->fd, o.handle, &r));
	EXPECT_EQ((__u32)MLAP2P_REGION_IMPORTED, r.kind);
	EXPECT_EQ(1U, r.importers);
	EXPECT_EQ(1U, r.mappings);

	/* The handle still maps anew; the IPC handle no longer opens. */
	m2 = kt_map(self->fd, o.mmap_cookie, XFER_LEN, PROT_READ);
	ASSERT_NE(MAP_FAILED, m2);
	EXPECT_EQ(-1, kt_check(m2, XFER_LEN, ANSWER_SEED));
	munmap(m2, XFER_LEN);
	EXPECT_EQ(-ENOENT, kt_import(self->fd, ipc, &o2));

	/* The region is ours alone now; it goes with our last reference. */
	if (self->counters) {
		ASSERT_EQ(0, kt_counters_read(&mid));
		EXPECT_EQ(self->base.live_regions + 1, mid.live_regions);
		EXPECT_EQ(self->base.live_bytes + XFER_LEN, mid.live_bytes);
		EXPECT_EQ(self->base.live_handles + 1, mid.live_handles);
		EXPECT_EQ(self->base.live_mappings + 1, mid.live_mappings);
	}
	EXPECT_EQ(0, kt_close_handle(self->fd, o.handle));
	EXPECT_EQ(ANSWER_SEED, *(volatile uint32_t *)m);
	munmap(m, XFER_LEN);
	if (self->counters)
		assert_counters_back(_metadata, &self->base);
}

/* Read-only import in another process: reads, never writes. */
static int child_read_only(int rd, int wr, void *arg)
{
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_ipc_open o;
	void *m, *w;
	char c;
	int fd, ret;

	(void)arg;
	fd = kt_dev_open();
	if (fd < 0)
		return kt_child_fail(10, "open: %s", strerror(errno));
	if (kt_read_full(rd, ipc, sizeof(ipc)))
		return kt_child_fail(11, "no handle");
	ret = kt_import(fd, ipc, &o);
	if (ret || o.access != 1)
		return kt_child_fail(12, "import: %d access %u", ret,
					 o.access);
	w = kt_map(fd, o.mmap_cookie, XFER_LEN, PROT_READ | PROT_WRITE);
	if (w != MAP_FAILED || errno != EACCES)
		return kt_child_fail(13, "PROT_WRITE mmap: %s",
					 w == MAP_FAILED ? strerror(errno) :
					 "mapped");
	m = kt_map(fd, o.mmap_cookie, XFER_LEN, PROT_READ);
	if (m == MAP_FAILED)
		return kt_child_fail(14, "PROT_READ mmap: %s",
					 strerror(errno));
	if (mprotect(m, XFER_LEN, PROT_READ | PROT_WRITE) == 0 ||
	    errno != EACCES)
		return kt_child_fail(15, "mprotect upgrade: %s",
					 strerror(errno));
	if (kt_check(m, XFER_LEN, XFER_SEED) >= 0)
		return kt_child_fail(16, "first pattern");
	if (send_byte(wr, 'r'))
		return kt_child_fail(17, "write");
	/* The owner rewrites; a read-only mapping sees it. */
	if (recv_byte(rd, &c))
		return kt_child_fail(18, "parent went away");
	if (kt_check(m, XFER_LEN, ANSWER_SEED) >= 0)
		return kt_child_fail(19, "second pattern");
	return 0;
}

TEST_F(ipc, read_only_import_in_another_process)
{
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_mem_alloc a;
	struct peer p;
	char *m, c;

	ASSERT_EQ(0, make_region(self->fd, self->mla, XFER_LEN, XFER_SEED,
				 MLAP2P_IPC_F_RDONLY, &a, ipc));
	ASSERT_EQ(0, peer_start(&p, self->fd, child_read_only, NULL));
	ASSERT_EQ(0, kt_write_full(p.wr, ipc, sizeof(ipc)));
	ASSERT_EQ(0, recv_byte(p.rd, &c)) {
		TH_LOG("child exited with %d", peer_finish(&p));
	}
	m = kt_map(self->fd, a.mmap_cookie, XFER_LEN,
		   PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, m);
	kt_fill(m, XFER_LEN, ANSWER_SEED);
	EXPECT_EQ(0, send_byte(p.wr, 'w'));
	EXPECT_EQ(0, peer_finish(&p));
	munmap(m, XFER_LEN);
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
}

/* Several processes import and map at once; each is counted. */
#define NR_IMPORTERS	4

static int child_hold(int rd, int wr, void *arg)
{
	const __u8 *ipc = arg;
	struct mlap2p_ipc_open o;
	void *m;
	char c;
	int fd;

	fd = kt_dev_open();
	if (fd < 0 || kt_import(fd, ipc, &o))
		return kt_child_fail(10, "open/import");
	m = kt_map(fd, o.mmap_cookie, o.size, PROT_READ);
	if (m == MAP_FAILED || kt_check(m, o.size, 7) >= 0)
		return kt_child_fail(11, "map/check");
	if (send_byte(wr, 'h') || recv_byte(rd, &c))
		return kt_child_fail(12, "pipe");
	return 0;
}

TEST_F(ipc, several_importers_are_counted)
{
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_region_info r;
	struct mlap2p_mem_alloc a;
	struct peer p[NR_IMPORTERS];
	char c;
	int k;

	ASSERT_EQ(0, make_region(self->fd, self->mla, 2 * self->page, 7, 0,
				 &a, ipc));
	for (k = 0; k < NR_IMPORTERS; k++) {
		ASSERT_EQ(0, peer_start(&p[k], self->fd, child_hold, ipc));
	}
	for (k = 0; k < NR_IMPORTERS; k++) {
		ASSERT_EQ(0, recv_byte(p[k].rd, &c)) TH_LOG("importer %d", k);
	}
	ASSERT_EQ(0, kt_region_info(self->fd, a.handle, &r));
	EXPECT_EQ((__u32)NR_IMPORTERS, r.importers);
	EXPECT_EQ((__u32)NR_IMPORTERS, r.mappings);

	/* Releasing them one by one counts down. */
	for (k = 0; k < NR_IMPORTERS; k++) {
		EXPECT_EQ(0, send_byte(p[k].wr, 'q'));
		EXPECT_EQ(0, peer_finish(&p[k])) TH_LOG("importer %d", k);
		ASSERT_EQ(0, kt_region_info(self->fd, a.handle, &r));
		EXPECT_EQ((__u32)(NR_IMPORTERS - k - 1), r.importers);
		EXPECT_EQ((__u32)(NR_IMPORTERS - k - 1), r.mappings);
	}
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
	if (self->counters)
		assert_counters_back(_metadata, &self->base);
}

KT_TEST_MAIN
