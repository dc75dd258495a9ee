// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * mlap2p locality rules: which MLA a logical core sits on, what each MLA is
 * wired to, and the edge class (LOCAL, D2D, RELAY, POD, NONE) between any
 * two MLAs or cores of the emulated pod.
 *
 * Built twice: into the kernel module (kmod/) and into user space (lib/,
 * selftests).  Pure functions, no allocation, no locking, no library calls.
 * Every public function validates the whole topology and every argument and
 * returns -EINVAL without writing its outputs when anything is wrong.
 *
 * docs/topology.md describes the tables and the rules; keep them in step.
 */
#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/errno.h>
#else
#include <stdbool.h>
#include <stddef.h>
#endif
#include <linux/mlap2p.h>
#include "mlap2p_topo.h"

/* How the MLAs of one node are wired to each other. */
enum mlap2p_topo_wiring {
	MLAP2P_WIRE_TORUS,	/* torus_w x torus_h 2D torus, row-major */
	MLAP2P_WIRE_RING,	/* one ring: local MLA i links i - 1 and i + 1 */
};

/*
 * Which MLA is an MLA's peer: the seed's runtime asks
 * nec_get_peer_mla_idx(dev, mla, port), the MLA at the far end of one of
 * the MLA's D2D ports (mlap2p_topo_local_port()).
 */
enum mlap2p_topo_peer {
	MLAP2P_PEER_NONE,	/* the family has no peer MLA */
	MLAP2P_PEER_PAIR,	/* the MLA on port (i & 1): 2k <-> 2k + 1 */
};

#define MLAP2P_TOPO_BIT(n)	(1U << (n))

/* One row per instance family; docs/topology.md shows the same table. */
struct mlap2p_topo_family {
	const char *name;
	__u32 num_devices;	/* default MLAs per node */
	__u32 cores_per_device;	/* default physical cores per MLA */
	__u32 lnc;		/* default logical core size */
	__u32 wiring;		/* enum mlap2p_topo_wiring */
	__u32 torus_w;		/* torus columns (x), MLAP2P_WIRE_TORUS only */
	__u32 torus_h;		/* torus rows (y), MLAP2P_WIRE_TORUS only */
	__u32 peer;		/* enum mlap2p_topo_peer */
	__u32 lnc_mask;		/* bit n set: LNC n allowed */
	__u32 pod_mask;		/* bit n set: pod type n allowed */
};

#define MLAP2P_TOPO_NR_FAMILIES	(MLAP2P_FAMILY_TRN3 + 1)

static const struct mlap2p_topo_family mlap2p_topo_families[MLAP2P_TOPO_NR_FAMILIES] = {
	[MLAP2P_FAMILY_TRN1] = {
		.name = "trn1",
		.num_devices = 16,
		.cores_per_device = 2,
		.lnc = 1,
		.wiring = MLAP2P_WIRE_TORUS,
		.torus_w = 4,
		.torus_h = 4,
		.peer = MLAP2P_PEER_PAIR,
		.lnc_mask = MLAP2P_TOPO_BIT(1),
		.pod_mask = MLAP2P_TOPO_BIT(MLAP2P_POD_NONE),
	},
	[MLAP2P_FAMILY_TRN2] = {
		.name = "trn2",
		.num_devices = 16,
		.cores_per_device = 8,
		.lnc = 2,
		.wiring = MLAP2P_WIRE_TORUS,
		.torus_w = 4,
		.torus_h = 4,
		.peer = MLAP2P_PEER_PAIR,
		.lnc_mask = MLAP2P_TOPO_BIT(1) | MLAP2P_TOPO_BIT(2),
		.pod_mask = MLAP2P_TOPO_BIT(MLAP2P_POD_NONE) |
			    MLAP2P_TOPO_BIT(MLAP2P_POD_P2P),
	},
	[MLAP2P_FAMILY_TRN3] = {
		.name = "trn3",
		.num_devices = 16,
		.cores_per_device = 8,
		.lnc = 2,
		.wiring = MLAP2P_WIRE_RING,
		.peer = MLAP2P_PEER_PAIR,
		.lnc_mask = MLAP2P_TOPO_BIT(1) | MLAP2P_TOPO_BIT(2),
		.pod_mask = MLAP2P_TOPO_BIT(MLAP2P_POD_NONE) |
			    MLAP2P_TOPO_BIT(MLAP2P_POD_SWITCH),
	},
};

#define MLAP2P_TOPO_NR_PODS	(MLAP2P_POD_SWITCH + 1)

static const char * const mlap2p_topo_pod_names[MLAP2P_TOPO_NR_PODS] = {
	[MLAP2P_POD_NONE] = "none",
	[MLAP2P_POD_P2P] = "p2p",
	[MLAP2P_POD_SWITCH] = "switch",
};

#define MLAP2P_TOPO_NR_EDGES	(MLAP2P_EDGE_POD + 1)

static const char * const mlap2p_topo_edge_names[MLAP2P_TOPO_NR_EDGES] = {
	[MLAP2P_EDGE_NONE] = "NONE",
	[MLAP2P_EDGE_LOCAL] = "LOCAL",
	[MLAP2P_EDGE_D2D] = "D2D",
	[MLAP2P_EDGE_RELAY] = "RELAY",
	[MLAP2P_EDGE_POD] = "POD",
};

static const struct mlap2p_topo_family *mlap2p_topo_fam(__u32 family)
{
	if (family >= MLAP2P_TOPO_NR_FAMILIES)
		return NULL;
	if (!mlap2p_topo_families[family].name)
		return NULL;
	return &mlap2p_topo_families[family];
}

int mlap2p_topo_defaults(struct mlap2p_topo *t, __u32 family)
{
	const struct mlap2p_topo_family *f = mlap2p_topo_fam(family);

	if (!t || !f)
		return -EINVAL;
	t->family = family;
	t->num_devices = f->num_devices;
	t->cores_per_device = f->cores_per_device;
	t->lnc = f->lnc;
	t->pod_type = MLAP2P_POD_NONE;
	t->pod_nodes = 1;
	t->node = 0;
	return 0;
}

int mlap2p_topo_validate(const struct mlap2p_topo *t)
{
	const struct mlap2p_topo_family *f;

	if (!t)
		return -EINVAL;
	f = mlap2p_topo_fam(t->family);
	if (!f)
		return -EINVAL;

	if (t->num_devices == 0 || t->num_devices > MLAP2P_TOPO_MAX_DEVICES)
		return -EINVAL;
	if (f->wiring == MLAP2P_WIRE_TORUS &&
	    t->num_devices != f->torus_w * f->torus_h)
		return -EINVAL;
	if (f->peer == MLAP2P_PEER_PAIR && t->num_devices % 2)
		return -EINVAL;

	if (t->cores_per_device == 0 ||
	    t->cores_per_device > MLAP2P_TOPO_MAX_CORES_PER_DEV)
		return -EINVAL;
	if (t->lnc != 1 && t->lnc != 2)
		return -EINVAL;
	if (!(f->lnc_mask & MLAP2P_TOPO_BIT(t->lnc)))
		return -EINVAL;
	if (t->cores_per_device % t->lnc)
		return -EINVAL;

	if (t->pod_type >= MLAP2P_TOPO_NR_PODS)
		return -EINVAL;
	if (!(f->pod_mask & MLAP2P_TOPO_BIT(t->pod_type)))
		return -EINVAL;
	if (t->pod_nodes == 0 || t->pod_nodes > MLAP2P_TOPO_MAX_POD_NODES)
		return -EINVAL;
	/* POD_NONE is exactly one node; a pod of one node is POD_NONE. */
	if (t->pod_type == MLAP2P_POD_NONE && t->pod_nodes != 1)
		return -EINVAL;
	if (t->pod_type != MLAP2P_POD_NONE && t->pod_nodes < 2)
		return -EINVAL;
	if (t->node >= t->pod_nodes)
		return -EINVAL;
	return 0;
}

/* Logical cores per MLA; @t valid. */
static __u32 mlap2p_topo_lpm(const struct mlap2p_topo *t)
{
	return t->cores_per_device / t->lnc;
}

__u32 mlap2p_topo_cores_per_node(const struct mlap2p_topo *t)
{
	if (mlap2p_topo_validate(t))
		return 0;
	return t->num_devices * mlap2p_topo_lpm(t);
}

__u32 mlap2p_topo_total_cores(const struct mlap2p_topo *t)
{
	if (mlap2p_topo_validate(t))
		return 0;
	return t->pod_nodes * t->num_devices * mlap2p_topo_lpm(t);
}

__u32 mlap2p_topo_total_mlas(const struct mlap2p_topo *t)
{
	if (mlap2p_topo_validate(t))
		return 0;
	return t->pod_nodes * t->num_devices;
}

int mlap2p_topo_core_mla(const struct mlap2p_topo *t, __u32 core, __u32 *mla)
{
	if (!mla || core >= mlap2p_topo_total_cores(t))
		return -EINVAL;
	/*
	 * core = node * num_devices * lpm + local_core and
	 * mla = node * num_devices + local_core / lpm, so mla = core / lpm.
	 */
	*mla = core / mlap2p_topo_lpm(t);
	return 0;
}

/* (v + 1) mod n and (v - 1) mod n, for v < n. */
static __u32 mlap2p_topo_inc(__u32 v, __u32 n)
{
	return v + 1 == n ? 0 : v + 1;
}

static __u32 mlap2p_topo_dec(__u32 v, __u32 n)
{
	return v == 0 ? n - 1 : v - 1;
}

/* D2D ports of each MLA: four on a torus, two on a ring. */
static __u32 mlap2p_topo_nr_ports(const struct mlap2p_topo_family *f)
{
	return f->wiring == MLAP2P_WIRE_TORUS ? 4 : 2;
}

/*
 * The local MLA at the far end of D2D port @port of local MLA @i, the
 * model of nec_get_peer_mla_idx(): on a torus port 0 is x + 1, 1 is x - 1,
 * 2 is y + 1 and 3 is y - 1; on a ring port 0 is i + 1 and 1 is i - 1
 * (all mod the dimension).  @port < mlap2p_topo_nr_ports().
 */
static __u32 mlap2p_topo_local_port(const struct mlap2p_topo *t,
				    const struct mlap2p_topo_family *f,
				    __u32 i, __u32 port)
{
	__u32 w = f->torus_w, h = f->torus_h, x, y;

	if (f->wiring != MLAP2P_WIRE_TORUS)
		return port ? mlap2p_topo_dec(i, t->num_devices) :
			      mlap2p_topo_inc(i, t->num_devices);
	x = i % w;
	y = i / w;
	switch (port) {
	case 0:
		return y * w + mlap2p_topo_inc(x, w);
	case 1:
		return y * w + mlap2p_topo_dec(x, w);
	case 2:
		return mlap2p_topo_inc(y, h) * w + x;
	default:
		return mlap2p_topo_dec(y, h) * w + x;
	}
}

/*
 * The peer of local MLA @i, or MLAP2P_NO_MLA: the MLA on port i & 1, so
 * even MLAs pair with the next one and odd with the previous (i ^ 1).
 * Validation makes num_devices (and the torus width) even.
 */
static __u32 mlap2p_topo_local_peer(const struct mlap2p_topo *t,
				    const struct mlap2p_topo_family *f,
				    __u32 i)
{
	if (f->peer == MLAP2P_PEER_PAIR)
		return mlap2p_topo_local_port(t, f, i, i & 1);
	return MLAP2P_NO_MLA;
}

/* Insert @v into the ascending set @set of *@n entries, unless present. */
static void mlap2p_topo_set_add(__u32 *set, __u32 *n, __u32 v)
{
	__u32 i, j;

	for (i = 0; i < *n; i++) {
		if (set[i] == v)
			return;
		if (set[i] > v)
			break;
	}
	if (*n >= MLAP2P_MAX_NEIGHBOURS)
		return;		/* cannot happen: at most 4 ports */
	for (j = *n; j > i; j--)
		set[j] = set[j - 1];
	set[i] = v;
	(*n)++;
}

/*
 * The D2D neighbours of local MLA @i, as ascending local indices: the
 * MLAs on its ports (the peer is one of them), never itself.  Returns the
 * count.
 */
static __u32 mlap2p_topo_local_nbrs(const struct mlap2p_topo *t,
				    const struct mlap2p_topo_family *f,
				    __u32 i, __u32 *out)
{
	__u32 n = 0, port, v;

	for (port = 0; port < mlap2p_topo_nr_ports(f); port++) {
		v = mlap2p_topo_local_port(t, f, i, port);
		if (v != i)
			mlap2p_topo_set_add(out, &n, v);
	}
	return n;
}

static bool mlap2p_topo_local_d2d(const struct mlap2p_topo *t,
				  const struct mlap2p_topo_family *f,
				  __u32 a, __u32 b)
{
	__u32 nbrs[MLAP2P_MAX_NEIGHBOURS], n, k;

	n = mlap2p_topo_local_nbrs(t, f, a, nbrs);
	for (k = 0; k < n; k++)
		if (nbrs[k] == b)
			return true;
	return false;
}

/*
 * One step from @from towards @to on a ring of @n, the shorter way round;
 * a tie (both ways equally long) goes up (+1).  @from != @to.
 */
static __u32 mlap2p_topo_ring_step(__u32 from, __u32 to, __u32 n)
{
	__u32 up = to >= from ? to - from : to + n - from;

	if (up <= n - up)
		return mlap2p_topo_inc(from, n);
	return mlap2p_topo_dec(from, n);
}

/*
 * The relay MLA between local MLAs @a < @b, which are neither equal nor
 * D2D neighbours: the first hop from @a (the lower index) on the route to
 * @b.  On a torus the route is dimension-ordered, x first, then y; on a
 * ring it is the shorter way round.  Ties go up.  Taking the route from
 * the lower index makes the answer the same for (a, b) and (b, a).
 */
static __u32 mlap2p_topo_local_relay(const struct mlap2p_topo *t,
				     const struct mlap2p_topo_family *f,
				     __u32 a, __u32 b)
{
	if (f->wiring == MLAP2P_WIRE_TORUS) {
		__u32 w = f->torus_w, h = f->torus_h;
		__u32 ax = a % w, ay = a / w, bx = b % w, by = b / w;

		if (ax != bx)
			return ay * w + mlap2p_topo_ring_step(ax, bx, w);
		return mlap2p_topo_ring_step(ay, by, h) * w + ax;
	}
	return mlap2p_topo_ring_step(a, b, t->num_devices);
}

/* Nodes @na != @nb linked by the pod; pod_nodes >= 2 here. */
static bool mlap2p_topo_pod_linked(const struct mlap2p_topo *t,
				   __u32 na, __u32 la, __u32 nb, __u32 lb)
{
	switch (t->pod_type) {
	case MLAP2P_POD_P2P:
		/* Node ring; an MLA links the same local MLA next door. */
		return la == lb &&
		       (mlap2p_topo_inc(na, t->pod_nodes) == nb ||
			mlap2p_topo_inc(nb, t->pod_nodes) == na);
	case MLAP2P_POD_SWITCH:
		return true;
	default:
		return false;
	}
}

int mlap2p_topo_dev(const struct mlap2p_topo *t, __u32 mla,
		    struct mlap2p_topo_dev *out)
{
	const struct mlap2p_topo_family *f;
	__u32 nbrs[MLAP2P_MAX_NEIGHBOURS], n, k, node, local, base, lpm;

	if (!out || mla >= mlap2p_topo_total_mlas(t))
		return -EINVAL;
	f = mlap2p_topo_fam(t->family);
	lpm = mlap2p_topo_lpm(t);
	node = mla / t->num_devices;
	local = mla % t->num_devices;
	base = node * t->num_devices;

	out->node = node;
	out->local_index = local;
	out->peer_mla = mlap2p_topo_local_peer(t, f, local);
	if (out->peer_mla != MLAP2P_NO_MLA)
		out->peer_mla += base;
	if (f->wiring == MLAP2P_WIRE_TORUS) {
		out->torus_x = local % f->torus_w;
		out->torus_y = local / f->torus_w;
	} else {
		out->torus_x = MLAP2P_NO_MLA;
		out->torus_y = MLAP2P_NO_MLA;
	}
	n = mlap2p_topo_local_nbrs(t, f, local, nbrs);
	out->num_neighbours = n;
	for (k = 0; k < MLAP2P_MAX_NEIGHBOURS; k++)
		out->neighbours[k] = k < n ? base + nbrs[k] : 0;
	out->first_core = mla * lpm;
	out->num_cores = lpm;
	return 0;
}

int mlap2p_topo_port_peer(const struct mlap2p_topo *t, __u32 mla,
			  __u32 port, __u32 *peer)
{
	const struct mlap2p_topo_family *f;
	__u32 base;

	if (!peer || mla >= mlap2p_topo_total_mlas(t))
		return -EINVAL;
	f = mlap2p_topo_fam(t->family);
	if (port >= mlap2p_topo_nr_ports(f))
		return -EINVAL;
	base = mla / t->num_devices * t->num_devices;
	*peer = base + mlap2p_topo_local_port(t, f, mla - base, port);
	return 0;
}

__u32 mlap2p_topo_num_ports(const struct mlap2p_topo *t)
{
	if (mlap2p_topo_validate(t))
		return 0;
	return mlap2p_topo_nr_ports(mlap2p_topo_fam(t->family));
}

int mlap2p_topo_mla_edge(const struct mlap2p_topo *t, __u32 mla_a,
			 __u32 mla_b, __u32 *edge, __u32 *intermediate)
{
	const struct mlap2p_topo_family *f;
	__u32 total = mlap2p_topo_total_mlas(t);
	__u32 na, nb, la, lb, e, mid = MLAP2P_NO_MLA;

	if (!edge || mla_a >= total || mla_b >= total)
		return -EINVAL;
	f = mlap2p_topo_fam(t->family);
	na = mla_a / t->num_devices;
	la = mla_a % t->num_devices;
	nb = mla_b / t->num_devices;
	lb = mla_b % t->num_devices;

	if (mla_a == mla_b) {
		e = MLAP2P_EDGE_LOCAL;
	} else if (na == nb) {
		if (mlap2p_topo_local_d2d(t, f, la, lb)) {
			e = MLAP2P_EDGE_D2D;
		} else {
			e = MLAP2P_EDGE_RELAY;
			mid = na * t->num_devices +
			      (la < lb ? mlap2p_topo_local_relay(t, f, la, lb) :
					 mlap2p_topo_local_relay(t, f, lb, la));
		}
	} else if (mlap2p_topo_pod_linked(t, na, la, nb, lb)) {
		e = MLAP2P_EDGE_POD;
	} else {
		e = MLAP2P_EDGE_NONE;
	}

	*edge = e;
	if (intermediate)
		*intermediate = mid;
	return 0;
}

int mlap2p_topo_core_edge(const struct mlap2p_topo *t, __u32 core_a,
			  __u32 core_b, __u32 *edge, __u32 *intermediate)
{
	__u32 mla_a, mla_b;

	if (mlap2p_topo_core_mla(t, core_a, &mla_a) ||
	    mlap2p_topo_core_mla(t, core_b, &mla_b))
		return -EINVAL;
	return mlap2p_topo_mla_edge(t, mla_a, mla_b, edge, intermediate);
}

const char *mlap2p_topo_family_name(__u32 family)
{
	const struct mlap2p_topo_family *f = mlap2p_topo_fam(family);

	return f ? f->name : NULL;
}

const char *mlap2p_topo_pod_name(__u32 pod_type)
{
	if (pod_type >= MLAP2P_TOPO_NR_PODS)
		return NULL;
	return mlap2p_topo_pod_names[pod_type];
}

const char *mlap2p_topo_edge_name(__u32 edge)
{
	if (edge >= MLAP2P_TOPO_NR_EDGES)
		return NULL;
	return mlap2p_topo_edge_names[edge];
}

static char mlap2p_topo_lower(char c)
{
	return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

/*
 * True if @s equals @name ignoring case; one trailing newline in @s is
 * ignored, as sysfs_streq() does, so module parameters written through
 * sysfs parse too.
 */
static bool mlap2p_topo_name_eq(const char *s, const char *name)
{
	while (*name) {
		if (mlap2p_topo_lower(*s) != mlap2p_topo_lower(*name))
			return false;
		s++;
		name++;
	}
	return *s == '\0' || (s[0] == '\n' && s[1] == '\0');
}

/*
 * A small decimal number (the value of the constant itself), with the same
 * trailing-newline rule.  -EINVAL for anything else, or above @max.
 */
static int mlap2p_topo_parse_num(const char *s, __u32 max, __u32 *v)
{
	__u32 n = 0;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	while (*s >= '0' && *s <= '9') {
		n = n * 10 + (__u32)(*s - '0');
		if (n > max)
			return -EINVAL;
		s++;
	}
	if (!(*s == '\0' || (s[0] == '\n' && s[1] == '\0')))
		return -EINVAL;
	*v = n;
	return 0;
}

/*
 * Parse @s as one of the @nr names of @names (NULL slots skipped) or as the
 * number of one.
 */
static int mlap2p_topo_parse(const char *s, const char * const *names,
			     __u32 nr, __u32 *out)
{
	__u32 i;

	if (!s || !out)
		return -EINVAL;
	if (!mlap2p_topo_parse_num(s, nr - 1, &i) && names[i]) {
		*out = i;
		return 0;
	}
	for (i = 0; i < nr; i++) {
		if (names[i] && mlap2p_topo_name_eq(s, names[i])) {
			*out = i;
			return 0;
		}
	}
	return -EINVAL;
}

int mlap2p_topo_parse_family(const char *s, __u32 *family)
{
	const char *names[MLAP2P_TOPO_NR_FAMILIES];
	__u32 i;

	for (i = 0; i < MLAP2P_TOPO_NR_FAMILIES; i++)
		names[i] = mlap2p_topo_families[i].name;
	return mlap2p_topo_parse(s, names, MLAP2P_TOPO_NR_FAMILIES, family);
}

int mlap2p_topo_parse_pod(const char *s, __u32 *pod_type)
{
	return mlap2p_topo_parse(s, mlap2p_topo_pod_names,
				 MLAP2P_TOPO_NR_PODS, pod_type);
}

int mlap2p_topo_parse_edge(const char *s, __u32 *edge)
{
	return mlap2p_topo_parse(s, mlap2p_topo_edge_names,
				 MLAP2P_TOPO_NR_EDGES, edge);
}
