// SPDX-License-Identifier: MIT
/*
 * The bootstrap's root (lib/bootstrap.c has the rest): a detached thread
 * that gathers every rank's listening address and ncclPeerInfo, one
 * connection per rank, and sends each the whole table (the all-gather),
 * then ends.  A rank that never arrives is named: the root gives up at the
 * earliest deadline of the ranks that did arrive and tells each of them
 * which ranks are missing.  Each rank closes its connection once it has
 * read the answer, with a reset (mlap2p_sock_close_reset()), so neither
 * end leaves a TIME_WAIT socket behind.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap_wire.h"

int mlap2p_bs_send_hdr(int fd, uint64_t magic, int type, int rank, int tag,
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

struct bs_root {
	int listenFd;
	uint64_t magic;
	long timeoutMs;
};

static void bs_root_error(int fd, uint64_t magic, int err, const char *msg)
{
	mlap2p_bs_send_hdr(fd, magic, BS_ERROR, -1, err, msg,
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
	uint32_t tableSize = (uint32_t)(sizeof(*infos) * (size_t)nranks);
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
			mlap2p_bs_send_hdr(fds[r], root->magic, BS_TABLE, -1,
					   0, infos, tableSize,
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

int mlap2p_bs_root_start(union mlap2p_sockaddr *addr, uint64_t magic,
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
