// SPDX-License-Identifier: MIT
/*
 * Environment variables.  Each is read when a communicator is created (a
 * snapshot, struct mlap2p_params), so two communicators never share
 * mutable state.  A value that does not parse is refused with a WARN that
 * names the variable, and init fails with -EINVAL: a typo in a knob never
 * silently turns into a default.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <linux/mlap2p.h>

#include "log.h"
#include "param.h"
#include "util.h"

static const char *mlap2p_env_get(const char *name)
{
	const char *s = getenv(name);

	return s && *s ? s : NULL;
}

/*
 * Log "X set by environment to Y" once per process and setting, as NCCL
 * does, however many communicators read it.  A small table of hashes: log
 * state, not communicator state.
 */
static void mlap2p_env_log(const char *name, const char *value)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static uint64_t seen[64];	/* protected by lock */
	static unsigned int nseen;
	uint64_t h;
	unsigned int i;
	bool fresh = true;

	if (!mlap2p_log_enabled(NCCL_LOG_INFO, NCCL_ENV))
		return;
	h = mlap2p_hash(value, strlen(value), mlap2p_hash(name, strlen(name), 0));
	pthread_mutex_lock(&lock);
	for (i = 0; i < nseen && fresh; i++)
		fresh = seen[i] != h;
	if (fresh && nseen < ARRAY_SIZE(seen))
		seen[nseen++] = h;
	pthread_mutex_unlock(&lock);
	if (fresh)
		INFO(NCCL_ENV, "%s set by environment to %s", name, value);
}

static int mlap2p_parse_long(const char *s, long *v)
{
	char *end;

	errno = 0;
	*v = strtol(s, &end, 0);
	if (errno || end == s || *end)
		return -EINVAL;
	return 0;
}

int mlap2p_env_int(const char *name, long min, long max, long def, long *out)
{
	const char *s = mlap2p_env_get(name);
	long v;

	if (!s) {
		*out = def;
		return 0;
	}
	if (mlap2p_parse_long(s, &v) || v < min || v > max) {
		WARN("%s=%s is not valid: expected an integer from %ld to %ld",
		     name, s, min, max);
		return -EINVAL;
	}
	mlap2p_env_log(name, s);
	*out = v;
	return 0;
}

int mlap2p_env_size(const char *name, uint64_t min, uint64_t max,
		    uint64_t def, uint64_t *out)
{
	const char *s = mlap2p_env_get(name);
	unsigned long long v;
	uint64_t mul = 1;
	char *end;

	if (!s) {
		*out = def;
		return 0;
	}
	errno = 0;
	v = strtoull(s, &end, 0);
	if (!errno && end != s && *s != '-') {
		switch (*end) {
		case 'k': case 'K':
			mul = 1ULL << 10;
			end++;
			break;
		case 'm': case 'M':
			mul = 1ULL << 20;
			end++;
			break;
		case 'g': case 'G':
			mul = 1ULL << 30;
			end++;
			break;
		}
	}
	if (errno || end == s || *end || *s == '-' ||
	    v > max / mul || v * mul < min || v * mul > max) {
		WARN("%s=%s is not valid: expected a size from %llu to %llu bytes (K, M, G suffixes allowed)",
		     name, s, (unsigned long long)min, (unsigned long long)max);
		return -EINVAL;
	}
	mlap2p_env_log(name, s);
	*out = v * mul;
	return 0;
}

int mlap2p_env_enum(const char *name, const char *const *names, int nr,
		    int def, int *out)
{
	const char *s = mlap2p_env_get(name);
	char list[256] = "";
	long v;
	int i;

	if (!s) {
		*out = def;
		return 0;
	}
	for (i = 0; i < nr; i++) {
		if (names[i] && !strcasecmp(s, names[i])) {
			mlap2p_env_log(name, s);
			*out = i;
			return 0;
		}
	}
	if (!mlap2p_parse_long(s, &v) && v >= 0 && v < nr && names[v]) {
		mlap2p_env_log(name, s);
		*out = (int)v;
		return 0;
	}
	for (i = 0; i < nr; i++) {
		if (!names[i])
			continue;
		if (*list)
			strncat(list, "|", sizeof(list) - strlen(list) - 1);
		strncat(list, names[i], sizeof(list) - strlen(list) - 1);
	}
	WARN("%s=%s is not valid: expected one of %s", name, s, list);
	return -EINVAL;
}

int mlap2p_env_timeout(const char *name, long def_ms, long *out_ms)
{
	const char *s = mlap2p_env_get(name);
	double v;
	char *end;

	if (!s) {
		*out_ms = def_ms;
		return 0;
	}
	errno = 0;
	v = strtod(s, &end);
	if (!errno && end != s && v >= 0) {
		if (!strcmp(end, "ms"))
			;
		else if (!*end || !strcmp(end, "s"))
			v *= 1000;
		else
			end = (char *)s;
	}
	if (errno || end == s || v < 0 || v > (double)LONG_MAX / 2) {
		WARN("%s=%s is not valid: expected a duration such as 5, 5s or 500ms (0 waits forever)",
		     name, s);
		return -EINVAL;
	}
	mlap2p_env_log(name, s);
	*out_ms = (long)v;
	return 0;
}

/* NCCL_DEBUG and NCCL_DEBUG_SUBSYS are read by lib/log.c; checked here. */
static int mlap2p_check_debug_env(void)
{
	static const char *const levels[] = {
		"NONE", "VERSION", "WARN", "INFO", "ABORT", "TRACE",
	};
	static const char *const subsys[] = {
		"INIT", "COLL", "P2P", "SHM", "NET", "GRAPH", "TUNING", "ENV",
		"ALLOC", "CALL", "PROXY", "BOOTSTRAP", "ALL", "NVLS", "REG",
		"PROFILE", "RAS",
	};
	char buf[256], *tok, *save = NULL;
	const char *s;
	size_t i;
	int level;

	if (mlap2p_env_enum("NCCL_DEBUG", levels, ARRAY_SIZE(levels), 0,
			    &level))
		return -EINVAL;
	s = mlap2p_env_get("NCCL_DEBUG_SUBSYS");
	if (!s)
		return 0;
	snprintf(buf, sizeof(buf), "%s", *s == '^' ? s + 1 : s);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		for (i = 0; i < ARRAY_SIZE(subsys); i++)
			if (!strcasecmp(tok, subsys[i]))
				break;
		if (i == ARRAY_SIZE(subsys)) {
			WARN("NCCL_DEBUG_SUBSYS=%s is not valid: unknown subsystem '%s'",
			     s, tok);
			return -EINVAL;
		}
	}
	return 0;
}

/*
 * NCCL_P2P_LEVEL, the farthest edge class P2P may use (docs/topology.md
 * has the table).  The project's class names; NCCL's path names, mapped
 * onto the classes in NCCL's order (LOC is the path to the device itself:
 * the same MLA); or a number, which NCCL reads in its old numbering
 * (levelsOldToNew in NCCL's paths.cc: 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 and
 * above SYS).  Names in any case.  Anything else is refused.
 */
static const struct {
	const char *name;
	int edge;
} mlap2p_p2p_levels[] = {
	{ "LOCAL", MLAP2P_EDGE_LOCAL },
	{ "D2D", MLAP2P_EDGE_D2D },
	{ "RELAY", MLAP2P_EDGE_RELAY },
	{ "POD", MLAP2P_EDGE_POD },
	{ "LOC", MLAP2P_EDGE_LOCAL },
	{ "NVL", MLAP2P_EDGE_D2D },
	{ "NVB", MLAP2P_EDGE_RELAY },
	{ "PIX", MLAP2P_EDGE_RELAY },
	{ "PXB", MLAP2P_EDGE_RELAY },
	{ "PHB", MLAP2P_EDGE_RELAY },
	{ "SYS", MLAP2P_EDGE_POD },
};

/* NCCL's old numbers, through its own names. */
static const char *const mlap2p_p2p_old_levels[] = {
	"LOC", "PIX", "PXB", "PHB", "SYS",
};

int mlap2p_parse_p2p_level(const char *s, int *edge)
{
	const char *name = NULL;
	size_t i;
	long v;

	if (!mlap2p_parse_long(s, &v) && v >= 0 && *s >= '0' && *s <= '9')
		name = mlap2p_p2p_old_levels[v < (long)ARRAY_SIZE(mlap2p_p2p_old_levels) ?
					     v : (long)ARRAY_SIZE(mlap2p_p2p_old_levels) - 1];
	for (i = 0; i < ARRAY_SIZE(mlap2p_p2p_levels); i++) {
		if (!strcasecmp(name ?: s, mlap2p_p2p_levels[i].name)) {
			*edge = mlap2p_p2p_levels[i].edge;
			return 0;
		}
	}
	return -EINVAL;
}

static int mlap2p_env_p2p_level(int *level)
{
	const char *s = mlap2p_env_get("NCCL_P2P_LEVEL");

	if (!s) {
		*level = MLAP2P_EDGE_POD;
		return 0;
	}
	if (mlap2p_parse_p2p_level(s, level)) {
		WARN("NCCL_P2P_LEVEL=%s is not valid: expected LOCAL|D2D|RELAY|POD, NCCL's LOC|NVL|NVB|PIX|PXB|PHB|SYS, or NCCL's number 0..5",
		     s);
		return -EINVAL;
	}
	mlap2p_env_log("NCCL_P2P_LEVEL", s);
	return 0;
}

/*
 * NCCL_P2P_DISABLE: an integer, as NCCL's parameters are (strtol, base
 * 0); any non-zero value disables P2P, as the seed's p2pCanConnect tests
 * it.
 */
static int mlap2p_env_p2p_disable(int *disable)
{
	const char *s = mlap2p_env_get("NCCL_P2P_DISABLE");
	long v;

	if (!s) {
		*disable = 0;
		return 0;
	}
	if (mlap2p_parse_long(s, &v)) {
		WARN("NCCL_P2P_DISABLE=%s is not valid: expected an integer (0 keeps P2P, any other value disables it)",
		     s);
		return -EINVAL;
	}
	mlap2p_env_log("NCCL_P2P_DISABLE", s);
	*disable = v != 0;
	return 0;
}

/* Channel-count bounds, as NCCL names them (MLAP2P_MAXCHANNELS is ours). */
static int mlap2p_params_channels(struct mlap2p_params *p)
{
	static const struct {
		const char *name;
		long def;
		size_t off;
	} v[] = {
		{ "NCCL_MIN_NCHANNELS", 1, offsetof(struct mlap2p_params, minRings) },
		{ "NCCL_MAX_NCHANNELS", MLAP2P_MAXCHANNELS, offsetof(struct mlap2p_params, maxRings) },
		{ "NCCL_MIN_P2P_NCHANNELS", 1, offsetof(struct mlap2p_params, minP2p) },
		{ "NCCL_MAX_P2P_NCHANNELS", MLAP2P_MAXCHANNELS, offsetof(struct mlap2p_params, maxP2p) },
		{ "NCCL_NCHANNELS_PER_NET_PEER", 2, offsetof(struct mlap2p_params, netPerPeer) },
	};
	size_t i;
	long x;
	int ret;

	for (i = 0; i < ARRAY_SIZE(v); i++) {
		ret = mlap2p_env_int(v[i].name, 1, MLAP2P_MAXCHANNELS, v[i].def, &x);
		if (ret)
			return ret;
		*(int *)((char *)p + v[i].off) = (int)x;
	}
	return 0;
}

int mlap2p_params_load(struct mlap2p_params *p)
{
	uint64_t ll, ll128, simple;
	long v;
	int ret;

	memset(p, 0, sizeof(*p));
	ret = mlap2p_check_debug_env();
	if (ret)
		return ret;
	ret = mlap2p_env_p2p_disable(&p->p2pDisable);
	if (ret)
		return ret;
	ret = mlap2p_env_p2p_level(&p->p2pLevel);
	if (ret)
		return ret;
	ret = mlap2p_env_int("NCCL_P2P_READ_ENABLE", 0, 1, 0, &v);
	if (ret)
		return ret;
	p->p2pReadEnable = (int)v;

	/* LL and LL128 may be 0 (protocol unused); SIMPLE needs a slot. */
	ret = mlap2p_env_size("NCCL_LL_BUFFSIZE", 0, 1ULL << 30,
			      DEFAULT_LL_BUFFSIZE, &ll);
	if (!ret)
		ret = mlap2p_env_size("NCCL_LL128_BUFFSIZE", 0, 1ULL << 30,
				      DEFAULT_LL128_BUFFSIZE, &ll128);
	if (!ret)
		ret = mlap2p_env_size("NCCL_BUFFSIZE", 4096, 1ULL << 30,
				      DEFAULT_BUFFSIZE, &simple);
	if (ret)
		return ret;
	p->buffSizes[NCCL_PROTO_LL] = (int)ll;
	p->buffSizes[NCCL_PROTO_LL128] = (int)ll128;
	p->buffSizes[NCCL_PROTO_SIMPLE] = (int)simple;

	ret = mlap2p_env_timeout("MLAP2P_BOOTSTRAP_TIMEOUT", 120 * 1000,
				 &p->bootstrapTimeoutMs);
	if (ret)
		return ret;

	ret = mlap2p_params_channels(p);
	if (ret)
		return ret;
	if (mlap2p_env_get("NCCL_RINGS")) {
		p->rings = strdup(getenv("NCCL_RINGS"));
		if (!p->rings)
			return -ENOMEM;
		mlap2p_env_log("NCCL_RINGS", p->rings);
	}
	return 0;
}

void mlap2p_params_free(struct mlap2p_params *p)
{
	free(p->rings);
	p->rings = NULL;
}
