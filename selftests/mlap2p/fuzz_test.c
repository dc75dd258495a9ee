// SPDX-License-Identifier: GPL-2.0
/*
 * fuzz_test: a structure-aware fuzzer of /dev/mlap2p and the "mlap2p"
 * generic netlink family.
 *
 * Unlike a generic syscall fuzzer it speaks the ABI: it allocates real
 * regions, exports them, passes the IPC handles (often mutated) to the
 * other workers through shared memory, imports, maps, remaps and unmaps
 * real cookies, and sends every ioctl with valid-looking arguments of
 * which a few fields are mutated.  FUZZ_PROCS processes of FUZZ_THREADS
 * threads each run at once; one of them (when started as root) is uid
 * 65534.  They pass their fds around a ring of unix sockets (SCM_RIGHTS),
 * fork children that act on inherited files and are sometimes killed in
 * the middle, and send genl requests, malformed ones included.
 *
 * Checks: every structured call returns 0 or an errno mlap2p(4) lists for
 * it; a successful MEM_ALLOC reports the rounded size; at the end, with
 * every process gone, the live_* counters of /sys/class/misc/mlap2p/ are
 * back where they started and the run made valid allocations, exports and
 * imports.  run_tests.sh then fails the program if the kernel log shows a
 * splat.
 *
 * Environment:
 *   MLAP2P_FUZZ_SEED     64-bit seed (default: from the clock); printed,
 *                        so a failing run can be repeated with it
 *   MLAP2P_FUZZ_SECONDS  run time (default 30, at most 120)
 * With the same seed each thread makes the same choices; what the kernel
 * answers still depends on how the threads interleave.
 */
#include "genl_util.h"
#include "mlap2p_util.h"
#include "kselftest_harness.h"

#include <dirent.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define FUZZ_PROCS		3
#define FUZZ_THREADS		2
#define FUZZ_MAX_FDS		8
#define FUZZ_MAX_HANDLES	64
#define FUZZ_MAX_MAPS		16
#define FUZZ_POOL		32	/* IPC handles shared by all workers */
#define FUZZ_DEFAULT_SECONDS	30
#define FUZZ_MAX_SECONDS	120
#define FUZZ_BAD_MAX		20	/* unexpected results printed */
#define FUZZ_GRACE		30	/* s a worker may take past its deadline */

/* Limits the fuzz runs under (restored after): they bound its memory. */
#define FUZZ_REGIONS_PER_FILE	48
#define FUZZ_MB_PER_FILE	4

/* Shared by every worker (MAP_SHARED): handles and tallies. */
struct fuzz_shared {
	__u8 pool[FUZZ_POOL][MLAP2P_IPC_HANDLE_SIZE];
	unsigned long ops, ok_allocs, ok_exports, ok_opens, ok_maps, forks;
	unsigned long bad;
};

struct fuzz_handle {
	int fd;
	__u32 id;
	__u64 cookie;
	__u64 size;
	bool owned;
};

struct fuzz_map {
	void *addr;
	size_t len;
	int prot;
};

/* One worker process; its threads share it under @lock. */
struct fuzz_worker {
	pthread_rwlock_t fdlock;	/* write: fd table changes */
	pthread_mutex_t lock;		/* the arrays below */
	pthread_mutex_t genl_lock;	/* one genl request at a time */
	int fds[FUZZ_MAX_FDS];
	int nr_fds;
	struct fuzz_handle h[FUZZ_MAX_HANDLES];
	int nr_h;
	struct fuzz_map maps[FUZZ_MAX_MAPS];
	int nr_maps;
	int ring_tx, ring_rx;		/* SCM_RIGHTS to the next, from the previous */
	int index;
	bool nobody;
	struct mlap2p_info info;
	struct gt_topo topo;		/* as at the start */
	struct fuzz_shared *sh;
	double deadline;
	__u64 seed;
};

struct fuzz_thread {
	struct fuzz_worker *w;
	__u64 rng;
	int tid;
	struct gt_sock gs;
	bool genl;
};

static double fuzz_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* xorshift64*: small, fast, and the same on every machine. */
static __u64 rnd(__u64 *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dULL;
}

static __u32 rnd_below(__u64 *s, __u32 n)
{
	return n ? (__u32)(rnd(s) % n) : 0;
}

/* True with probability 1/@n. */
static bool one_in(__u64 *s, __u32 n)
{
	return rnd_below(s, n) == 0;
}

static __u64 mix_seed(__u64 seed, __u64 salt)
{
	__u64 s = seed ^ (salt * 0x9e3779b97f4a7c15ULL);

	/* Never zero: xorshift would stay there. */
	rnd(&s);
	return s ? s : 1;
}

/* Mostly 0, sometimes one bit, sometimes anything. */
static __u32 rnd_field32(__u64 *s)
{
	if (!one_in(s, 8))
		return 0;
	return one_in(s, 2) ? 1U << rnd_below(s, 32) : (__u32)rnd(s);
}

static __u64 rnd_field64(__u64 *s)
{
	if (!one_in(s, 8))
		return 0;
	return one_in(s, 2) ? 1ULL << rnd_below(s, 64) : rnd(s);
}

static void bad(struct fuzz_thread *t, const char *what, int ret)
{
	unsigned long n = __atomic_add_fetch(&t->w->sh->bad, 1,
					     __ATOMIC_RELAXED);

	if (n <= FUZZ_BAD_MAX) {
		ksft_print_msg("fuzz: worker %d thread %d: %s gave %d (%s)\n",
			       t->w->index, t->tid, what, ret,
			       ret < 0 ? strerror(-ret) : "?");
		/* Every process here leaves with _exit(). */
		fflush(stdout);
	}
}

/* @ret must be 0 or one of the -errnos in @ok (0-terminated). */
static void expect(struct fuzz_thread *t, const char *what, int ret,
		   const int *ok)
{
	int i;

	if (!ret)
		return;
	for (i = 0; ok[i]; i++)
		if (ret == -ok[i])
			return;
	bad(t, what, ret);
}

/* The errnos mlap2p(4) lists, per call. */
static const int ok_info[] = { EFAULT, 0 };
static const int ok_dev_info[] = { EFAULT, EINVAL, 0 };
static const int ok_alloc[] = { EFAULT, EINVAL, ENOSPC, ENOMEM, EINTR, 0 };
static const int ok_release[] = { EFAULT, EINVAL, ENOENT, 0 };
static const int ok_get[] = { EFAULT, EINVAL, ENOENT, EACCES, EINTR, 0 };
static const int ok_open[] = { EFAULT, EINVAL, ENOENT, EACCES, ENOSPC,
			       ENOMEM, 0 };
static const int ok_peer[] = { EFAULT, EINVAL, 0 };
static const int ok_region[] = { EFAULT, EINVAL, ENOENT, 0 };
static const int ok_mmap[] = { EINVAL, EACCES, ENOMEM, 0 };
static const int ok_mprotect[] = { EACCES, ENOMEM, 0 };
static const int ok_mremap[] = { EFAULT, EINVAL, ENOMEM, 0 };

/* ------------------------------------------------------------------ */
/* State                                                               */
/* ------------------------------------------------------------------ */

/* A random fd of the worker, or -1.  Call with fdlock held. */
static int pick_fd(struct fuzz_thread *t)
{
	struct fuzz_worker *w = t->w;
	int fd = -1;

	pthread_mutex_lock(&w->lock);
	if (w->nr_fds)
		fd = w->fds[rnd_below(&t->rng, (__u32)w->nr_fds)];
	pthread_mutex_unlock(&w->lock);
	return fd;
}

/* A copy of a random known handle; false if none. */
static bool pick_handle(struct fuzz_thread *t, struct fuzz_handle *out)
{
	struct fuzz_worker *w = t->w;
	bool found = false;

	pthread_mutex_lock(&w->lock);
	if (w->nr_h) {
		*out = w->h[rnd_below(&t->rng, (__u32)w->nr_h)];
		found = true;
	}
	pthread_mutex_unlock(&w->lock);
	return found;
}

static void add_handle(struct fuzz_thread *t, const struct fuzz_handle *h)
{
	struct fuzz_worker *w = t->w;

	pthread_mutex_lock(&w->lock);
	if (w->nr_h < FUZZ_MAX_HANDLES)
		w->h[w->nr_h++] = *h;
	else
		w->h[rnd_below(&t->rng, FUZZ_MAX_HANDLES)] = *h;
	pthread_mutex_unlock(&w->lock);
}

/* Forget the handles of @fd (closed), or handle @id of it (id != 0). */
static void drop_handles(struct fuzz_worker *w, int fd, __u32 id)
{
	int i;

	pthread_mutex_lock(&w->lock);
	for (i = 0; i < w->nr_h;) {
		if (w->h[i].fd == fd && (!id || w->h[i].id == id))
			w->h[i] = w->h[--w->nr_h];
		else
			i++;
	}
	pthread_mutex_unlock(&w->lock);
}

/* Add @fd to the table, or close it when the table is full. */
static void add_fd(struct fuzz_worker *w, int fd)
{
	pthread_mutex_lock(&w->lock);
	if (w->nr_fds < FUZZ_MAX_FDS) {
		w->fds[w->nr_fds++] = fd;
		fd = -1;
	}
	pthread_mutex_unlock(&w->lock);
	if (fd >= 0)
		close(fd);
}

/* ------------------------------------------------------------------ */
/* ioctls                                                              */
/* ------------------------------------------------------------------ */

static __u64 rnd_size(struct fuzz_thread *t)
{
	const __u64 page = kt_page_size();

	switch (rnd_below(&t->rng, 10)) {
	case 0:
		return 0;
	case 1:
		return 1;
	case 2:
		return 2ULL << 20;
	case 3:
		return (2ULL << 20) + 1;
	case 4:
		return one_in(&t->rng, 2) ? 1ULL << 36 : rnd(&t->rng);
	case 5:
		return (__u64)rnd_below(&t->rng, 4 << 20) + 1;
	default:
		return page * (1 + rnd_below(&t->rng, 16));
	}
}

static __u32 rnd_mla(struct fuzz_thread *t)
{
	__u32 total = kt_total_mlas(&t->w->info);

	if (one_in(&t->rng, 10))
		return one_in(&t->rng, 2) ? total : (__u32)rnd(&t->rng);
	return kt_local_mla(&t->w->info) +
	       rnd_below(&t->rng, t->w->info.num_devices);
}

static void op_alloc(struct fuzz_thread *t, int fd)
{
	struct mlap2p_mem_alloc a;
	struct fuzz_handle h;
	__u64 size = rnd_size(t);
	int ret;

	kt_alloc_args(&a, size, rnd_mla(t));
	if (one_in(&t->rng, 6))
		a.flags = one_in(&t->rng, 2) ? MLAP2P_MEM_F_CONTIG :
					       rnd_field32(&t->rng);
	a.pad = rnd_field32(&t->rng);
	a.reserved[rnd_below(&t->rng, 2)] = rnd_field64(&t->rng);
	ret = kt_ioctl(fd, MLAP2P_IOC_MEM_ALLOC, &a);
	expect(t, "MEM_ALLOC", ret, ok_alloc);
	if (ret)
		return;
	if (a.alloc_size != kt_round_up(size, kt_page_size()) ||
	    a.flags & ~MLAP2P_MEM_F_ALL || a.pad || a.reserved[0] ||
	    a.reserved[1])
		bad(t, "MEM_ALLOC result", 0);
	__atomic_add_fetch(&t->w->sh->ok_allocs, 1, __ATOMIC_RELAXED);
	h.fd = fd;
	h.id = a.handle;
	h.cookie = a.mmap_cookie;
	h.size = a.alloc_size;
	h.owned = true;
	add_handle(t, &h);
}

/* MEM_FREE or IPC_CLOSE_HANDLE of a known handle, sometimes the wrong one. */
static void op_release(struct fuzz_thread *t, int fd)
{
	struct mlap2p_handle_op op;
	struct fuzz_handle h;
	bool owned;
	int ret;

	if (!pick_handle(t, &h) || one_in(&t->rng, 8)) {
		h.fd = fd;
		h.id = rnd_below(&t->rng, 3) ? rnd_below(&t->rng, 64) :
					       (__u32)rnd(&t->rng);
		h.owned = one_in(&t->rng, 2);
	}
	owned = one_in(&t->rng, 8) ? !h.owned : h.owned;
	kt_handle_args(&op, h.id);
	op.flags = rnd_field32(&t->rng);
	op.reserved = rnd_field64(&t->rng);
	ret = kt_ioctl(h.fd, owned ? MLAP2P_IOC_MEM_FREE :
					 MLAP2P_IOC_IPC_CLOSE_HANDLE, &op);
	expect(t, owned ? "MEM_FREE" : "IPC_CLOSE_HANDLE", ret, ok_release);
	if (!ret || ret == -ENOENT)
		drop_handles(t->w, h.fd, h.id);
}

static void op_export(struct fuzz_thread *t)
{
	struct mlap2p_ipc_get g;
	struct fuzz_handle h;
	int ret;

	if (!pick_handle(t, &h))
		return;
	kt_ipc_get_args(&g, h.id, one_in(&t->rng, 3) ?
				       MLAP2P_IPC_F_RDONLY : 0);
	if (one_in(&t->rng, 10))
		g.flags = rnd_field32(&t->rng);
	g.reserved[rnd_below(&t->rng, 2)] = rnd_field64(&t->rng);
	ret = kt_ioctl(h.fd, MLAP2P_IOC_IPC_GET_HANDLE, &g);
	expect(t, "IPC_GET_HANDLE", ret, ok_get);
	if (ret)
		return;
	__atomic_add_fetch(&t->w->sh->ok_exports, 1, __ATOMIC_RELAXED);
	memcpy(t->w->sh->pool[rnd_below(&t->rng, FUZZ_POOL)], g.ipc,
	       sizeof(g.ipc));
}

static void mutate(struct fuzz_thread *t, __u8 *buf, size_t len)
{
	int n = 1 + (int)rnd_below(&t->rng, 4);

	while (n--) {
		size_t i = rnd_below(&t->rng, (__u32)len);

		if (one_in(&t->rng, 2))
			buf[i] ^= (__u8)(1U << rnd_below(&t->rng, 8));
		else
			buf[i] = (__u8)rnd(&t->rng);
	}
}

static void op_import(struct fuzz_thread *t, int fd)
{
	__u8 ipc[MLAP2P_IPC_HANDLE_SIZE];
	struct mlap2p_ipc_open o;
	struct fuzz_handle h;
	int ret;

	memcpy(ipc, t->w->sh->pool[rnd_below(&t->rng, FUZZ_POOL)],
	       sizeof(ipc));
	if (one_in(&t->rng, 4))
		mutate(t, ipc, sizeof(ipc));
	kt_ipc_open_args(&o, ipc);
	o.flags = rnd_field32(&t->rng);
	o.reserved[rnd_below(&t->rng, 2)] = rnd_field64(&t->rng);
	ret = kt_ioctl(fd, MLAP2P_IOC_IPC_OPEN_HANDLE, &o);
	expect(t, "IPC_OPEN_HANDLE", ret, ok_open);
	if (ret)
		return;
	if (o.access > 1 || !o.size || o.size % kt_page_size())
		bad(t, "IPC_OPEN_HANDLE result", 0);
	__atomic_add_fetch(&t->w->sh->ok_opens, 1, __ATOMIC_RELAXED);
	h.fd = fd;
	h.id = o.handle;
	h.cookie = o.mmap_cookie;
	h.size = o.size;
	h.owned = false;
	add_handle(t, &h);
}

static void op_query(struct fuzz_thread *t, int fd)
{
	struct mlap2p_region_info ri;
	struct mlap2p_peer_query q;
	struct mlap2p_dev_info d;
	struct mlap2p_info info;
	struct fuzz_handle h;
	__u32 cores;

	switch (rnd_below(&t->rng, 4)) {
	case 0:
		expect(t, "GET_INFO", kt_get_info(fd, &info), ok_info);
		break;
	case 1:
		kt_dev_info_args(&d, rnd_mla(t));
		d.flags = rnd_field32(&t->rng);
		d.reserved[rnd_below(&t->rng, 2)] = rnd_field64(&t->rng);
		expect(t, "DEV_INFO",
		       kt_ioctl(fd, MLAP2P_IOC_DEV_INFO, &d), ok_dev_info);
		break;
	case 2:
		cores = t->w->info.cores_per_node * t->w->info.pod_nodes + 2;
		kt_peer_args(&q, rnd_below(&t->rng, cores),
				 one_in(&t->rng, 10) ? (__u32)rnd(&t->rng) :
				 rnd_below(&t->rng, cores));
		q.flags = rnd_field32(&t->rng);
		q.reserved[rnd_below(&t->rng, 2)] = rnd_field64(&t->rng);
		expect(t, "CAN_ACCESS_PEER",
		       kt_ioctl(fd, MLAP2P_IOC_CAN_ACCESS_PEER, &q),
		       ok_peer);
		break;
	default:
		if (!pick_handle(t, &h)) {
			h.fd = fd;
			h.id = rnd_below(&t->rng, 64);
		}
		kt_region_info_args(&ri, h.id);
		ri.flags = rnd_field32(&t->rng);
		ri.reserved[rnd_below(&t->rng, 2)] = rnd_field64(&t->rng);
		expect(t, "REGION_INFO",
		       kt_ioctl(h.fd, MLAP2P_IOC_REGION_INFO, &ri),
		       ok_region);
		break;
	}
}

/* Any command number of ours (or near it), any size, odd pointers. */
static void op_raw_ioctl(struct fuzz_thread *t, int fd)
{
	static const unsigned long cmds[] = {
		MLAP2P_IOC_GET_INFO, MLAP2P_IOC_DEV_INFO,
		MLAP2P_IOC_MEM_ALLOC, MLAP2P_IOC_MEM_FREE,
		MLAP2P_IOC_IPC_GET_HANDLE, MLAP2P_IOC_IPC_OPEN_HANDLE,
		MLAP2P_IOC_IPC_CLOSE_HANDLE, MLAP2P_IOC_CAN_ACCESS_PEER,
		MLAP2P_IOC_REGION_INFO,
	};
	__u64 buf[32];
	unsigned long cmd;
	void *arg = buf;
	size_t i;

	for (i = 0; i < sizeof(buf) / sizeof(buf[0]); i++)
		buf[i] = one_in(&t->rng, 2) ? 0 : rnd(&t->rng);
	cmd = cmds[rnd_below(&t->rng, sizeof(cmds) / sizeof(cmds[0]))];
	switch (rnd_below(&t->rng, 4)) {
	case 0:		/* another size or direction */
		cmd ^= (unsigned long)(1U << (16 + rnd_below(&t->rng, 16)));
		break;
	case 1:		/* another number */
		cmd = _IOC(rnd_below(&t->rng, 4), MLAP2P_IOC_MAGIC,
			   rnd_below(&t->rng, 256), rnd_below(&t->rng, 256));
		break;
	default:
		break;
	}
	switch (rnd_below(&t->rng, 6)) {
	case 0:
		arg = NULL;
		break;
	case 1:
		arg = (void *)(unsigned long)rnd(&t->rng);
		break;
	default:
		break;
	}
	ioctl(fd, cmd, arg);
	/* The result is whatever it is; the kernel must only survive it. */
	if (!ioctl(fd, MLAP2P_IOC_MEM_ALLOC, NULL))
		bad(t, "MEM_ALLOC(NULL)", 0);
}

/* ------------------------------------------------------------------ */
/* mmap                                                                */
/* ------------------------------------------------------------------ */

static void op_map(struct fuzz_thread *t)
{
	const size_t page = kt_page_size();
	struct fuzz_worker *w = t->w;
	struct fuzz_handle h;
	size_t len, off;
	int prot, flags;
	void *p;

	if (!pick_handle(t, &h))
		return;
	off = rnd_below(&t->rng, (__u32)(h.size / page) + 1) * page;
	len = one_in(&t->rng, 8) ? (size_t)h.size + page :
				   (1 + rnd_below(&t->rng, 4)) * page;
	prot = one_in(&t->rng, 3) ? PROT_READ : PROT_READ | PROT_WRITE;
	flags = one_in(&t->rng, 10) ? MAP_PRIVATE : MAP_SHARED;
	p = mmap(NULL, len, prot, flags, h.fd, (off_t)(h.cookie + off));
	if (p == MAP_FAILED) {
		expect(t, "mmap", -errno, ok_mmap);
		return;
	}
	if (flags != MAP_SHARED || off + len > h.size)
		bad(t, "mmap accepted", 0);
	__atomic_add_fetch(&w->sh->ok_maps, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&w->lock);
	if (w->nr_maps == FUZZ_MAX_MAPS) {
		munmap(w->maps[0].addr, w->maps[0].len);
		w->maps[0] = w->maps[--w->nr_maps];
	}
	w->maps[w->nr_maps].addr = p;
	w->maps[w->nr_maps].len = len;
	w->maps[w->nr_maps].prot = prot;
	w->nr_maps++;
	pthread_mutex_unlock(&w->lock);
}

/* Touch, mprotect, mremap, madvise or unmap a mapping of this process. */
static void op_vma(struct fuzz_thread *t)
{
	const size_t page = kt_page_size();
	struct fuzz_worker *w = t->w;
	struct fuzz_map *m;
	volatile char *c;
	size_t i, len;
	int prot;
	void *p;

	pthread_mutex_lock(&w->lock);
	if (!w->nr_maps) {
		pthread_mutex_unlock(&w->lock);
		return;
	}
	i = rnd_below(&t->rng, (__u32)w->nr_maps);
	m = &w->maps[i];
	c = m->addr;
	switch (rnd_below(&t->rng, 6)) {
	case 0:
	case 1:
		for (i = 0; i < m->len; i += page) {
			if (m->prot & PROT_WRITE)
				c[i] = (char)(c[i] + 1);
			else
				(void)c[i];
		}
		break;
	case 2:
		prot = one_in(&t->rng, 2) ? PROT_READ : PROT_READ | PROT_WRITE;
		if (mprotect(m->addr, m->len, prot))
			expect(t, "mprotect", -errno, ok_mprotect);
		else
			m->prot = prot;
		break;
	case 3:
		/* Growing is refused (VM_DONTEXPAND); shrinking is not. */
		len = one_in(&t->rng, 2) ? m->len + page : page;
		p = mremap(m->addr, m->len, len,
			   one_in(&t->rng, 2) ? MREMAP_MAYMOVE : 0);
		if (p == MAP_FAILED) {
			expect(t, "mremap", -errno, ok_mremap);
			break;
		}
		if (len > m->len)
			bad(t, "mremap grew", 0);
		m->addr = p;
		m->len = len;
		break;
	case 4:
		madvise(m->addr, m->len, one_in(&t->rng, 2) ? MADV_DOFORK :
							     MADV_DONTNEED);
		break;
	default:
		munmap(m->addr, m->len);
		*m = w->maps[--w->nr_maps];
		break;
	}
	pthread_mutex_unlock(&w->lock);
}

/* ------------------------------------------------------------------ */
/* fds: open, close, dup, SCM_RIGHTS, fork                             */
/* ------------------------------------------------------------------ */

static void send_fd(int sock, int fd)
{
	char data = 'f';
	struct iovec iov = { &data, 1 };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = u.buf, .msg_controllen = sizeof(u.buf),
	};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	sendmsg(sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* An fd from the ring, or -1. */
static int recv_fd(int sock)
{
	char data;
	struct iovec iov = { &data, 1 };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = u.buf, .msg_controllen = sizeof(u.buf),
	};
	struct cmsghdr *cm;
	int fd = -1;

	if (recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) <= 0)
		return -1;
	cm = CMSG_FIRSTHDR(&mh);
	if (cm && cm->cmsg_type == SCM_RIGHTS &&
	    cm->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

/* Changes to the fd table, with fdlock held for writing. */
static void op_fds(struct fuzz_thread *t)
{
	struct fuzz_worker *w = t->w;
	int fd, i;

	pthread_rwlock_wrlock(&w->fdlock);
	switch (rnd_below(&t->rng, 5)) {
	case 0:
		fd = kt_dev_open();
		if (fd >= 0)
			add_fd(w, fd);
		break;
	case 1:
		if (w->nr_fds > 1) {
			i = (int)rnd_below(&t->rng, (__u32)w->nr_fds);
			fd = w->fds[i];
			w->fds[i] = w->fds[--w->nr_fds];
			drop_handles(w, fd, 0);
			close(fd);
		}
		break;
	case 2:
		if (w->nr_fds) {
			fd = dup(w->fds[rnd_below(&t->rng, (__u32)w->nr_fds)]);
			if (fd >= 0)
				add_fd(w, fd);
		}
		break;
	case 3:
		if (w->nr_fds)
			send_fd(w->ring_tx,
				w->fds[rnd_below(&t->rng, (__u32)w->nr_fds)]);
		break;
	default:
		fd = recv_fd(w->ring_rx);
		if (fd >= 0)
			add_fd(w, fd);
		break;
	}
	pthread_rwlock_unlock(&w->fdlock);
}

static void thread_ops(struct fuzz_thread *t, int n, bool in_child);

/*
 * A child acts on the inherited files for a moment (its mappings are not
 * inherited, so it only issues ioctls), and is sometimes killed mid-way.
 */
static void op_fork(struct fuzz_thread *t)
{
	struct fuzz_worker *w = t->w;
	struct timespec ts = { 0, (long)rnd_below(&t->rng, 5) * 1000000L };
	pid_t pid;

	pthread_rwlock_rdlock(&w->fdlock);
	pid = fork();
	if (pid == 0) {
		/* The other thread may have held these: this copy is ours. */
		pthread_mutex_init(&w->lock, NULL);
		pthread_rwlock_init(&w->fdlock, NULL);
		t->genl = false;	/* the socket is the parent's */
		/* Gone with the thread that forked it, or in 20 s at most. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(20);
		t->rng = mix_seed(t->rng, (__u64)getpid());
		thread_ops(t, 1 + (int)rnd_below(&t->rng, 40), true);
		_exit(0);
	}
	pthread_rwlock_unlock(&w->fdlock);
	if (pid < 0)
		return;
	__atomic_add_fetch(&w->sh->forks, 1, __ATOMIC_RELAXED);
	if (one_in(&t->rng, 3)) {
		nanosleep(&ts, NULL);
		kill(pid, SIGKILL);
	}
	waitpid(pid, NULL, 0);
}

/* ------------------------------------------------------------------ */
/* genl                                                                */
/* ------------------------------------------------------------------ */

static void op_genl(struct fuzz_thread *t)
{
	static __thread struct gt_regions l;
	struct gt_sock *s = &t->gs;
	struct nlattr *nest;
	struct gt_topo topo;
	struct gt_msg m;
	int ret;
	__u64 id;
	__u8 cmd;

	if (!t->genl)
		return;
	pthread_mutex_lock(&t->w->genl_lock);
	switch (rnd_below(&t->rng, 7)) {
	case 0:
		id = one_in(&t->rng, 2) ? 1 + rnd_below(&t->rng, 4096) :
					  rnd(&t->rng);
		ret = gt_get_regions(s, id ? id : 1, MLAP2P_NO_MLA, &l);
		break;
	case 1:
		ret = gt_get_regions(s, 0, one_in(&t->rng, 2) ?
					   MLAP2P_NO_MLA : rnd_mla(t), &l);
		break;
	case 2:
		gt_cmd(s, &m, MLAP2P_CMD_GET_STATS, 0);
		ret = gt_request(s, &m, NULL, NULL);
		break;
	case 3:
		gt_cmd(s, &m, MLAP2P_CMD_GET_TOPO,
		       one_in(&t->rng, 2) ? NLM_F_DUMP : 0);
		ret = gt_request(s, &m, NULL, NULL);
		break;
	case 4:
		/*
		 * Root sets only the topology there is (EBUSY while regions
		 * live, else no change but a generation); nobody anything.
		 */
		topo = t->w->topo;
		if (t->w->nobody) {
			topo.lnc = (__u32)rnd(&t->rng) % 4;
			topo.num_devices = (__u32)rnd(&t->rng) % 80;
			topo.capacity = rnd(&t->rng);
		}
		ret = gt_set_topo(s, &topo);
		break;
	default:
		/*
		 * Attributes of any type and length, anywhere; no random
		 * SET_TOPO from root, which a lucky value could apply.
		 */
		cmd = (__u8)(1 + rnd_below(&t->rng, MLAP2P_CMD_MAX + 1));
		if (cmd == MLAP2P_CMD_SET_TOPO && !t->w->nobody)
			cmd = MLAP2P_CMD_GET_TOPO;
		gt_cmd(s, &m, cmd, one_in(&t->rng, 2) ? NLM_F_DUMP : 0);
		nest = NULL;
		if (one_in(&t->rng, 2))
			nest = gt_nest_start(&m, MLAP2P_A_REGION);
		{
			__u64 v = rnd(&t->rng);

			gt_put(&m, (__u16)rnd_below(&t->rng, MLAP2P_A_MAX + 3),
			       &v, rnd_below(&t->rng, 9));
		}
		if (nest)
			gt_nest_end(&m, nest);
		ret = gt_request(s, &m, NULL, NULL);
		break;
	}
	/* Any answer will do, but there must be one. */
	if (ret == -ETIMEDOUT)
		bad(t, "genl request (no answer)", ret);
	pthread_mutex_unlock(&t->w->genl_lock);
}

/* ------------------------------------------------------------------ */
/* Workers                                                             */
/* ------------------------------------------------------------------ */

static void thread_ops(struct fuzz_thread *t, int n, bool in_child)
{
	struct fuzz_worker *w = t->w;
	__u32 op;
	int fd;

	while (n-- > 0 && fuzz_now() < w->deadline) {
		__atomic_add_fetch(&w->sh->ops, 1, __ATOMIC_RELAXED);
		op = rnd_below(&t->rng, 100);
		if (op < 8 && !in_child) {
			op_fds(t);
			continue;
		}
		if (op < 10 && !in_child) {
			op_fork(t);
			continue;
		}
		if (op < 18 && !in_child) {
			pthread_rwlock_rdlock(&w->fdlock);
			op_map(t);
			pthread_rwlock_unlock(&w->fdlock);
			continue;
		}
		if (op < 26 && !in_child) {
			op_vma(t);
			continue;
		}
		if (op < 32) {
			op_genl(t);
			continue;
		}
		pthread_rwlock_rdlock(&w->fdlock);
		fd = pick_fd(t);
		if (fd < 0) {
			pthread_rwlock_unlock(&w->fdlock);
			continue;
		}
		if (op < 50)
			op_alloc(t, fd);
		else if (op < 62)
			op_release(t, fd);
		else if (op < 72)
			op_export(t);
		else if (op < 84)
			op_import(t, fd);
		else if (op < 94)
			op_query(t, fd);
		else
			op_raw_ioctl(t, fd);
		pthread_rwlock_unlock(&w->fdlock);
	}
}

static void *thread_main(void *arg)
{
	struct fuzz_thread *t = arg;

	t->genl = !gt_connect(&t->gs);
	thread_ops(t, 1 << 30, false);
	if (t->genl)
		gt_close(&t->gs);
	return NULL;
}

static int worker_main(struct fuzz_worker *w, pid_t test)
{
	struct fuzz_thread t[FUZZ_THREADS];
	pthread_t tid[FUZZ_THREADS];
	int i, fd;

	/*
	 * A change of uid clears the parent-death signal, so it is set
	 * after; then the test may already have gone (killed on its
	 * timeout): a worker never outlives it, with the memory it holds.
	 */
	if (w->nobody && kt_become_nobody())
		return 3;
	if (prctl(PR_SET_PDEATHSIG, SIGKILL))
		return 2;
	if (getppid() != test)
		return 2;
	pthread_rwlock_init(&w->fdlock, NULL);
	pthread_mutex_init(&w->lock, NULL);
	pthread_mutex_init(&w->genl_lock, NULL);
	fd = kt_dev_open();
	if (fd < 0)
		return 4;
	add_fd(w, fd);
	for (i = 0; i < FUZZ_THREADS; i++) {
		t[i].w = w;
		t[i].tid = i;
		t[i].rng = mix_seed(w->seed, (__u64)(w->index * 16 + i + 1));
		if (pthread_create(&tid[i], NULL, thread_main, &t[i]))
			return 5;
	}
	for (i = 0; i < FUZZ_THREADS; i++)
		pthread_join(tid[i], NULL);
	/* Everything goes with the process; drain fds still in flight. */
	while ((fd = recv_fd(w->ring_rx)) >= 0)
		close(fd);
	return 0;
}

static unsigned long env_ul(const char *name, unsigned long dflt)
{
	const char *v = getenv(name);
	char *end;
	unsigned long long n;

	if (!v || !*v)
		return dflt;
	errno = 0;
	n = strtoull(v, &end, 0);
	return errno || *end ? dflt : (unsigned long)n;
}

/* ------------------------------------------------------------------ */
/* A worker that does not finish                                      */
/* ------------------------------------------------------------------ */

/*
 * Print @path's lines after @indent; nothing if it cannot be read.  Of a
 * stat file only "pid (comm) state": the rest is numbers nobody reads.
 */
static void fuzz_show_file(const char *path, const char *indent)
{
	char line[512], *p;
	FILE *f = fopen(path, "re");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		p = strrchr(line, ')');
		if (!strcmp(strrchr(path, '/'), "/stat") && p &&
		    strlen(p) >= 4) {
			p[3] = '\n';	/* ") S" stays */
			p[4] = '\0';
		}
		ksft_print_msg("%s%s%s", indent, line,
			       strchr(line, '\n') ? "" : "\n");
	}
	fclose(f);
}

/* The parent of process @pid from /proc/@pid/stat, or -1. */
static pid_t fuzz_ppid(pid_t pid)
{
	char path[64], buf[512], *p;
	int ppid = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	/* "pid (comm) state ppid ...": comm may hold anything but ')'. */
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
		sscanf(p + 1, " %*c %d", &ppid);
	fclose(f);
	return ppid;
}

/*
 * What each task of @pid and of its descendants is blocked in: the state
 * line, wchan, the syscall and (as root) the kernel stack.  With @kill_it,
 * SIGKILL each process once it and its descendants have been shown.
 */
static void fuzz_show_tree(pid_t pid, bool kill_it)
{
	static const char *const what[][2] = {
		{ "stat", "    stat " }, { "wchan", "    wchan " },
		{ "syscall", "    syscall " }, { "stack", "    " },
	};
	char path[96];
	struct dirent *e;
	size_t i;
	DIR *d;
	int tid;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	while (d && (e = readdir(d))) {
		tid = atoi(e->d_name);
		if (tid <= 0)
			continue;
		ksft_print_msg("  pid %d task %d:\n", pid, tid);
		for (i = 0; i < sizeof(what) / sizeof(what[0]); i++) {
			snprintf(path, sizeof(path), "/proc/%d/task/%d/%s",
				 pid, tid, what[i][0]);
			fuzz_show_file(path, what[i][1]);
		}
	}
	if (d)
		closedir(d);
	/* Children first: once @pid is gone they are init's. */
	d = opendir("/proc");
	while (d && (e = readdir(d))) {
		tid = atoi(e->d_name);
		if (tid > 0 && fuzz_ppid(tid) == pid)
			fuzz_show_tree(tid, kill_it);
	}
	if (d)
		closedir(d);
	if (kill_it)
		kill(pid, SIGKILL);
}

/*
 * Wait for worker @i until @deadline.  Past it, show what its tasks and
 * its children's are blocked in and kill them all; false then.  Either
 * way *@status is kt_wait()'s.
 */
static bool fuzz_reap(int i, pid_t pid, double deadline, int *status)
{
	const struct timespec tick = { 0, 20 * 1000 * 1000 };
	bool done = false;
	siginfo_t si;

	for (;;) {
		memset(&si, 0, sizeof(si));
		if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT))
			done = errno != EINTR;	/* kt_wait() says why */
		else
			done = si.si_pid == pid;
		if (done || fuzz_now() >= deadline)
			break;
		nanosleep(&tick, NULL);
	}
	if (!done) {
		ksft_print_msg("fuzz: worker %d (pid %d) is still running %d s after its deadline; killing it and its children:\n",
			       i, pid, FUZZ_GRACE);
		fuzz_show_tree(pid, true);
		fflush(stdout);
	}
	*status = kt_wait(pid);
	return done;
}

FIXTURE(fuzz) {
	unsigned long regions, mb;
	bool params;
};

FIXTURE_SETUP(fuzz)
{
	self->params = geteuid() == 0 &&
		       !kt_param_read("max_regions_per_file",
					  &self->regions) &&
		       !kt_param_read("max_bytes_per_file_mb", &self->mb);
	if (self->params) {
		ASSERT_EQ(0, kt_param_write("max_regions_per_file",
						FUZZ_REGIONS_PER_FILE));
		ASSERT_EQ(0, kt_param_write("max_bytes_per_file_mb",
						FUZZ_MB_PER_FILE));
	}
}

FIXTURE_TEARDOWN(fuzz)
{
	if (self->params) {
		EXPECT_EQ(0, kt_param_write("max_regions_per_file",
						self->regions));
		EXPECT_EQ(0, kt_param_write("max_bytes_per_file_mb",
						self->mb));
	}
}

TEST_F_TIMEOUT(fuzz, uapi_and_genl, FUZZ_MAX_SECONDS + 60)
{
	struct kt_counters before, after;
	struct fuzz_worker w[FUZZ_PROCS];
	int ring[FUZZ_PROCS][2];
	struct fuzz_shared *sh;
	pid_t pid[FUZZ_PROCS];
	unsigned long secs;
	struct gt_sock gs;
	struct gt_topo topo;
	struct mlap2p_info info;
	pid_t test = getpid();
	int fd, i, status;
	__u64 seed;

	seed = env_ul("MLAP2P_FUZZ_SEED", 0);
	if (!seed)
		seed = ((__u64)time(NULL) << 20) ^ (__u64)getpid();
	secs = env_ul("MLAP2P_FUZZ_SECONDS", FUZZ_DEFAULT_SECONDS);
	if (secs > FUZZ_MAX_SECONDS)
		secs = FUZZ_MAX_SECONDS;
	ksft_print_msg("fuzz: MLAP2P_FUZZ_SEED=%llu MLAP2P_FUZZ_SECONDS=%lu (%d processes x %d threads)\n",
		       (unsigned long long)seed, secs, FUZZ_PROCS,
		       FUZZ_THREADS);
	/* The harness leaves with _exit(): flush, or the seed is lost. */
	fflush(stdout);

	fd = kt_dev_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, kt_get_info(fd, &info));
	close(fd);
	memset(&topo, 0, sizeof(topo));
	gt_topo_none(&topo);
	if (!gt_connect(&gs)) {
		gt_get_topo(&gs, &topo);
		gt_close(&gs);
	}
	ASSERT_EQ(0, kt_counters_read(&before));

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, sh);
	memset(sh, 0, sizeof(*sh));
	for (i = 0; i < FUZZ_PROCS; i++)
		ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0,
					ring[i]));

	for (i = 0; i < FUZZ_PROCS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].index = i;
		w[i].nobody = geteuid() == 0 && i == FUZZ_PROCS - 1;
		w[i].info = info;
		w[i].topo = topo;
		w[i].sh = sh;
		w[i].seed = seed;
		w[i].deadline = fuzz_now() + (double)secs;
		w[i].ring_tx = ring[(i + 1) % FUZZ_PROCS][0];
		w[i].ring_rx = ring[i][1];
		pid[i] = fork();
		ASSERT_LE(0, pid[i]);
		if (pid[i] == 0)
			_exit(worker_main(&w[i], test));
	}
	for (i = 0; i < FUZZ_PROCS; i++) {
		close(ring[i][0]);
		close(ring[i][1]);
	}
	for (i = 0; i < FUZZ_PROCS; i++) {
		EXPECT_TRUE(fuzz_reap(i, pid[i], w[i].deadline + FUZZ_GRACE,
				      &status));
		EXPECT_EQ(0, status) {
			TH_LOG("worker %d", i);
		}
	}

	ksft_print_msg("fuzz: %lu operations, %lu allocations, %lu exports, %lu imports, %lu mappings, %lu forks; %lu unexpected\n",
		       sh->ops, sh->ok_allocs, sh->ok_exports, sh->ok_opens,
		       sh->ok_maps, sh->forks, sh->bad);
	fflush(stdout);
	EXPECT_EQ(0, sh->bad) {
		TH_LOG("replay with MLAP2P_FUZZ_SEED=%llu",
		       (unsigned long long)seed);
	}
	/* It must have spoken the ABI, not only been refused. */
	EXPECT_LT(0, sh->ok_allocs);
	EXPECT_LT(0, sh->ok_exports);
	EXPECT_LT(0, sh->ok_opens);
	EXPECT_LT(0, sh->ok_maps);

	/* Every process is gone: the live counters are back. */
	EXPECT_TRUE(kt_counters_settle(&before, &after, 5000)) {
		kt_counters_log("before", &before);
		kt_counters_log("after", &after);
	}
	ASSERT_EQ(0, kt_counters_read(&after));
	/* The module saw them too: each MEM_ALLOC that returned 0 is one. */
	ksft_print_msg("fuzz: the module's allocs counter went from %llu to %llu\n",
		       (unsigned long long)before.allocs,
		       (unsigned long long)after.allocs);
	fflush(stdout);
	EXPECT_LE(before.allocs + sh->ok_allocs, after.allocs);
	munmap(sh, sizeof(*sh));
}

KT_TEST_MAIN
