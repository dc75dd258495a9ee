// SPDX-License-Identifier: MIT
/*
 * The data plane's state dump: mlap2p_dump_state() and the dump signal.
 */
#include "dataplane/dp.h"

/* ---- registry for the dump signal ---- */

static struct dp *dp_registry[DP_MAX_COMMS];

static void dp_dump(struct dp *dp, int fd);

static void dp_dump_signal(int sig)
{
	int i, saved = errno;

	(void)sig;
	for (i = 0; i < DP_MAX_COMMS; i++) {
		struct dp *dp = __atomic_load_n(&dp_registry[i], __ATOMIC_ACQUIRE);

		if (dp)
			dp_dump(dp, STDERR_FILENO);
	}
	errno = saved;
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

void dp_register(struct dp *dp)
{
	int i;

	dp->slot = -1;
	for (i = 0; i < DP_MAX_COMMS; i++) {
		struct dp *none = NULL;

		if (__atomic_compare_exchange_n(&dp_registry[i], &none, dp, 0,
						__ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			dp->slot = i;
			return;
		}
	}
}

/* Leave the registry (dp_free, before anything is freed). */
void dp_unregister(struct dp *dp)
{
	if (dp->slot >= 0)
		__atomic_store_n(&dp_registry[dp->slot], NULL, __ATOMIC_RELEASE);
}

/* ---- state dump ---- */

/* snprintf-only formatting and one write(2) per line: usable from the
 * dump signal's handler. */
static void dp_dump_link(const struct dp *dp, const struct dp_link *k, int fd)
{
	const struct ncclConnInfo *c = k->l.conn;
	const struct mlap2p_op *op = k->qhead;
	char line[320];
	int n;

	n = snprintf(line, sizeof(line),
		     "mlap2p: rank %d %s %d ch %d %s%s: step %llu head %llu tail %llu ops %llu single-copy %llu",
		     dp->comm->rank, k->conn->send ? "->" : "<-", k->l.peer,
		     k->l.channel, mlap2p_conn_mode_name(k->conn->mode),
		     k->conn->read ? "/read" : "",
		     (unsigned long long)c->step,
		     (unsigned long long)__atomic_load_n(c->head, __ATOMIC_RELAXED),
		     (unsigned long long)__atomic_load_n(c->tail, __ATOMIC_RELAXED),
		     (unsigned long long)k->ops,
		     (unsigned long long)k->direct);
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
