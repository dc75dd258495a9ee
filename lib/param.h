/* SPDX-License-Identifier: MIT */
/*
 * lib/param.h: the environment (lib/param.c): typed, range-checked reads
 * of one variable each, and the per-communicator snapshot taken at init.
 */
#ifndef MLAP2P_LIB_PARAM_H
#define MLAP2P_LIB_PARAM_H

#include <stdint.h>

#include "mlap2p/transport.h"

/* Default FIFO sizes, as NCCL 2.7 (NCCL_LL_BUFFSIZE, ...). */
#define DEFAULT_LL_BUFFSIZE	(8 * 512 * NCCL_STEPS * 16)
#define DEFAULT_LL128_BUFFSIZE	(120 * 640 * NCCL_STEPS * 8)
#define DEFAULT_BUFFSIZE	(4 << 20)

/*
 * Each reads one variable.  Unset (or empty): *out = @def, 0.  A value that
 * does not parse or is out of range: a WARN naming the variable, -EINVAL.
 * Settings are logged once per process under NCCL_ENV.
 */
int mlap2p_env_int(const char *name, long min, long max, long def, long *out);
/* Byte sizes accept K, M, G suffixes (powers of 1024). */
int mlap2p_env_size(const char *name, uint64_t min, uint64_t max,
		    uint64_t def, uint64_t *out);
/* One of @names (case-insensitive), or its index as a number. */
int mlap2p_env_enum(const char *name, const char *const *names, int nr,
		    int def, int *out);
/*
 * An NCCL_P2P_LEVEL value to the farthest MLAP2P_EDGE_* P2P may use: the
 * class names, NCCL's path names or NCCL's old numbers.  0 or -EINVAL.
 */
int mlap2p_parse_p2p_level(const char *s, int *edge);
/* Timeouts in milliseconds: "500ms", "5s", "2" (seconds), "0" = forever. */
int mlap2p_env_timeout(const char *name, long def_ms, long *out_ms);

/* Channels a communicator has (core.h's MAXCHANNELS is this). */
#define MLAP2P_MAXCHANNELS	32

/* Per communicator snapshot of the environment, taken at init. */
struct mlap2p_params {
	int p2pDisable;			/* NCCL_P2P_DISABLE */
	int p2pLevel;			/* NCCL_P2P_LEVEL, MLAP2P_EDGE_* cap */
	int p2pReadEnable;		/* NCCL_P2P_READ_ENABLE */
	int buffSizes[NCCL_NUM_PROTOCOLS]; /* NCCL_LL/LL128_BUFFSIZE, NCCL_BUFFSIZE */
	long bootstrapTimeoutMs;	/* MLAP2P_BOOTSTRAP_TIMEOUT, 0 = none */
	char *rings;			/* NCCL_RINGS (strdup) or NULL */
	/* NCCL_MIN/MAX_NCHANNELS, NCCL_MIN/MAX_P2P_NCHANNELS,
	 * NCCL_NCHANNELS_PER_NET_PEER: mlap2p_topo_channels(). */
	int minRings, maxRings, minP2p, maxP2p, netPerPeer;
};

int mlap2p_params_load(struct mlap2p_params *p);
void mlap2p_params_free(struct mlap2p_params *p);

#endif /* MLAP2P_LIB_PARAM_H */
