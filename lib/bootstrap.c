// SPDX-License-Identifier: MIT
/*
 * Bootstrap: how ranks find each other before any transport exists.
 *
 * The unique id carries a random magic and the address of a root: a
 * detached thread started by mlap2p_get_unique_id() (or, with NCCL_COMM_ID,
 * by rank 0).  Each rank listens on its own TCP socket, connects to the
 * root and sends its listening address and ncclPeerInfo; once all nranks
 * have checked in the root sends everyone the whole table (the all-gather)
 * and leaves.  A rank that never arrives is named: the root gives up at the
 * earliest deadline of the ranks that did arrive and tells each of them
 * which ranks are missing.
 *
 * After that, ranks talk point to point, one TCP connection per message as
 * NCCL does.  Each communicator runs one thread that accepts those
 * connections: it queues tagged messages for bootstrapRecv() and answers
 * the remote-allocation service (bootstrapRemAlloc, the relay's memory, as
 * in NCCL 2.7).  Every connection starts with the id's magic; anything
 * else is dropped.  Every wait is bounded by MLAP2P_BOOTSTRAP_TIMEOUT and
 * checks the peer's liveness once a second, so a dead or missing rank
 * turns into an error that names it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "bootstrap.h"
#include "core.h"
#include "log.h"
#include "param.h"
#include "socket.h"
#include "util.h"

#define BS_ID_TAG		0x44494c4dU	/* "MLID" */
#define BS_ID_F_RANK0_ROOT	0x1		/* NCCL_COMM_ID: rank 0 roots */
#define BS_IO_MS		5000		/* one message's transfer */
#define BS_GRACE_MS		2000		/* root answers before ranks give up */
#define BS_MAX_MSG		(64U << 20)
#define BS_MAX_RANKS		65536

struct bs_id {
	uint32_t tag;
	uint32_t flags;
	uint64_t magic;
	union mlap2p_sockaddr root;
};
_Static_assert(sizeof(struct bs_id) <= MLAP2P_UNIQUE_ID_BYTES, "unique id");

enum bs_type {
	BS_HELLO = 1,
	BS_TABLE,
	BS_ERROR,
	BS_MSG,
	BS_REMALLOC,
	BS_REMFREE,
	BS_REPLY,
};

struct bs_hdr {
	uint64_t magic;
	uint32_t type;
	int32_t rank;		/* sender */
	int32_t tag;		/* message tag; errno in BS_ERROR/BS_REPLY */
	uint32_t size;		/* payload bytes that follow */
};

struct bs_rankinfo {
	union mlap2p_sockaddr addr;	/* the rank's listener */
	uint32_t pad;
	struct ncclPeerInfo peer;
};

struct bs_hello {
	int32_t nranks;
	uint32_t timeoutMs;	/* the rank's bootstrap timeout, 0 = none */
	struct bs_rankinfo info;
};

struct bs_remalloc_rep {
	int32_t id;
	uint32_t pad;
	uint64_t ptr;
	struct ncclRtIpcMemHandle ipc;
};

struct bs_msg {
	struct bs_msg *next;
	int rank;
	int tag;
	uint32_t size;
	char data[];
};

struct bs_alloc {
	struct bs_alloc *next;
	int id;
	void *ptr;
};

struct mlap2p_bootstrap {
	struct ncclComm *comm;
	int rank;
	int nranks;
	uint64_t magic;
	long timeoutMs;
	union mlap2p_sockaddr *addrs;	/* every rank's listener */
	int listenFd;
	int stopFd;
	pthread_t thread;
	int threadStarted;

	pthread_mutex_t lock;		/* queue, aborted, allocs, nextId */
	pthread_cond_t cond;		/* signalled on queue or abort */
	struct bs_msg *queue;		/* received, not yet taken */
	int aborted;
	struct bs_alloc *allocs;	/* relay memory served to others */
	int nextId;
};

/* The communicator's liveness check (comm->peerAlive), or "alive". */
static int bootstrap_peer_alive(struct mlap2p_bootstrap *s, int peer)
{
	return s->comm->peerAlive ? s->comm->peerAlive(s->comm, peer) : 0;
}

static int64_t bs_deadline(long ms)
{
	return ms > 0 ? mlap2p_now_ms() + ms : -1;
}

static int bs_send_hdr(int fd, uint64_t magic, int type, int rank, int tag,
		       const void *data, uint32_t size, int64_t deadline)
{
	struct bs_hdr h = {
		.magic = magic, .type = (uint32_t)type, .rank = rank,
		.tag = tag, .size = size,
	};
	int ret;

	ret = mlap2p_sock_send(fd, &h, sizeof(h), deadline);
	if (!ret && size)
		ret = mlap2p_sock_send(fd, data, size, deadline);
	return ret;
}

/* ---- root ---- */

struct bs_root {
	int listenFd;
	uint64_t magic;
	long timeoutMs;
};

static void bs_root_error(int fd, uint64_t magic, int err, const char *msg)
{
	bs_send_hdr(fd, magic, BS_ERROR, -1, err, msg,
		    (uint32_t)strlen(msg) + 1, bs_deadline(BS_IO_MS));
}

/* "2, 5" (truncated) */
static void bs_root_missing(const int *fds, int nranks, char *buf, size_t len)
{
	size_t o = 0;
	int r, n = 0;

	buf[0] = '\0';
	for (r = 0; r < nranks && o + 16 < len; r++) {
		if (fds[r] >= 0)
			continue;
		o += (size_t)snprintf(buf + o, len - o, "%s%d", n++ ? ", " : "",
				      r);
	}
	if (r < nranks)
		snprintf(buf + o, len - o, ", ...");
}

static void bs_root_finish(struct bs_root *root, int nranks, int *fds,
			   struct bs_rankinfo *infos, int arrived,
			   int64_t started)
{
	char missing[256], msg[512];
	int r;

	if (nranks > 0 && arrived < nranks) {
		bs_root_missing(fds, nranks, missing, sizeof(missing));
		snprintf(msg, sizeof(msg),
			 "rank%s %s of %d did not arrive within %lld ms",
			 nranks - arrived > 1 ? "s" : "", missing, nranks,
			 (long long)(mlap2p_now_ms() - started));
	}
	for (r = 0; r < nranks; r++) {
		if (fds[r] < 0)
			continue;
		if (arrived == nranks)
			bs_send_hdr(fds[r], root->magic, BS_TABLE, -1, 0, infos,
				    (uint32_t)(sizeof(*infos) * (size_t)nranks),
				    bs_deadline(BS_IO_MS));
		else
			bs_root_error(fds[r], root->magic, -ETIMEDOUT, msg);
		close(fds[r]);
	}
}

static void *bs_root_main(void *arg)
{
	struct bs_root *root = arg;
	int64_t started = mlap2p_now_ms();
	int64_t deadline = bs_deadline(root->timeoutMs);
	struct bs_rankinfo *infos = NULL;
	int *fds = NULL, nranks = -1, arrived = 0, r;
	struct bs_hello hello;
	struct bs_hdr h;

	while (nranks < 0 || arrived < nranks) {
		char msg[128];
		int fd;

		if (mlap2p_sock_accept(root->listenFd, deadline, &fd))
			break;
		if (mlap2p_sock_recv(fd, &h, sizeof(h), bs_deadline(BS_IO_MS)) ||
		    h.magic != root->magic || h.type != BS_HELLO ||
		    h.size != sizeof(hello) ||
		    mlap2p_sock_recv(fd, &hello, sizeof(hello),
				     bs_deadline(BS_IO_MS))) {
			close(fd);
			continue;
		}
		if (nranks < 0) {
			if (hello.nranks < 1 || hello.nranks > BS_MAX_RANKS) {
				bs_root_error(fd, root->magic, -EINVAL,
					      "invalid number of ranks");
				close(fd);
				continue;
			}
			nranks = hello.nranks;
			fds = malloc(sizeof(*fds) * (size_t)nranks);
			infos = calloc((size_t)nranks, sizeof(*infos));
			if (!fds || !infos) {
				free(fds);
				fds = NULL;
				close(fd);
				break;
			}
			for (r = 0; r < nranks; r++)
				fds[r] = -1;
		}
		r = h.rank;
		if (hello.nranks != nranks || r < 0 || r >= nranks ||
		    fds[r] >= 0) {
			snprintf(msg, sizeof(msg), hello.nranks != nranks ?
				 "rank %d says there are %d ranks, the first rank to arrive said %d" :
				 "rank %d joined twice (or is out of range)",
				 r, hello.nranks, nranks);
			bs_root_error(fd, root->magic, -EINVAL, msg);
			close(fd);
			continue;
		}
		fds[r] = fd;
		infos[r] = hello.info;
		arrived++;
		if (hello.timeoutMs) {
			int64_t d = mlap2p_now_ms() + hello.timeoutMs;

			if (deadline < 0 || d < deadline)
				deadline = d;
		}
	}
	if (fds)
		bs_root_finish(root, nranks, fds, infos, arrived, started);
	free(fds);
	free(infos);
	close(root->listenFd);
	free(root);
	return NULL;
}

/* Listen on @addr and start a detached root thread there. */
static int bs_root_start(union mlap2p_sockaddr *addr, uint64_t magic,
			 long timeoutMs)
{
	struct bs_root *root;
	pthread_attr_t attr;
	pthread_t thread;
	int ret;

	root = calloc(1, sizeof(*root));
	if (!root)
		return -ENOMEM;
	root->magic = magic;
	root->timeoutMs = timeoutMs;
	ret = mlap2p_sock_listen(addr, &root->listenFd);
	if (ret) {
		char buf[64];

		WARN("bootstrap: cannot listen on %s: %s",
		     mlap2p_sock_str(addr, buf, sizeof(buf)), strerror(-ret));
		free(root);
		return ret;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	ret = -pthread_create(&thread, &attr, bs_root_main, root);
	pthread_attr_destroy(&attr);
	if (ret) {
		close(root->listenFd);
		free(root);
	}
	return ret;
}

int mlap2p_bootstrap_get_unique_id(struct mlap2p_unique_id *uid)
{
	const char *commId = getenv("NCCL_COMM_ID");
	struct bs_id id;
	long timeoutMs;
	int ret;

	memset(&id, 0, sizeof(id));
	id.tag = BS_ID_TAG;
	ret = mlap2p_random(&id.magic, sizeof(id.magic));
	if (ret)
		return ret;
	ret = mlap2p_env_timeout("MLAP2P_BOOTSTRAP_TIMEOUT", 120 * 1000,
				 &timeoutMs);
	if (ret)
		return ret;
	if (commId && *commId) {
		if (mlap2p_sock_parse(commId, &id.root)) {
			WARN("NCCL_COMM_ID=%s is not valid: expected <ip>:<port> or [<ipv6>]:<port>",
			     commId);
			return -EINVAL;
		}
		id.flags = BS_ID_F_RANK0_ROOT;
		/* A fixed id: the magic must be the same in every process. */
		id.magic = mlap2p_hash(commId, strlen(commId), 0x6d6c6170ULL);
	} else {
		ret = mlap2p_sock_local_addr(&id.root);
		if (!ret)
			ret = bs_root_start(&id.root, id.magic, timeoutMs);
		if (ret)
			return ret;
	}
	memset(uid, 0, sizeof(*uid));
	memcpy(uid->internal, &id, sizeof(id));
	return 0;
}

/* ---- the per-communicator thread ---- */

static void bs_enqueue(struct mlap2p_bootstrap *s, struct bs_msg *m)
{
	struct bs_msg **pp;

	pthread_mutex_lock(&s->lock);
	for (pp = &s->queue; *pp; pp = &(*pp)->next)
		;
	*pp = m;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

static int bs_serve_alloc(struct mlap2p_bootstrap *s, uint64_t size,
			  struct bs_remalloc_rep *rep)
{
	struct mlap2p_rt *rt = s->comm->rt;
	struct bs_alloc *a;
	void *ptr = NULL;

	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	if (ncclRtCalloc(rt, &ptr, size) != ncclSuccess ||
	    ncclRtIpcGetMemHandle(rt, &rep->ipc, ptr) != ncclSuccess) {
		int err = mlap2p_errno_take(ncclInternalError);

		if (ptr)
			ncclRtFree(rt, ptr);
		free(a);
		return err;
	}
	a->ptr = ptr;
	pthread_mutex_lock(&s->lock);
	a->id = s->nextId++;
	a->next = s->allocs;
	s->allocs = a;
	pthread_mutex_unlock(&s->lock);
	rep->id = a->id;
	rep->ptr = (uint64_t)(uintptr_t)ptr;
	INFO(NCCL_ALLOC, "bootstrap: rank %d allocated %llu bytes (id %d) for a relay",
	     s->rank, (unsigned long long)size, a->id);
	return 0;
}

static int bs_serve_free(struct mlap2p_bootstrap *s, int id)
{
	struct bs_alloc **pp, *a = NULL;

	pthread_mutex_lock(&s->lock);
	for (pp = &s->allocs; *pp; pp = &(*pp)->next) {
		if ((*pp)->id == id) {
			a = *pp;
			*pp = a->next;
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
	if (!a)
		return -ENOENT;
	ncclRtFree(s->comm->rt, a->ptr);
	free(a);
	return 0;
}

/* One connection to this rank's listener (mlap2p_sock_serve()). */
static void bs_handle(void *arg, int fd)
{
	struct mlap2p_bootstrap *s = arg;
	int64_t deadline = bs_deadline(BS_IO_MS);
	struct bs_remalloc_rep rep;
	struct bs_msg *m;
	struct bs_hdr h;
	uint64_t size;
	int32_t id;
	int ret;

	if (mlap2p_sock_recv(fd, &h, sizeof(h), deadline) ||
	    h.magic != s->magic || h.rank < 0 || h.rank >= s->nranks ||
	    h.size > BS_MAX_MSG)
		return;
	switch (h.type) {
	case BS_MSG:
		m = malloc(sizeof(*m) + h.size);
		if (!m)
			return;
		m->next = NULL;
		m->rank = h.rank;
		m->tag = h.tag;
		m->size = h.size;
		if (mlap2p_sock_recv(fd, m->data, h.size, deadline)) {
			free(m);
			return;
		}
		bs_enqueue(s, m);
		/*
		 * Acknowledge only once the message is queued: the sender
		 * waits for this, so a rank that sends and then exits never
		 * leaves a message its peer has not taken in yet.
		 */
		bs_send_hdr(fd, s->magic, BS_REPLY, s->rank, 0, NULL, 0,
			    deadline);
		break;
	case BS_REMALLOC:
		if (h.size != sizeof(size) ||
		    mlap2p_sock_recv(fd, &size, sizeof(size), deadline))
			return;
		memset(&rep, 0, sizeof(rep));
		ret = bs_serve_alloc(s, size, &rep);
		bs_send_hdr(fd, s->magic, BS_REPLY, s->rank, ret, &rep,
			    sizeof(rep), deadline);
		break;
	case BS_REMFREE:
		if (h.size != sizeof(id) ||
		    mlap2p_sock_recv(fd, &id, sizeof(id), deadline))
			return;
		ret = bs_serve_free(s, id);
		bs_send_hdr(fd, s->magic, BS_REPLY, s->rank, ret, NULL, 0,
			    deadline);
		break;
	}
}

static void *bs_thread_main(void *arg)
{
	struct mlap2p_bootstrap *s = arg;

	mlap2p_sock_serve(s->listenFd, s->stopFd, bs_handle, s);
	return NULL;
}

/* ---- init and close ---- */

static int bs_rendezvous(struct mlap2p_bootstrap *s, const struct bs_id *id,
			 const union mlap2p_sockaddr *self,
			 struct ncclPeerInfo *peerInfo)
{
	int64_t deadline = bs_deadline(s->timeoutMs);
	struct bs_rankinfo *table;
	struct bs_hello hello;
	char where[64];
	struct bs_hdr h;
	int fd, ret, r;

	mlap2p_sock_str(&id->root, where, sizeof(where));
	memset(&hello, 0, sizeof(hello));
	hello.nranks = s->nranks;
	hello.timeoutMs = s->timeoutMs > (long)UINT32_MAX ? UINT32_MAX :
			  (uint32_t)s->timeoutMs;
	hello.info.addr = *self;
	hello.info.peer = peerInfo[s->rank];

	ret = mlap2p_sock_connect(&id->root, deadline, &fd);
	if (ret) {
		WARN("bootstrap: rank %d cannot reach the root at %s: %s",
		     s->rank, where, strerror(-ret));
		return ret;
	}
	ret = bs_send_hdr(fd, s->magic, BS_HELLO, s->rank, 0, &hello,
			  sizeof(hello), deadline);
	if (!ret)
		ret = mlap2p_sock_recv(fd, &h, sizeof(h), deadline < 0 ? -1 :
				       deadline + BS_GRACE_MS);
	if (ret) {
		WARN(ret == -ETIMEDOUT ?
		     "bootstrap: rank %d: the %d ranks did not all reach the root at %s within %ld ms" :
		     "bootstrap: rank %d: no answer from the root of %d ranks at %s (after %ld ms)",
		     s->rank, s->nranks, where, s->timeoutMs);
		goto out_close;
	}
	if (h.magic != s->magic || h.size > BS_MAX_MSG) {
		ret = -EPROTO;
		WARN("bootstrap: rank %d: garbled answer from the root at %s",
		     s->rank, where);
		goto out_close;
	}
	if (h.type == BS_ERROR) {
		char msg[512] = "";

		mlap2p_sock_recv(fd, msg, h.size < sizeof(msg) ? h.size :
					  sizeof(msg) - 1,
				 bs_deadline(BS_IO_MS));
		msg[sizeof(msg) - 1] = '\0';
		ret = h.tag < 0 ? h.tag : -EPROTO;
		WARN("bootstrap: rank %d: %s", s->rank, msg);
		goto out_close;
	}
	if (h.type != BS_TABLE ||
	    h.size != sizeof(*table) * (size_t)s->nranks) {
		ret = -EPROTO;
		WARN("bootstrap: rank %d: unexpected answer from the root at %s",
		     s->rank, where);
		goto out_close;
	}
	table = malloc(h.size);
	if (!table) {
		ret = -ENOMEM;
		goto out_close;
	}
	ret = mlap2p_sock_recv(fd, table, h.size, bs_deadline(BS_IO_MS));
	if (!ret) {
		for (r = 0; r < s->nranks; r++) {
			s->addrs[r] = table[r].addr;
			peerInfo[r] = table[r].peer;
		}
	}
	free(table);
out_close:
	close(fd);
	return ret;
}

int mlap2p_bootstrap_init(struct ncclComm *comm,
			  const struct mlap2p_unique_id *uid)
{
	struct mlap2p_bootstrap *s;
	union mlap2p_sockaddr self;
	struct bs_id id;
	int ret;

	memcpy(&id, uid->internal, sizeof(id));
	if (id.tag != BS_ID_TAG) {
		WARN("bootstrap: the unique id is not one (did every rank get a copy of the same id?)");
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->comm = comm;
	s->rank = comm->rank;
	s->nranks = comm->nRanks;
	s->magic = id.magic;
	s->timeoutMs = comm->params.bootstrapTimeoutMs;
	s->listenFd = -1;
	s->stopFd = -1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->addrs = calloc((size_t)s->nranks, sizeof(*s->addrs));
	if (!s->addrs) {
		ret = -ENOMEM;
		goto out_free;
	}

	if (id.flags & BS_ID_F_RANK0_ROOT && s->rank == 0) {
		ret = bs_root_start(&id.root, id.magic, s->timeoutMs);
		if (ret)
			goto out_free;
	}
	/* Listen on the root's family when the interface offers both. */
	ret = mlap2p_sock_local_addr(&self);
	if (ret)
		goto out_free;
	ret = mlap2p_sock_listen(&self, &s->listenFd);
	if (ret) {
		WARN("bootstrap: rank %d cannot listen: %s", s->rank,
		     strerror(-ret));
		goto out_free;
	}
	s->stopFd = eventfd(0, EFD_CLOEXEC);
	if (s->stopFd < 0) {
		ret = -errno;
		goto out_free;
	}
	ret = -pthread_create(&s->thread, NULL, bs_thread_main, s);
	if (ret)
		goto out_free;
	s->threadStarted = 1;
	comm->bootstrap = s;

	ret = bs_rendezvous(s, &id, &self, comm->peerInfo);
	if (ret) {
		comm->bootstrap = NULL;
		goto out_free;
	}
	INFO(NCCL_BOOTSTRAP | NCCL_INIT, "bootstrap: rank %d of %d joined",
	     s->rank, s->nranks);
	return 0;

out_free:
	mlap2p_bootstrap_close(s);
	return ret;
}

void mlap2p_bootstrap_abort(struct mlap2p_bootstrap *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	__atomic_store_n(&s->aborted, 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

void mlap2p_bootstrap_close(struct mlap2p_bootstrap *s)
{
	uint64_t one = 1;
	struct bs_msg *m;
	struct bs_alloc *a;

	if (!s)
		return;
	if (s->threadStarted) {
		if (write(s->stopFd, &one, sizeof(one)) != sizeof(one))
			WARN("bootstrap: cannot stop the thread: %s",
			     strerror(errno));
		pthread_join(s->thread, NULL);
	}
	if (s->stopFd >= 0)
		close(s->stopFd);
	if (s->listenFd >= 0)
		close(s->listenFd);
	while ((m = s->queue)) {
		s->queue = m->next;
		free(m);
	}
	/* Relay memory nobody freed (a peer aborted): ours to release. */
	while ((a = s->allocs)) {
		s->allocs = a->next;
		ncclRtFree(s->comm->rt, a->ptr);
		free(a);
	}
	free(s->addrs);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* ---- point to point ---- */

static ncclResult_t bs_fail(int err)
{
	mlap2p_errno_stash(err);
	return err == -EINVAL ? ncclInvalidArgument : ncclSystemError;
}

static bool bs_valid_peer(struct mlap2p_bootstrap *s, int peer)
{
	return s && peer >= 0 && peer < s->nranks;
}

/*
 * Connect to @peer's listener, a second at a time, so that a peer that
 * died is noticed (-ESRCH) instead of being retried until the deadline.
 */
static int bs_connect(struct mlap2p_bootstrap *s, int peer, int64_t deadline,
		      int *fd)
{
	int ret;

	for (;;) {
		int64_t slice = mlap2p_now_ms() + 1000;

		if (deadline >= 0 && deadline < slice)
			slice = deadline;
		ret = mlap2p_sock_connect(&s->addrs[peer], slice, fd);
		if (ret != -ETIMEDOUT && ret != -ECONNREFUSED)
			return ret;
		if (deadline >= 0 && mlap2p_now_ms() >= deadline)
			return -ETIMEDOUT;
		if (mlap2p_comm_aborted(s->comm) ||
		    __atomic_load_n(&s->aborted, __ATOMIC_ACQUIRE))
			return -ECANCELED;
		if (bootstrap_peer_alive(s, peer))
			return -ESRCH;
	}
}

static int bs_request(struct mlap2p_bootstrap *s, int rank, int type,
		      int tag, const void *req, uint32_t reqSize, void *rep,
		      uint32_t repSize);

ncclResult_t bootstrapSend(struct mlap2p_bootstrap *s, int peer, int tag,
			   const void *data, int size)
{
	int ret;

	if (!bs_valid_peer(s, peer) || size < 0 || (uint32_t)size > BS_MAX_MSG)
		return bs_fail(-EINVAL);
	if (peer == s->rank) {
		struct bs_msg *m = malloc(sizeof(*m) + (size_t)size);

		if (!m)
			return bs_fail(-ENOMEM);
		m->next = NULL;
		m->rank = peer;
		m->tag = tag;
		m->size = (uint32_t)size;
		if (size)
			memcpy(m->data, data, (size_t)size);
		bs_enqueue(s, m);
		return ncclSuccess;
	}
	ret = bs_request(s, peer, BS_MSG, tag, data, (uint32_t)size, NULL, 0);
	/* A peer that died before acknowledging is a dead peer, not I/O. */
	if (ret && ret != -ESRCH && bootstrap_peer_alive(s, peer) == -ESRCH)
		ret = -ESRCH;
	if (ret == -ESRCH) {
		WARN("bootstrap: rank %d cannot send to rank %d (tag %#x): rank %d (pid %d) has exited",
		     s->rank, peer, tag, peer, (int)s->comm->peerInfo[peer].pid);
		return bs_fail(ret);
	}
	if (ret) {
		WARN("bootstrap: rank %d cannot send to rank %d (tag %#x): %s",
		     s->rank, peer, tag, mlap2p_strerror(ret));
		return bs_fail(ret);
	}
	return ncclSuccess;
}

static struct bs_msg *bs_find(struct mlap2p_bootstrap *s, int peer, int tag)
{
	struct bs_msg *m;

	for (m = s->queue; m; m = m->next)
		if (m->rank == peer && m->tag == tag)
			return m;
	return NULL;
}

static struct bs_msg *bs_take(struct mlap2p_bootstrap *s, int peer, int tag)
{
	struct bs_msg **pp, *m;

	for (pp = &s->queue; *pp; pp = &(*pp)->next) {
		m = *pp;
		if (m->rank == peer && m->tag == tag) {
			*pp = m->next;
			return m;
		}
	}
	return NULL;
}

/*
 * Wait for (peer, tag); 0, -ETIMEDOUT, -ECANCELED, -ESRCH (peer died) or,
 * with @failFast, -ECONNABORTED once the peer posted MLAP2P_TAG_FAILED.
 */
static int bs_wait(struct mlap2p_bootstrap *s, int peer, int tag,
		   bool failFast, struct bs_msg **out)
{
	int64_t deadline = bs_deadline(s->timeoutMs);
	struct bs_msg *m;
	int ret = 0;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct timespec ts;
		int64_t now, until;

		m = bs_take(s, peer, tag);
		if (m)
			break;
		if (failFast && bs_find(s, peer, MLAP2P_TAG_FAILED)) {
			ret = -ECONNABORTED;
			break;
		}
		if (s->aborted || mlap2p_comm_aborted(s->comm)) {
			ret = -ECANCELED;
			break;
		}
		now = mlap2p_now_ms();
		if (deadline >= 0 && now >= deadline) {
			ret = -ETIMEDOUT;
			break;
		}
		pthread_mutex_unlock(&s->lock);
		ret = peer != s->rank ? bootstrap_peer_alive(s, peer) : 0;
		pthread_mutex_lock(&s->lock);
		if (ret) {
			/* It may have sent, been acknowledged and exited since
			 * the look above: what it sent is queued by now. */
			m = bs_take(s, peer, tag);
			if (m)
				ret = 0;
			break;
		}
		/* Wake at least once a second to look at the peer again. */
		until = now + 1000;
		if (deadline >= 0 && deadline < until)
			until = deadline;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += (until - now) / 1000;
		ts.tv_nsec += ((until - now) % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&s->cond, &s->lock, &ts);
	}
	pthread_mutex_unlock(&s->lock);
	*out = m;
	return ret;
}

static ncclResult_t bs_recv(struct mlap2p_bootstrap *s, int peer, int tag,
			    void *data, int size, bool failFast)
{
	struct bs_msg *m;
	int ret;

	if (!bs_valid_peer(s, peer) || size < 0)
		return bs_fail(-EINVAL);
	ret = bs_wait(s, peer, tag, failFast, &m);
	if (ret == -ECONNABORTED) {
		WARN("bootstrap: rank %d: rank %d failed its side of the connection setup (see its log)",
		     s->rank, peer);
	} else if (ret == -ETIMEDOUT) {
		WARN("bootstrap: rank %d: nothing from rank %d (tag %#x) within %ld ms",
		     s->rank, peer, tag, s->timeoutMs);
	} else if (ret == -ESRCH) {
		WARN("bootstrap: rank %d: rank %d (pid %d) exited while rank %d waited for it (tag %#x)",
		     s->rank, peer, (int)s->comm->peerInfo[peer].pid, s->rank,
		     tag);
	} else if (ret == -ECANCELED) {
		WARN("bootstrap: rank %d: aborted while waiting for rank %d",
		     s->rank, peer);
	} else if (m->size != (uint32_t)size) {
		WARN("bootstrap: rank %d: message from rank %d (tag %#x) has %u bytes, expected %d",
		     s->rank, peer, tag, m->size, size);
		ret = -EPROTO;
	} else if (size) {
		memcpy(data, m->data, (size_t)size);
	}
	free(m);
	return ret ? bs_fail(ret) : ncclSuccess;
}

ncclResult_t bootstrapRecv(struct mlap2p_bootstrap *s, int peer, int tag,
			   void *data, int size)
{
	return bs_recv(s, peer, tag, data, size, false);
}

ncclResult_t bootstrapRecvSetup(struct mlap2p_bootstrap *s, int peer, int tag,
				void *data, int size)
{
	return bs_recv(s, peer, tag, data, size, true);
}

ncclResult_t bootstrapBarrier(struct mlap2p_bootstrap *s, int tag)
{
	int r;

	if (s->rank == 0) {
		for (r = 1; r < s->nranks; r++)
			NCCLCHECK(bootstrapRecv(s, r, tag, NULL, 0));
		for (r = 1; r < s->nranks; r++)
			NCCLCHECK(bootstrapSend(s, r, tag, NULL, 0));
	} else {
		NCCLCHECK(bootstrapSend(s, 0, tag, NULL, 0));
		NCCLCHECK(bootstrapRecv(s, 0, tag, NULL, 0));
	}
	return ncclSuccess;
}

ncclResult_t bootstrapAllGather(struct mlap2p_bootstrap *s, void *allData,
				int size)
{
	const int tag = MLAP2P_TAG_ALLGATHER;
	char *all = allData;
	int r;

	if ((size_t)size * (size_t)s->nranks > BS_MAX_MSG)
		return bs_fail(-E2BIG);
	if (s->rank == 0) {
		for (r = 1; r < s->nranks; r++)
			NCCLCHECK(bootstrapRecv(s, r, tag,
						all + (size_t)r * (size_t)size,
						size));
		for (r = 1; r < s->nranks; r++)
			NCCLCHECK(bootstrapSend(s, r, tag, all,
						size * s->nranks));
	} else {
		NCCLCHECK(bootstrapSend(s, 0, tag,
					all + (size_t)s->rank * (size_t)size,
					size));
		NCCLCHECK(bootstrapRecv(s, 0, tag, all, size * s->nranks));
	}
	return ncclSuccess;
}

/* One request to @rank's service; the reply header's status is returned. */
static int bs_request(struct mlap2p_bootstrap *s, int rank, int type,
		      int tag, const void *req, uint32_t reqSize, void *rep,
		      uint32_t repSize)
{
	int64_t deadline = bs_deadline(s->timeoutMs);
	struct bs_hdr h;
	int fd, ret;

	ret = bs_connect(s, rank, deadline, &fd);
	if (ret)
		return ret;
	ret = bs_send_hdr(fd, s->magic, type, s->rank, tag, req, reqSize,
			  deadline);
	if (!ret)
		ret = mlap2p_sock_recv(fd, &h, sizeof(h), deadline);
	if (!ret && (h.magic != s->magic || h.type != BS_REPLY ||
		     (h.size && h.size != repSize)))
		ret = -EPROTO;
	if (!ret && h.size)
		ret = mlap2p_sock_recv(fd, rep, repSize, deadline);
	if (!ret)
		ret = h.tag;
	close(fd);
	return ret;
}

ncclResult_t bootstrapRemAlloc(size_t size, int rank,
			       struct mlap2p_bootstrap *s, int *id,
			       struct ncclRtIpcMemHandle *ipc, void **ptr)
{
	struct bs_remalloc_rep rep;
	uint64_t sz = size;
	int ret;

	if (!bs_valid_peer(s, rank))
		return bs_fail(-EINVAL);
	memset(&rep, 0, sizeof(rep));
	if (rank == s->rank)
		ret = bs_serve_alloc(s, sz, &rep);
	else
		ret = bs_request(s, rank, BS_REMALLOC, 0, &sz, sizeof(sz), &rep,
				 sizeof(rep));
	if (ret) {
		WARN("bootstrap: rank %d: rank %d could not allocate %zu bytes for a relay: %s",
		     s->rank, rank, size, mlap2p_strerror(ret));
		return bs_fail(ret);
	}
	*id = rep.id;
	*ipc = rep.ipc;
	*ptr = (void *)(uintptr_t)rep.ptr;
	return ncclSuccess;
}

ncclResult_t bootstrapRemFree(int id, int rank, struct mlap2p_bootstrap *s)
{
	int32_t rid = id;
	int ret;

	if (!bs_valid_peer(s, rank))
		return bs_fail(-EINVAL);
	if (rank == s->rank)
		ret = bs_serve_free(s, id);
	else
		ret = bs_request(s, rank, BS_REMFREE, 0, &rid, sizeof(rid), NULL,
				 0);
	if (ret) {
		WARN("bootstrap: rank %d: rank %d could not free relay memory %d: %s",
		     s->rank, rank, id, mlap2p_strerror(ret));
		return bs_fail(ret);
	}
	return ncclSuccess;
}

struct ncclComm *mlap2p_bootstrap_comm(struct mlap2p_bootstrap *s)
{
	return s->comm;
}
