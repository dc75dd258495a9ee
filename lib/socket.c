// SPDX-License-Identifier: MIT
/*
 * TCP helpers for the bootstrap: interface choice, listen, connect with
 * retries, and full sends/receives bounded by a deadline; the accept loops
 * of the bootstrap's (connections kept open) and the host runtime's (one
 * request per connection) service threads; and a close without TIME_WAIT.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "socket.h"
#include "log.h"
#include "util.h"

static socklen_t mlap2p_sock_len(const union mlap2p_sockaddr *a)
{
	return a->sa.sa_family == AF_INET6 ? sizeof(a->sin6) : sizeof(a->sin);
}

const char *mlap2p_sock_str(const union mlap2p_sockaddr *a, char *buf,
			    size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (a->sa.sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &a->sin6.sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(a->sin6.sin6_port));
	} else {
		inet_ntop(AF_INET, &a->sin.sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(a->sin.sin_port));
	}
	return buf;
}

int mlap2p_sock_parse(const char *s, union mlap2p_sockaddr *addr)
{
	char host[128];
	const char *port;
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
	struct addrinfo *res;
	size_t n;

	if (*s == '[') {
		const char *end = strchr(s, ']');

		if (!end || end[1] != ':')
			return -EINVAL;
		n = (size_t)(end - s - 1);
		port = end + 2;
		s++;
	} else {
		port = strrchr(s, ':');
		if (!port)
			return -EINVAL;
		n = (size_t)(port - s);
		port++;
	}
	if (n == 0 || n >= sizeof(host) || !*port)
		return -EINVAL;
	memcpy(host, s, n);
	host[n] = '\0';
	if (getaddrinfo(host, port, &hints, &res))
		return -EINVAL;
	memset(addr, 0, sizeof(*addr));
	memcpy(addr, res->ai_addr, res->ai_addrlen < sizeof(*addr) ?
				   res->ai_addrlen : sizeof(*addr));
	freeaddrinfo(res);
	return 0;
}

/* NCCL_SOCKET_IFNAME matching: prefixes, ^ excludes, = exact. */
static bool mlap2p_if_match(const char *spec, const char *name)
{
	bool exclude = false, exact = false, hit = false;
	char buf[256], *tok, *save = NULL;

	if (*spec == '^') {
		exclude = true;
		spec++;
	}
	if (*spec == '=') {
		exact = true;
		spec++;
	}
	snprintf(buf, sizeof(buf), "%s", spec);
	for (tok = strtok_r(buf, ",", &save); tok && !hit;
	     tok = strtok_r(NULL, ",", &save)) {
		if (exact)
			hit = !strcmp(name, tok);
		else
			hit = !strncmp(name, tok, strlen(tok));
	}
	return exclude ? !hit : hit;
}

int mlap2p_sock_local_addr(union mlap2p_sockaddr *addr)
{
	const char *var = "MLAP2P_SOCKET_IFNAME";
	const char *spec = getenv(var);
	struct ifaddrs *ifs, *i;
	int pass, found = 0;

	if (!spec || !*spec) {
		var = "NCCL_SOCKET_IFNAME";
		spec = getenv(var);
	}
	if (!spec || !*spec) {
		var = NULL;
		spec = "lo";
	}
	if (getifaddrs(&ifs))
		return -errno;
	/* IPv4 first, then IPv6 (not link-local: it needs a scope). */
	for (pass = 0; pass < 2 && !found; pass++) {
		int family = pass ? AF_INET6 : AF_INET;

		for (i = ifs; i && !found; i = i->ifa_next) {
			if (!i->ifa_addr || i->ifa_addr->sa_family != family)
				continue;
			if (!(i->ifa_flags & IFF_UP))
				continue;
			if (!mlap2p_if_match(spec, i->ifa_name))
				continue;
			if (family == AF_INET6 &&
			    IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)
						    i->ifa_addr)->sin6_addr))
				continue;
			memset(addr, 0, sizeof(*addr));
			memcpy(addr, i->ifa_addr, family == AF_INET ?
			       sizeof(struct sockaddr_in) :
			       sizeof(struct sockaddr_in6));
			found = 1;
		}
	}
	freeifaddrs(ifs);
	if (!found) {
		if (var)
			WARN("%s=%s matches no interface that is up", var, spec);
		else
			WARN("bootstrap: no loopback interface; set NCCL_SOCKET_IFNAME");
		return var ? -EINVAL : -ENODEV;
	}
	if (addr->sa.sa_family == AF_INET)
		addr->sin.sin_port = 0;
	else
		addr->sin6.sin6_port = 0;
	return 0;
}

int mlap2p_sock_listen(union mlap2p_sockaddr *addr, int *fd)
{
	socklen_t len = mlap2p_sock_len(addr);
	int s, one = 1, ret;

	s = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, &addr->sa, len) || listen(s, 1024) ||
	    getsockname(s, &addr->sa, &len)) {
		ret = -errno;
		close(s);
		return ret;
	}
	*fd = s;
	return 0;
}

/* Milliseconds left before @deadline, for poll(); -1 = forever. */
static int mlap2p_sock_wait_ms(int64_t deadline)
{
	int64_t left;

	if (deadline < 0)
		return -1;
	left = deadline - mlap2p_now_ms();
	if (left <= 0)
		return 0;
	return left > 1000 ? 1000 : (int)left;
}

static bool mlap2p_sock_expired(int64_t deadline)
{
	return deadline >= 0 && mlap2p_now_ms() >= deadline;
}

static int mlap2p_sock_poll(int fd, short events, int64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = events };
	int n;

	for (;;) {
		n = poll(&p, 1, mlap2p_sock_wait_ms(deadline));
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
		if (mlap2p_sock_expired(deadline))
			return -ETIMEDOUT;
	}
}

int mlap2p_sock_connect(const union mlap2p_sockaddr *addr, int64_t deadline,
			int *fd)
{
	struct timespec backoff = { 0, 10 * 1000 * 1000 };
	int s, ret, err, one = 1;
	socklen_t len;

	for (;;) {
		s = socket(addr->sa.sa_family,
			   SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (s < 0)
			return -errno;
		setsockopt(s, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one,
			   sizeof(one));
		ret = connect(s, &addr->sa, mlap2p_sock_len(addr));
		if (ret && errno == EINPROGRESS) {
			ret = mlap2p_sock_poll(s, POLLOUT, deadline);
			if (ret) {
				close(s);
				return ret;
			}
			len = sizeof(err);
			getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len);
			errno = err;
			ret = err ? -1 : 0;
		}
		if (!ret)
			break;
		err = errno;
		close(s);
		if ((err != ECONNREFUSED && err != EAGAIN && err != ETIMEDOUT) ||
		    mlap2p_sock_expired(deadline))
			return -err;
		nanosleep(&backoff, NULL);
		if (backoff.tv_nsec < 100 * 1000 * 1000)
			backoff.tv_nsec *= 2;
	}
	/* Back to blocking; every transfer polls with its deadline. */
	fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK);
	*fd = s;
	return 0;
}

int mlap2p_sock_accept(int listenFd, int64_t deadline, int *fd)
{
	int ret, s;

	ret = mlap2p_sock_poll(listenFd, POLLIN, deadline);
	if (ret)
		return ret;
	s = accept4(listenFd, NULL, NULL, SOCK_CLOEXEC);
	if (s < 0)
		return -errno;
	*fd = s;
	return 0;
}

int mlap2p_sock_serve(int listenFd, int stopFd,
		      void (*fn)(void *arg, int fd), void *arg)
{
	struct pollfd pfd[2] = {
		{ .fd = listenFd, .events = POLLIN },
		{ .fd = stopFd, .events = POLLIN },
	};
	int fd;

	for (;;) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (pfd[1].revents)
			return 0;
		if (!(pfd[0].revents & POLLIN))
			continue;
		fd = accept4(listenFd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		fn(arg, fd);
		close(fd);
	}
}

void mlap2p_sock_close_reset(int fd)
{
	struct linger l = { .l_onoff = 1, .l_linger = 0 };

	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

/*
 * A reset throws away whatever the socket has not sent yet.  Before the
 * service resets its connections at the end, let each send what it
 * queued (a last reply: the peer may still be reading it) and have it
 * acknowledged, up to @deadline for all of them.  Data the peer's kernel
 * holds survives the reset: its reads return it before the error.
 */
static void mlap2p_sock_drain(int fd, int64_t deadline)
{
	int outq;

	while (ioctl(fd, SIOCOUTQ, &outq) == 0 && outq > 0 &&
	       !mlap2p_sock_expired(deadline))
		poll(NULL, 0, 1);
}

/* The connection idle longest, or -1 when none is open. */
static int mlap2p_sock_lru(const uint64_t *used, int n)
{
	int i, best = -1;

	for (i = 0; i < n; i++)
		if (best < 0 || used[i] < used[best])
			best = i;
	return best;
}

/* Close connection @i of @n (pfd[2 + i]); the last one takes its place. */
static void mlap2p_sock_drop(struct pollfd *pfd, uint64_t *used, int *n,
			     int i)
{
	mlap2p_sock_close_reset(pfd[2 + i].fd);
	(*n)--;
	pfd[2 + i] = pfd[2 + *n];
	used[i] = used[*n];
}

int mlap2p_sock_serve_conns(int listenFd, int stopFd, int max,
			    int (*fn)(void *arg, int fd), void *arg)
{
	struct pollfd *pfd = calloc((size_t)max + 2, sizeof(*pfd));
	uint64_t *used = calloc((size_t)max, sizeof(*used)), clock = 0;
	int n = 0, i, fd, ret = 0, one = 1;
	int64_t stop;

	if (!pfd || !used) {
		free(pfd);
		free(used);
		return -ENOMEM;
	}
	/* pfd[0] the stop, pfd[1] the listener, pfd[2 + i] connection i. */
	pfd[0] = (struct pollfd){ .fd = stopFd, .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = listenFd, .events = POLLIN };
	for (;;) {
		if (poll(pfd, (nfds_t)n + 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			break;
		}
		if (pfd[0].revents)
			break;
		for (i = 0; i < n; i++) {
			if (!pfd[2 + i].revents)
				continue;
			used[i] = ++clock;
			if ((pfd[2 + i].revents & POLLIN) &&
			    !fn(arg, pfd[2 + i].fd))
				continue;
			/* Closed by the peer, or garbled: drop it. */
			mlap2p_sock_drop(pfd, used, &n, i--);
		}
		if (!(pfd[1].revents & POLLIN))
			continue;
		fd = accept4(listenFd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
			/* Out of descriptors: give one back, or wait a bit. */
			if (!n) {
				poll(NULL, 0, 10);
				continue;
			}
			mlap2p_sock_drop(pfd, used, &n,
					 mlap2p_sock_lru(used, n));
			continue;
		}
		if (fd < 0)
			continue;
		/* Replies are small: out at once, not behind a delayed ACK. */
		setsockopt(fd, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one,
			   sizeof(one));
		if (n == max) {
			/* Full: the idle one goes; its peer reconnects. */
			mlap2p_sock_drop(pfd, used, &n,
					 mlap2p_sock_lru(used, n));
		}
		pfd[2 + n] = (struct pollfd){ .fd = fd, .events = POLLIN };
		used[n++] = ++clock;
	}
	stop = mlap2p_now_ms() + 2000;
	for (i = 0; i < n; i++) {
		mlap2p_sock_drain(pfd[2 + i].fd, stop);
		mlap2p_sock_close_reset(pfd[2 + i].fd);
	}
	free(pfd);
	free(used);
	return ret;
}

int mlap2p_sock_send(int fd, const void *buf, size_t len, int64_t deadline)
{
	const char *p = buf;
	ssize_t n;
	int ret;

	while (len) {
		ret = mlap2p_sock_poll(fd, POLLOUT, deadline);
		if (ret)
			return ret;
		n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int mlap2p_sock_recv(int fd, void *buf, size_t len, int64_t deadline)
{
	char *p = buf;
	ssize_t n;
	int ret;

	while (len) {
		ret = mlap2p_sock_poll(fd, POLLIN, deadline);
		if (ret)
			return ret;
		n = recv(fd, p, len, MSG_DONTWAIT);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
