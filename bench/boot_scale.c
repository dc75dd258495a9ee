// SPDX-License-Identifier: MIT
/*
 * boot_scale: the bootstrap at node scale.  N ranks (64, a trn2 node) as
 * processes on the host runtime meet through NCCL_COMM_ID (rank 0 roots,
 * as torchrun-style launchers do), then:
 *
 *   1. init + mlap2p_connect_ring: wall time from the first rank's start
 *      to the last rank's ring connected, and each rank's descriptors;
 *   2. C back-to-back cycles of init + destroy (-r: init + ring + destroy),
 *      each rank counting its descriptors after every destroy.
 *
 * The parent counts TIME_WAIT sockets (`ss -tan state time-wait`) before,
 * after step 1 and after step 2; other processes on the machine add
 * theirs, so the figures are deltas of a whole-machine count.
 *
 *   boot_scale [-n ranks] [-c cycles] [-r] [-k channels]
 *
 * Output: one "key: value" line per figure.  Exit 0, or 1 when a rank
 * failed (its error is printed).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <mlap2p/mlap2p.h>

struct rank_report {
	int rank;
	int failed;		/* step, 0 = fine */
	int64_t t_start_us;	/* told to go, CLOCK_MONOTONIC */
	int64_t t_init_us;	/* init returned */
	int64_t t_ring_us;	/* ring connected */
	int fds_base;		/* before the first init */
	int fds_ring;		/* with the ring connected */
	int fds_max_cycle;	/* most after any cycle's destroy */
	int fds_end;		/* after the last cycle */
	int64_t cycles_us;	/* the cycles, wall */
	char msg[200];
};

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int fd_count(void)
{
	struct dirent *e;
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;
}

static long time_wait(void)
{
	FILE *f = popen("ss -tan state time-wait 2>/dev/null | tail -n +2 | wc -l",
			"r");
	long n = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%ld", &n) != 1)
		n = -1;
	pclose(f);
	return n;
}

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM, 0), port;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(s, (struct sockaddr *)&a, &len))
		return -1;
	port = ntohs(a.sin_port);
	close(s);
	return port;
}

static int one_comm(int n, int rank, int ring, int channels)
{
	struct mlap2p_unique_id id;
	struct mlap2p_comm *comm;

	if (mlap2p_get_unique_id(&id) ||
	    mlap2p_comm_init_rank(&comm, n, &id, rank, rank))
		return 1;
	if (ring && mlap2p_connect_ring(comm, channels)) {
		mlap2p_comm_abort(comm);
		return 2;
	}
	return mlap2p_comm_destroy(comm) ? 3 : 0;
}

static void child(int n, int rank, int cycles, int ring, int channels,
		  int go, int go2, int out)
{
	struct rank_report rep = { .rank = rank };
	struct mlap2p_unique_id id;
	struct mlap2p_comm *comm;
	int64_t t0;
	char c;
	int i, k;

	rep.fds_base = fd_count();
	if (read(go, &c, 1) != 1)
		_exit(2);
	rep.t_start_us = now_us();
	if (mlap2p_get_unique_id(&id) ||
	    mlap2p_comm_init_rank(&comm, n, &id, rank, rank)) {
		rep.failed = 1;
		goto out;
	}
	rep.t_init_us = now_us();
	if (mlap2p_connect_ring(comm, channels)) {
		rep.failed = 2;
		mlap2p_comm_abort(comm);
		goto out;
	}
	rep.t_ring_us = now_us();
	rep.fds_ring = fd_count();
	if (mlap2p_comm_destroy(comm)) {
		rep.failed = 3;
		goto out;
	}
	/* Step 1 reported; the cycles start when the parent says. */
	if (write(out, &rep, sizeof(rep)) != (ssize_t)sizeof(rep) ||
	    read(go2, &c, 1) != 1)
		_exit(3);
	t0 = now_us();
	for (i = 0; i < cycles; i++) {
		k = one_comm(n, rank, ring, channels);
		if (k) {
			rep.failed = 10 + k;
			snprintf(rep.msg, sizeof(rep.msg), "cycle %d: ", i);
			goto out;
		}
		k = fd_count();
		if (k > rep.fds_max_cycle)
			rep.fds_max_cycle = k;
	}
	rep.cycles_us = now_us() - t0;
	rep.fds_end = fd_count();
out:
	if (rep.failed == 1 || rep.failed == 2 || rep.failed == 3) {
		/* Step 1 failed: report it for both steps. */
		snprintf(rep.msg, sizeof(rep.msg), "%s", mlap2p_last_error());
		if (write(out, &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
			_exit(3);
		_exit(1);
	}
	if (rep.failed) {
		size_t o = strlen(rep.msg);

		snprintf(rep.msg + o, sizeof(rep.msg) - o, "%s",
			 mlap2p_last_error());
	}
	if (write(out, &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
		_exit(3);
	_exit(rep.failed ? 1 : 0);
}

int main(int argc, char **argv)
{
	int n = 64, cycles = 100, ring = 0, channels = 1, opt, i, k, bad = 0;
	int go[2], go2[2], out[2], port;
	struct rank_report *reps;
	long tw0, tw1, tw2;
	int64_t t0, last = 0, cyc = 0, lastStart = 0, lastInit = 0;
	int fb = 0, fr = 0, fm = 0, fe = 0, fdgrow = 0;
	char env[64];
	pid_t *pids;

	while ((opt = getopt(argc, argv, "n:c:rk:")) != -1) {
		switch (opt) {
		case 'n': n = atoi(optarg); break;
		case 'c': cycles = atoi(optarg); break;
		case 'r': ring = 1; break;
		case 'k': channels = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-n ranks] [-c cycles] [-r] [-k channels]\n",
				argv[0]);
			return 2;
		}
	}
	if (n < 2 || n > 1024 || cycles < 0 || channels < 1)
		return 2;
	port = free_port();
	if (port < 0)
		return 1;
	snprintf(env, sizeof(env), "127.0.0.1:%d", port);
	setenv("NCCL_COMM_ID", env, 1);
	if (!getenv("MLAP2P_RUNTIME"))
		setenv("MLAP2P_RUNTIME", "host", 1);
	setenv("MLAP2P_FAMILY", "trn2", 1);
	setenv("MLAP2P_NET_DISABLE", "1", 1);
	if (!getenv("MLAP2P_BOOTSTRAP_TIMEOUT"))
		setenv("MLAP2P_BOOTSTRAP_TIMEOUT", "600s", 1);
	setenv("NCCL_LL_BUFFSIZE", "64K", 1);
	setenv("NCCL_LL128_BUFFSIZE", "60K", 1);
	setenv("NCCL_BUFFSIZE", "256K", 1);

	reps = calloc((size_t)n, sizeof(*reps));
	pids = calloc((size_t)n, sizeof(*pids));
	if (!reps || !pids || pipe(go) || pipe(go2) || pipe(out))
		return 1;
	for (i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			return 1;
		if (!pids[i]) {
			close(go[1]);
			close(go2[1]);
			close(out[0]);
			child(n, i, cycles, ring, channels, go[0], go2[0],
			      out[1]);
		}
	}
	close(go[0]);
	close(go2[0]);
	close(out[1]);
	tw0 = time_wait();
	t0 = now_us();
	for (i = 0; i < n; i++)
		if (write(go[1], "g", 1) != 1)
			return 1;
	close(go[1]);
	for (i = 0; i < n; i++) {
		struct rank_report r;

		if (read(out[0], &r, sizeof(r)) != (ssize_t)sizeof(r)) {
			bad = 1;
			break;
		}
		if (r.rank >= 0 && r.rank < n)
			reps[r.rank] = r;
	}
	tw1 = time_wait();
	for (i = 0; i < n; i++)
		if (!reps[i].failed && write(go2[1], "g", 1) != 1)
			return 1;
	close(go2[1]);
	for (k = 0, i = 0; i < n; i++)
		k += !reps[i].failed;
	for (i = 0; !bad && i < k; i++) {
		struct rank_report r;

		if (read(out[0], &r, sizeof(r)) != (ssize_t)sizeof(r)) {
			bad = 1;
			break;
		}
		if (r.rank >= 0 && r.rank < n)
			reps[r.rank] = r;
	}
	for (i = 0; i < n; i++) {
		int st;

		waitpid(pids[i], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			bad = 1;
	}
	tw2 = time_wait();
	for (i = 0; i < n; i++) {
		struct rank_report *r = &reps[i];

		if (r->failed) {
			fprintf(stderr, "rank %d failed at step %d: %s\n", i,
				r->failed, r->msg);
			bad = 1;
			continue;
		}
		if (r->t_ring_us - t0 > last)
			last = r->t_ring_us - t0;
		if (r->t_start_us - t0 > lastStart)
			lastStart = r->t_start_us - t0;
		if (r->t_init_us - t0 > lastInit)
			lastInit = r->t_init_us - t0;
		if (r->cycles_us > cyc)
			cyc = r->cycles_us;
		if (r->fds_base > fb)
			fb = r->fds_base;
		if (r->fds_ring > fr)
			fr = r->fds_ring;
		if (r->fds_max_cycle > fm)
			fm = r->fds_max_cycle;
		if (r->fds_end > fe)
			fe = r->fds_end;
		if (r->fds_end != r->fds_base)
			fdgrow++;
	}
	printf("ranks: %d\ncycles: %d (%s)\n", n, cycles,
	       ring ? "init + ring + destroy" : "init + destroy");
	printf("init+ring_ms: %.1f (last rank connected, from the start)\n",
	       last / 1000.0);
	printf("  last_rank_started_ms: %.1f\n  last_init_done_ms: %.1f\n",
	       lastStart / 1000.0, lastInit / 1000.0);
	printf("cycles_s: %.2f (%.1f ms a cycle)\n", cyc / 1e6,
	       cycles ? cyc / 1000.0 / cycles : 0.0);
	printf("fds_base_max: %d\nfds_with_ring_max: %d\n", fb, fr);
	printf("fds_after_cycle_max: %d\nfds_end_max: %d\n", fm, fe);
	printf("ranks_whose_fds_grew: %d\n", fdgrow);
	printf("time_wait_before: %ld\n", tw0);
	printf("time_wait_after_ring: %ld (+%ld)\n", tw1, tw1 - tw0);
	printf("time_wait_after_cycles: %ld (+%ld)\n", tw2, tw2 - tw0);
	return bad;
}
