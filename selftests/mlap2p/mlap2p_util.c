// SPDX-License-Identifier: GPL-2.0
/*
 * The mlap2p selftests' helpers (mlap2p_util.h says what each does),
 * compiled once and linked into every program of the suite.
 */
#include "mlap2p_util.h"
#include "kselftest.h"

int kt_dev_open(void)
{
	return open(MLAP2P_DEVICE_PATH, O_RDWR | O_CLOEXEC);
}

void kt_require_device(void)
{
	int fd = kt_dev_open();

	if (fd >= 0) {
		close(fd);
		return;
	}
	ksft_print_header();
	ksft_exit_skip("%s: %s (module not loaded?)\n", MLAP2P_DEVICE_PATH,
		       strerror(errno));
}

size_t kt_page_size(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

__u64 kt_round_up(__u64 v, __u64 to)
{
	return (v + to - 1) / to * to;
}

int kt_ioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? -errno : 0;
}

int kt_get_info(int fd, struct mlap2p_info *info)
{
	KT_POISON(*info);
	return kt_ioctl(fd, MLAP2P_IOC_GET_INFO, info);
}

void kt_dev_info_args(struct mlap2p_dev_info *d, __u32 device)
{
	KT_POISON(*d);
	d->device = device;
	d->flags = 0;
	d->reserved[0] = 0;
	d->reserved[1] = 0;
}

void kt_alloc_args(struct mlap2p_mem_alloc *a, __u64 size, __u32 device)
{
	KT_POISON(*a);
	a->size = size;
	a->device = device;
	a->flags = 0;
	a->pad = 0;
	a->reserved[0] = 0;
	a->reserved[1] = 0;
}

void kt_handle_args(struct mlap2p_handle_op *op, __u32 handle)
{
	KT_POISON(*op);
	op->handle = handle;
	op->flags = 0;
	op->reserved = 0;
}

void kt_ipc_get_args(struct mlap2p_ipc_get *g, __u32 handle, __u32 flags)
{
	KT_POISON(*g);
	g->handle = handle;
	g->flags = flags;
	g->reserved[0] = 0;
	g->reserved[1] = 0;
}

void kt_ipc_open_args(struct mlap2p_ipc_open *o,
		      const __u8 ipc[MLAP2P_IPC_HANDLE_SIZE])
{
	KT_POISON(*o);
	memcpy(o->ipc, ipc, MLAP2P_IPC_HANDLE_SIZE);
	o->flags = 0;
	o->reserved[0] = 0;
	o->reserved[1] = 0;
}

void kt_peer_args(struct mlap2p_peer_query *q, __u32 core_a, __u32 core_b)
{
	KT_POISON(*q);
	q->core_a = core_a;
	q->core_b = core_b;
	q->flags = 0;
	q->reserved[0] = 0;
	q->reserved[1] = 0;
}

void kt_region_info_args(struct mlap2p_region_info *r, __u32 handle)
{
	KT_POISON(*r);
	r->handle = handle;
	r->flags = 0;
	r->reserved[0] = 0;
	r->reserved[1] = 0;
}

int kt_dev_info(int fd, __u32 device, struct mlap2p_dev_info *d)
{
	kt_dev_info_args(d, device);
	return kt_ioctl(fd, MLAP2P_IOC_DEV_INFO, d);
}

int kt_alloc(int fd, __u64 size, __u32 device, struct mlap2p_mem_alloc *a)
{
	kt_alloc_args(a, size, device);
	return kt_ioctl(fd, MLAP2P_IOC_MEM_ALLOC, a);
}

int kt_free(int fd, __u32 handle)
{
	struct mlap2p_handle_op op;

	kt_handle_args(&op, handle);
	return kt_ioctl(fd, MLAP2P_IOC_MEM_FREE, &op);
}

int kt_export(int fd, __u32 handle, __u32 flags,
	      __u8 ipc[MLAP2P_IPC_HANDLE_SIZE])
{
	struct mlap2p_ipc_get g;
	int ret;

	kt_ipc_get_args(&g, handle, flags);
	ret = kt_ioctl(fd, MLAP2P_IOC_IPC_GET_HANDLE, &g);
	if (!ret)
		memcpy(ipc, g.ipc, MLAP2P_IPC_HANDLE_SIZE);
	return ret;
}

int kt_import(int fd, const __u8 ipc[MLAP2P_IPC_HANDLE_SIZE],
	      struct mlap2p_ipc_open *o)
{
	kt_ipc_open_args(o, ipc);
	return kt_ioctl(fd, MLAP2P_IOC_IPC_OPEN_HANDLE, o);
}

int kt_close_handle(int fd, __u32 handle)
{
	struct mlap2p_handle_op op;

	kt_handle_args(&op, handle);
	return kt_ioctl(fd, MLAP2P_IOC_IPC_CLOSE_HANDLE, &op);
}

int kt_region_info(int fd, __u32 handle, struct mlap2p_region_info *r)
{
	kt_region_info_args(r, handle);
	return kt_ioctl(fd, MLAP2P_IOC_REGION_INFO, r);
}

int kt_peer(int fd, __u32 core_a, __u32 core_b, struct mlap2p_peer_query *q)
{
	kt_peer_args(q, core_a, core_b);
	return kt_ioctl(fd, MLAP2P_IOC_CAN_ACCESS_PEER, q);
}

__u32 kt_local_mla(const struct mlap2p_info *info)
{
	return info->node * info->num_devices;
}

__u32 kt_total_mlas(const struct mlap2p_info *info)
{
	return info->pod_nodes * info->num_devices;
}

void *kt_map(int fd, __u64 cookie, size_t len, int prot)
{
	return mmap(NULL, len, prot, MAP_SHARED, fd, (off_t)cookie);
}

int kt_param_read(const char *name, unsigned long *val)
{
	char path[256], buf[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), KT_PARAM_DIR "/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -ENODATA;
	buf[n] = '\0';
	*val = strtoul(buf, NULL, 0);
	return 0;
}

int kt_param_write(const char *name, unsigned long val)
{
	char path[256], buf[32];
	int fd, len, ret = 0;

	snprintf(path, sizeof(path), KT_PARAM_DIR "/%s", name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	len = snprintf(buf, sizeof(buf), "%lu\n", val);
	if (write(fd, buf, (size_t)len) != len)
		ret = -errno;
	close(fd);
	return ret;
}

int kt_counter_read(const char *name, uint64_t *val)
{
	char path[256], buf[64];
	unsigned long long v;
	char *end;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), KT_SYSFS_DIR "/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -ENODATA;
	buf[n] = '\0';
	errno = 0;
	v = strtoull(buf, &end, 0);
	if (errno || end == buf)
		return -EINVAL;
	*val = v;
	return 0;
}

int kt_counters_read(struct kt_counters *c)
{
	static const struct {
		const char *name;
		size_t off;
	} tab[] = {
#define KT_CTR(f) { #f, offsetof(struct kt_counters, f) }
		KT_CTR(live_regions), KT_CTR(live_bytes),
		KT_CTR(live_mappings), KT_CTR(live_handles),
		KT_CTR(allocs), KT_CTR(frees), KT_CTR(exports),
		KT_CTR(opens), KT_CTR(closes), KT_CTR(rejected),
		KT_CTR(hwm_bytes),
#undef KT_CTR
	};
	size_t i;
	int ret;

	for (i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
		ret = kt_counter_read(tab[i].name,
				      (uint64_t *)((char *)c + tab[i].off));
		if (ret)
			return ret;
	}
	return 0;
}

bool kt_live_equal(const struct kt_counters *a, const struct kt_counters *b)
{
	return a->live_regions == b->live_regions &&
	       a->live_bytes == b->live_bytes &&
	       a->live_mappings == b->live_mappings &&
	       a->live_handles == b->live_handles;
}

bool kt_counters_settle(const struct kt_counters *base, struct kt_counters *now,
			int ms)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };

	for (;;) {
		if (kt_counters_read(now))
			return false;
		if (kt_live_equal(base, now))
			return true;
		if (ms <= 0)
			return false;
		nanosleep(&ts, NULL);
		ms -= 10;
	}
}

void kt_counters_log(const char *what, const struct kt_counters *c)
{
	ksft_print_msg("%s: regions %llu bytes %llu mappings %llu handles %llu allocs %llu frees %llu exports %llu opens %llu closes %llu rejected %llu hwm %llu\n",
		       what, (unsigned long long)c->live_regions,
		       (unsigned long long)c->live_bytes,
		       (unsigned long long)c->live_mappings,
		       (unsigned long long)c->live_handles,
		       (unsigned long long)c->allocs,
		       (unsigned long long)c->frees,
		       (unsigned long long)c->exports,
		       (unsigned long long)c->opens,
		       (unsigned long long)c->closes,
		       (unsigned long long)c->rejected,
		       (unsigned long long)c->hwm_bytes);
}

int kt_write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int kt_read_full(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int kt_wait(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return -ECHILD;
}

int kt_become_nobody(void)
{
	gid_t none[1] = { 65534 };

	if (setgroups(1, none))
		return -errno;
	if (syscall(SYS_setresgid, 65534, 65534, 65534))
		return -errno;
	if (syscall(SYS_setresuid, 65534, 65534, 65534))
		return -errno;
	return 0;
}

int kt_enter_userns_root(int fail)
{
	int map;

	if (syscall(SYS_unshare, CLONE_NEWUSER))
		return errno == EINVAL || errno == EPERM || errno == ENOSPC ?
		       KT_KSFT_SKIP :
		       kt_child_fail(fail, "unshare: %s", strerror(errno));
	map = open("/proc/self/uid_map", O_WRONLY | O_CLOEXEC);
	if (map < 0 || write(map, "0 0 1\n", 6) != 6)
		return kt_child_fail(fail, "uid_map: %s", strerror(errno));
	close(map);
	if (geteuid() != 0)
		return kt_child_fail(fail, "euid %d in the new namespace",
					 (int)geteuid());
	return 0;
}

void kt_fill(void *p, size_t len, uint32_t seed)
{
	uint32_t *w = p;
	size_t i;

	for (i = 0; i < len / 4; i++)
		w[i] = seed ^ (uint32_t)(i * 2654435761u);
}

long kt_check(const void *p, size_t len, uint32_t seed)
{
	const volatile uint32_t *w = p;
	size_t i;

	for (i = 0; i < len / 4; i++) {
		if (w[i] != (seed ^ (uint32_t)(i * 2654435761u)))
			return (long)(i * 4);
	}
	return -1;
}

long kt_first_nonzero(const void *p, size_t len)
{
	const volatile unsigned char *b = p;
	size_t i;

	for (i = 0; i < len; i++) {
		if (b[i])
			return (long)i;
	}
	return -1;
}
