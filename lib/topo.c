// SPDX-License-Identifier: MIT
/*
 * Topology: who each rank is (ncclPeerInfo), the edge class between every
 * pair of ranks (answered by the runtime: the module's CAN_ACCESS_PEER or
 * the same rules in common/mlap2p_topo.c), whether P2P may use an edge
 * (NCCL_P2P_LEVEL, same host, a rank on the relay MLA), and rings.
 *
 * Rings follow the seed's p2pGetRings in spirit: the old code searched
 * NVLink rings recursively and PCI rings by nearest distance; here one
 * search does both.  For the smallest class cap that admits a ring (LOCAL,
 * then D2D, RELAY, POD) a depth-first search builds a Hamiltonian cycle
 * from rank 0, always trying the nearest edge class first, so every hop
 * takes the nearest class still available (torus neighbours before
 * relays).  Ties are broken by a rotation that differs per channel pair,
 * and odd channels run the previous ring backwards, so channels may use
 * different rings and both directions of every link.  NCCL_RINGS (NCCL
 * 2.4's form, "0 1 2 3|3 2 1 0") overrides the search.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topo.h"
#include "log.h"
#include "param.h"
#include "rt/rt.h"
#include "util.h"

/* ---- rank-pair topology ---- */

void mlap2p_topo_free(struct ncclTopoSystem *topo)
{
	if (!topo)
		return;
	free(topo->edge);
	free(topo->intermediate);
	free(topo->relayMla);
	free(topo);
}

static int mlap2p_topo_check_ranks(struct ncclComm *comm)
{
	struct ncclPeerInfo *pi = comm->peerInfo;
	int a, b;

	for (a = 0; a < comm->nRanks; a++) {
		if (pi[a].rank != a) {
			WARN("rank %d: peer info of rank %d is garbled", comm->rank, a);
			return -EPROTO;
		}
		for (b = a + 1; b < comm->nRanks; b++) {
			if (pi[a].hostHash != pi[b].hostHash)
				continue;
			if (pi[a].cudaDev == pi[b].cudaDev) {
				WARN("ranks %d and %d both run on core %d of this host",
				     a, b, pi[a].cudaDev);
				return -EINVAL;
			}
			if (pi[a].rtKind != pi[b].rtKind ||
			    pi[a].topoHash != pi[b].topoHash) {
				WARN("ranks %d and %d disagree on the %s (rank %d: %s runtime, topology %08x; rank %d: %s runtime, topology %08x); every rank of a host must use the same runtime and topology",
				     a, b, pi[a].rtKind != pi[b].rtKind ?
				     "runtime" : "topology",
				     a, mlap2p_rt_kind_name(pi[a].rtKind),
				     pi[a].topoHash, b,
				     mlap2p_rt_kind_name(pi[b].rtKind),
				     pi[b].topoHash);
				return -EINVAL;
			}
		}
	}
	return 0;
}

int mlap2p_topo_compute(struct ncclComm *comm)
{
	struct ncclPeerInfo *pi = comm->peerInfo;
	struct ncclTopoSystem *t;
	int n = comm->nRanks, a, b, r, ret;

	ret = mlap2p_topo_check_ranks(comm);
	if (ret)
		return ret;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->comm = comm;
	t->nRanks = n;
	t->edge = calloc((size_t)n * (size_t)n, sizeof(int));
	t->intermediate = calloc((size_t)n * (size_t)n, sizeof(int));
	t->relayMla = calloc((size_t)n * (size_t)n, sizeof(int));
	if (!t->edge || !t->intermediate || !t->relayMla) {
		mlap2p_topo_free(t);
		return -ENOMEM;
	}
	for (a = 0; a < n; a++) {
		for (b = 0; b < n; b++) {
			int i = a * n + b, edge = MLAP2P_EDGE_NONE, mla = -1;

			t->intermediate[i] = -1;
			if (pi[a].hostHash == pi[b].hostHash) {
				ret = comm->rt->ops->deviceGetP2PAttribute(
					comm->rt, &edge, &mla, pi[a].cudaDev,
					pi[b].cudaDev);
				if (ret) {
					WARN("edge class between cores %d and %d: %s",
					     pi[a].cudaDev, pi[b].cudaDev,
					     mlap2p_strerror(ret));
					mlap2p_topo_free(t);
					return ret;
				}
			}
			t->edge[i] = edge;
			t->relayMla[i] = mla;
			if (edge != MLAP2P_EDGE_RELAY)
				continue;
			/* The lowest rank on the relay MLA of this host. */
			for (r = 0; r < n; r++) {
				if (pi[r].hostHash == pi[a].hostHash &&
				    (int)pi[r].mla == mla) {
					t->intermediate[i] = r;
					break;
				}
			}
		}
	}
	comm->topo = t;
	return 0;
}

static const char *mlap2p_edge_name(int edge)
{
	return mlap2p_topo_edge_name((__u32)edge) ?: "?";
}

ncclResult_t ncclTopoCheckP2p(struct ncclTopoSystem *topo,
			      struct ncclPeerInfo *a, struct ncclPeerInfo *b,
			      int *p2p, int *read, int *intermediateRank)
{
	struct ncclComm *comm = topo->comm;
	int i, edge;

	*p2p = 0;
	if (read)
		*read = comm->params.p2pReadEnable;
	if (intermediateRank)
		*intermediateRank = -1;
	if (a->rank < 0 || a->rank >= topo->nRanks || b->rank < 0 ||
	    b->rank >= topo->nRanks)
		return ncclInternalError;
	if (a->hostHash != b->hostHash)
		return ncclSuccess;
	i = a->rank * topo->nRanks + b->rank;
	edge = topo->edge[i];
	if (edge == MLAP2P_EDGE_NONE)
		return ncclSuccess;
	if (edge > comm->params.p2pLevel) {
		TRACE(NCCL_INIT | NCCL_P2P, "P2P %d -> %d: edge %s above NCCL_P2P_LEVEL %s",
		      a->rank, b->rank, mlap2p_edge_name(edge),
		      mlap2p_edge_name(comm->params.p2pLevel));
		return ncclSuccess;
	}
	if (edge == MLAP2P_EDGE_RELAY) {
		if (topo->intermediate[i] < 0) {
			INFO(NCCL_INIT | NCCL_P2P, "P2P %d -> %d needs a relay through MLA %d, which no rank runs on",
			     a->rank, b->rank, topo->relayMla[i]);
			return ncclSuccess;
		}
		if (intermediateRank)
			*intermediateRank = topo->intermediate[i];
	}
	*p2p = 1;
	return ncclSuccess;
}

/*
 * The seed's ncclTopoCheckPdsP2p (Trn3SwitchV1): whether @a and @b sit on
 * different nodes of one switch pod, the pod whose switch links every MLA
 * of every node.  From the runtime's locality answer (the module's
 * GET_INFO, or the host runtime's MLAP2P_POD), which both ranks must share:
 * the peer's topoHash is the hash of the same configuration.  It says
 * nothing about the hosts: across hosts the path exists but P2P cannot
 * take it (docs/topology.md, "Pods across hosts").
 */
ncclResult_t ncclTopoCheckPdsP2p(struct ncclTopoSystem *topo,
				 struct ncclPeerInfo *a, struct ncclPeerInfo *b,
				 int *pds)
{
	const struct mlap2p_topo *t = &topo->comm->rt->topo;

	*pds = t->pod_type == MLAP2P_POD_SWITCH &&
	       a->topoHash == b->topoHash && a->node != b->node;
	return ncclSuccess;
}

/*
 * The seed's ncclTopoCheckSameIntraCC: whether @a and @b sit in one
 * compute complex, the MLAs of one node that its D2D links (torus or ring)
 * and relays join: same host, same node of the runtime's topology.
 */
ncclResult_t ncclTopoCheckSameIntraCC(struct ncclTopoSystem *topo,
				      struct ncclPeerInfo *a,
				      struct ncclPeerInfo *b, int *sameCC)
{
	(void)topo;
	*sameCC = a->hostHash == b->hostHash && a->topoHash == b->topoHash &&
		  a->node == b->node;
	return ncclSuccess;
}

/* ---- rings ---- */

#define RING_INF	1000
#define RING_BUDGET	200000

struct ring_search {
	int n;
	int cap;
	int rot;
	const int *cost;	/* [a * n + b] */
	int *ring;
	char *used;
	long steps;
};

/* Cost of the hop a -> b for P2P, or RING_INF when P2P cannot take it. */
static int ring_cost(struct ncclComm *comm, int a, int b)
{
	int p2p = 0;

	if (comm->params.p2pDisable)
		return RING_INF;
	if (ncclTopoCheckP2p(comm->topo, &comm->peerInfo[a],
			     &comm->peerInfo[b], &p2p, NULL, NULL) ||
	    !p2p)
		return RING_INF;
	return comm->topo->edge[a * comm->nRanks + b];
}

static int ring_dfs(struct ring_search *s, int depth, int cur)
{
	int cand[64], *cands = cand, nc = 0, i, j, v, ok = 0;

	if (depth == s->n)
		return s->cost[cur * s->n + s->ring[0]] <= s->cap;
	if (++s->steps > RING_BUDGET)
		return 0;
	if (s->n > (int)ARRAY_SIZE(cand)) {
		cands = malloc(sizeof(int) * (size_t)s->n);
		if (!cands)
			return 0;
	}
	/* Candidates by cost, then by rotated rank: nearest class first. */
	for (i = 0; i < s->n; i++) {
		int k = (i + s->rot) % s->n;

		if (s->used[k] || s->cost[cur * s->n + k] > s->cap)
			continue;
		for (j = nc; j > 0 && s->cost[cur * s->n + cands[j - 1]] >
				      s->cost[cur * s->n + k]; j--)
			cands[j] = cands[j - 1];
		cands[j] = k;
		nc++;
	}
	for (i = 0; i < nc && !ok; i++) {
		v = cands[i];
		s->used[v] = 1;
		s->ring[depth] = v;
		ok = ring_dfs(s, depth + 1, v);
		if (!ok)
			s->used[v] = 0;
	}
	if (cands != cand)
		free(cands);
	return ok;
}

/* One ring for tie rotation @rot; 0 if found, else the identity order. */
static int ring_search(struct ncclComm *comm, const int *cost, int rot,
		       int *ring)
{
	struct ring_search s = {
		.n = comm->nRanks, .rot = rot, .cost = cost, .ring = ring,
	};
	int i, found = 0;

	s.used = calloc((size_t)s.n, 1);
	if (!s.used)
		return -ENOMEM;
	for (s.cap = MLAP2P_EDGE_LOCAL; s.cap <= MLAP2P_EDGE_POD && !found;
	     s.cap++) {
		memset(s.used, 0, (size_t)s.n);
		s.steps = 0;
		s.ring[0] = 0;
		s.used[0] = 1;
		found = ring_dfs(&s, 1, 0);
	}
	free(s.used);
	if (!found) {
		/* Let selectTransport say why this order cannot connect. */
		for (i = 0; i < comm->nRanks; i++)
			ring[i] = i;
		INFO(NCCL_GRAPH | NCCL_INIT, "rings: no P2P ring through all %d ranks; using rank order",
		     comm->nRanks);
	}
	return 0;
}

/*
 * Parse NCCL_RINGS as NCCL 2.4 did: numbers separated by anything, rings
 * separated by '|'.  Each ring must name every rank exactly once.
 */
static int rings_parse(const char *str, int nranks, int **out, int *nout)
{
	int *rings = NULL, nrings = 0, len = 0, cur = -1, i;
	char *seen = NULL;
	const char *p;
	int ret = -EINVAL;

	seen = calloc((size_t)nranks, 1);
	if (!seen)
		return -ENOMEM;
	for (p = str;; p++) {
		if (*p >= '0' && *p <= '9') {
			cur = (cur < 0 ? 0 : cur * 10) + (*p - '0');
			if (cur >= nranks)
				goto bad;
			continue;
		}
		if (cur >= 0) {
			int *grown;

			if (seen[cur] || len >= nranks)
				goto bad;
			seen[cur] = 1;
			grown = realloc(rings, sizeof(int) *
					(size_t)(nrings + 1) * (size_t)nranks);
			if (!grown) {
				ret = -ENOMEM;
				goto out;
			}
			rings = grown;
			rings[nrings * nranks + len++] = cur;
			cur = -1;
		}
		if (*p == '|' || *p == '\0') {
			if (len != nranks)
				goto bad;
			nrings++;
			len = 0;
			memset(seen, 0, (size_t)nranks);
			if (!*p)
				break;
		}
	}
	*out = rings;
	*nout = nrings;
	free(seen);
	return 0;
bad:
	WARN("NCCL_RINGS=%s is not valid for %d ranks: each ring (separated by '|') must list every rank 0..%d once",
	     str, nranks, nranks - 1);
	(void)i;
out:
	free(rings);
	free(seen);
	return ret;
}

int mlap2p_rings_check(const char *str, int nranks)
{
	int *rings, n, ret;

	ret = rings_parse(str, nranks, &rings, &n);
	if (!ret)
		free(rings);
	return ret;
}

int mlap2p_topo_rings(struct ncclComm *comm, int nrings, int *order)
{
	int n = comm->nRanks, r, i, ret = 0;
	int *cost;

	if (comm->params.rings) {
		int *parsed, np;

		ret = rings_parse(comm->params.rings, n, &parsed, &np);
		if (ret)
			return ret;
		for (r = 0; r < nrings; r++)
			memcpy(order + r * n, parsed + (r % np) * n,
			       sizeof(int) * (size_t)n);
		free(parsed);
		return 0;
	}

	cost = malloc(sizeof(int) * (size_t)n * (size_t)n);
	if (!cost)
		return -ENOMEM;
	for (i = 0; i < n * n; i++)
		cost[i] = i / n == i % n ? 0 : ring_cost(comm, i / n, i % n);
	for (r = 0; r < nrings && !ret; r++) {
		int *ring = order + r * n;

		if (r % 2 == 0) {
			ret = ring_search(comm, cost, (r / 2) % n, ring);
			continue;
		}
		/* The previous ring backwards: every link in both directions. */
		ring[0] = ring[-n];
		for (i = 1; i < n; i++)
			ring[i] = ring[-i];
		for (i = 0; i < n; i++) {
			int nx = ring[(i + 1) % n];

			if (cost[ring[i] * n + nx] >= RING_INF &&
			    cost[ring[-n + i] * n + ring[-n + (i + 1) % n]] <
			    RING_INF) {
				/* Asymmetric reachability: keep the forward ring. */
				memcpy(ring, ring - n, sizeof(int) * (size_t)n);
				break;
			}
		}
	}
	free(cost);
	if (!ret && mlap2p_log_enabled(NCCL_LOG_INFO, NCCL_GRAPH)) {
		for (r = 0; r < nrings; r++) {
			char line[512];
			size_t o = 0;

			for (i = 0; i < n && o < sizeof(line) - 16; i++)
				o += (size_t)snprintf(line + o, sizeof(line) - o,
						      "%s%d", i ? " " : "",
						      order[r * n + i]);
			INFO(NCCL_GRAPH, "Ring %02d : %s", r, line);
		}
	}
	return ret;
}

static int pow2_up(int v)
{
	int p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

int mlap2p_topo_channels(struct ncclComm *comm)
{
	const struct mlap2p_params *pa = &comm->params;
	int n = comm->nRanks, r, p2p, nr, per;

	/* The ring search gives a ring and its reverse (mlap2p_topo_rings). */
	nr = 2;
	if (nr > pa->maxRings)
		nr = pa->maxRings;
	if (nr < pa->minRings)
		nr = pa->minRings;
	comm->nRings = nr;
	/* As NCCL: min with the maximum first, then max with the minimum. */
	nr = nr < pa->maxP2p ? nr : pa->maxP2p;
	nr = nr > pa->minP2p ? nr : pa->minP2p;
	comm->p2pnChannels = pow2_up(nr);
	if (comm->p2pnChannels > MAXCHANNELS)
		comm->p2pnChannels = MAXCHANNELS;
	per = comm->p2pnChannels;
	for (r = 0; r < n; r++) {
		int want;

		if (r == comm->rank)
			continue;
		p2p = 0;
		if (!comm->params.p2pDisable &&
		    ncclTopoCheckP2p(comm->topo, &comm->peerInfo[comm->rank],
				     &comm->peerInfo[r], &p2p, NULL, NULL))
			p2p = 0;
		want = p2p ? 2 : pa->netPerPeer;
		if (want < per)
			per = want;
	}
	comm->p2pnChannelsPerPeer = pow2_up(per);
	if (comm->p2pnChannelsPerPeer > comm->p2pnChannels)
		comm->p2pnChannelsPerPeer = comm->p2pnChannels;
	INFO(NCCL_INIT | NCCL_GRAPH, "%d coll channels, %d p2p channels, %d p2p channels per peer",
	     comm->nRings, comm->p2pnChannels, comm->p2pnChannelsPerPeer);
	return 0;
}

/*
 * As NCCL spreads peers over the P2P channels: the pair at distance
 * (recv - send) mod n starts at that distance times the share per peer,
 * so that different peers use different channels where there are enough.
 */
int mlap2p_p2p_channel(const struct ncclComm *comm, int send, int recv,
		       int i)
{
	int n = comm->nRanks, delta = ((recv - send) % n + n) % n;

	return (delta * comm->p2pnChannelsPerPeer + i) % comm->p2pnChannels;
}
