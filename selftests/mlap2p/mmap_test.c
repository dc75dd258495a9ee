// SPDX-License-Identifier: GPL-2.0
/*
 * mmap_test: mapping regions by cookie.
 *
 * Zeroed pages (also after a dirty region is freed and the memory comes
 * back), coherent shared mappings, the refusals uapi/linux/mlap2p.h lists
 * (MAP_PRIVATE, ranges outside the region, cookies of freed handles or of
 * another file, PROT_WRITE or mprotect upgrades of a read-only import),
 * no inheritance over fork, mappings outliving their handle and file, and
 * VMA splits counted correctly.
 */
#include "mlap2p_util.h"
#include "kselftest_harness.h"

#include <sys/resource.h>

#define MAP_PAGES	4

FIXTURE(map) {
	int fd;
	struct mlap2p_info info;
	size_t page, len;
	__u32 mla;
	struct mlap2p_mem_alloc a;	/* MAP_PAGES pages, owned by fd */
};

FIXTURE_SETUP(map)
{
	self->fd = kt_dev_open();
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, kt_get_info(self->fd, &self->info));
	self->page = kt_page_size();
	self->len = MAP_PAGES * self->page;
	self->mla = kt_local_mla(&self->info);
	ASSERT_EQ(0, kt_alloc(self->fd, self->len, self->mla, &self->a));
}

FIXTURE_TEARDOWN(map)
{
	if (self->fd > 0)
		close(self->fd);
}

static void *map_rw(int fd, __u64 cookie, size_t len)
{
	return kt_map(fd, cookie, len, PROT_READ | PROT_WRITE);
}

/* Mappings of the region (REGION_INFO), or -errno. */
static long region_mappings(int fd, __u32 handle)
{
	struct mlap2p_region_info r;
	int ret = kt_region_info(fd, handle, &r);

	return ret ? ret : (long)r.mappings;
}

TEST_F(map, new_region_reads_zero)
{
	const size_t big = (4UL << 20) + 3 * self->page;
	struct mlap2p_mem_alloc b;
	void *p;

	p = map_rw(self->fd, self->a.mmap_cookie, self->len);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(-1, kt_first_nonzero(p, self->len));
	munmap(p, self->len);

	/* Several 2 MiB chunks and a tail. */
	ASSERT_EQ(0, kt_alloc(self->fd, big, self->mla, &b));
	p = kt_map(self->fd, b.mmap_cookie, big, PROT_READ);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(-1, kt_first_nonzero(p, big));
	munmap(p, big);
	EXPECT_EQ(0, kt_free(self->fd, b.handle));
}

/*
 * Dirty a region, free it, allocate again: whatever memory comes back
 * reads as zero.  A few rounds, so the allocator hands back freed pages.
 */
TEST_F(map, region_after_a_dirty_free_reads_zero)
{
	const size_t len = 1UL << 20;
	struct mlap2p_mem_alloc b;
	int round;
	long nz;
	void *p;

	for (round = 0; round < 8; round++) {
		ASSERT_EQ(0, kt_alloc(self->fd, len, self->mla, &b));
		p = map_rw(self->fd, b.mmap_cookie, len);
		ASSERT_NE(MAP_FAILED, p);
		nz = kt_first_nonzero(p, len);
		EXPECT_EQ(-1, nz) TH_LOG("round %d: byte %ld is 0x%02x", round,
					 nz, ((unsigned char *)p)[nz]);
		memset(p, 0xa5, len);
		munmap(p, len);
		ASSERT_EQ(0, kt_free(self->fd, b.handle));
	}
}

/* Two mappings in this file and one through an importing file. */
TEST_F(map, mappings_of_a_region_are_coherent)
{
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_ipc_open o;
	char *p1, *p2, *p3;
	int fd2;

	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, kt_export(self->fd, self->a.handle, 0, ipc));
	ASSERT_EQ(0, kt_import(fd2, ipc, &o));
	p1 = map_rw(self->fd, self->a.mmap_cookie, self->len);
	ASSERT_NE(MAP_FAILED, p1);
	p2 = map_rw(self->fd, self->a.mmap_cookie, self->len);
	ASSERT_NE(MAP_FAILED, p2);
	p3 = map_rw(fd2, o.mmap_cookie, self->len);
	ASSERT_NE(MAP_FAILED, p3);

	kt_fill(p1, self->len, 11);
	EXPECT_EQ(-1, kt_check(p2, self->len, 11));
	EXPECT_EQ(-1, kt_check(p3, self->len, 11));
	kt_fill(p3, self->len, 12);
	EXPECT_EQ(-1, kt_check(p1, self->len, 12));
	EXPECT_EQ(3, region_mappings(self->fd, self->a.handle));

	munmap(p1, self->len);
	munmap(p2, self->len);
	munmap(p3, self->len);
	EXPECT_EQ(0, region_mappings(self->fd, self->a.handle));
	close(fd2);
}

/* Data crosses 2 MiB chunk boundaries at the right offsets. */
TEST_F(map, offsets_inside_a_large_region)
{
	const size_t big = (4UL << 20) + 3 * self->page;
	const size_t off = (2UL << 20) - self->page;
	struct mlap2p_mem_alloc b;
	char *whole, *part;

	ASSERT_EQ(0, kt_alloc(self->fd, big, self->mla, &b));
	whole = map_rw(self->fd, b.mmap_cookie, big);
	ASSERT_NE(MAP_FAILED, whole);
	kt_fill(whole, big, 13);
	part = map_rw(self->fd, b.mmap_cookie + off, big - off);
	ASSERT_NE(MAP_FAILED, part);
	EXPECT_EQ(0, memcmp(whole + off, part, big - off));
	kt_fill(part, big - off, 14);
	EXPECT_EQ(-1, kt_check(whole + off, big - off, 14));
	munmap(part, big - off);
	munmap(whole, big);
	EXPECT_EQ(0, kt_free(self->fd, b.handle));
}

TEST_F(map, map_private_is_refused)
{
	void *p;

	p = mmap(NULL, self->len, PROT_READ | PROT_WRITE, MAP_PRIVATE,
		 self->fd, (off_t)self->a.mmap_cookie);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	p = mmap(NULL, self->len, PROT_READ, MAP_PRIVATE, self->fd,
		 (off_t)self->a.mmap_cookie);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, region_mappings(self->fd, self->a.handle));
}

/* Past the end, or starting inside but running beyond: -EINVAL. */
TEST_F(map, ranges_outside_the_region_are_refused)
{
	const __u64 c = self->a.mmap_cookie;
	const size_t pg = self->page, len = self->len;
	const struct {
		__u64 off;
		size_t len;
		const char *what;
	} bad[] = {
		{ c, len + pg, "one page too long" },
		{ c, 2 * len, "twice the size" },
		{ c + len, pg, "first page past the end" },
		{ c + len - pg, 2 * pg, "inside, running past the end" },
		{ c + pg, len, "offset one page, full length" },
		{ c + 64 * len, pg, "far past the end" },
	};
	char *whole, *p;
	size_t k;

	for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		p = kt_map(self->fd, bad[k].off, bad[k].len, PROT_READ);
		EXPECT_EQ(MAP_FAILED, p) TH_LOG("%s", bad[k].what);
		EXPECT_EQ(EINVAL, errno) TH_LOG("%s", bad[k].what);
		if (p != MAP_FAILED)
			munmap(p, bad[k].len);
	}

	/* A window inside the region is fine and lands at its offset. */
	whole = map_rw(self->fd, c, len);
	ASSERT_NE(MAP_FAILED, whole);
	kt_fill(whole, len, 15);
	p = map_rw(self->fd, c + pg, len - 2 * pg);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(0, memcmp(whole + pg, p, len - 2 * pg));
	p[0] = 0x42;
	EXPECT_EQ(0x42, whole[pg]);
	munmap(p, len - 2 * pg);
	/* And so is the last page alone. */
	p = kt_map(self->fd, c + len - pg, pg, PROT_READ);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(0, memcmp(whole + len - pg, p, pg));
	munmap(p, pg);
	munmap(whole, len);
}

/* Is @off inside a cookie range of a live handle of @fd? */
static bool cookie_taken(int fd, __u64 off, const __u32 *handles, int n)
{
	struct mlap2p_region_info r;
	int k;

	for (k = 0; k < n; k++) {
		if (kt_region_info(fd, handles[k], &r))
			continue;
		if (off >= r.mmap_cookie && off < r.mmap_cookie + r.size)
			return true;
	}
	return false;
}

TEST_F(map, stale_and_unknown_cookies_are_refused)
{
	struct mlap2p_mem_alloc b;
	void *p;

	ASSERT_EQ(0, kt_alloc(self->fd, self->page, self->mla, &b));
	ASSERT_EQ(0, kt_free(self->fd, b.handle));
	ASSERT_FALSE(cookie_taken(self->fd, b.mmap_cookie, &self->a.handle,
				  1));
	p = kt_map(self->fd, b.mmap_cookie, self->page, PROT_READ);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);

	if (!cookie_taken(self->fd, 0, &self->a.handle, 1)) {
		p = kt_map(self->fd, 0, self->page, PROT_READ);
		EXPECT_EQ(MAP_FAILED, p);
		EXPECT_EQ(EINVAL, errno);
	}
}

/*
 * A cookie is valid only on the file that holds the handle: another
 * file's cookie (one that names nothing here) maps nothing.
 */
TEST_F(map, cookie_of_another_file_is_refused)
{
	struct mlap2p_mem_alloc b[3];
	bool tried = false;
	int fd2, k;
	void *p;

	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	for (k = 0; k < 3; k++) {
		ASSERT_EQ(0, kt_alloc(fd2, self->page, self->mla, &b[k]));
	}
	for (k = 0; k < 3; k++) {
		if (cookie_taken(self->fd, b[k].mmap_cookie, &self->a.handle,
				 1))
			continue;
		tried = true;
		p = kt_map(self->fd, b[k].mmap_cookie, self->page,
			   PROT_READ);
		EXPECT_EQ(MAP_FAILED, p) TH_LOG("cookie of handle %d", k);
		EXPECT_EQ(EINVAL, errno);
	}
	EXPECT_TRUE(tried) TH_LOG("every cookie of fd2 also names a handle here");
	close(fd2);
}

TEST_F(map, read_only_import_cannot_write)
{
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_ipc_open o;
	char *w, *r;
	int fd2;

	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, kt_export(self->fd, self->a.handle,
			       MLAP2P_IPC_F_RDONLY, ipc));
	ASSERT_EQ(0, kt_import(fd2, ipc, &o));
	ASSERT_EQ(1U, o.access);

	r = map_rw(fd2, o.mmap_cookie, self->len);
	EXPECT_EQ(MAP_FAILED, r);
	EXPECT_EQ(EACCES, errno);
	r = kt_map(fd2, o.mmap_cookie, self->len, PROT_WRITE);
	EXPECT_EQ(MAP_FAILED, r);
	EXPECT_EQ(EACCES, errno);

	r = kt_map(fd2, o.mmap_cookie, self->len, PROT_READ);
	ASSERT_NE(MAP_FAILED, r);
	EXPECT_EQ(-1, mprotect(r, self->len, PROT_READ | PROT_WRITE));
	EXPECT_EQ(EACCES, errno);
	EXPECT_EQ(-1, mprotect(r, self->page, PROT_WRITE));
	EXPECT_EQ(EACCES, errno);

	/* The owner's writes show through the read-only mapping. */
	w = map_rw(self->fd, self->a.mmap_cookie, self->len);
	ASSERT_NE(MAP_FAILED, w);
	kt_fill(w, self->len, 16);
	EXPECT_EQ(-1, kt_check(r, self->len, 16));
	munmap(w, self->len);
	munmap(r, self->len);
	close(fd2);
}

/* The owner's own read-only mapping may be upgraded: it is not an import. */
TEST_F(map, owner_may_upgrade_its_mapping)
{
	char *p;

	p = kt_map(self->fd, self->a.mmap_cookie, self->len, PROT_READ);
	ASSERT_NE(MAP_FAILED, p);
	ASSERT_EQ(0, mprotect(p, self->len, PROT_READ | PROT_WRITE));
	p[0] = 1;
	munmap(p, self->len);
}

/* Touch @p in a forked child; returns the child's status (kt_wait). */
static int touch_in_child(volatile char *p, bool write)
{
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		/*
		 * No core files for the expected SIGSEGV, and no sanitizer
		 * turning it into an exit status.
		 */
		struct rlimit rl = { 0, 0 };

		setrlimit(RLIMIT_CORE, &rl);
		signal(SIGSEGV, SIG_DFL);
		if (write)
			p[0] = 1;
		else
			(void)p[0];
		_exit(0);
	}
	return kt_wait(pid);
}

TEST_F(map, fork_does_not_inherit_the_mapping)
{
	char *p;

	p = map_rw(self->fd, self->a.mmap_cookie, self->len);
	ASSERT_NE(MAP_FAILED, p);
	kt_fill(p, self->len, 17);

	EXPECT_EQ(128 + SIGSEGV, touch_in_child(p, false));
	EXPECT_EQ(128 + SIGSEGV, touch_in_child(p + self->len - 1, true));
	/* Only our own VMA was ever counted; our data is untouched. */
	EXPECT_EQ(1, region_mappings(self->fd, self->a.handle));
	EXPECT_EQ(-1, kt_check(p, self->len, 17));
	munmap(p, self->len);
}

/*
 * "Not inherited over fork" holds even when the process asks for the
 * opposite with MADV_DOFORK: either madvise refuses, or the child still
 * gets no mapping.
 */
TEST_F(map, madv_dofork_does_not_make_it_inherited)
{
	char *p;
	int ret;

	p = map_rw(self->fd, self->a.mmap_cookie, self->len);
	ASSERT_NE(MAP_FAILED, p);
	ret = madvise(p, self->len, MADV_DOFORK);
	if (ret)
		TH_LOG("MADV_DOFORK refused: %s", strerror(errno));
	EXPECT_EQ(128 + SIGSEGV, touch_in_child(p, false));
	EXPECT_EQ(1, region_mappings(self->fd, self->a.handle));
	munmap(p, self->len);
}

/* smaps shows the mapping shared, not copied on fork, never dumped. */
TEST_F(map, vma_flags_in_smaps)
{
	char line[512], want[32], flags[512] = "";
	bool in_vma = false;
	FILE *f;
	void *p;

	p = map_rw(self->fd, self->a.mmap_cookie, self->len);
	ASSERT_NE(MAP_FAILED, p);
	snprintf(want, sizeof(want), "%lx-", (unsigned long)p);
	f = fopen("/proc/self/smaps", "re");
	ASSERT_NE(NULL, f);
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, want, strlen(want)))
			in_vma = true;
		else if (in_vma && !strncmp(line, "VmFlags:", 8)) {
			snprintf(flags, sizeof(flags), "%s", line + 8);
			break;
		}
	}
	fclose(f);
	ASSERT_TRUE(in_vma);
	EXPECT_NE(NULL, strstr(flags, " sh")) TH_LOG("VmFlags:%s", flags);
	EXPECT_NE(NULL, strstr(flags, " dc")) TH_LOG("VmFlags:%s", flags);
	EXPECT_NE(NULL, strstr(flags, " dd")) TH_LOG("VmFlags:%s", flags);
	EXPECT_NE(NULL, strstr(flags, " de")) TH_LOG("VmFlags:%s", flags);
	munmap(p, self->len);
}

TEST_F(map, mremap_cannot_grow_a_mapping)
{
	void *p, *q;

	p = map_rw(self->fd, self->a.mmap_cookie, self->len);
	ASSERT_NE(MAP_FAILED, p);
	q = mremap(p, self->len, 2 * self->len, MREMAP_MAYMOVE);
	EXPECT_EQ(MAP_FAILED, q);
	if (q != MAP_FAILED)
		p = q;
	EXPECT_EQ(1, region_mappings(self->fd, self->a.handle));
	munmap(p, q != MAP_FAILED ? 2 * self->len : self->len);
}

/* Moving a mapping keeps its data and its count. */
TEST_F(map, mremap_moves_a_mapping)
{
	char *p, *q, *hole;

	p = map_rw(self->fd, self->a.mmap_cookie, self->len);
	ASSERT_NE(MAP_FAILED, p);
	kt_fill(p, self->len, 21);
	/* A free spot to move to. */
	hole = mmap(NULL, self->len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
		    -1, 0);
	ASSERT_NE(MAP_FAILED, hole);
	q = mremap(p, self->len, self->len, MREMAP_MAYMOVE | MREMAP_FIXED,
		   hole);
	ASSERT_EQ(hole, q);
	EXPECT_EQ(-1, kt_check(q, self->len, 21));
	EXPECT_EQ(1, region_mappings(self->fd, self->a.handle));
	/* Shrinking is fine too. */
	ASSERT_EQ(q, mremap(q, self->len, self->page, 0));
	EXPECT_EQ(1, region_mappings(self->fd, self->a.handle));
	EXPECT_EQ(-1, kt_check(q, self->page, 21));
	munmap(q, self->page);
	EXPECT_EQ(0, region_mappings(self->fd, self->a.handle));
}

/* Device memory is not anonymous memory: MADV_DONTNEED loses nothing. */
TEST_F(map, madv_dontneed_keeps_the_data)
{
	char *p;

	p = map_rw(self->fd, self->a.mmap_cookie, self->len);
	ASSERT_NE(MAP_FAILED, p);
	kt_fill(p, self->len, 22);
	ASSERT_EQ(0, madvise(p, self->len, MADV_DONTNEED));
	EXPECT_EQ(-1, kt_check(p, self->len, 22));
	munmap(p, self->len);
	p = kt_map(self->fd, self->a.mmap_cookie, self->len, PROT_READ);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(-1, kt_check(p, self->len, 22));
	munmap(p, self->len);
}

/* A hole punched in a mapping leaves two VMAs, each counted and working. */
TEST_F(map, split_mapping_is_counted)
{
	const size_t pg = self->page;
	char *p, *ref;

	ref = malloc(self->len);
	ASSERT_NE(NULL, ref);
	p = map_rw(self->fd, self->a.mmap_cookie, self->len);
	ASSERT_NE(MAP_FAILED, p);
	kt_fill(p, self->len, 18);
	memcpy(ref, p, self->len);
	ASSERT_EQ(0, munmap(p + pg, pg));
	EXPECT_EQ(2, region_mappings(self->fd, self->a.handle));
	EXPECT_EQ(0, memcmp(ref, p, pg));
	EXPECT_EQ(0, memcmp(ref + 2 * pg, p + 2 * pg, 2 * pg));
	ASSERT_EQ(0, munmap(p, pg));
	EXPECT_EQ(1, region_mappings(self->fd, self->a.handle));
	ASSERT_EQ(0, munmap(p + 2 * pg, 2 * pg));
	EXPECT_EQ(0, region_mappings(self->fd, self->a.handle));
	free(ref);
}

/*
 * A mapping holds the region after MEM_FREE and after the file is closed;
 * the region goes with the last munmap.
 */
TEST_F(map, mapping_outlives_handle_and_file)
{
	struct kt_counters base, mid;
	bool ctr;
	char *p;
	int fd;

	ctr = kt_counters_read(&base) == 0;
	fd = kt_dev_open();
	ASSERT_LE(0, fd);
	{
		struct mlap2p_mem_alloc b;

		ASSERT_EQ(0, kt_alloc(fd, self->len, self->mla, &b));
		p = map_rw(fd, b.mmap_cookie, self->len);
		ASSERT_NE(MAP_FAILED, p);
		kt_fill(p, self->len, 19);
		ASSERT_EQ(0, kt_free(fd, b.handle));
	}
	close(fd);

	EXPECT_EQ(-1, kt_check(p, self->len, 19));
	kt_fill(p, self->len, 20);
	EXPECT_EQ(-1, kt_check(p, self->len, 20));
	if (ctr) {
		ASSERT_EQ(0, kt_counters_read(&mid));
		EXPECT_EQ(base.live_regions + 1, mid.live_regions);
		EXPECT_EQ(base.live_bytes + self->len, mid.live_bytes);
		EXPECT_EQ(base.live_mappings + 1, mid.live_mappings);
		EXPECT_EQ(base.live_handles, mid.live_handles);
	}
	munmap(p, self->len);
	if (ctr) {
		EXPECT_TRUE(kt_counters_settle(&base, &mid, 2000)) {
			kt_counters_log("baseline", &base);
			kt_counters_log("now", &mid);
		}
	}
}

KT_TEST_MAIN
