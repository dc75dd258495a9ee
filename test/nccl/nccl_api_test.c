// SPDX-License-Identifier: GPL-2.0
/*
 * <nccl.h>: version, error strings, every result an argument or usage
 * error gives (exact code and ncclGetLastError text), the "device" rule,
 * non-blocking init, ncclCommInitAll's devices and PreMulSum operators.
 */
#include "nccl_check.h"

static void last_is(ncclComm_t comm, const char *want)
{
	const char *got = ncclGetLastError(comm);

	if (strcmp(got, want)) {
		fprintf(stderr, "last error \"%s\", want \"%s\"\n", got, want);
		exit(1);
	}
}

/* A one-rank communicator in a child with @env set; its device. */
static int child_device(const char *env, const char *val, int cfgCore,
			ncclResult_t want)
{
	pid_t pid = fork();

	if (pid == 0) {
		ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
		ncclUniqueId id;
		ncclComm_t c;
		int dev = -1;

		if (env)
			setenv(env, val, 1);
		NCCLCHECK(ncclGetUniqueId(&id));
		cfg.mlap2pCore = cfgCore;
		NCCLEQ(want, ncclCommInitRankConfig(&c, 1, id, 0, &cfg));
		if (want != ncclSuccess)
			_exit(200);
		NCCLCHECK(ncclCommCuDevice(c, &dev));
		NCCLCHECK(ncclCommDestroy(c));
		_exit(dev);
	}
	return nt_wait(pid);
}

static void test_device_rule(void)
{
	unsetenv("MLAP2P_CORE");
	unsetenv("NEURON_RT_VISIBLE_CORES");
	unsetenv("LOCAL_RANK");
	unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
	unsetenv("SLURM_LOCALID");
	unsetenv("MPI_LOCALRANKID");
	CHECK(child_device(NULL, NULL, NCCL_CONFIG_UNDEF_INT, ncclSuccess) == 0);
	CHECK(child_device("MLAP2P_CORE", "7", NCCL_CONFIG_UNDEF_INT,
			   ncclSuccess) == 7);
	CHECK(child_device("MLAP2P_CORE", "7", 9, ncclSuccess) == 9);
	CHECK(child_device("NEURON_RT_VISIBLE_CORES", "4-7",
			   NCCL_CONFIG_UNDEF_INT, ncclSuccess) == 4);
	CHECK(child_device("NEURON_RT_VISIBLE_CORES", "6,2",
			   NCCL_CONFIG_UNDEF_INT, ncclSuccess) == 6);
	CHECK(child_device("LOCAL_RANK", "3", NCCL_CONFIG_UNDEF_INT,
			   ncclSuccess) == 3);
	CHECK(child_device("MLAP2P_CORE", "x", NCCL_CONFIG_UNDEF_INT,
			   ncclInvalidArgument) == 200);
	/* A system error: the module's runtime where there is no module. */
	if (access("/dev/mlap2p", F_OK))
		CHECK(child_device("MLAP2P_RUNTIME", "kmod",
				   NCCL_CONFIG_UNDEF_INT,
				   ncclSystemError) == 200);
}

static void test_nonblocking(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
		ncclResult_t state;
		ncclUniqueId id;
		ncclComm_t c;
		double t0 = nt_now();

		cfg.blocking = 0;
		NCCLCHECK(ncclGetUniqueId(&id));
		NCCLEQ(ncclInProgress, ncclCommInitRankConfig(&c, 1, id, 0, &cfg));
		do {
			NCCLCHECK(ncclCommGetAsyncError(c, &state));
			CHECK(state == ncclInProgress || state == ncclSuccess);
			CHECK(nt_now() - t0 < 20);
		} while (state == ncclInProgress);
		NCCLCHECK(ncclCommFinalize(c));
		NCCLCHECK(ncclCommDestroy(c));
		/* A config not made by NCCL_CONFIG_INITIALIZER. */
		memset(&cfg, 0, sizeof(cfg));
		NCCLEQ(ncclInvalidArgument,
		       ncclCommInitRankConfig(&c, 1, id, 0, &cfg));
		last_is(NULL, "ncclCommInitRankConfig: config not initialized with NCCL_CONFIG_INITIALIZER");
		_exit(0);
	}
	CHECK(nt_wait(pid) == 0);
}

static void test_strings(void)
{
	int v = 0;

	CHECK(NCCL_VERSION_CODE == 21803);
	CHECK(NCCL_VERSION(2, 18, 3) == 21803);
	CHECK(NCCL_VERSION(2, 8, 4) == 2804);
	NCCLCHECK(ncclGetVersion(&v));
	CHECK(v == NCCL_VERSION_CODE);
	NCCLEQ(ncclInvalidArgument, ncclGetVersion(NULL));
	last_is(NULL, "ncclGetVersion: version is NULL");
	CHECK(!strcmp(ncclGetErrorString(ncclSuccess), "no error"));
	CHECK(!strcmp(ncclGetErrorString(ncclUnhandledCudaError),
		      "unhandled cuda error (run with NCCL_DEBUG=INFO for details)"));
	CHECK(!strcmp(ncclGetErrorString(ncclSystemError),
		      "unhandled system error (run with NCCL_DEBUG=INFO for details)"));
	CHECK(!strcmp(ncclGetErrorString(ncclInternalError),
		      "internal error - please report this issue to the NCCL developers"));
	CHECK(!strcmp(ncclGetErrorString(ncclInvalidArgument),
		      "invalid argument (run with NCCL_DEBUG=WARN for details)"));
	CHECK(!strcmp(ncclGetErrorString(ncclInvalidUsage),
		      "invalid usage (run with NCCL_DEBUG=WARN for details)"));
	CHECK(!strcmp(ncclGetErrorString(ncclRemoteError),
		      "remote process exited or there was a network error"));
	CHECK(!strcmp(ncclGetErrorString(ncclInProgress),
		      "NCCL operation in progress"));
	CHECK(!strcmp(ncclGetErrorString(ncclNumResults), "unknown result code"));
	/* Usage: a group end without a start. */
	NCCLEQ(ncclInvalidUsage, ncclGroupEnd());
	last_is(NULL, "ncclGroupEnd: not in a group call");
	NCCLCHECK(ncclGroupStart());
	NCCLCHECK(ncclGroupStart());
	NCCLCHECK(ncclGroupEnd());
	NCCLCHECK(ncclGroupEnd());
	NCCLEQ(ncclInvalidUsage, ncclGroupEnd());
}

static void test_comms(void)
{
	int devs[2] = { 3, 5 }, n, r, d, i;
	ncclComm_t comms[2];
	ncclUniqueId id;
	ncclComm_t c = NULL;
	ncclRedOp_t op, op2;
	float f = 0.5f, buf[4] = { 0 };
	double dbl = 2.0;

	NCCLCHECK(ncclGetUniqueId(&id));
	NCCLEQ(ncclInvalidArgument, ncclCommInitRank(&c, 2, id, 5));
	last_is(NULL, "ncclCommInitRank: invalid rank 5 of 2 ranks");
	CHECK(c == NULL);
	NCCLEQ(ncclInvalidArgument, ncclCommInitAll(comms, 0, NULL));

	NCCLCHECK(ncclCommInitAll(comms, 2, devs));
	for (i = 0; i < 2; i++) {
		NCCLCHECK(ncclCommCount(comms[i], &n));
		NCCLCHECK(ncclCommUserRank(comms[i], &r));
		NCCLCHECK(ncclCommCuDevice(comms[i], &d));
		CHECK(n == 2 && r == i && d == devs[i]);
	}
	NCCLEQ(ncclInvalidArgument, ncclCommCount(NULL, &n));
	NCCLEQ(ncclInvalidArgument, ncclCommCount(comms[0], NULL));

	/* Argument errors: exact code and text, the comm still usable. */
	NCCLEQ(ncclInvalidArgument,
	       ncclAllReduce(buf, buf, 4, (ncclDataType_t)42, ncclSum,
			     comms[0], NULL));
	last_is(comms[0], "ncclAllReduce: invalid datatype 42");
	NCCLEQ(ncclInvalidArgument,
	       ncclAllReduce(buf, buf, 4, ncclFloat, (ncclRedOp_t)99,
			     comms[0], NULL));
	last_is(comms[0], "ncclAllReduce: invalid reduction operation 99");
	NCCLEQ(ncclInvalidArgument,
	       ncclReduce(buf, buf, 4, ncclFloat, ncclSum, 2, comms[1], NULL));
	last_is(comms[1], "ncclReduce: invalid root 2 (nranks 2)");
	NCCLEQ(ncclInvalidArgument,
	       ncclBroadcast(buf, buf, 4, ncclFloat, -1, comms[1], NULL));
	last_is(comms[1], "ncclBroadcast: invalid root -1 (nranks 2)");
	NCCLEQ(ncclInvalidArgument,
	       ncclSend(buf, 4, ncclFloat, 7, comms[0], NULL));
	last_is(comms[0], "ncclSend: invalid peer 7 (nranks 2)");
	NCCLEQ(ncclInvalidArgument,
	       ncclAllGather(NULL, buf, 4, ncclFloat, comms[0], NULL));
	last_is(comms[0], "ncclAllGather: NULL buffer with count 4");
	NCCLEQ(ncclInvalidArgument,
	       ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, NULL, NULL));
	last_is(NULL, "ncclAllReduce: invalid communicator");
	/* One the library finds, on the path a plain call takes. */
	NCCLEQ(ncclInvalidArgument,
	       ncclAllReduce(buf, buf + 1, 2, ncclFloat, ncclSum, comms[0],
			     NULL));
	last_is(comms[0], "Invalid argument: mlap2p_all_reduce: sendbuf and recvbuf overlap, other than in place");
	/* A group with a bad call fails as a whole. */
	NCCLCHECK(ncclGroupStart());
	NCCLEQ(ncclInvalidArgument,
	       ncclRecv(buf, 4, (ncclDataType_t)12, 1, comms[0], NULL));
	NCCLEQ(ncclInvalidArgument, ncclGroupEnd());

	/* One thread splits both ranks in a group (each split waits for the
	 * other rank): the children exist at the group's end, rank by key. */
	{
		ncclComm_t kid[2] = { NULL, NULL };
		float in[2][3] = { { 1, 2, 3 }, { 10, 20, 30 } }, out[2][3];
		int j, r;

		NCCLCHECK(ncclGroupStart());
		NCCLCHECK(ncclCommSplit(comms[0], 5, 1, &kid[0], NULL));
		NCCLCHECK(ncclCommSplit(comms[1], 5, 0, &kid[1], NULL));
		CHECK(kid[0] == NULL && kid[1] == NULL);
		NCCLCHECK(ncclGroupEnd());
		CHECK(kid[0] && kid[1]);
		NCCLCHECK(ncclCommUserRank(kid[0], &r));
		CHECK(r == 1);
		NCCLCHECK(ncclCommUserRank(kid[1], &r));
		CHECK(r == 0);
		NCCLCHECK(ncclGroupStart());
		for (j = 0; j < 2; j++)
			NCCLCHECK(ncclAllReduce(in[j], out[j], 3, ncclFloat,
						ncclSum, kid[j], NULL));
		NCCLCHECK(ncclGroupEnd());
		for (j = 0; j < 2; j++)
			CHECK(out[j][0] == 11 && out[j][1] == 22 &&
			      out[j][2] == 33);
		/* One after the other from this thread, as NCCL programs do. */
		NCCLCHECK(ncclCommDestroy(kid[0]));
		NCCLCHECK(ncclCommDestroy(kid[1]));
	}
	/* A group whose split has a bad argument fails before it runs. */
	NCCLCHECK(ncclGroupStart());
	NCCLEQ(ncclInvalidArgument, ncclCommSplit(comms[0], -2, 0, &c, NULL));
	NCCLEQ(ncclInvalidArgument, ncclGroupEnd());

	/* PreMulSum operators: per communicator, typed. */
	NCCLCHECK(ncclRedOpCreatePreMulSum(&op, &f, ncclFloat,
					   ncclScalarHostImmediate, comms[0]));
	CHECK((int)op == ncclNumOps);
	NCCLCHECK(ncclRedOpCreatePreMulSum(&op2, &dbl, ncclDouble,
					   ncclScalarDevice, comms[0]));
	CHECK((int)op2 == ncclNumOps + 1);
	NCCLEQ(ncclInvalidArgument,
	       ncclAllReduce(buf, buf, 4, ncclFloat, op2, comms[0], NULL));
	last_is(comms[0], "ncclAllReduce: invalid reduction operation 6");
	/* A count whose bytes overflow fails before the operator's scratch
	 * is sized from it (it wrapped to 0 and the scaling wrote past). */
	NCCLEQ(ncclInvalidArgument,
	       ncclAllReduce(buf, buf, (size_t)1 << 62, ncclFloat, op,
			     comms[0], NULL));
	last_is(comms[0], "ncclAllReduce: count 4611686018427387904 overflows");
	NCCLEQ(ncclInvalidArgument,
	       ncclReduceScatter(buf, buf, (size_t)1 << 61, ncclFloat, op,
				 comms[0], NULL));
	last_is(comms[0], "ncclReduceScatter: count 2305843009213693952 overflows");
	NCCLEQ(ncclInvalidArgument, ncclRedOpDestroy(ncclSum, comms[0]));
	last_is(comms[0], "ncclRedOpDestroy: operator 0 is a builtin");
	NCCLEQ(ncclInvalidArgument, ncclRedOpDestroy(op, comms[1]));
	last_is(comms[1], "ncclRedOpDestroy: operator 5 was not created on this communicator");
	NCCLCHECK(ncclRedOpDestroy(op, comms[0]));
	NCCLCHECK(ncclRedOpDestroy(op2, comms[0]));
	NCCLEQ(ncclInvalidArgument, ncclRedOpDestroy(op, comms[0]));
	NCCLEQ(ncclInvalidArgument,
	       ncclRedOpCreatePreMulSum(&op, &f, (ncclDataType_t)10,
					ncclScalarHostImmediate, comms[0]));

	NCCLCHECK(ncclCommFinalize(comms[0]));
	NCCLCHECK(ncclCommFinalize(comms[1]));
	NCCLCHECK(ncclCommDestroy(comms[0]));
	NCCLCHECK(ncclCommDestroy(comms[1]));
	NCCLEQ(ncclInvalidArgument, ncclCommDestroy(NULL));
}

int main(void)
{
	nt_env();
	/* Children first: this process has no thread yet. */
	test_device_rule();
	test_nonblocking();
	test_strings();
	test_comms();
	printf("nccl_api_test: ok\n");
	return 0;
}
