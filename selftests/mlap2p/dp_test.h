/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the tests of the data-plane API (dp_api_test.c, net_test.c).
 */
#ifndef MLAP2P_DP_TEST_H
#define MLAP2P_DP_TEST_H

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <mlap2p/dataplane.h>

/*
 * The "ops N single-copy M" of one link in mlap2p_dump_state(): the first
 * line containing @key (" -> 1 ch " is the send link to rank 1), or the
 * first link with @key NULL.  0, or -1 when there is no such line.
 */
static inline int dp_link_counts(struct mlap2p_comm *comm, const char *key,
				 unsigned long long *ops,
				 unsigned long long *direct)
{
	char out[8192] = "";
	const char *at;
	ssize_t got;
	int fds[2];

	if (pipe(fds))
		return -1;
	if (mlap2p_dump_state(comm, fds[1])) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	close(fds[1]);
	got = read(fds[0], out, sizeof(out) - 1);
	close(fds[0]);
	at = got <= 0 ? NULL : key ? strstr(out, key) : out;
	at = at ? strstr(at, " ops ") : NULL;
	if (!at || sscanf(at, " ops %llu single-copy %llu", ops, direct) != 2)
		return -1;
	return 0;
}

#endif /* MLAP2P_DP_TEST_H */
