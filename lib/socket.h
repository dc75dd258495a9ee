/* SPDX-License-Identifier: MIT */
/*
 * lib/socket.h: TCP helpers for the bootstrap (lib/socket.c).  Every call
 * that moves data takes an absolute deadline (mlap2p_now_ms() based, -1 =
 * none) and returns 0 or -errno (-ETIMEDOUT when the deadline passes).
 */
#ifndef MLAP2P_SOCKET_H
#define MLAP2P_SOCKET_H

#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

union mlap2p_sockaddr {
	struct sockaddr sa;
	struct sockaddr_in sin;
	struct sockaddr_in6 sin6;
};

/*
 * The address this process listens on: the first address of the interface
 * chosen by MLAP2P_SOCKET_IFNAME or NCCL_SOCKET_IFNAME (NCCL's syntax:
 * comma-separated prefixes, ^ to exclude, = for exact names), loopback by
 * default.  Port 0.
 */
int mlap2p_sock_local_addr(union mlap2p_sockaddr *addr);
/* Parse "ip:port" or "[ip6]:port" (NCCL_COMM_ID). */
int mlap2p_sock_parse(const char *s, union mlap2p_sockaddr *addr);
/* "ip:port" for messages. */
const char *mlap2p_sock_str(const union mlap2p_sockaddr *addr, char *buf,
			    size_t len);

/* Listen on @addr (its port is filled in when 0). */
int mlap2p_sock_listen(union mlap2p_sockaddr *addr, int *fd);
/* Connect, retrying refused connections until @deadline. */
int mlap2p_sock_connect(const union mlap2p_sockaddr *addr, int64_t deadline,
			int *fd);
/* Accept one connection if one arrives before @deadline. */
int mlap2p_sock_accept(int listenFd, int64_t deadline, int *fd);
int mlap2p_sock_send(int fd, const void *buf, size_t len, int64_t deadline);
/* -ECONNRESET when the peer closes before @len bytes. */
int mlap2p_sock_recv(int fd, void *buf, size_t len, int64_t deadline);

/*
 * A service thread's loop, with no deadline: accept each connection on
 * @listenFd (any socket family) and call @fn(@arg, fd) on it, one at a
 * time; the loop closes fd when @fn returns.  Returns 0 once @stopFd (an
 * eventfd, say) becomes readable, or -errno if poll fails.
 */
int mlap2p_sock_serve(int listenFd, int stopFd,
		      void (*fn)(void *arg, int fd), void *arg);

/*
 * The same with connections kept open, up to @max of them: @fn(@arg, fd)
 * serves one request when fd is readable and returns 0 to keep it, or
 * -errno to have it closed.  A connection the peer closes is closed too;
 * with @max open, a new one closes the one idle longest (its peer, finding
 * it reset before it sent anything, connects again).  Every connection is
 * closed with mlap2p_sock_close_reset() at the end.
 */
int mlap2p_sock_serve_conns(int listenFd, int stopFd, int max,
			    int (*fn)(void *arg, int fd), void *arg);

/*
 * Close with a reset (SO_LINGER 0): no TIME_WAIT socket stays behind.
 * Only for a connection whose every byte the protocol has acknowledged.
 */
void mlap2p_sock_close_reset(int fd);

#endif /* MLAP2P_SOCKET_H */
