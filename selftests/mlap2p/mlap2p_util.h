/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared helpers for the mlap2p selftests, kt_* (mlap2p_util.c, compiled
 * once and linked into every program; mm's vm_util.c).
 *
 *  - KT_TEST_MAIN replaces TEST_HARNESS_MAIN in tests that need the
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
#ifndef MLAP2P_UTIL_H
#define MLAP2P_UTIL_H

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

#define KT_POISON_BYTE	0xcc
#define KT_POISON32		0xccccccccU
#define KT_POISON64		0xccccccccccccccccULL

/* Fill an object (not a pointer) with the poison byte. */
#define KT_POISON(obj)	memset(&(obj), KT_POISON_BYTE, sizeof(obj))

#define KT_SYSFS_DIR	"/sys/class/misc/mlap2p"

/*
 * Errnos of the limits.  uapi/linux/mlap2p.h does not name them; these are
 * the ones the module documents on its parameters (modinfo mlap2p): an MLA
 * that is full and a file at max_regions_per_file give -ENOSPC, a file at
 * max_bytes_per_file_mb gives -ENOMEM.
 */
#define KT_E_CAPACITY	ENOSPC
#define KT_E_HANDLES	ENOSPC
#define KT_E_BYTES		ENOMEM

/* The exit status kselftest reads as "skipped". */
#define KT_KSFT_SKIP	4

/* ------------------------------------------------------------------ */
/* Device and skip logic                                              */
/* ------------------------------------------------------------------ */

int kt_dev_open(void);

/*
 * Runs before main(): a program built with KT_TEST_MAIN and no usable
 * device prints "1..0 # SKIP ..." and exits 4 as a whole.
 */
void kt_require_device(void);

#define KT_TEST_MAIN							\
	static void __attribute__((constructor))			\
	kt_require_device_ctor(void)					\
	{								\
		kt_require_device();					\
	}								\
	TEST_HARNESS_MAIN

size_t kt_page_size(void);

__u64 kt_round_up(__u64 v, __u64 to);

/* ------------------------------------------------------------------ */
/* ioctl wrappers: 0 or -errno                                        */
/* ------------------------------------------------------------------ */

int kt_ioctl(int fd, unsigned long cmd, void *arg);

int kt_get_info(int fd, struct mlap2p_info *info);

void kt_dev_info_args(struct mlap2p_dev_info *d, __u32 device);

void kt_alloc_args(struct mlap2p_mem_alloc *a, __u64 size, __u32 device);

void kt_handle_args(struct mlap2p_handle_op *op, __u32 handle);

void kt_ipc_get_args(struct mlap2p_ipc_get *g, __u32 handle, __u32 flags);

void kt_ipc_open_args(struct mlap2p_ipc_open *o,
		      const __u8 ipc[MLAP2P_IPC_HANDLE_SIZE]);

void kt_peer_args(struct mlap2p_peer_query *q, __u32 core_a, __u32 core_b);

void kt_region_info_args(struct mlap2p_region_info *r, __u32 handle);

int kt_dev_info(int fd, __u32 device, struct mlap2p_dev_info *d);

/* Allocate @size bytes on @device; the result lands in @a. */
int kt_alloc(int fd, __u64 size, __u32 device, struct mlap2p_mem_alloc *a);

int kt_free(int fd, __u32 handle);

int kt_export(int fd, __u32 handle, __u32 flags,
	      __u8 ipc[MLAP2P_IPC_HANDLE_SIZE]);

int kt_import(int fd, const __u8 ipc[MLAP2P_IPC_HANDLE_SIZE],
	      struct mlap2p_ipc_open *o);

int kt_close_handle(int fd, __u32 handle);

int kt_region_info(int fd, __u32 handle, struct mlap2p_region_info *r);

int kt_peer(int fd, __u32 core_a, __u32 core_b, struct mlap2p_peer_query *q);

/* The first MLA of this host's node: always a valid allocation target. */
__u32 kt_local_mla(const struct mlap2p_info *info);

__u32 kt_total_mlas(const struct mlap2p_info *info);

/* mmap a region by cookie; MAP_FAILED or the address (errno preserved). */
void *kt_map(int fd, __u64 cookie, size_t len, int prot);

/* ------------------------------------------------------------------ */
/* Module parameters (root only; the limits are writable at run time)   */
/* ------------------------------------------------------------------ */

#define KT_PARAM_DIR	"/sys/module/mlap2p/parameters"

/* 0 and the parameter's value, or -errno. */
int kt_param_read(const char *name, unsigned long *val);

int kt_param_write(const char *name, unsigned long val);

/* ------------------------------------------------------------------ */
/* sysfs counters                                                     */
/* ------------------------------------------------------------------ */

struct kt_counters {
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
int kt_counter_read(const char *name, uint64_t *val);

/* Reads every counter; 0 or the -errno of the first one missing. */
int kt_counters_read(struct kt_counters *c);

bool kt_live_equal(const struct kt_counters *a, const struct kt_counters *b);

/*
 * Waits up to @ms for the live counters to come back to @base (a process's
 * files and mappings are gone once waitpid() returns, but give deferred
 * work a moment).  @now holds the last reading.  True when they match.
 */
bool kt_counters_settle(const struct kt_counters *base, struct kt_counters *now,
			int ms);

void kt_counters_log(const char *what, const struct kt_counters *c);

/* ------------------------------------------------------------------ */
/* Processes and pipes                                                */
/* ------------------------------------------------------------------ */

/* 0 when all @len bytes moved, else -errno (-EPIPE on early EOF). */
int kt_write_full(int fd, const void *buf, size_t len);

int kt_read_full(int fd, void *buf, size_t len);

/*
 * Waits for @pid: its exit code, 128 + signal if a signal killed it, or
 * -errno if waitpid() failed.
 */
int kt_wait(pid_t pid);

/* Print a "# "-prefixed diagnostic from a forked child and return @code. */
#define kt_child_fail(code, fmt, ...)					\
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
int kt_become_nobody(void);

#ifndef CLONE_NEWUSER
#define CLONE_NEWUSER	0x10000000	/* <sched.h> has it with _GNU_SOURCE */
#endif

/*
 * In a forked child: unshare a user namespace and map its uid 0 to uid 0
 * outside, so the euid (as a kuid) stays root's while every capability now
 * holds only over the new namespace.  0 on success; KT_KSFT_SKIP when
 * user namespaces are not available here; @fail (after a diagnostic) when
 * a later step fails.  Needs root outside to write the map.
 */
int kt_enter_userns_root(int fail);

/* Fill @len bytes at @p with a pattern derived from @seed and the offset. */
void kt_fill(void *p, size_t len, uint32_t seed);

/* Offset of the first word that differs from the pattern, or -1. */
long kt_check(const void *p, size_t len, uint32_t seed);

/* Offset of the first non-zero byte, or -1. */
long kt_first_nonzero(const void *p, size_t len);

#endif /* MLAP2P_UTIL_H */
