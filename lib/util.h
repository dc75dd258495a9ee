/* SPDX-License-Identifier: MIT */
/*
 * lib/util.h: the leaves every layer may use (lib/util.c): export and
 * fence macros, hashing, the clock in milliseconds, process start times,
 * random bytes, a constant-time compare.
 */
#ifndef MLAP2P_LIB_UTIL_H
#define MLAP2P_LIB_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MLAP2P_EXPORT		__attribute__((visibility("default")))

/*
 * A memory fence.  TSan does not model fences (GCC refuses them under
 * -fsanitize=thread), so there it is a compiler barrier only; every
 * cross-thread hand-off in the library is also an atomic store/load pair,
 * which TSan does see.
 */
#ifdef __SANITIZE_THREAD__
#define mlap2p_fence(order)	__asm__ __volatile__("" ::: "memory")
#else
#define mlap2p_fence(order)	__atomic_thread_fence(order)
#endif

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a)		(sizeof(a) / sizeof((a)[0]))
#endif
#ifndef container_of
#define container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))
#endif
#define ALIGN_UP(x, a)		(((x) + (a) - 1) / (a) * (a))

uint64_t mlap2p_hash(const void *data, size_t len, uint64_t seed);
/* CLOCK_MONOTONIC in milliseconds. */
int64_t mlap2p_now_ms(void);
/* Start time of @pid in clock ticks since boot (/proc/pid/stat field 22);
 * -ESRCH when it is gone or a zombie. */
int mlap2p_proc_start_time(pid_t pid, uint64_t *ticks);
/* What a system call costs here, in ns: the fastest of a few reads of 64
 * bytes of this process by process_vm_readv(2), getppid(2) where that is
 * refused. */
uint32_t mlap2p_syscall_ns(void);
/* getrandom() that never fails short; 0 or -errno. */
int mlap2p_random(void *buf, size_t len);
/* Constant-time memcmp: 0 when equal. */
int mlap2p_memeq_ct(const void *a, const void *b, size_t len);

#endif /* MLAP2P_LIB_UTIL_H */
