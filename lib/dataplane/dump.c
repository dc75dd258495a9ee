// SPDX-License-Identifier: MIT
/*
 * The data plane's state dump: mlap2p_dump_state() and the dump signal.
 */
#include "dataplane/dp.h"

/*
 * ---- the dump signal ----
 *
 * The handler only counts: one lock-free atomic add, which is
 * async-signal-safe (no formatting, no lock, no memory another thread may
 * free).  A thread waiting in the data plane sees the count move the next
 * time its wait goes idle (dp_check) and writes its own communicator's
 * state, from its own thread, inside its own call: the communicator cannot
 * be freed under it and nothing races with the links it reads.  A
 * communicator no thread waits in prints at its next idle wait;
 * mlap2p_dump_state() prints one at once.
 */

static uint32_t dp_dump_requests;

_Static_assert(__atomic_always_lock_free(sizeof(uint32_t), 0),
	       "the dump signal's counter must be lock-free");

static void dp_dump(struct dp *dp, int fd);

static void dp_dump_signal(int sig)
{
	(void)sig;
	__atomic_add_fetch(&dp_dump_requests, 1, __ATOMIC_RELAXED);
}

void dp_install_dump_signal(void)
{
	static int done;
	struct sigaction old, sa;
	long sig;

	if (__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL))
		return;
	if (mlap2p_env_int("MLAP2P_DUMP_SIGNAL", 0, SIGRTMAX, SIGUSR1, &sig) ||
	    !sig)
		return;
	if (sigaction((int)sig, NULL, &old) || old.sa_handler != SIG_DFL)
		return;	/* the application's handler wins */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = dp_dump_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (!sigaction((int)sig, &sa, NULL))
		INFO(NCCL_ENV, "signal %ld dumps the data plane's state", sig);
}

/* A new communicator owes no dump for signals before it existed. */
void dp_dump_init(struct dp *dp)
{
	dp->dumpSeen = __atomic_load_n(&dp_dump_requests, __ATOMIC_RELAXED);
}

/* From a wait of the thread inside @dp: a dump if a signal asked for one. */
void dp_dump_poll(struct dp *dp)
{
	uint32_t n = __atomic_load_n(&dp_dump_requests, __ATOMIC_RELAXED);

	if (n == dp->dumpSeen)
		return;
	dp->dumpSeen = n;
	dp_dump(dp, STDERR_FILENO);
}

/* ---- state dump ---- */

/* One write(2) per line, so lines of several threads do not mix. */
static void dp_dump_link(const struct dp *dp, const struct dp_link *k, int fd)
{
	const struct ncclConnInfo *c = k->l.conn;
	const struct mlap2p_op *op = k->qhead;
	char line[320];
	int n;

	n = snprintf(line, sizeof(line),
		     "mlap2p: rank %d %s %d ch %d %s%s: step %llu head %llu tail %llu ops %llu single-copy %llu split %llu",
		     dp->comm->rank, k->conn->send ? "->" : "<-", k->l.peer,
		     k->l.channel, mlap2p_conn_mode_name(k->conn->mode),
		     k->conn->read ? "/read" : "",
		     (unsigned long long)c->step,
		     (unsigned long long)__atomic_load_n(c->head, __ATOMIC_RELAXED),
		     (unsigned long long)__atomic_load_n(c->tail, __ATOMIC_RELAXED),
		     (unsigned long long)k->ops,
		     (unsigned long long)k->direct,
		     (unsigned long long)k->split);
	if (n < 0 || n >= (int)sizeof(line))
		n = sizeof(line) - 1;
	if (op)
		n += snprintf(line + n, sizeof(line) - n,
			      " | busy: %s %zu B at step %llu, %zu B moved",
			      mlap2p_proto_name(op->proto), op->bytes,
			      (unsigned long long)op->step, op->off);
	else
		n += snprintf(line + n, sizeof(line) - n, " | idle");
	if (n >= (int)sizeof(line) - 1)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(fd, line, n) < 0)
		return;
}

static void dp_dump(struct dp *dp, int fd)
{
	struct dp_link *k;
	int c, i;

	dp_for_each_link(dp, c, i, k)
		dp_dump_link(dp, k, fd);
	if (dp->comm->collDump)
		dp->comm->collDump(dp->comm, fd);
}

MLAP2P_EXPORT int mlap2p_dump_state(struct mlap2p_comm *api, int fd)
{
	struct dp *dp;
	int ret, c, i;

	ret = dp_enter(api, &dp);
	if (ret)
		return mlap2p_err(ret);
	/* Make sure every connection appears, used or not. */
	for (c = 0; c < MAXCHANNELS; c++) {
		for (i = 0; i < 2 * dp->comm->nRanks; i++) {
			struct mlap2p_conn *conn;
			int err;

			if (i / 2 == dp->comm->rank)
				continue;
			conn = mlap2p_channel_conn(dp->comm, c, i / 2, i % 2);
			if (conn && conn->c.connected)
				dp_link_on(dp, c, i / 2, i % 2, &err, 1);
		}
	}
	dp_dump(dp, fd);
	dp_out(dp);
	return 0;
}
