// SPDX-License-Identifier: GPL-2.0
/*
 * ioctl_test: every ioctl of /dev/mlap2p, its success path and every errno
 * that uapi/linux/mlap2p.h documents, within one process.
 *
 * Output structs are filled with 0xcc before each call (the kt_*_args()
 * of mlap2p_util.h), so a field the kernel should have written but did not
 * stands out; input flags/pad/reserved fields start at zero and each test
 * sets exactly one of them to check that it alone is refused.
 */
#include "mlap2p_util.h"
#include "kselftest_harness.h"

#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <linux/capability.h>
#include <linux/userfaultfd.h>

FIXTURE(dev) {
	int fd;
	struct mlap2p_info info;
	size_t page;
	__u32 mla;		/* a local MLA to allocate on */
};

FIXTURE_SETUP(dev)
{
	self->fd = kt_dev_open();
	ASSERT_LE(0, self->fd) TH_LOG("open %s: %s", MLAP2P_DEVICE_PATH,
				      strerror(errno));
	ASSERT_EQ(0, kt_get_info(self->fd, &self->info));
	self->page = kt_page_size();
	self->mla = kt_local_mla(&self->info);
}

FIXTURE_TEARDOWN(dev)
{
	if (self->fd > 0)
		close(self->fd);
}

/*
 * A private page holding a copy of @len bytes of @src, then made read-only:
 * copy_from_user from it works, copy_to_user into it fails.
 */
static void *ro_copy(const void *src, size_t len)
{
	size_t pg = kt_page_size();
	void *p = mmap(NULL, pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	memcpy(p, src, len);
	if (mprotect(p, pg, PROT_READ)) {
		munmap(p, pg);
		return NULL;
	}
	return p;
}

static bool counters_available(void)
{
	struct kt_counters c;

	return kt_counters_read(&c) == 0;
}

TEST_F(dev, get_info_reports_abi_and_limits)
{
	const struct mlap2p_info *i = &self->info;
	struct mlap2p_info again;
	int k;

	EXPECT_EQ((__u32)MLAP2P_ABI_MAJOR, i->abi_major);
	EXPECT_NE(KT_POISON32, i->abi_minor);
	EXPECT_NE(0ULL, i->features & MLAP2P_FEAT_IPC_HANDLE);
	EXPECT_NE(0ULL, i->features & MLAP2P_FEAT_RDONLY);
	EXPECT_NE(0ULL, i->features & MLAP2P_FEAT_LOCALITY);
	EXPECT_NE(0ULL, i->features & MLAP2P_FEAT_REGION_INFO);
	EXPECT_NE(KT_POISON64, i->features);

	EXPECT_LE((__u32)MLAP2P_FAMILY_TRN1, i->family);
	EXPECT_GE((__u32)MLAP2P_FAMILY_TRN3, i->family);
	EXPECT_LE(1U, i->num_devices);
	EXPECT_LE(1U, i->cores_per_device);
	EXPECT_TRUE(i->lnc == 1 || i->lnc == 2) TH_LOG("lnc %u", i->lnc);
	EXPECT_GE((__u32)MLAP2P_POD_SWITCH, i->pod_type);
	EXPECT_LE(1U, i->pod_nodes);
	EXPECT_GT(i->pod_nodes, i->node);
	if (i->pod_type == MLAP2P_POD_NONE) {
		EXPECT_EQ(1U, i->pod_nodes);
	}
	EXPECT_EQ(i->num_devices * i->cores_per_device / i->lnc,
		  i->cores_per_node);

	EXPECT_LE((__u64)self->page, i->dev_capacity);
	EXPECT_NE(KT_POISON64, i->dev_capacity);
	EXPECT_LE((__u64)self->page, i->max_bytes_per_file);
	EXPECT_NE(KT_POISON64, i->max_bytes_per_file);
	EXPECT_LE(1U, i->max_regions_per_file);
	EXPECT_NE(KT_POISON32, i->max_regions_per_file);
	EXPECT_NE(KT_POISON32, i->topo_generation);
	for (k = 0; k < 4; k++) {
		EXPECT_EQ(0ULL, i->reserved[k]) TH_LOG("reserved[%d]", k);
	}

	/* Nothing changes between two calls. */
	ASSERT_EQ(0, kt_get_info(self->fd, &again));
	EXPECT_EQ(0, memcmp(i, &again, sizeof(again)));
}

TEST_F(dev, get_info_faults_on_bad_pointer)
{
	void *ro;

	EXPECT_EQ(-EFAULT, kt_ioctl(self->fd, MLAP2P_IOC_GET_INFO, NULL));
	EXPECT_EQ(-EFAULT, kt_ioctl(self->fd, MLAP2P_IOC_GET_INFO,
				    (void *)0xffff888000000000ULL));
	ro = ro_copy(&self->info, sizeof(self->info));
	ASSERT_NE(NULL, ro);
	EXPECT_EQ(-EFAULT, kt_ioctl(self->fd, MLAP2P_IOC_GET_INFO, ro));
	munmap(ro, self->page);
}

/* Every command of the header with a NULL argument. */
TEST_F(dev, every_ioctl_faults_on_null_argument)
{
	static const struct {
		unsigned long cmd;
		const char *name;
	} cmds[] = {
		{ MLAP2P_IOC_GET_INFO, "GET_INFO" },
		{ MLAP2P_IOC_DEV_INFO, "DEV_INFO" },
		{ MLAP2P_IOC_MEM_ALLOC, "MEM_ALLOC" },
		{ MLAP2P_IOC_MEM_FREE, "MEM_FREE" },
		{ MLAP2P_IOC_IPC_GET_HANDLE, "IPC_GET_HANDLE" },
		{ MLAP2P_IOC_IPC_OPEN_HANDLE, "IPC_OPEN_HANDLE" },
		{ MLAP2P_IOC_IPC_CLOSE_HANDLE, "IPC_CLOSE_HANDLE" },
		{ MLAP2P_IOC_CAN_ACCESS_PEER, "CAN_ACCESS_PEER" },
		{ MLAP2P_IOC_REGION_INFO, "REGION_INFO" },
	};
	size_t k;

	for (k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++) {
		EXPECT_EQ(-EFAULT, kt_ioctl(self->fd, cmds[k].cmd, NULL))
			TH_LOG("%s", cmds[k].name);
	}
}

/*
 * Numbers the header does not define, and defined numbers with the wrong
 * size, direction or magic: all are unknown commands.
 */
TEST_F(dev, unknown_commands_give_enotty)
{
	static const struct {
		unsigned long cmd;
		const char *name;
	} cmds[] = {
		{ _IO(MLAP2P_IOC_MAGIC, 0x09), "_IO(nr 9)" },
		{ _IOWR(MLAP2P_IOC_MAGIC, 0x09, struct mlap2p_info),
		  "_IOWR(nr 9)" },
		{ _IOWR(MLAP2P_IOC_MAGIC, 0x7f, struct mlap2p_region_info),
		  "_IOWR(nr 0x7f)" },
		{ _IOWR(MLAP2P_IOC_MAGIC, 0xff, struct mlap2p_region_info),
		  "_IOWR(nr 0xff)" },
		{ _IO(MLAP2P_IOC_MAGIC, 0x00), "GET_INFO without size" },
		{ _IOW(MLAP2P_IOC_MAGIC, 0x00, struct mlap2p_info),
		  "GET_INFO as _IOW" },
		{ _IOWR(MLAP2P_IOC_MAGIC, 0x02, struct mlap2p_handle_op),
		  "MEM_ALLOC with a short size" },
		{ _IOR(MLAP2P_IOC_MAGIC, 0x03, struct mlap2p_handle_op),
		  "MEM_FREE as _IOR" },
		{ _IOWR(MLAP2P_IOC_MAGIC, 0x08, struct mlap2p_info),
		  "REGION_INFO with a long size" },
		{ _IOWR('x', 0x02, struct mlap2p_mem_alloc), "other magic" },
		{ 0, "command 0" },
		{ TCGETS, "TCGETS" },
		{ FIONREAD, "FIONREAD" },
	};
	static __u64 buf[512];	/* zeroes, large enough for any of them */
	size_t k;

	for (k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++) {
		EXPECT_EQ(-ENOTTY, kt_ioctl(self->fd, cmds[k].cmd, buf))
			TH_LOG("%s (0x%lx)", cmds[k].name, cmds[k].cmd);
	}
}

TEST_F(dev, dev_info_describes_every_mla)
{
	const struct mlap2p_info *i = &self->info;
	__u32 total = kt_total_mlas(i);
	__u32 per_mla = i->cores_per_node / i->num_devices;
	struct mlap2p_dev_info d;
	__u32 mla, k;

	for (mla = 0; mla < total; mla++) {
		ASSERT_EQ(0, kt_dev_info(self->fd, mla, &d))
			TH_LOG("mla %u", mla);
		EXPECT_EQ(mla, d.device);
		EXPECT_EQ(mla / i->num_devices, d.node) TH_LOG("mla %u", mla);
		EXPECT_EQ(mla % i->num_devices, d.local_index)
			TH_LOG("mla %u", mla);
		EXPECT_EQ(per_mla, d.num_cores) TH_LOG("mla %u", mla);
		EXPECT_EQ(d.node * i->cores_per_node + d.local_index * per_mla,
			  d.first_core) TH_LOG("mla %u", mla);
		EXPECT_EQ(i->dev_capacity, d.capacity) TH_LOG("mla %u", mla);
		EXPECT_GE(d.capacity, d.used) TH_LOG("mla %u", mla);
		EXPECT_TRUE(d.peer_mla == MLAP2P_NO_MLA ||
			    (d.peer_mla < total && d.peer_mla != mla))
			TH_LOG("mla %u peer %u", mla, d.peer_mla);
		EXPECT_EQ(d.torus_x == MLAP2P_NO_MLA,
			  d.torus_y == MLAP2P_NO_MLA) TH_LOG("mla %u", mla);
		ASSERT_GE((__u32)MLAP2P_MAX_NEIGHBOURS, d.num_neighbours)
			TH_LOG("mla %u", mla);
		for (k = 0; k < d.num_neighbours; k++) {
			EXPECT_GT(total, d.neighbours[k])
				TH_LOG("mla %u neighbour %u", mla, k);
			EXPECT_NE(mla, d.neighbours[k])
				TH_LOG("mla %u neighbour %u", mla, k);
		}
	}
}

TEST_F(dev, dev_info_rejects_bad_device)
{
	__u32 total = kt_total_mlas(&self->info);
	const __u32 bad[] = { total, total + 1, 0x80000000U, MLAP2P_NO_MLA };
	struct mlap2p_dev_info d;
	size_t k;

	for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		EXPECT_EQ(-EINVAL, kt_dev_info(self->fd, bad[k], &d))
			TH_LOG("device %u", bad[k]);
	}
}

TEST_F(dev, dev_info_rejects_flags_and_reserved)
{
	struct mlap2p_dev_info d;
	int bit, k;

	for (bit = 0; bit < 32; bit++) {
		kt_dev_info_args(&d, self->mla);
		d.flags = 1U << bit;
		EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, MLAP2P_IOC_DEV_INFO,
					    &d)) TH_LOG("flag bit %d", bit);
	}
	for (k = 0; k < 2; k++) {
		kt_dev_info_args(&d, self->mla);
		d.reserved[k] = 1ULL << (k * 63);
		EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, MLAP2P_IOC_DEV_INFO,
					    &d)) TH_LOG("reserved[%d]", k);
	}
	/* The same struct with everything zero is fine. */
	EXPECT_EQ(0, kt_dev_info(self->fd, self->mla, &d));
}

TEST_F(dev, dev_info_used_follows_allocations)
{
	struct mlap2p_dev_info before, during, after;
	struct mlap2p_mem_alloc a;

	ASSERT_EQ(0, kt_dev_info(self->fd, self->mla, &before));
	ASSERT_EQ(0, kt_alloc(self->fd, 3 * self->page, self->mla, &a));
	ASSERT_EQ(0, kt_dev_info(self->fd, self->mla, &during));
	EXPECT_EQ(before.used + a.alloc_size, during.used);
	ASSERT_EQ(0, kt_free(self->fd, a.handle));
	ASSERT_EQ(0, kt_dev_info(self->fd, self->mla, &after));
	EXPECT_EQ(before.used, after.used);
}

struct blocked_alloc {
	int fd;
	struct mlap2p_mem_alloc *a;
	int ret;
};

static void *blocked_alloc_run(void *arg)
{
	struct blocked_alloc *b = arg;

	b->ret = kt_ioctl(b->fd, MLAP2P_IOC_MEM_ALLOC, b->a);
	return NULL;
}

/*
 * DEV_INFO.used is the bytes of live regions, not of allocations in
 * progress.  The argument of a MEM_ALLOC sits in a page that userfaultfd
 * write-protects: the kernel reads it, creates the region, then blocks
 * writing the result back, with the region reserved but not yet live.
 * Until the page is released, used (and live_regions) must not move.
 */
TEST_F(dev, dev_info_used_ignores_allocations_in_progress)
{
	struct uffdio_writeprotect wp;
	struct kt_counters c0, c1;
	struct mlap2p_dev_info d0, d1;
	struct uffdio_register reg;
	struct uffdio_api api;
	struct uffd_msg msg;
	struct blocked_alloc b;
	struct pollfd pfd;
	bool ctr = counters_available();
	pthread_t t;
	void *pg;
	int uffd;

	uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (uffd < 0)
		SKIP(return, "userfaultfd: %s", strerror(errno));
	memset(&api, 0, sizeof(api));
	api.api = UFFD_API;
	api.features = UFFD_FEATURE_PAGEFAULT_FLAG_WP;
	if (ioctl(uffd, UFFDIO_API, &api)) {
		close(uffd);
		SKIP(return, "userfaultfd write-protect: %s", strerror(errno));
	}
	pg = mmap(NULL, self->page, PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, pg);
	b.fd = self->fd;
	b.a = pg;
	kt_alloc_args(b.a, 4 * self->page, self->mla);
	memset(&reg, 0, sizeof(reg));
	reg.range.start = (unsigned long)pg;
	reg.range.len = self->page;
	reg.mode = UFFDIO_REGISTER_MODE_WP;
	ASSERT_EQ(0, ioctl(uffd, UFFDIO_REGISTER, &reg));
	memset(&wp, 0, sizeof(wp));
	wp.range = reg.range;
	wp.mode = UFFDIO_WRITEPROTECT_MODE_WP;
	ASSERT_EQ(0, ioctl(uffd, UFFDIO_WRITEPROTECT, &wp));

	ASSERT_EQ(0, kt_dev_info(self->fd, self->mla, &d0));
	if (ctr) {
		ASSERT_EQ(0, kt_counters_read(&c0));
	}
	ASSERT_EQ(0, pthread_create(&t, NULL, blocked_alloc_run, &b));

	/* The copy of the result faults: the allocation is in progress. */
	pfd.fd = uffd;
	pfd.events = POLLIN;
	EXPECT_EQ(1, poll(&pfd, 1, 20000));
	EXPECT_EQ((ssize_t)sizeof(msg), read(uffd, &msg, sizeof(msg)));
	EXPECT_EQ(UFFD_EVENT_PAGEFAULT, msg.event);
	EXPECT_TRUE(msg.arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP);
	ASSERT_EQ(0, kt_dev_info(self->fd, self->mla, &d1));
	EXPECT_EQ(d0.used, d1.used);
	if (ctr) {
		ASSERT_EQ(0, kt_counters_read(&c1));
		EXPECT_EQ(c0.live_regions, c1.live_regions);
	}

	/* Let the copy through: now it is live and counted. */
	wp.mode = 0;
	ASSERT_EQ(0, ioctl(uffd, UFFDIO_WRITEPROTECT, &wp));
	ASSERT_EQ(0, pthread_join(t, NULL));
	ASSERT_EQ(0, b.ret);
	ASSERT_EQ(0, kt_dev_info(self->fd, self->mla, &d1));
	EXPECT_EQ(d0.used + b.a->alloc_size, d1.used);
	EXPECT_EQ(0, kt_free(self->fd, b.a->handle));
	munmap(pg, self->page);
	close(uffd);
}

/*
 * Region pages are charged to the allocating user's RLIMIT_MEMLOCK unless
 * it has CAP_IPC_LOCK.  MEMLOCK_PAGES is the limit the children set.
 */
#define MEMLOCK_PAGES	16

static int memlock_limit(size_t page)
{
	struct rlimit rl = { MEMLOCK_PAGES * page, MEMLOCK_PAGES * page };

	return setrlimit(RLIMIT_MEMLOCK, &rl) ? -errno : 0;
}

/*
 * As nobody with a limit of MEMLOCK_PAGES: the limit is per user (two
 * files share it), imports are not charged, the charge stays while any
 * reference keeps the pages and goes with the last one.
 */
static int memlock_nobody(__u32 mla, size_t page)
{
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_mem_alloc a1, a2, a3;
	struct mlap2p_ipc_open o;
	int fd1, fd2, ret;

	if (memlock_limit(page) || kt_become_nobody())
		return 10;
	fd1 = kt_dev_open();
	fd2 = kt_dev_open();
	if (fd1 < 0 || fd2 < 0)
		return 11;
	if (kt_alloc(fd1, MEMLOCK_PAGES / 2 * page, mla, &a1) ||
	    kt_alloc(fd2, MEMLOCK_PAGES / 2 * page, mla, &a2))
		return 12;
	ret = kt_alloc(fd2, page, mla, &a3);
	if (ret != -ENOMEM)
		return kt_child_fail(13, "past the limit: %d", ret);
	if (kt_alloc(fd1, page, mla, &a3) != -ENOMEM)
		return 14;
	/* Importing the pages charges nothing more. */
	if (kt_export(fd1, a1.handle, 0, ipc) ||
	    kt_import(fd2, ipc, &o))
		return 15;
	/* The owner lets go; the importer still holds the pages. */
	if (kt_free(fd1, a1.handle) ||
	    kt_alloc(fd1, page, mla, &a3) != -ENOMEM)
		return 16;
	/* The last reference goes and with it the charge. */
	if (kt_close_handle(fd2, o.handle) ||
	    kt_alloc(fd1, page, mla, &a3))
		return 17;
	if (kt_free(fd1, a3.handle) || kt_free(fd2, a2.handle))
		return 18;
	/* One region over the whole limit, then exactly the limit. */
	if (kt_alloc(fd1, (MEMLOCK_PAGES + 1) * page, mla, &a1) !=
	    -ENOMEM)
		return 19;
	if (kt_alloc(fd1, MEMLOCK_PAGES * page, mla, &a1))
		return 20;
	/* Closing the file frees it: the next process of nobody starts at 0. */
	return 0;
}

/* Root with CAP_IPC_LOCK is not limited; without it, it is. */
static int memlock_root(__u32 mla, size_t page)
{
	struct __user_cap_header_struct h = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	struct mlap2p_mem_alloc a1, a2;
	int fd, ret;

	fd = kt_dev_open();
	if (fd < 0 || memlock_limit(page))
		return 30;
	if (kt_alloc(fd, 4 * MEMLOCK_PAGES * page, mla, &a1))
		return 31;
	if (syscall(SYS_capget, &h, d))
		return 32;
	d[0].effective &= ~(1U << CAP_IPC_LOCK);
	if (syscall(SYS_capset, &h, d))
		return 33;
	ret = kt_alloc(fd, (MEMLOCK_PAGES + 1) * page, mla, &a2);
	if (ret != -ENOMEM)
		return kt_child_fail(34, "without CAP_IPC_LOCK: %d", ret);
	if (kt_alloc(fd, MEMLOCK_PAGES * page, mla, &a2))
		return 35;
	/* The uncharged region frees without touching the charge. */
	if (kt_free(fd, a1.handle) || kt_free(fd, a2.handle) ||
	    kt_alloc(fd, MEMLOCK_PAGES * page, mla, &a2))
		return 36;
	return 0;
}

TEST_F(dev, mem_alloc_charges_rlimit_memlock)
{
	struct kt_counters c0, c1;
	bool ctr = counters_available();
	pid_t pid;

	if (geteuid() != 0)
		SKIP(return, "needs root to switch users and set limits");
	if (ctr) {
		ASSERT_EQ(0, kt_counters_read(&c0));
	}
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		close(self->fd);
		_exit(memlock_nobody(self->mla, self->page));
	}
	EXPECT_EQ(0, kt_wait(pid));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		close(self->fd);
		_exit(memlock_root(self->mla, self->page));
	}
	EXPECT_EQ(0, kt_wait(pid));
	if (ctr) {
		EXPECT_TRUE(kt_counters_settle(&c0, &c1, 2000));
	}
}

TEST_F(dev, mem_alloc_rounds_sizes_to_pages)
{
	const __u64 pg = self->page;
	const __u64 sizes[] = { 1, pg - 1, pg, pg + 1, 3 * pg + 5, 16 * pg };
	enum { N = sizeof(sizes) / sizeof(sizes[0]) };
	struct mlap2p_mem_alloc a[N];
	struct mlap2p_region_info r;
	int k, j;

	for (k = 0; k < N; k++) {
		ASSERT_EQ(0, kt_alloc(self->fd, sizes[k], self->mla, &a[k]))
			TH_LOG("size %llu", (unsigned long long)sizes[k]);
		EXPECT_EQ(kt_round_up(sizes[k], pg), a[k].alloc_size);
		EXPECT_NE(KT_POISON32, a[k].handle);
		EXPECT_NE(KT_POISON64, a[k].mmap_cookie);
		EXPECT_EQ(0ULL, a[k].mmap_cookie % pg);

		ASSERT_EQ(0, kt_region_info(self->fd, a[k].handle, &r));
		EXPECT_EQ((__u32)MLAP2P_REGION_OWNED, r.kind);
		EXPECT_EQ(self->mla, r.device);
		EXPECT_EQ(a[k].alloc_size, r.size);
		EXPECT_EQ(a[k].mmap_cookie, r.mmap_cookie);
	}
	/* Distinct handles; cookie ranges never overlap. */
	for (k = 0; k < N; k++) {
		for (j = k + 1; j < N; j++) {
			EXPECT_NE(a[k].handle, a[j].handle);
			EXPECT_TRUE(a[k].mmap_cookie + a[k].alloc_size <=
					    a[j].mmap_cookie ||
				    a[j].mmap_cookie + a[j].alloc_size <=
					    a[k].mmap_cookie)
				TH_LOG("cookie ranges %d and %d overlap", k, j);
		}
	}
	for (k = 0; k < N; k++) {
		EXPECT_EQ(0, kt_free(self->fd, a[k].handle));
	}
}

TEST_F(dev, mem_alloc_rejects_zero_size)
{
	struct mlap2p_mem_alloc a;

	EXPECT_EQ(-EINVAL, kt_alloc(self->fd, 0, self->mla, &a));
}

TEST_F(dev, mem_alloc_rejects_bad_device)
{
	__u32 total = kt_total_mlas(&self->info);
	const __u32 bad[] = { total, total + 7, 0x80000000U, MLAP2P_NO_MLA };
	struct mlap2p_mem_alloc a;
	size_t k;

	for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		EXPECT_EQ(-EINVAL, kt_alloc(self->fd, self->page, bad[k],
					    &a)) TH_LOG("device %u", bad[k]);
	}
}

TEST_F(dev, mem_alloc_rejects_unknown_flags_pad_reserved)
{
	struct mlap2p_mem_alloc a;
	int bit, k;

	for (bit = 0; bit < 32; bit++) {
		if ((1U << bit) & MLAP2P_MEM_F_ALL)
			continue;
		kt_alloc_args(&a, self->page, self->mla);
		a.flags = 1U << bit;
		EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, MLAP2P_IOC_MEM_ALLOC,
					    &a)) TH_LOG("flag bit %d", bit);
	}
	kt_alloc_args(&a, self->page, self->mla);
	a.pad = 1;
	EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, MLAP2P_IOC_MEM_ALLOC, &a));
	kt_alloc_args(&a, self->page, self->mla);
	a.pad = 0x80000000U;
	EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, MLAP2P_IOC_MEM_ALLOC, &a));
	for (k = 0; k < 2; k++) {
		kt_alloc_args(&a, self->page, self->mla);
		a.reserved[k] = 1ULL << (k * 63);
		EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, MLAP2P_IOC_MEM_ALLOC,
					    &a)) TH_LOG("reserved[%d]", k);
	}
}

/*
 * Larger than the whole MLA (within the file's byte limit, so the MLA is
 * the limit that bites), then sizes past every limit, including ones whose
 * page round-up would wrap to zero.
 */
TEST_F(dev, mem_alloc_over_device_capacity)
{
	const __u64 cap = self->info.dev_capacity;
	const __u64 huge[] = { ~0ULL, ~0ULL - self->page + 2, 1ULL << 63 };
	struct mlap2p_dev_info d0, d1;
	struct mlap2p_mem_alloc a;
	size_t k;
	int ret;

	ASSERT_EQ(0, kt_dev_info(self->fd, self->mla, &d0));
	if (cap + self->page <= self->info.max_bytes_per_file) {
		EXPECT_EQ(-KT_E_CAPACITY,
			  kt_alloc(self->fd, cap + self->page, self->mla,
				   &a));
		EXPECT_EQ(-KT_E_CAPACITY,
			  kt_alloc(self->fd, cap + 1, self->mla, &a));
	} else {
		ksft_print_msg("max_bytes_per_file <= dev_capacity: only the huge sizes\n");
	}
	for (k = 0; k < sizeof(huge) / sizeof(huge[0]); k++) {
		/* Over both limits: either errno is right. */
		ret = kt_alloc(self->fd, huge[k], self->mla, &a);
		EXPECT_TRUE(ret == -KT_E_CAPACITY || ret == -KT_E_BYTES)
			TH_LOG("size 0x%llx: %d", (unsigned long long)huge[k],
			       ret);
	}
	ASSERT_EQ(0, kt_dev_info(self->fd, self->mla, &d1));
	EXPECT_EQ(d0.used, d1.used);
}

/*
 * The per-file limits, lowered for the test through the module's writable
 * parameters (root only) so they are cheap to reach: 8 MiB and 32 handles
 * per file.  GET_INFO reports the values in force.
 */
#define LIMITS_BYTES_MB		8
#define LIMITS_HANDLES		32

FIXTURE(limits) {
	int fd;
	struct mlap2p_info info;
	size_t page;
	__u32 mla;
	unsigned long saved_bytes_mb, saved_handles;
	bool saved;
	const char *skip;
};

FIXTURE_SETUP(limits)
{
	self->fd = kt_dev_open();
	ASSERT_LE(0, self->fd);
	self->page = kt_page_size();
	if (geteuid() != 0) {
		self->skip = "not root: cannot lower the module's limits";
		return;
	}
	if (kt_param_read("max_bytes_per_file_mb", &self->saved_bytes_mb) ||
	    kt_param_read("max_regions_per_file", &self->saved_handles)) {
		self->skip = "no max_bytes_per_file_mb/max_regions_per_file parameters";
		return;
	}
	self->saved = true;
	ASSERT_EQ(0, kt_param_write("max_bytes_per_file_mb",
				    LIMITS_BYTES_MB));
	ASSERT_EQ(0, kt_param_write("max_regions_per_file",
				    LIMITS_HANDLES));
	ASSERT_EQ(0, kt_get_info(self->fd, &self->info));
	ASSERT_EQ((__u64)LIMITS_BYTES_MB << 20, self->info.max_bytes_per_file);
	ASSERT_EQ((__u32)LIMITS_HANDLES, self->info.max_regions_per_file);
	ASSERT_LE((__u64)LIMITS_BYTES_MB << 20, self->info.dev_capacity);
	self->mla = kt_local_mla(&self->info);
}

FIXTURE_TEARDOWN(limits)
{
	if (self->saved) {
		kt_param_write("max_bytes_per_file_mb",
			       self->saved_bytes_mb);
		kt_param_write("max_regions_per_file", self->saved_handles);
	}
	if (self->fd > 0)
		close(self->fd);
}

TEST_F(limits, bytes_per_file_in_one_allocation)
{
	const __u64 max = self->info.max_bytes_per_file;
	struct mlap2p_mem_alloc a;

	if (self->skip)
		SKIP(return, "%s", self->skip);
	EXPECT_EQ(-KT_E_BYTES, kt_alloc(self->fd, max + self->page,
					self->mla, &a));
	EXPECT_EQ(-KT_E_BYTES, kt_alloc(self->fd, max + 1, self->mla,
					&a));
	ASSERT_EQ(0, kt_alloc(self->fd, max, self->mla, &a));
	EXPECT_EQ(max, a.alloc_size);
	EXPECT_EQ(-KT_E_BYTES, kt_alloc(self->fd, 1, self->mla, &a));
}

TEST_F(limits, bytes_per_file_accumulate)
{
	const __u64 max = self->info.max_bytes_per_file;
	struct mlap2p_mem_alloc a, b;
	__u32 handles[4];
	int k, fd2;

	if (self->skip)
		SKIP(return, "%s", self->skip);
	for (k = 0; k < 4; k++) {
		ASSERT_EQ(0, kt_alloc(self->fd, max / 4, self->mla, &a))
			TH_LOG("chunk %d", k);
		handles[k] = a.handle;
	}
	EXPECT_EQ(-KT_E_BYTES, kt_alloc(self->fd, 1, self->mla, &a));

	/* The limit is per file: another file still gets memory. */
	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	EXPECT_EQ(0, kt_alloc(fd2, self->page, self->mla, &b));
	close(fd2);

	/* Freeing makes room again, exactly as much as was freed. */
	ASSERT_EQ(0, kt_free(self->fd, handles[0]));
	EXPECT_EQ(-KT_E_BYTES, kt_alloc(self->fd, max / 4 + 1,
					self->mla, &a));
	EXPECT_EQ(0, kt_alloc(self->fd, max / 4, self->mla, &a));
	EXPECT_EQ(-KT_E_BYTES, kt_alloc(self->fd, 1, self->mla, &a));
}

/*
 * Writing a limit out of its range fails and leaves it as it was: 0 is
 * EINVAL, a number over 32 bits ERANGE (kstrtouint), as mlap2p(4) says.
 */
TEST_F(limits, params_reject_out_of_range)
{
	static const char *const names[] = {
		"max_bytes_per_file_mb", "max_regions_per_file",
	};
	const unsigned long now[] = { LIMITS_BYTES_MB, LIMITS_HANDLES };
	unsigned long v;
	int k;

	if (self->skip)
		SKIP(return, "%s", self->skip);
	for (k = 0; k < 2; k++) {
		EXPECT_EQ(-EINVAL, kt_param_write(names[k], 0))
			TH_LOG("%s", names[k]);
		EXPECT_EQ(-ERANGE, kt_param_write(names[k], 4294967296UL))
			TH_LOG("%s", names[k]);
		ASSERT_EQ(0, kt_param_read(names[k], &v));
		EXPECT_EQ(now[k], v) TH_LOG("%s", names[k]);
	}
	ASSERT_EQ(0, kt_get_info(self->fd, &self->info));
	EXPECT_EQ((__u64)LIMITS_BYTES_MB << 20, self->info.max_bytes_per_file);
	EXPECT_EQ((__u32)LIMITS_HANDLES, self->info.max_regions_per_file);
}

/*
 * max_regions_per_file counts the handles of one file, owned and imported
 * alike: fill a file with owned handles and one import, then one more of
 * either kind is refused.
 */
TEST_F(limits, handles_per_file)
{
	const __u32 max = self->info.max_regions_per_file;
	struct mlap2p_mem_alloc a, other;
	struct mlap2p_ipc_open o;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	__u32 handles[LIMITS_HANDLES], k;
	int fd2;

	if (self->skip)
		SKIP(return, "%s", self->skip);
	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, kt_alloc(fd2, self->page, self->mla, &other));
	ASSERT_EQ(0, kt_export(fd2, other.handle, 0, ipc));

	for (k = 0; k + 1 < max; k++) {
		ASSERT_EQ(0, kt_alloc(self->fd, self->page, self->mla, &a))
			TH_LOG("handle %u of %u", k, max);
		handles[k] = a.handle;
	}
	ASSERT_EQ(0, kt_import(self->fd, ipc, &o));
	EXPECT_EQ(-KT_E_HANDLES, kt_alloc(self->fd, self->page,
					  self->mla, &a));
	EXPECT_EQ(-KT_E_HANDLES, kt_import(self->fd, ipc, &o));

	/* Room for one again after one owned handle goes. */
	ASSERT_EQ(0, kt_free(self->fd, handles[0]));
	EXPECT_EQ(0, kt_alloc(self->fd, self->page, self->mla, &a));
	EXPECT_EQ(-KT_E_HANDLES, kt_alloc(self->fd, self->page,
					  self->mla, &a));
	/* The other file is not affected. */
	EXPECT_EQ(0, kt_alloc(fd2, self->page, self->mla, &a));
	close(fd2);
}

#define PM_PRESENT	(1ULL << 63)
#define PM_PFN_MASK	((1ULL << 55) - 1)

/*
 * The /proc/self/pagemap entries of the @n pages mapped at @p, faulted in
 * already: 0, or -errno.  Without CAP_SYS_ADMIN the PFN bits read as 0.
 */
static int read_pagemap(const void *p, size_t n, __u64 *ent)
{
	size_t pg = kt_page_size();
	off_t off = (off_t)((uintptr_t)p / pg * sizeof(*ent));
	size_t len = n * sizeof(*ent);
	ssize_t got;
	int fd;

	fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	got = pread(fd, ent, len, off);
	close(fd);
	if (got < 0)
		return -errno;
	return (size_t)got == len ? 0 : -EIO;
}

/*
 * First page whose entry is not present or whose PFN does not follow the
 * first page's, or -1 when the @n pages are one physically contiguous
 * run in virtual order.
 */
static long first_pfn_gap(const __u64 *ent, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (!(ent[i] & PM_PRESENT) ||
		    (ent[i] & PM_PFN_MASK) != (ent[0] & PM_PFN_MASK) + i)
			return (long)i;
	}
	return -1;
}

/*
 * MLAP2P_MEM_F_CONTIG gives one 2 MiB block: as root, pagemap shows the
 * PFNs of the whole mapping consecutive and the first one 2 MiB aligned
 * (an order-9 block of the page allocator).  So that the check is known
 * to catch a gap, the same pages mapped in another order must fail it.
 */
TEST_F(dev, mem_alloc_contig_when_supported)
{
	const __u64 huge = 2ULL << 20;
	const size_t n = huge / self->page;
	struct mlap2p_mem_alloc a;
	__u64 *ent, swap[2];
	char *p, *q;
	int ret;

	if (!(self->info.features & MLAP2P_FEAT_HUGE_2M))
		SKIP(return, "no MLAP2P_FEAT_HUGE_2M");
	if (self->info.dev_capacity < huge ||
	    self->info.max_bytes_per_file < huge)
		SKIP(return, "limits below 2 MiB");
	kt_alloc_args(&a, huge, self->mla);
	a.flags = MLAP2P_MEM_F_CONTIG;
	ret = kt_ioctl(self->fd, MLAP2P_IOC_MEM_ALLOC, &a);
	if (ret == -ENOMEM)
		SKIP(return, "no 2 MiB-contiguous memory right now");
	ASSERT_EQ(0, ret);
	EXPECT_EQ(huge, a.alloc_size);
	p = kt_map(self->fd, a.mmap_cookie, huge, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, p);
	/* Reads every byte, so every page is faulted in. */
	EXPECT_EQ(-1, kt_first_nonzero(p, huge));

	ent = calloc(n, sizeof(*ent));
	ASSERT_NE(NULL, ent);
	ASSERT_EQ(0, read_pagemap(p, n, ent));
	if ((ent[0] & PM_PRESENT) && !(ent[0] & PM_PFN_MASK)) {
		free(ent);
		munmap(p, huge);
		EXPECT_EQ(0, kt_free(self->fd, a.handle));
		SKIP(return, "pagemap hides PFNs (needs CAP_SYS_ADMIN)");
	}
	EXPECT_EQ(-1, first_pfn_gap(ent, n)) {
		long i = first_pfn_gap(ent, n);

		TH_LOG("page %ld: entry %#llx after PFN %#llx", i,
		       (unsigned long long)ent[i],
		       (unsigned long long)(ent[0] & PM_PFN_MASK));
	}
	EXPECT_EQ(0ULL, (ent[0] & PM_PFN_MASK) % n);

	/* Pages 1 and 0, in that order: a gap at the second page. */
	q = mmap(NULL, 2 * self->page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	ASSERT_NE(MAP_FAILED, q);
	ASSERT_EQ(q, mmap(q, self->page, PROT_READ, MAP_SHARED | MAP_FIXED,
			  self->fd, (off_t)(a.mmap_cookie + self->page)));
	ASSERT_EQ(q + self->page,
		  mmap(q + self->page, self->page, PROT_READ,
		       MAP_SHARED | MAP_FIXED, self->fd,
		       (off_t)a.mmap_cookie));
	EXPECT_EQ(0, *(volatile char *)q + *(volatile char *)(q + self->page));
	ASSERT_EQ(0, read_pagemap(q, 2, swap));
	EXPECT_EQ(ent[1] & PM_PFN_MASK, swap[0] & PM_PFN_MASK);
	EXPECT_EQ(ent[0] & PM_PFN_MASK, swap[1] & PM_PFN_MASK);
	EXPECT_EQ(1, first_pfn_gap(swap, 2));

	munmap(q, 2 * self->page);
	free(ent);
	munmap(p, huge);
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
}

/*
 * The kernel reads the arguments, allocates, then cannot write the result
 * back: the allocation must be undone, not leaked as a handle nobody knows.
 */
TEST_F(dev, mem_alloc_fault_leaves_no_region)
{
	struct kt_counters c0, c1;
	struct mlap2p_dev_info d0, d1;
	struct mlap2p_mem_alloc a;
	bool ctr = counters_available();
	void *ro;

	kt_alloc_args(&a, 4 * self->page, self->mla);
	ro = ro_copy(&a, sizeof(a));
	ASSERT_NE(NULL, ro);
	if (ctr) {
		ASSERT_EQ(0, kt_counters_read(&c0));
	}
	ASSERT_EQ(0, kt_dev_info(self->fd, self->mla, &d0));

	EXPECT_EQ(-EFAULT, kt_ioctl(self->fd, MLAP2P_IOC_MEM_ALLOC, ro));

	ASSERT_EQ(0, kt_dev_info(self->fd, self->mla, &d1));
	EXPECT_EQ(d0.used, d1.used);
	if (ctr) {
		ASSERT_EQ(0, kt_counters_read(&c1));
		EXPECT_TRUE(kt_live_equal(&c0, &c1)) {
			kt_counters_log("before", &c0);
			kt_counters_log("after", &c1);
		}
	}
	munmap(ro, self->page);
}

TEST_F(dev, mem_free_releases_the_handle_once)
{
	struct mlap2p_mem_alloc a;
	struct mlap2p_region_info r;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	void *p;

	ASSERT_EQ(0, kt_alloc(self->fd, self->page, self->mla, &a));
	ASSERT_EQ(0, kt_free(self->fd, a.handle));
	EXPECT_EQ(-ENOENT, kt_free(self->fd, a.handle));
	EXPECT_EQ(-ENOENT, kt_region_info(self->fd, a.handle, &r));
	EXPECT_EQ(-ENOENT, kt_export(self->fd, a.handle, 0, ipc));
	EXPECT_EQ(-ENOENT, kt_close_handle(self->fd, a.handle));
	p = kt_map(self->fd, a.mmap_cookie, self->page, PROT_READ);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	if (p != MAP_FAILED)
		munmap(p, self->page);
}

TEST_F(dev, mem_free_unknown_handle)
{
	struct mlap2p_mem_alloc a;

	ASSERT_EQ(0, kt_alloc(self->fd, self->page, self->mla, &a));
	EXPECT_EQ(-ENOENT, kt_free(self->fd, a.handle + 1000));
	EXPECT_EQ(-ENOENT, kt_free(self->fd, 0x7fffffffU));
	EXPECT_EQ(-ENOENT, kt_free(self->fd, 0xffffffffU));
	EXPECT_EQ(-ENOENT, kt_close_handle(self->fd, 0xffffffffU));
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
}

TEST_F(dev, mem_free_rejects_flags_and_reserved)
{
	struct mlap2p_mem_alloc a;
	struct mlap2p_handle_op op;
	int bit;

	ASSERT_EQ(0, kt_alloc(self->fd, self->page, self->mla, &a));
	for (bit = 0; bit < 32; bit++) {
		kt_handle_args(&op, a.handle);
		op.flags = 1U << bit;
		EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, MLAP2P_IOC_MEM_FREE,
					    &op)) TH_LOG("flag bit %d", bit);
	}
	kt_handle_args(&op, a.handle);
	op.reserved = 1;
	EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, MLAP2P_IOC_MEM_FREE, &op));
	kt_handle_args(&op, a.handle);
	op.reserved = 1ULL << 63;
	EXPECT_EQ(-EINVAL, kt_ioctl(self->fd, MLAP2P_IOC_MEM_FREE, &op));
	/* None of those released it. */
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
}

/* MEM_FREE on an imported handle and IPC_CLOSE on an owned one. */
TEST_F(dev, wrong_release_call_gives_einval)
{
	struct mlap2p_mem_alloc a;
	struct mlap2p_ipc_open o;
	struct mlap2p_region_info r;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	int fd2;

	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, kt_alloc(self->fd, self->page, self->mla, &a));
	ASSERT_EQ(0, kt_export(self->fd, a.handle, 0, ipc));
	ASSERT_EQ(0, kt_import(fd2, ipc, &o));

	EXPECT_EQ(-EINVAL, kt_free(fd2, o.handle));
	EXPECT_EQ(-EINVAL, kt_close_handle(self->fd, a.handle));
	/* Both handles survived the wrong calls. */
	EXPECT_EQ(0, kt_region_info(fd2, o.handle, &r));
	EXPECT_EQ(0, kt_region_info(self->fd, a.handle, &r));

	EXPECT_EQ(0, kt_close_handle(fd2, o.handle));
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
	close(fd2);
}

/* A local handle means nothing on another file, even of the same process. */
TEST_F(dev, handles_are_private_to_their_file)
{
	struct mlap2p_mem_alloc a;
	struct mlap2p_region_info r;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	int fd2;
	void *p;

	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, kt_alloc(self->fd, self->page, self->mla, &a));

	EXPECT_EQ(-ENOENT, kt_region_info(fd2, a.handle, &r));
	EXPECT_EQ(-ENOENT, kt_export(fd2, a.handle, 0, ipc));
	EXPECT_EQ(-ENOENT, kt_free(fd2, a.handle));
	EXPECT_EQ(-ENOENT, kt_close_handle(fd2, a.handle));
	p = kt_map(fd2, a.mmap_cookie, self->page, PROT_READ);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	if (p != MAP_FAILED)
		munmap(p, self->page);

	EXPECT_EQ(0, kt_free(self->fd, a.handle));
	close(fd2);
}

TEST_F(dev, ipc_get_handle_exports_an_owned_region)
{
	struct mlap2p_mem_alloc a, b;
	__u8 ipc_a[MLAP2P_IPC_HANDLE_SIZE], ipc_a2[MLAP2P_IPC_HANDLE_SIZE];
	__u8 ipc_b[MLAP2P_IPC_HANDLE_SIZE], poison[MLAP2P_IPC_HANDLE_SIZE];
	__u8 zero[MLAP2P_IPC_HANDLE_SIZE] = { 0 };
	struct mlap2p_ipc_get g;

	memset(poison, KT_POISON_BYTE, sizeof(poison));
	ASSERT_EQ(0, kt_alloc(self->fd, self->page, self->mla, &a));
	ASSERT_EQ(0, kt_alloc(self->fd, self->page, self->mla, &b));

	kt_ipc_get_args(&g, a.handle, 0);
	ASSERT_EQ(0, kt_ioctl(self->fd, MLAP2P_IOC_IPC_GET_HANDLE, &g));
	memcpy(ipc_a, g.ipc, sizeof(ipc_a));
	EXPECT_NE(0, memcmp(ipc_a, poison, sizeof(poison)));
	EXPECT_NE(0, memcmp(ipc_a, zero, sizeof(zero)));

	/* Exporting again works; two regions never share a handle. */
	ASSERT_EQ(0, kt_export(self->fd, a.handle, 0, ipc_a2));
	ASSERT_EQ(0, kt_export(self->fd, b.handle, 0, ipc_b));
	EXPECT_NE(0, memcmp(ipc_a, ipc_b, sizeof(ipc_b)));
	EXPECT_NE(0, memcmp(ipc_a2, ipc_b, sizeof(ipc_b)));

	/* Read-only exports too. */
	EXPECT_EQ(0, kt_export(self->fd, a.handle, MLAP2P_IPC_F_RDONLY,
			       ipc_a2));

	EXPECT_EQ(0, kt_free(self->fd, a.handle));
	EXPECT_EQ(0, kt_free(self->fd, b.handle));
}

TEST_F(dev, ipc_get_handle_rejects_bad_input)
{
	struct mlap2p_mem_alloc a;
	struct mlap2p_ipc_get g;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	int bit, k;

	ASSERT_EQ(0, kt_alloc(self->fd, self->page, self->mla, &a));
	EXPECT_EQ(-ENOENT, kt_export(self->fd, a.handle + 1000, 0, ipc));
	EXPECT_EQ(-ENOENT, kt_export(self->fd, 0xffffffffU, 0, ipc));
	for (bit = 0; bit < 32; bit++) {
		if ((1U << bit) & MLAP2P_IPC_F_ALL)
			continue;
		kt_ipc_get_args(&g, a.handle, 1U << bit);
		EXPECT_EQ(-EINVAL, kt_ioctl(self->fd,
					    MLAP2P_IOC_IPC_GET_HANDLE, &g))
			TH_LOG("flag bit %d", bit);
	}
	for (k = 0; k < 2; k++) {
		kt_ipc_get_args(&g, a.handle, 0);
		g.reserved[k] = 1ULL << (k * 63);
		EXPECT_EQ(-EINVAL, kt_ioctl(self->fd,
					    MLAP2P_IOC_IPC_GET_HANDLE, &g))
			TH_LOG("reserved[%d]", k);
	}
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
}

TEST_F(dev, ipc_open_handle_imports_the_region)
{
	struct mlap2p_region_info ro, ri;
	struct mlap2p_mem_alloc a;
	struct mlap2p_ipc_open o, o2;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	int fd2;

	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, kt_alloc(self->fd, 5 * self->page, self->mla, &a));
	ASSERT_EQ(0, kt_export(self->fd, a.handle, 0, ipc));
	ASSERT_EQ(0, kt_import(fd2, ipc, &o));

	EXPECT_NE(KT_POISON32, o.handle);
	EXPECT_EQ(self->mla, o.device);
	EXPECT_EQ(0U, o.access);
	EXPECT_EQ(a.alloc_size, o.size);
	EXPECT_NE(KT_POISON64, o.mmap_cookie);
	EXPECT_EQ(0ULL, o.mmap_cookie % self->page);
	EXPECT_NE(KT_POISON64, o.region_id);

	ASSERT_EQ(0, kt_region_info(self->fd, a.handle, &ro));
	EXPECT_EQ(o.region_id, ro.region_id);
	EXPECT_EQ(1U, ro.importers);

	ASSERT_EQ(0, kt_region_info(fd2, o.handle, &ri));
	EXPECT_EQ((__u32)MLAP2P_REGION_IMPORTED, ri.kind);
	EXPECT_EQ(self->mla, ri.device);
	EXPECT_EQ(a.alloc_size, ri.size);
	EXPECT_EQ(o.mmap_cookie, ri.mmap_cookie);
	EXPECT_EQ(o.region_id, ri.region_id);
	EXPECT_EQ(1U, ri.importers);
	EXPECT_EQ(0U, ri.access);

	/* A second import on the same file is a second handle. */
	ASSERT_EQ(0, kt_import(fd2, ipc, &o2));
	EXPECT_NE(o.handle, o2.handle);
	EXPECT_EQ(o.region_id, o2.region_id);
	ASSERT_EQ(0, kt_region_info(self->fd, a.handle, &ro));
	EXPECT_EQ(2U, ro.importers);

	EXPECT_EQ(0, kt_close_handle(fd2, o2.handle));
	EXPECT_EQ(0, kt_close_handle(fd2, o.handle));
	ASSERT_EQ(0, kt_region_info(self->fd, a.handle, &ro));
	EXPECT_EQ(0U, ro.importers);
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
	close(fd2);
}

TEST_F(dev, ipc_open_handle_read_only_export)
{
	struct mlap2p_region_info ro, ri;
	struct mlap2p_mem_alloc a;
	struct mlap2p_ipc_open o;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	int fd2;

	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, kt_alloc(self->fd, self->page, self->mla, &a));
	ASSERT_EQ(0, kt_export(self->fd, a.handle, MLAP2P_IPC_F_RDONLY,
			       ipc));
	ASSERT_EQ(0, kt_import(fd2, ipc, &o));
	EXPECT_EQ(1U, o.access);
	ASSERT_EQ(0, kt_region_info(fd2, o.handle, &ri));
	EXPECT_EQ(1U, ri.access);
	ASSERT_EQ(0, kt_region_info(self->fd, a.handle, &ro));
	EXPECT_EQ(0U, ro.access);
	EXPECT_EQ(0, kt_close_handle(fd2, o.handle));
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
	close(fd2);
}

TEST_F(dev, ipc_open_handle_rejects_flags_and_reserved)
{
	struct mlap2p_mem_alloc a;
	struct mlap2p_ipc_open o;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	int bit, k;

	ASSERT_EQ(0, kt_alloc(self->fd, self->page, self->mla, &a));
	ASSERT_EQ(0, kt_export(self->fd, a.handle, 0, ipc));
	for (bit = 0; bit < 32; bit++) {
		kt_ipc_open_args(&o, ipc);
		o.flags = 1U << bit;
		EXPECT_EQ(-EINVAL, kt_ioctl(self->fd,
					    MLAP2P_IOC_IPC_OPEN_HANDLE, &o))
			TH_LOG("flag bit %d", bit);
	}
	for (k = 0; k < 2; k++) {
		kt_ipc_open_args(&o, ipc);
		o.reserved[k] = 1ULL << (k * 63);
		EXPECT_EQ(-EINVAL, kt_ioctl(self->fd,
					    MLAP2P_IOC_IPC_OPEN_HANDLE, &o))
			TH_LOG("reserved[%d]", k);
	}
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
}

/* The import is taken, then the result cannot be written back: undo it. */
TEST_F(dev, ipc_open_fault_leaves_no_import)
{
	struct kt_counters c0, c1;
	struct mlap2p_region_info r;
	struct mlap2p_mem_alloc a;
	struct mlap2p_ipc_open o;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	bool ctr = counters_available();
	void *ro;
	int fd2;

	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, kt_alloc(self->fd, self->page, self->mla, &a));
	ASSERT_EQ(0, kt_export(self->fd, a.handle, 0, ipc));
	kt_ipc_open_args(&o, ipc);
	ro = ro_copy(&o, sizeof(o));
	ASSERT_NE(NULL, ro);
	if (ctr) {
		ASSERT_EQ(0, kt_counters_read(&c0));
	}

	EXPECT_EQ(-EFAULT, kt_ioctl(fd2, MLAP2P_IOC_IPC_OPEN_HANDLE, ro));

	ASSERT_EQ(0, kt_region_info(self->fd, a.handle, &r));
	EXPECT_EQ(0U, r.importers);
	if (ctr) {
		ASSERT_EQ(0, kt_counters_read(&c1));
		EXPECT_TRUE(kt_live_equal(&c0, &c1)) {
			kt_counters_log("before", &c0);
			kt_counters_log("after", &c1);
		}
	}
	munmap(ro, self->page);
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
	close(fd2);
}

TEST_F(dev, ipc_close_handle_releases_once)
{
	struct mlap2p_mem_alloc a;
	struct mlap2p_ipc_open o;
	struct mlap2p_handle_op op;
	struct mlap2p_region_info r;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	int bit, fd2;

	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, kt_alloc(self->fd, self->page, self->mla, &a));
	ASSERT_EQ(0, kt_export(self->fd, a.handle, 0, ipc));
	ASSERT_EQ(0, kt_import(fd2, ipc, &o));

	for (bit = 0; bit < 32; bit++) {
		kt_handle_args(&op, o.handle);
		op.flags = 1U << bit;
		EXPECT_EQ(-EINVAL, kt_ioctl(fd2,
					    MLAP2P_IOC_IPC_CLOSE_HANDLE,
						&op)) TH_LOG("flag bit %d", bit);
	}
	kt_handle_args(&op, o.handle);
	op.reserved = 1ULL << 63;
	EXPECT_EQ(-EINVAL, kt_ioctl(fd2, MLAP2P_IOC_IPC_CLOSE_HANDLE,
				    &op));

	EXPECT_EQ(0, kt_close_handle(fd2, o.handle));
	EXPECT_EQ(-ENOENT, kt_close_handle(fd2, o.handle));
	EXPECT_EQ(-ENOENT, kt_region_info(fd2, o.handle, &r));
	EXPECT_EQ(-ENOENT, kt_close_handle(fd2, o.handle + 1000));
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
	close(fd2);
}

/* kind, size, importers, mappings and access, seen from both sides. */
TEST_F(dev, region_info_reports_the_region)
{
	const size_t len = 2 * self->page;
	struct mlap2p_region_info r;
	struct mlap2p_mem_alloc a;
	struct mlap2p_ipc_open o;
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	void *p1, *p2, *p3;
	int fd2;

	fd2 = kt_dev_open();
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, kt_alloc(self->fd, len, self->mla, &a));

	ASSERT_EQ(0, kt_region_info(self->fd, a.handle, &r));
	EXPECT_EQ(a.handle, r.handle);
	EXPECT_EQ((__u32)MLAP2P_REGION_OWNED, r.kind);
	EXPECT_EQ(self->mla, r.device);
	EXPECT_EQ((__u64)len, r.size);
	EXPECT_EQ(a.mmap_cookie, r.mmap_cookie);
	EXPECT_NE(KT_POISON64, r.region_id);
	EXPECT_EQ(0U, r.importers);
	EXPECT_EQ(0U, r.mappings);
	EXPECT_EQ(0U, r.access);
	EXPECT_EQ(0U, r.pad);

	p1 = kt_map(self->fd, a.mmap_cookie, len, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, p1);
	p2 = kt_map(self->fd, a.mmap_cookie, len, PROT_READ);
	ASSERT_NE(MAP_FAILED, p2);
	ASSERT_EQ(0, kt_export(self->fd, a.handle, 0, ipc));
	ASSERT_EQ(0, kt_import(fd2, ipc, &o));
	p3 = kt_map(fd2, o.mmap_cookie, len, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, p3);

	ASSERT_EQ(0, kt_region_info(self->fd, a.handle, &r));
	EXPECT_EQ(1U, r.importers);
	EXPECT_EQ(3U, r.mappings);
	ASSERT_EQ(0, kt_region_info(fd2, o.handle, &r));
	EXPECT_EQ((__u32)MLAP2P_REGION_IMPORTED, r.kind);
	EXPECT_EQ(1U, r.importers);
	EXPECT_EQ(3U, r.mappings);
	EXPECT_EQ(0U, r.pad);

	munmap(p2, len);
	ASSERT_EQ(0, kt_region_info(fd2, o.handle, &r));
	EXPECT_EQ(2U, r.mappings);
	munmap(p1, len);
	munmap(p3, len);
	ASSERT_EQ(0, kt_region_info(self->fd, a.handle, &r));
	EXPECT_EQ(0U, r.mappings);

	EXPECT_EQ(0, kt_close_handle(fd2, o.handle));
	ASSERT_EQ(0, kt_region_info(self->fd, a.handle, &r));
	EXPECT_EQ(0U, r.importers);
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
	close(fd2);
}

TEST_F(dev, region_info_rejects_bad_input)
{
	struct mlap2p_region_info r;
	struct mlap2p_mem_alloc a;
	int bit, k;

	ASSERT_EQ(0, kt_alloc(self->fd, self->page, self->mla, &a));
	EXPECT_EQ(-ENOENT, kt_region_info(self->fd, a.handle + 1000, &r));
	EXPECT_EQ(-ENOENT, kt_region_info(self->fd, 0xffffffffU, &r));
	for (bit = 0; bit < 32; bit++) {
		kt_region_info_args(&r, a.handle);
		r.flags = 1U << bit;
		EXPECT_EQ(-EINVAL, kt_ioctl(self->fd,
					    MLAP2P_IOC_REGION_INFO, &r))
			TH_LOG("flag bit %d", bit);
	}
	for (k = 0; k < 2; k++) {
		kt_region_info_args(&r, a.handle);
		r.reserved[k] = 1ULL << (k * 63);
		EXPECT_EQ(-EINVAL, kt_ioctl(self->fd,
					    MLAP2P_IOC_REGION_INFO, &r))
			TH_LOG("reserved[%d]", k);
	}
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
}

/*
 * The success path of CAN_ACCESS_PEER (the tables are locality_test's):
 * a core reaches itself LOCALly, and every core's MLA is the one whose
 * DEV_INFO core range holds it.
 */
TEST_F(dev, can_access_peer_answers)
{
	const struct mlap2p_info *i = &self->info;
	__u32 total = i->pod_nodes * i->cores_per_node;
	__u32 per_mla = i->cores_per_node / i->num_devices;
	struct mlap2p_peer_query q;
	__u32 core;

	for (core = 0; core < total; core++) {
		ASSERT_EQ(0, kt_peer(self->fd, core, core, &q))
			TH_LOG("core %u", core);
		EXPECT_EQ(1U, q.access) TH_LOG("core %u", core);
		EXPECT_EQ((__u32)MLAP2P_EDGE_LOCAL, q.edge_class)
			TH_LOG("core %u", core);
		EXPECT_EQ(MLAP2P_NO_MLA, q.intermediate_mla)
			TH_LOG("core %u", core);
		EXPECT_EQ(core / per_mla, q.mla_a) TH_LOG("core %u", core);
		EXPECT_EQ(q.mla_a, q.mla_b) TH_LOG("core %u", core);
	}
	/* Any pair answers, with a class in range and a consistent flag. */
	ASSERT_EQ(0, kt_peer(self->fd, 0, total - 1, &q));
	EXPECT_GE((__u32)MLAP2P_EDGE_POD, q.edge_class);
	EXPECT_EQ(q.edge_class != MLAP2P_EDGE_NONE, q.access == 1);
	EXPECT_EQ(0U, q.mla_a);
	EXPECT_EQ((total - 1) / per_mla, q.mla_b);
	if (q.edge_class == MLAP2P_EDGE_RELAY) {
		EXPECT_GT(kt_total_mlas(i), q.intermediate_mla);
	} else {
		EXPECT_EQ(MLAP2P_NO_MLA, q.intermediate_mla);
	}
}

TEST_F(dev, can_access_peer_rejects_bad_input)
{
	__u32 total = self->info.pod_nodes * self->info.cores_per_node;
	struct mlap2p_peer_query q;
	int bit, k;

	EXPECT_EQ(-EINVAL, kt_peer(self->fd, total, 0, &q));
	EXPECT_EQ(-EINVAL, kt_peer(self->fd, 0, total, &q));
	EXPECT_EQ(-EINVAL, kt_peer(self->fd, 0xffffffffU, 0, &q));
	EXPECT_EQ(-EINVAL, kt_peer(self->fd, 0, 0xffffffffU, &q));
	for (bit = 0; bit < 32; bit++) {
		kt_peer_args(&q, 0, 0);
		q.flags = 1U << bit;
		EXPECT_EQ(-EINVAL, kt_ioctl(self->fd,
					    MLAP2P_IOC_CAN_ACCESS_PEER, &q))
			TH_LOG("flag bit %d", bit);
	}
	for (k = 0; k < 2; k++) {
		kt_peer_args(&q, 0, 0);
		q.reserved[k] = 1ULL << (k * 63);
		EXPECT_EQ(-EINVAL, kt_ioctl(self->fd,
					    MLAP2P_IOC_CAN_ACCESS_PEER, &q))
			TH_LOG("reserved[%d]", k);
	}
}

/* Results that cannot be written back are -EFAULT for the read-only ones too. */
TEST_F(dev, queries_fault_on_read_only_argument)
{
	struct mlap2p_dev_info d;
	struct mlap2p_peer_query q;
	struct mlap2p_region_info r;
	struct mlap2p_mem_alloc a;
	void *ro;

	kt_dev_info_args(&d, self->mla);
	ro = ro_copy(&d, sizeof(d));
	ASSERT_NE(NULL, ro);
	EXPECT_EQ(-EFAULT, kt_ioctl(self->fd, MLAP2P_IOC_DEV_INFO, ro));
	munmap(ro, self->page);

	kt_peer_args(&q, 0, 0);
	ro = ro_copy(&q, sizeof(q));
	ASSERT_NE(NULL, ro);
	EXPECT_EQ(-EFAULT, kt_ioctl(self->fd, MLAP2P_IOC_CAN_ACCESS_PEER,
				    ro));
	munmap(ro, self->page);

	ASSERT_EQ(0, kt_alloc(self->fd, self->page, self->mla, &a));
	kt_region_info_args(&r, a.handle);
	ro = ro_copy(&r, sizeof(r));
	ASSERT_NE(NULL, ro);
	EXPECT_EQ(-EFAULT, kt_ioctl(self->fd, MLAP2P_IOC_REGION_INFO, ro));
	munmap(ro, self->page);
	EXPECT_EQ(0, kt_free(self->fd, a.handle));
}

KT_TEST_MAIN
