/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the library tests in test/ (helpers.c, compiled once and
 * linked into every program; liburing's test/helpers.h).  All are t_*,
 * T_*: nothing here can take a name of the library's.
 *
 *  - t_run_threads(): run one function per rank in threads of this
 *    process, each with its own communicator, and collect the results.
 *  - t_fork(): fork the child processes *before* any thread exists
 *    (the unique id's root is a thread; TSan forbids threads after a
 *    multi-threaded fork), then hand them the id through a pipe
 *    (t_procs_start(), t_procs_wait()).
 *  - t_exchange(): prove a connection by hand: the sender writes a
 *    known pattern into every protocol buffer of its wired ncclConnInfo and
 *    bumps *tail; the receiver waits for tail, checks the bytes, bumps
 *    *head; the sender waits for head.  Plus sizesFifo and ptrExchange.
 *  - t_fd_count(), t_memfd_count(): what a process holds, for teardown;
 *    kt_counters_*(): what the module holds (its sysfs counters).
 *  - kt_write_full(), kt_read_full(), kt_wait(), kt_fill(), kt_check():
 *    pipes, children and byte patterns, shared with selftests/mlap2p/.
 *  - t_link_counts(): one link's counters from mlap2p_dump_state().
 *
 * Every helper returns 0 or a small positive step number (or -errno where
 * it says so), so a forked child can exit with it and a thread can hand it
 * back.  Children report through their exit status, never with ASSERT_*.
 * The tests include kselftest_harness.h themselves.
 */
#ifndef MLAP2P_TEST_HELPERS_H
#define MLAP2P_TEST_HELPERS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <linux/mlap2p.h>
#include <mlap2p/dataplane.h>

#include "bootstrap.h"
#include "mlap2p_util.h"
#include "comm.h"
#include "log.h"
#include "rt/rt.h"
#include "topo.h"
#include "transport.h"
#include "transport/net.h"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

/* ---- /dev/mlap2p, for the kmod runtime's cases ---- */

int t_get_info(int fd, struct mlap2p_info *info);

/*
 * ---- processes, pipes, patterns, the module's counters ----
 *
 * The kernel selftests' helpers (selftests/mlap2p/mlap2p_util.h, linked in
 * here too): kt_dev_open(), kt_counters_*(), kt_write_full(),
 * kt_read_full(), kt_wait(), kt_fill(), kt_check(), kt_child_fail(),
 * KT_POISON().
 */

/* Offset of the first non-zero byte, or -1. */
long t_first_nonzero(const void *p, size_t len);

#define T_MAX_RANKS	64
#define T_WAIT_MS	20000

/* Small FIFOs: every side still rounds up to 2 MiB. */
void t_small_buffers(void);

/*
 * 1 if the NET transport has a libfabric provider under the current
 * environment (asks it, as selection does, on a 1-rank communicator).
 */
int t_net_available(void);

/* What every P2P selection test sets, whatever the runtime. */
void t_p2p_only(void);

/*
 * Host runtime with a trn2 pod of two nodes: every edge class exists.
 * Only for cases that need the pod (POD and NONE edges, cores 64 and up):
 * the module, as the VM lane loads it, has no pod.
 */
void t_host_topology(void);

/*
 * Node 0 of the trn2 defaults (16 MLAs on a 4x4 torus, LNC 2: cores 4m to
 * 4m + 3 on MLA m), the module's defaults, with which the VM lane loads
 * it.  With /dev/mlap2p the ranks use the module, so its CAN_ACCESS_PEER
 * and edge answers decide; without it, the host runtime with that family
 * and no pod.  An MLAP2P_RUNTIME already set wins.  NULL, or why the
 * loaded module cannot serve these cases (the caller skips).
 */
const char *t_node_topology(void);

/* The communicator runs on the runtime MLAP2P_RUNTIME names: 0 or 1. */
int t_check_runtime(struct mlap2p_comm *api);

#define T_NODE_TOPOLOGY() do {						\
	const char *why_ = t_node_topology();				\
									\
	if (why_)							\
		SKIP(return, "%s", why_);				\
} while (0)

/*
 * Test children leave with _exit(), which skips LeakSanitizer's exit-time
 * check: run it by hand where a test's library work is over.  1 = leaks.
 */
int t_leak_check(void);

/* ---- ranks as threads ---- */

struct t_rank;
typedef int (*t_rank_fn)(struct t_rank *r);

struct t_rank {
	int rank;
	int nranks;
	int core;
	struct mlap2p_unique_id id;
	struct mlap2p_comm *comm;
	t_rank_fn fn;
	void *arg;		/* shared by all ranks */
	int result;		/* 0 or the failing step */
	char msg[512];		/* mlap2p_last_error() of a failure */
	pthread_t thread;
};

int t_init(struct t_rank *r);

void *t_thread_main(void *arg);

/*
 * Run @fn for ranks 0..nranks-1 on @cores in threads, with one fresh id.
 * Returns 0 when every rank returned 0; else logs and returns the first
 * failing rank's result.
 */
int t_run_threads(int nranks, const int *cores, t_rank_fn fn, void *arg,
		  struct t_rank *ranks);

/* ---- ranks as processes ---- */

struct t_procs {
	int n;
	pid_t pid[T_MAX_RANKS];
	int pipe[T_MAX_RANKS];	/* write end, to hand out the id */
};

/*
 * Fork @n children; each reads a unique id from its pipe and returns
 * @child(index, &id, arg) as its exit status.  The parent then calls
 * t_procs_start() with the id and t_procs_wait().
 */
int t_fork(struct t_procs *p, int n,
	   int (*child)(int idx, struct mlap2p_unique_id *id, void *arg),
	   void *arg);

int t_procs_start(struct t_procs *p, const struct mlap2p_unique_id *id);

/* 0 when every child exited 0; else the first non-zero status. */
int t_procs_wait(struct t_procs *p);

/* ---- moving a pattern by hand ---- */

int t_wait_ge(volatile uint64_t *p, uint64_t v);

uint32_t t_seed(int proto, int sender, int channel);

/* Bytes of each protocol buffer the pattern covers (head and tail ends). */
#define T_PATTERN_BYTES	4096

/*
 * Sender side of one connection: for each protocol with a buffer, write
 * the pattern at the start and the end of buffs[p], record the size in
 * sizesFifo, release tail = k, wait for head = k.  Then accept the
 * receiver's ptrExchange token.  0 or a step number.
 */
int t_send_pattern(struct mlap2p_comm *comm, int channel, int peer);

int t_recv_pattern(struct mlap2p_comm *comm, int channel, int peer);

/*
 * Both directions with @peer on @channel: the lower rank sends first.
 * Connections in both directions must exist.
 */
int t_exchange(struct mlap2p_comm *comm, int channel, int peer);

/* The device-visible mirror holds the wired connector (a real copy). */
int t_check_mirror(struct mlap2p_comm *comm, int channel, int peer, int dir);

/* ---- what a process holds ---- */

int t_fd_count(void);

/* Mappings and descriptors of mlap2p memfds in this process. */
int t_memfd_count(void);

/* ---- the data plane's state dump ---- */

/*
 * The "ops N single-copy M" of one link in mlap2p_dump_state(): the first
 * line containing @key (" -> 1 ch " is the send link to rank 1), or the
 * first link with @key NULL.  0, or -1 when there is no such line.
 */
int t_link_counts(struct mlap2p_comm *comm, const char *key,
		  unsigned long long *ops, unsigned long long *direct);
/* ... and its "split S": sends both cores copied (sender's link). */
int t_link_splits(struct mlap2p_comm *comm, const char *key,
		  unsigned long long *split);
/* The same summed over every link of direction @dir ("->" sends, "<-"
 * receives); -1 when there is none. */
int t_links_sum(struct mlap2p_comm *comm, const char *dir,
		unsigned long long *ops, unsigned long long *direct);
/* The collectives' line of mlap2p_dump_state(): how many ran each way,
 * in its order (ring, one-shot, pairs, direct-regions, direct-address).
 * 0, or -1 when there is no such line. */
#define T_COLL_WAYS 5
int t_coll_ways(struct mlap2p_comm *comm, unsigned long long *ways);
/*
 * Can a process write into its sibling's memory (process_vm_writev, what
 * the data plane does with a plain receive buffer across processes)?  Yama
 * or a missing CONFIG_CROSS_MEMORY_ATTACH may say no; root may always.
 */
int t_cma_between_siblings(void);
/*
 * Make cross-memory attach into or out of this process impossible even
 * for root: it may not be ptraced (not dumpable), and keeps no
 * CAP_SYS_PTRACE, which would override that.  0 or -errno.
 */
int t_refuse_cma(void);

#endif /* MLAP2P_TEST_HELPERS_H */
