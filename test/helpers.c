// SPDX-License-Identifier: GPL-2.0
/*
 * The library tests' helpers (helpers.h says what each does), compiled
 * once and linked into every program of test/.
 */
#include "helpers.h"
#include "kselftest.h"

#include <sys/prctl.h>
#include <linux/capability.h>

int t_get_info(int fd, struct mlap2p_info *info)
{
	KT_POISON(*info);
	return ioctl(fd, MLAP2P_IOC_GET_INFO, info) ? -errno : 0;
}

long t_first_nonzero(const void *p, size_t len)
{
	const volatile unsigned char *b = p;
	size_t i;

	for (i = 0; i < len; i++) {
		if (b[i])
			return (long)i;
	}
	return -1;
}

void t_small_buffers(void)
{
	setenv("NCCL_LL_BUFFSIZE", "64K", 1);
	setenv("NCCL_LL128_BUFFSIZE", "60K", 1);
	setenv("NCCL_BUFFSIZE", "256K", 1);
}

void t_p2p_only(void)
{
	setenv("MLAP2P_BOOTSTRAP_TIMEOUT", "20s", 1);
	/* These tests pin P2P and the seed's terminal error; NET, which
	 * would take every pair P2P cannot, has net_test and net_hosts.sh. */
	setenv("MLAP2P_NET_DISABLE", "1", 1);
	t_small_buffers();
}

void t_host_topology(void)
{
	setenv("MLAP2P_FAMILY", "trn2", 1);
	setenv("MLAP2P_POD", "p2p", 1);
	setenv("MLAP2P_POD_NODES", "2", 1);
	setenv("MLAP2P_RUNTIME", "host", 1);
	t_p2p_only();
}

const char *t_node_topology(void)
{
	static const char *const host_vars[] = {
		"MLAP2P_DEVICES", "MLAP2P_CORES_PER_DEVICE", "MLAP2P_LNC",
		"MLAP2P_POD", "MLAP2P_POD_NODES", "MLAP2P_NODE",
	};
	static char why[192];
	struct mlap2p_info info;
	const char *rt;
	size_t i;
	int fd, ret;

	t_p2p_only();
	setenv("MLAP2P_FAMILY", "trn2", 1);
	for (i = 0; i < ARRAY_SIZE(host_vars); i++)
		unsetenv(host_vars[i]);
	rt = getenv("MLAP2P_RUNTIME");
	if (!rt || !*rt || !strcasecmp(rt, "auto")) {
		rt = access(MLAP2P_DEVICE_PATH, F_OK) ? "host" : "kmod";
		setenv("MLAP2P_RUNTIME", rt, 1);
	}
	if (strcasecmp(rt, "kmod"))
		return NULL;
	/* Let the library say what is wrong with the device itself. */
	fd = kt_dev_open();
	if (fd < 0)
		return NULL;
	ret = t_get_info(fd, &info);
	close(fd);
	if (ret || (info.family == MLAP2P_FAMILY_TRN2 &&
		    info.num_devices == 16 && info.cores_per_device == 8 &&
		    info.lnc == 2 && info.node == 0))
		return NULL;
	snprintf(why, sizeof(why),
		 "needs the module's default topology (trn2, 16 MLAs, 8 cores, LNC 2, node 0), not %s, %u MLAs, %u cores, LNC %u, node %u",
		 mlap2p_topo_family_name(info.family) ?: "?", info.num_devices,
		 info.cores_per_device, info.lnc, info.node);
	return why;
}

int t_check_runtime(struct mlap2p_comm *api)
{
	const char *want = getenv("MLAP2P_RUNTIME");
	const char *kind = mlap2p_rt_kind_name(mlap2p_nccl(api)->rt->kind);

	return want && !strcasecmp(kind, want) ? 0 : 1;
}

int t_leak_check(void)
{
#ifdef __SANITIZE_ADDRESS__
	return __lsan_do_recoverable_leak_check();
#else
	return 0;
#endif
}

int t_init(struct t_rank *r)
{
	int ret = mlap2p_comm_init_rank(&r->comm, r->nranks, &r->id, r->rank,
					r->core);

	if (ret)
		snprintf(r->msg, sizeof(r->msg), "init: %s: %s",
			 mlap2p_strerror(ret), mlap2p_last_error());
	return ret;
}

void *t_thread_main(void *arg)
{
	struct t_rank *r = arg;

	r->result = r->fn(r);
	if (r->result && !r->msg[0])
		snprintf(r->msg, sizeof(r->msg), "%s", mlap2p_last_error());
	return NULL;
}

int t_run_threads(int nranks, const int *cores, t_rank_fn fn, void *arg,
		  struct t_rank *ranks)
{
	struct mlap2p_unique_id id;
	int i, ret = 0;

	if (mlap2p_get_unique_id(&id)) {
		ksft_print_msg("get_unique_id: %s\n", mlap2p_last_error());
		return 100;
	}
	for (i = 0; i < nranks; i++) {
		memset(&ranks[i], 0, sizeof(ranks[i]));
		ranks[i].rank = i;
		ranks[i].nranks = nranks;
		ranks[i].core = cores[i];
		ranks[i].id = id;
		ranks[i].fn = fn;
		ranks[i].arg = arg;
		pthread_create(&ranks[i].thread, NULL, t_thread_main,
			       &ranks[i]);
	}
	for (i = 0; i < nranks; i++) {
		pthread_join(ranks[i].thread, NULL);
		if (ranks[i].result && !ret) {
			ksft_print_msg("rank %d failed at step %d: %s\n", i,
				       ranks[i].result, ranks[i].msg);
			ret = ranks[i].result;
		}
	}
	if (!ret && t_leak_check())
		ret = 101;
	return ret;
}

int t_fork(struct t_procs *p, int n,
	   int (*child)(int idx, struct mlap2p_unique_id *id, void *arg),
	   void *arg)
{
	int i;

	p->n = n;
	for (i = 0; i < n; i++) {
		int fds[2];

		if (pipe(fds))
			return -errno;
		/* The child's diagnostics, and nothing of ours twice. */
		fflush(NULL);
		p->pid[i] = fork();
		if (p->pid[i] < 0)
			return -errno;
		if (p->pid[i] == 0) {
			struct mlap2p_unique_id id;
			int k;

			close(fds[1]);
			for (k = 0; k < i; k++)
				close(p->pipe[k]);
			if (kt_read_full(fds[0], &id, sizeof(id)))
				_exit(99);
			close(fds[0]);
			k = child(i, &id, arg);
			if (!k && t_leak_check())
				k = 102;
			fflush(NULL);
			_exit(k);
		}
		close(fds[0]);
		p->pipe[i] = fds[1];
	}
	return 0;
}

int t_procs_start(struct t_procs *p, const struct mlap2p_unique_id *id)
{
	int i, ret = 0;

	for (i = 0; i < p->n; i++) {
		if (kt_write_full(p->pipe[i], id, sizeof(*id)))
			ret = -EPIPE;
		close(p->pipe[i]);
	}
	return ret;
}

int t_procs_wait(struct t_procs *p)
{
	int i, st, ret = 0;

	for (i = 0; i < p->n; i++) {
		st = kt_wait(p->pid[i]);
		if (st && !ret) {
			ksft_print_msg("child %d (pid %d) ended with %d\n", i,
				       (int)p->pid[i], st);
			fflush(stdout);	/* a failed ASSERT ends us by _exit() */
			ret = st;
		}
	}
	return ret;
}

int t_wait_ge(volatile uint64_t *p, uint64_t v)
{
	int64_t deadline = mlap2p_now_ms() + T_WAIT_MS;
	unsigned long spins = 0;

	while (__atomic_load_n(p, __ATOMIC_ACQUIRE) < v) {
		if (++spins % 1024 == 0) {
			if (mlap2p_now_ms() > deadline)
				return -ETIMEDOUT;
			sched_yield();
		}
	}
	return 0;
}

uint32_t t_seed(int proto, int sender, int channel)
{
	return 0x9e3779b9u * (uint32_t)(proto + 1) ^
	       (uint32_t)(sender << 16) ^ (uint32_t)channel;
}

int t_send_pattern(struct mlap2p_comm *comm, int channel, int peer)
{
	struct mlap2p_conn_desc d;
	struct ncclConnInfo *c;
	uint64_t k = 0;
	void *tok;
	int p;

	if (mlap2p_conn_get(comm, channel, peer, MLAP2P_DIR_SEND, &d))
		return 1;
	c = &d.host->conn;
	if (!c->tail || !c->head || !c->ptrExchange || !c->sizesFifo)
		return 2;
	for (p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
		size_t n = (size_t)d.buff_sizes[p];
		uint32_t seed = t_seed(p, mlap2p_comm_rank(comm), channel);

		if (!n)
			continue;
		if (!c->buffs[p])
			return 3;
		if (n > T_PATTERN_BYTES)
			n = T_PATTERN_BYTES;
		kt_fill(c->buffs[p], n, seed);
		kt_fill(c->buffs[p] + d.buff_sizes[p] - n, n, ~seed);
		k++;
		c->sizesFifo[k % NCCL_STEPS] = (int)(n + (size_t)p);
		__atomic_store_n(c->tail, k, __ATOMIC_RELEASE);
		if (t_wait_ge(c->head, k))
			return 4;
	}
	/* The receiver offers a token through ptrExchange (our sendMem). */
	{
		int64_t deadline = mlap2p_now_ms() + T_WAIT_MS;

		while (!(tok = __atomic_load_n(c->ptrExchange, __ATOMIC_ACQUIRE))) {
			if (mlap2p_now_ms() > deadline)
				return 5;
			sched_yield();
		}
	}
	if (tok != (void *)(uintptr_t)(0x1000 + channel))
		return 6;
	__atomic_store_n(c->ptrExchange, NULL, __ATOMIC_RELEASE);
	return 0;
}

int t_recv_pattern(struct mlap2p_comm *comm, int channel, int peer)
{
	struct mlap2p_conn_desc d;
	struct ncclConnInfo *c;
	uint64_t k = 0;
	int p;

	if (mlap2p_conn_get(comm, channel, peer, MLAP2P_DIR_RECV, &d))
		return 11;
	c = &d.host->conn;
	if (!c->tail || !c->head || !c->ptrExchange || !c->sizesFifo)
		return 12;
	for (p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
		size_t n = (size_t)d.buff_sizes[p];
		uint32_t seed = t_seed(p, peer, channel);

		if (!n)
			continue;
		if (!c->buffs[p])
			return 13;
		if (n > T_PATTERN_BYTES)
			n = T_PATTERN_BYTES;
		k++;
		if (t_wait_ge(c->tail, k))
			return 14;
		if (c->sizesFifo[k % NCCL_STEPS] != (int)(n + (size_t)p))
			return 15;
		if (kt_check(c->buffs[p], n, seed) >= 0)
			return 16;
		if (kt_check(c->buffs[p] + d.buff_sizes[p] - n, n,
			    ~seed) >= 0)
			return 17;
		__atomic_store_n(c->head, k, __ATOMIC_RELEASE);
	}
	__atomic_store_n(c->ptrExchange, (void *)(uintptr_t)(0x1000 + channel),
			 __ATOMIC_RELEASE);
	/* Wait until the sender took it, so teardown finds it consumed. */
	{
		int64_t deadline = mlap2p_now_ms() + T_WAIT_MS;

		while (__atomic_load_n(c->ptrExchange, __ATOMIC_ACQUIRE)) {
			if (mlap2p_now_ms() > deadline)
				return 18;
			sched_yield();
		}
	}
	return 0;
}

int t_exchange(struct mlap2p_comm *comm, int channel, int peer)
{
	int ret;

	if (mlap2p_comm_rank(comm) < peer) {
		ret = t_send_pattern(comm, channel, peer);
		if (!ret)
			ret = t_recv_pattern(comm, channel, peer);
	} else {
		ret = t_recv_pattern(comm, channel, peer);
		if (!ret)
			ret = t_send_pattern(comm, channel, peer);
	}
	return ret;
}

int t_check_mirror(struct mlap2p_comm *comm, int channel, int peer, int dir)
{
	struct mlap2p_conn_desc d;

	if (mlap2p_conn_get(comm, channel, peer, dir, &d))
		return 21;
	if (!d.dev || d.dev == d.host)
		return 22;
	if (d.dev->connected != 1)
		return 23;
	if (memcmp(&d.dev->conn, &d.host->conn,
		   offsetof(struct ncclConnInfo, step)))
		return 24;
	return 0;
}

int t_fd_count(void)
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
	return n - 1;	/* the DIR's own descriptor */
}

int t_memfd_count(void)
{
	char line[512], path[64], target[256];
	struct dirent *e;
	int n = 0;
	FILE *f;
	DIR *d;

	f = fopen("/proc/self/maps", "re");
	if (f) {
		while (fgets(line, sizeof(line), f))
			if (strstr(line, "memfd:mlap2p"))
				n++;
		fclose(f);
	}
	d = opendir("/proc/self/fd");
	if (d) {
		while ((e = readdir(d))) {
			ssize_t len;

			snprintf(path, sizeof(path), "/proc/self/fd/%.32s",
				 e->d_name);
			len = readlink(path, target, sizeof(target) - 1);
			if (len <= 0)
				continue;
			target[len] = '\0';
			if (strstr(target, "memfd:mlap2p"))
				n++;
		}
		closedir(d);
	}
	return n;
}

/* The whole of mlap2p_dump_state() into @out (NUL-terminated): 0, or -1
 * when it fails or does not fit. */
static int t_dump_text(struct mlap2p_comm *comm, char *out, size_t size)
{
	ssize_t got = 0;
	size_t len;
	int fds[2];

	if (pipe(fds))
		return -1;
	if (mlap2p_dump_state(comm, fds[1])) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	close(fds[1]);
	for (len = 0; len < size - 1; len += (size_t)got) {
		got = read(fds[0], out + len, size - 1 - len);
		if (got <= 0)
			break;
	}
	close(fds[0]);
	out[len] = '\0';
	return got < 0 || len >= size - 1 ? -1 : 0;
}

/* Scan "ops N single-copy M split S" of the line t_link_counts() finds. */
static int t_link_line(struct mlap2p_comm *comm, const char *key,
		       unsigned long long v[3])
{
	char out[16384];
	const char *at;

	if (t_dump_text(comm, out, sizeof(out)))
		return -1;
	at = key ? strstr(out, key) : out;
	at = at ? strstr(at, " ops ") : NULL;
	if (!at || sscanf(at, " ops %llu single-copy %llu split %llu",
			  &v[0], &v[1], &v[2]) != 3)
		return -1;
	return 0;
}

int t_link_counts(struct mlap2p_comm *comm, const char *key,
		  unsigned long long *ops, unsigned long long *direct)
{
	unsigned long long v[3];

	if (t_link_line(comm, key, v))
		return -1;
	*ops = v[0];
	*direct = v[1];
	return 0;
}

int t_link_splits(struct mlap2p_comm *comm, const char *key,
		  unsigned long long *split)
{
	unsigned long long v[3];

	if (t_link_line(comm, key, v))
		return -1;
	*split = v[2];
	return 0;
}

int t_net_available(void)
{
	struct mlap2p_unique_id id;
	struct t_rank r = { .nranks = 1 };
	int ok = 0;

	if (mlap2p_get_unique_id(&id))
		return 0;
	r.id = id;
	if (t_init(&r))
		return 0;
	netTransport.canConnect(&ok, mlap2p_nccl(r.comm)->topo, NULL,
				&mlap2p_nccl(r.comm)->peerInfo[0],
				&mlap2p_nccl(r.comm)->peerInfo[0]);
	mlap2p_comm_destroy(r.comm);
	return ok;
}

int t_cma_between_siblings(void)
{
	static volatile char target = 'a';
	char c = 'b';
	pid_t a, b;
	int st = 0;

	a = fork();
	if (a == 0) {
		pause();
		_exit(0);
	}
	b = fork();
	if (b == 0) {
		struct iovec l = { &c, 1 }, r = { (void *)&target, 1 };

		_exit(process_vm_writev(a, &l, 1, &r, 1, 0) == 1 ? 0 : 1);
	}
	if (a < 0 || b < 0 || waitpid(b, &st, 0) != b)
		st = 1;
	if (a > 0) {
		kill(a, SIGKILL);
		waitpid(a, NULL, 0);
	}
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* The sums over the links of @dir ("->" or "<-") of mlap2p_dump_state(). */
int t_links_sum(struct mlap2p_comm *comm, const char *dir,
		unsigned long long *ops, unsigned long long *direct)
{
	char out[16384], key[8], *line, *save = NULL;
	unsigned long long v[3];
	int n = 0;

	*ops = 0;
	*direct = 0;
	if (t_dump_text(comm, out, sizeof(out)))
		return -1;
	snprintf(key, sizeof(key), " %s ", dir);
	for (line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *at = strstr(line, " ops ");

		if (!at || !strstr(line, key) ||
		    sscanf(at, " ops %llu single-copy %llu split %llu",
			   &v[0], &v[1], &v[2]) != 3)
			continue;
		*ops += v[0];
		*direct += v[1];
		n++;
	}
	return n ? 0 : -1;
}

int t_coll_ways(struct mlap2p_comm *comm, unsigned long long *w)
{
	char out[16384], *at;

	if (t_dump_text(comm, out, sizeof(out)))
		return -1;
	at = strstr(out, " collectives: ");
	if (!at || sscanf(at, " collectives: ring %llu one-shot %llu pairs %llu direct-regions %llu direct-address %llu",
			  &w[0], &w[1], &w[2], &w[3], &w[4]) != T_COLL_WAYS)
		return -1;
	return 0;
}

int t_refuse_cma(void)
{
	struct __user_cap_header_struct h = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct d[2];

	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) ||
	    syscall(SYS_capget, &h, d))
		return -errno;
	d[CAP_TO_INDEX(CAP_SYS_PTRACE)].effective &=
		~CAP_TO_MASK(CAP_SYS_PTRACE);
	return syscall(SYS_capset, &h, d) ? -errno : 0;
}
