/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared helpers for the mlap2p selftests.
 *
 *  - MLAP2P_TEST_MAIN replaces TEST_HARNESS_MAIN in tests that need the
 *    module: without /dev/mlap2p the whole program prints a KTAP skip plan
 *    and exits 4 (KSFT_SKIP) before the harness runs a single test.
 *  - Thin ioctl wrappers return 0 or -errno, so a test reads
 *    EXPECT_EQ(-EINVAL, mlap2p_mem_free(fd, &op)).
 *  - *_args() helpers fill a struct with 0xcc first and then set the input
 *    fields, zeroing every flags/pad/reserved input; an output field the
 *    kernel forgot to write still reads 0xcc.
 *  - Readers for the sysfs counters under /sys/class/misc/mlap2p/.
 *  - Small process helpers: full pipe reads/writes and a waitpid that
 *    folds "exited with N" and "killed by signal S" into one int.
 *
 * EXPECT_* and ASSERT_* expand to two statements (the check, then a loop
 * that runs an optional trailing TH_LOG or block): always brace the body
 * of an if/for that uses them.
 *
 * Children forked inside a test report through their exit status (0 = ok,
 * anything else names the failing step); they never use ASSERT_*, which
 * would unwind into the harness's copy of the parent's state.
 */
#ifndef MLAP2P_TEST_H
#define MLAP2P_TEST_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <linux/mlap2p.h>

#include "kselftest_harness.h"

#define MLAP2P_POISON_BYTE	0xcc
#define MLAP2P_POISON32		0xccccccccU
#define MLAP2P_POISON64		0xccccccccccccccccULL

/* Fill an object (not a pointer) with the poison byte. */
#define MLAP2P_POISON(obj)	memset(&(obj), MLAP2P_POISON_BYTE, sizeof(obj))

#define MLAP2P_SYSFS_DIR	"/sys/class/misc/mlap2p"

/*
 * Errnos of the limits.  uapi/linux/mlap2p.h does not name them; these are
 * the ones the module documents on its parameters (modinfo mlap2p): an MLA
 * that is full and a file at max_regions_per_file give -ENOSPC, a file at
 * max_bytes_per_file_mb gives -ENOMEM.
 */
#define MLAP2P_E_CAPACITY	ENOSPC
#define MLAP2P_E_HANDLES	ENOSPC
#define MLAP2P_E_BYTES		ENOMEM

/* The exit status kselftest reads as "skipped". */
#define MLAP2P_KSFT_SKIP	4

/* ------------------------------------------------------------------ */
/* Device and skip logic                                              */
/* ------------------------------------------------------------------ */

static inline int mlap2p_dev_open(void)
{
	return open(MLAP2P_DEVICE_PATH, O_RDWR | O_CLOEXEC);
}

/*
 * Runs before main(): a program built with MLAP2P_TEST_MAIN and no usable
 * device prints "1..0 # SKIP ..." and exits 4 as a whole.
 */
static inline void mlap2p_require_device(void)
{
	int fd = mlap2p_dev_open();

	if (fd >= 0) {
		close(fd);
		return;
	}
	ksft_print_header();
	ksft_exit_skip("%s: %s (module not loaded?)\n", MLAP2P_DEVICE_PATH,
		       strerror(errno));
}

#define MLAP2P_TEST_MAIN						\
	static void __attribute__((constructor))			\
	mlap2p_require_device_ctor(void)				\
	{								\
		mlap2p_require_device();				\
	}								\
	TEST_HARNESS_MAIN

static inline size_t mlap2p_page_size(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

static inline __u64 mlap2p_round_up(__u64 v, __u64 to)
{
	return (v + to - 1) / to * to;
}

/* ------------------------------------------------------------------ */
/* ioctl wrappers: 0 or -errno                                        */
/* ------------------------------------------------------------------ */

static inline int mlap2p_ioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? -errno : 0;
}

static inline int mlap2p_get_info(int fd, struct mlap2p_info *info)
{
	MLAP2P_POISON(*info);
	return mlap2p_ioctl(fd, MLAP2P_IOC_GET_INFO, info);
}

static inline void mlap2p_dev_info_args(struct mlap2p_dev_info *d,
					__u32 device)
{
	MLAP2P_POISON(*d);
	d->device = device;
	d->flags = 0;
	d->reserved[0] = 0;
	d->reserved[1] = 0;
}

static inline void mlap2p_alloc_args(struct mlap2p_mem_alloc *a, __u64 size,
				     __u32 device)
{
	MLAP2P_POISON(*a);
	a->size = size;
	a->device = device;
	a->flags = 0;
	a->pad = 0;
	a->reserved[0] = 0;
	a->reserved[1] = 0;
}

static inline void mlap2p_handle_args(struct mlap2p_handle_op *op,
				      __u32 handle)
{
	MLAP2P_POISON(*op);
	op->handle = handle;
	op->flags = 0;
	op->reserved = 0;
}

static inline void mlap2p_ipc_get_args(struct mlap2p_ipc_get *g, __u32 handle,
				       __u32 flags)
{
	MLAP2P_POISON(*g);
	g->handle = handle;
	g->flags = flags;
	g->reserved[0] = 0;
	g->reserved[1] = 0;
}

static inline void mlap2p_ipc_open_args(struct mlap2p_ipc_open *o,
					const __u8 ipc[MLAP2P_IPC_HANDLE_SIZE])
{
	MLAP2P_POISON(*o);
	memcpy(o->ipc, ipc, MLAP2P_IPC_HANDLE_SIZE);
	o->flags = 0;
	o->reserved[0] = 0;
	o->reserved[1] = 0;
}

static inline void mlap2p_peer_args(struct mlap2p_peer_query *q, __u32 core_a,
				    __u32 core_b)
{
	MLAP2P_POISON(*q);
	q->core_a = core_a;
	q->core_b = core_b;
	q->flags = 0;
	q->reserved[0] = 0;
	q->reserved[1] = 0;
}

static inline void mlap2p_region_info_args(struct mlap2p_region_info *r,
					   __u32 handle)
{
	MLAP2P_POISON(*r);
	r->handle = handle;
	r->flags = 0;
	r->reserved[0] = 0;
	r->reserved[1] = 0;
}

static inline int mlap2p_dev_info(int fd, __u32 device,
				  struct mlap2p_dev_info *d)
{
	mlap2p_dev_info_args(d, device);
	return mlap2p_ioctl(fd, MLAP2P_IOC_DEV_INFO, d);
}

/* Allocate @size bytes on @device; the result lands in @a. */
static inline int mlap2p_alloc(int fd, __u64 size, __u32 device,
			       struct mlap2p_mem_alloc *a)
{
	mlap2p_alloc_args(a, size, device);
	return mlap2p_ioctl(fd, MLAP2P_IOC_MEM_ALLOC, a);
}

static inline int mlap2p_free(int fd, __u32 handle)
{
	struct mlap2p_handle_op op;

	mlap2p_handle_args(&op, handle);
	return mlap2p_ioctl(fd, MLAP2P_IOC_MEM_FREE, &op);
}

static inline int mlap2p_export(int fd, __u32 handle, __u32 flags,
				__u8 ipc[MLAP2P_IPC_HANDLE_SIZE])
{
	struct mlap2p_ipc_get g;
	int ret;

	mlap2p_ipc_get_args(&g, handle, flags);
	ret = mlap2p_ioctl(fd, MLAP2P_IOC_IPC_GET_HANDLE, &g);
	if (!ret)
		memcpy(ipc, g.ipc, MLAP2P_IPC_HANDLE_SIZE);
	return ret;
}

static inline int mlap2p_import(int fd, const __u8 ipc[MLAP2P_IPC_HANDLE_SIZE],
				struct mlap2p_ipc_open *o)
{
	mlap2p_ipc_open_args(o, ipc);
	return mlap2p_ioctl(fd, MLAP2P_IOC_IPC_OPEN_HANDLE, o);
}

static inline int mlap2p_close_handle(int fd, __u32 handle)
{
	struct mlap2p_handle_op op;

	mlap2p_handle_args(&op, handle);
	return mlap2p_ioctl(fd, MLAP2P_IOC_IPC_CLOSE_HANDLE, &op);
}

static inline int mlap2p_region_info(int fd, __u32 handle,
				     struct mlap2p_region_info *r)
{
	mlap2p_region_info_args(r, handle);
	return mlap2p_ioctl(fd, MLAP2P_IOC_REGION_INFO, r);
}

static inline int mlap2p_peer(int fd, __u32 core_a, __u32 core_b,
			      struct mlap2p_peer_query *q)
{
	mlap2p_peer_args(q, core_a, core_b);
	return mlap2p_ioctl(fd, MLAP2P_IOC_CAN_ACCESS_PEER, q);
}

/* The first MLA of this host's node: always a valid allocation target. */
static inline __u32 mlap2p_local_mla(const struct mlap2p_info *info)
{
	return info->node * info->num_devices;
}

static inline __u32 mlap2p_total_mlas(const struct mlap2p_info *info)
{
	return info->pod_nodes * info->num_devices;
}

/* mmap a region by cookie; MAP_FAILED or the address (errno preserved). */
static inline void *mlap2p_map(int fd, __u64 cookie, size_t len, int prot)
{
	return mmap(NULL, len, prot, MAP_SHARED, fd, (off_t)cookie);
}

/* ------------------------------------------------------------------ */
/* Module parameters (root only; the limits are writable at run time)   */
/* ------------------------------------------------------------------ */

#define MLAP2P_PARAM_DIR	"/sys/module/mlap2p/parameters"

/* 0 and the parameter's value, or -errno. */
static inline int mlap2p_param_read(const char *name, unsigned long *val)
{
	char path[256], buf[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), MLAP2P_PARAM_DIR "/%s", name);
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

static inline int mlap2p_param_write(const char *name, unsigned long val)
{
	char path[256], buf[32];
	int fd, len, ret = 0;

	snprintf(path, sizeof(path), MLAP2P_PARAM_DIR "/%s", name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	len = snprintf(buf, sizeof(buf), "%lu\n", val);
	if (write(fd, buf, (size_t)len) != len)
		ret = -errno;
	close(fd);
	return ret;
}

/* ------------------------------------------------------------------ */
/* sysfs counters                                                     */
/* ------------------------------------------------------------------ */

struct mlap2p_counters {
	uint64_t live_regions;
	uint64_t live_bytes;
	uint64_t live_mappings;
	uint64_t live_handles;
	uint64_t allocs;
	uint64_t frees;
	uint64_t exports;
	uint64_t opens;
	uint64_t closes;
	uint64_t rejected;
	uint64_t hwm_bytes;
};

/* 0 and the value of /sys/class/misc/mlap2p/<name>, or -errno. */
static inline int mlap2p_counter_read(const char *name, uint64_t *val)
{
	char path[256], buf[64];
	unsigned long long v;
	char *end;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), MLAP2P_SYSFS_DIR "/%s", name);
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

/* Reads every counter; 0 or the -errno of the first one missing. */
static inline int mlap2p_counters_read(struct mlap2p_counters *c)
{
	static const struct {
		const char *name;
		size_t off;
	} tab[] = {
#define MLAP2P_CTR(f) { #f, offsetof(struct mlap2p_counters, f) }
		MLAP2P_CTR(live_regions), MLAP2P_CTR(live_bytes),
		MLAP2P_CTR(live_mappings), MLAP2P_CTR(live_handles),
		MLAP2P_CTR(allocs), MLAP2P_CTR(frees), MLAP2P_CTR(exports),
		MLAP2P_CTR(opens), MLAP2P_CTR(closes), MLAP2P_CTR(rejected),
		MLAP2P_CTR(hwm_bytes),
#undef MLAP2P_CTR
	};
	size_t i;
	int ret;

	for (i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
		ret = mlap2p_counter_read(tab[i].name,
					  (uint64_t *)((char *)c + tab[i].off));
		if (ret)
			return ret;
	}
	return 0;
}

static inline bool mlap2p_live_equal(const struct mlap2p_counters *a,
				     const struct mlap2p_counters *b)
{
	return a->live_regions == b->live_regions &&
	       a->live_bytes == b->live_bytes &&
	       a->live_mappings == b->live_mappings &&
	       a->live_handles == b->live_handles;
}

/*
 * Waits up to @ms for the live counters to come back to @base (a process's
 * files and mappings are gone once waitpid() returns, but give deferred
 * work a moment).  @now holds the last reading.  True when they match.
 */
static inline bool mlap2p_counters_settle(const struct mlap2p_counters *base,
					  struct mlap2p_counters *now, int ms)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };

	for (;;) {
		if (mlap2p_counters_read(now))
			return false;
		if (mlap2p_live_equal(base, now))
			return true;
		if (ms <= 0)
			return false;
		nanosleep(&ts, NULL);
		ms -= 10;
	}
}

static inline void mlap2p_counters_log(const char *what,
				       const struct mlap2p_counters *c)
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

/* ------------------------------------------------------------------ */
/* Processes and pipes                                                */
/* ------------------------------------------------------------------ */

/* 0 when all @len bytes moved, else -errno (-EPIPE on early EOF). */
static inline int mlap2p_write_full(int fd, const void *buf, size_t len)
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

static inline int mlap2p_read_full(int fd, void *buf, size_t len)
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

/*
 * Waits for @pid: its exit code, 128 + signal if a signal killed it, or
 * -errno if waitpid() failed.
 */
static inline int mlap2p_wait(pid_t pid)
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

/* Print a "# "-prefixed diagnostic from a forked child and return @code. */
#define mlap2p_child_fail(code, fmt, ...)				\
	({								\
		ksft_print_msg("child %d: " fmt "\n", (int)getpid(),	\
			       ##__VA_ARGS__);				\
		(code);							\
	})

/*
 * Drop to nobody:nogroup (65534) for good, capabilities included.  Raw
 * system calls, so this header needs no _GNU_SOURCE from its includer;
 * they change the calling thread only, which is all a forked child has.
 */
static inline int mlap2p_become_nobody(void)
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

#ifndef CLONE_NEWUSER
#define CLONE_NEWUSER	0x10000000	/* <sched.h> has it with _GNU_SOURCE */
#endif

/*
 * In a forked child: unshare a user namespace and map its uid 0 to uid 0
 * outside, so the euid (as a kuid) stays root's while every capability now
 * holds only over the new namespace.  0 on success; MLAP2P_KSFT_SKIP when
 * user namespaces are not available here; @fail (after a diagnostic) when
 * a later step fails.  Needs root outside to write the map.
 */
static inline int mlap2p_enter_userns_root(int fail)
{
	int map;

	if (syscall(SYS_unshare, CLONE_NEWUSER))
		return errno == EINVAL || errno == EPERM || errno == ENOSPC ?
		       MLAP2P_KSFT_SKIP :
		       mlap2p_child_fail(fail, "unshare: %s", strerror(errno));
	map = open("/proc/self/uid_map", O_WRONLY | O_CLOEXEC);
	if (map < 0 || write(map, "0 0 1\n", 6) != 6)
		return mlap2p_child_fail(fail, "uid_map: %s", strerror(errno));
	close(map);
	if (geteuid() != 0)
		return mlap2p_child_fail(fail, "euid %d in the new namespace",
					 (int)geteuid());
	return 0;
}

/* Fill @len bytes at @p with a pattern derived from @seed and the offset. */
static inline void mlap2p_fill(void *p, size_t len, uint32_t seed)
{
	uint32_t *w = p;
	size_t i;

	for (i = 0; i < len / 4; i++)
		w[i] = seed ^ (uint32_t)(i * 2654435761u);
}

/* Offset of the first word that differs from the pattern, or -1. */
static inline long mlap2p_check(const void *p, size_t len, uint32_t seed)
{
	const volatile uint32_t *w = p;
	size_t i;

	for (i = 0; i < len / 4; i++) {
		if (w[i] != (seed ^ (uint32_t)(i * 2654435761u)))
			return (long)(i * 4);
	}
	return -1;
}

/* Offset of the first non-zero byte, or -1. */
static inline long mlap2p_first_nonzero(const void *p, size_t len)
{
	const volatile unsigned char *b = p;
	size_t i;

	for (i = 0; i < len; i++) {
		if (b[i])
			return (long)i;
	}
	return -1;
}

#endif /* MLAP2P_TEST_H */
