// SPDX-License-Identifier: MIT
/*
 * Bootstrap: how ranks find each other before any transport exists.
 *
 * The unique id carries a random magic and the address of a root: a
 * detached thread started by mlap2p_get_unique_id() (or, with NCCL_COMM_ID,
 * by rank 0), lib/bootstrap_root.c.  Each rank listens on its own TCP
 * socket, connects to the root and sends its listening address and
 * ncclPeerInfo; the root answers with everyone's (the all-gather), or
 * names the ranks that never arrived.
 *
 * After that, ranks talk point to point.  Unlike NCCL, which opens one TCP
 * connection per message, a rank keeps one connection to each peer it has
 * talked to, until close: 64 ranks of a node that ring-connect and barrier
 * would otherwise open and leave in TIME_WAIT hundreds of sockets per
 * init.  Each communicator runs one thread that serves the connections to
 * its listener: it queues tagged messages for bootstrapRecv() and answers
 * the remote-allocation service (bootstrapRemAlloc, the relay's memory, as
 * in NCCL 2.7).  Every request is answered, so every connection is closed
 * with a reset, leaving no TIME_WAIT.  Every message starts with the id's
 * magic; anything else drops the connection.  Every wait is bounded by
 * MLAP2P_BOOTSTRAP_TIMEOUT and checks the peer's liveness once a second,
 * so a dead or missing rank turns into an error that names it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "bootstrap_wire.h"

#define BS_MAX_CONNS	256	/* kept connections, each way */

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
	pthread_mutex_t sendLock;	/* peerFd, nPeerFds, their requests */
	int *peerFd;			/* our connection to each, or -1 */
	int nPeerFds;
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
			ret = mlap2p_bs_root_start(&id.root, id.magic,
						   timeoutMs);
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

/*
 * One request on a connection to this rank's listener
 * (mlap2p_sock_serve_conns()): 0 to keep the connection, -1 to drop it.
 */
static int bs_handle(void *arg, int fd)
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
		return -1;
	switch (h.type) {
	case BS_MSG:
		m = malloc(sizeof(*m) + h.size);
		if (!m)
			return -1;
		m->next = NULL;
		m->rank = h.rank;
		m->tag = h.tag;
		m->size = h.size;
		if (mlap2p_sock_recv(fd, m->data, h.size, deadline)) {
			free(m);
			return -1;
		}
		bs_enqueue(s, m);
		/*
		 * Acknowledge only once the message is queued: the sender
		 * waits for this, so a rank that sends and then exits never
		 * leaves a message its peer has not taken in yet.
		 */
		return mlap2p_bs_send_hdr(fd, s->magic, BS_REPLY, s->rank, 0,
					  NULL, 0, deadline);
	case BS_REMALLOC:
		if (h.size != sizeof(size) ||
		    mlap2p_sock_recv(fd, &size, sizeof(size), deadline))
			return -1;
		memset(&rep, 0, sizeof(rep));
		ret = bs_serve_alloc(s, size, &rep);
		return mlap2p_bs_send_hdr(fd, s->magic, BS_REPLY, s->rank, ret,
					  &rep, sizeof(rep), deadline);
	case BS_REMFREE:
		if (h.size != sizeof(id) ||
		    mlap2p_sock_recv(fd, &id, sizeof(id), deadline))
			return -1;
		ret = bs_serve_free(s, id);
		return mlap2p_bs_send_hdr(fd, s->magic, BS_REPLY, s->rank, ret,
					  NULL, 0, deadline);
	}
	return -1;
}

static void *bs_thread_main(void *arg)
{
	struct mlap2p_bootstrap *s = arg;

	/* One connection from each peer that talks to us, and a few spare. */
	mlap2p_sock_serve_conns(s->listenFd, s->stopFd,
				s->nranks < BS_MAX_CONNS ? s->nranks + 8 :
				BS_MAX_CONNS, bs_handle, s);
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
	ret = mlap2p_bs_send_hdr(fd, s->magic, BS_HELLO, s->rank, 0, &hello,
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
	/* All read: a reset leaves no TIME_WAIT at either end. */
	mlap2p_sock_close_reset(fd);
	return ret;
}

int mlap2p_bootstrap_init(struct ncclComm *comm,
			  const struct mlap2p_unique_id *uid)
{
	struct mlap2p_bootstrap *s;
	union mlap2p_sockaddr self;
	struct bs_id id;
	int ret, r;

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
	pthread_mutex_init(&s->sendLock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->addrs = calloc((size_t)s->nranks, sizeof(*s->addrs));
	s->peerFd = malloc(sizeof(*s->peerFd) * (size_t)s->nranks);
	for (r = 0; s->peerFd && r < s->nranks; r++)
		s->peerFd[r] = -1;
	if (!s->addrs || !s->peerFd) {
		ret = -ENOMEM;
		goto out_free;
	}

	if (id.flags & BS_ID_F_RANK0_ROOT && s->rank == 0) {
		ret = mlap2p_bs_root_start(&id.root, id.magic, s->timeoutMs);
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
	int r;

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
	/* Every request was answered: close without TIME_WAIT. */
	for (r = 0; s->peerFd && r < s->nranks; r++)
		mlap2p_sock_close_reset(s->peerFd[r]);
	free(s->peerFd);
	free(s->addrs);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->sendLock);
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
	int64_t deadline = bs_deadline(s->timeoutMs), look = 0;
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
		if (now >= look && peer != s->rank) {
			/* Once a second, unlocked: then look at the queue
			 * again, since what came meanwhile signalled no one. */
			pthread_mutex_unlock(&s->lock);
			ret = bootstrap_peer_alive(s, peer);
			pthread_mutex_lock(&s->lock);
			look = now + 1000;
			if (!ret)
				continue;
			/* It may have sent, been acknowledged and exited since
			 * the look above: what it sent is queued by now. */
			m = bs_take(s, peer, tag);
			if (m)
				ret = 0;
			break;
		}
		until = look > now ? look : now + 1000;
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

/*
 * One request to @rank's service, on our connection to it: opened on first
 * use and kept (up to BS_MAX_CONNS of them) until close.  The reply
 * header's status is returned.  A kept connection the peer dropped since
 * (reset or closed before its reply: its service evicted it, or it is
 * gone) carried nothing the peer acted on: once more on a new one.
 */
static int bs_request(struct mlap2p_bootstrap *s, int rank, int type,
		      int tag, const void *req, uint32_t reqSize, void *rep,
		      uint32_t repSize)
{
	int64_t deadline = bs_deadline(s->timeoutMs);
	int *fd = &s->peerFd[rank];
	struct bs_hdr h;
	bool kept;
	int ret;

	pthread_mutex_lock(&s->sendLock);
	for (;;) {
		kept = *fd >= 0;
		if (!kept) {
			ret = bs_connect(s, rank, deadline, fd);
			if (ret)
				break;
			s->nPeerFds++;
		}
		ret = mlap2p_bs_send_hdr(*fd, s->magic, type, s->rank, tag, req,
					 reqSize, deadline);
		if (!ret)
			ret = mlap2p_sock_recv(*fd, &h, sizeof(h), deadline);
		if (!ret && (h.magic != s->magic || h.type != BS_REPLY ||
			     (h.size && h.size != repSize)))
			ret = -EPROTO;
		if (!ret && h.size)
			ret = mlap2p_sock_recv(*fd, rep, repSize, deadline);
		if (!ret && (kept || s->nPeerFds <= BS_MAX_CONNS)) {
			ret = h.tag;
			break;
		}
		mlap2p_sock_close_reset(*fd);
		*fd = -1;
		s->nPeerFds--;
		if (!ret) {	/* served, but one connection too many */
			ret = h.tag;
			break;
		}
		if (!kept || (ret != -ECONNRESET && ret != -EPIPE))
			break;
	}
	pthread_mutex_unlock(&s->sendLock);
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
