/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The locality rules of mlap2p, in one plain-C file that both the kernel
 * module (kmod/) and the library (lib/) build.  No allocation, no locking,
 * no I/O: pure functions over a struct mlap2p_topo.  docs/topology.md holds
 * the tables and the rules.
 *
 * Functions return 0 or -EINVAL (out-of-range argument or invalid topology).
 */
#ifndef MLAP2P_TOPO_H
#define MLAP2P_TOPO_H

#include <linux/types.h>
#ifdef __KERNEL__
#include <linux/errno.h>
#else
#include <errno.h>
#endif

#define MLAP2P_TOPO_MAX_DEVICES		64	/* MLAs per node */
#define MLAP2P_TOPO_MAX_CORES_PER_DEV	16	/* physical cores per MLA */
#define MLAP2P_TOPO_MAX_POD_NODES	64

struct mlap2p_topo {
	__u32 family;		/* MLAP2P_FAMILY_* */
	__u32 num_devices;	/* MLAs per node */
	__u32 cores_per_device;	/* physical cores per MLA */
	__u32 lnc;		/* logical core size, 1 or 2 */
	__u32 pod_type;		/* MLAP2P_POD_* */
	__u32 pod_nodes;	/* nodes in the pod, 1 for MLAP2P_POD_NONE */
	__u32 node;		/* this host's node, < pod_nodes */
};

/* What DEV_INFO and the genl topology dump report for one MLA. */
struct mlap2p_topo_dev {
	__u32 node;
	__u32 local_index;
	__u32 peer_mla;		/* MLAP2P_NO_MLA if the family has none */
	__u32 torus_x;		/* MLAP2P_NO_MLA without a torus */
	__u32 torus_y;
	__u32 num_neighbours;
	__u32 neighbours[8];	/* MLAP2P_MAX_NEIGHBOURS, ascending */
	__u32 first_core;
	__u32 num_cores;
};

/* Fill @t with the defaults of @family (node 0, no pod). */
int mlap2p_topo_defaults(struct mlap2p_topo *t, __u32 family);
/* 0 if every field is in range and consistent, else -EINVAL. */
int mlap2p_topo_validate(const struct mlap2p_topo *t);

__u32 mlap2p_topo_cores_per_node(const struct mlap2p_topo *t);
__u32 mlap2p_topo_total_cores(const struct mlap2p_topo *t);
__u32 mlap2p_topo_total_mlas(const struct mlap2p_topo *t);

/* MLA that global logical @core sits on. */
int mlap2p_topo_core_mla(const struct mlap2p_topo *t, __u32 core, __u32 *mla);
int mlap2p_topo_dev(const struct mlap2p_topo *t, __u32 mla,
		    struct mlap2p_topo_dev *out);
/*
 * The MLA at the far end of D2D port @port of @mla, on the same node: the
 * model of the seed runtime's nec_get_peer_mla_idx(dev, mla, port).
 * Torus families have 4 ports (x + 1, x - 1, y + 1, y - 1), ring families
 * 2 (+1, -1); the peer MLA is the one on port (local index & 1).
 * -EINVAL for a bad MLA or port.
 */
int mlap2p_topo_port_peer(const struct mlap2p_topo *t, __u32 mla,
			  __u32 port, __u32 *peer);
/* Ports per MLA, or 0 for an invalid @t. */
__u32 mlap2p_topo_num_ports(const struct mlap2p_topo *t);
/*
 * Edge class between two MLAs (MLAP2P_EDGE_*), and for MLAP2P_EDGE_RELAY
 * the intermediate MLA (MLAP2P_NO_MLA otherwise).
 */
int mlap2p_topo_mla_edge(const struct mlap2p_topo *t, __u32 mla_a,
			 __u32 mla_b, __u32 *edge, __u32 *intermediate);
/* The same for two global logical cores. */
int mlap2p_topo_core_edge(const struct mlap2p_topo *t, __u32 core_a,
			  __u32 core_b, __u32 *edge, __u32 *intermediate);

/* Names for logs and tools: "trn2", "switch", "D2D"; NULL if unknown. */
const char *mlap2p_topo_family_name(__u32 family);
const char *mlap2p_topo_pod_name(__u32 pod_type);
const char *mlap2p_topo_edge_name(__u32 edge);
/* Parse a name back (case-insensitive); -EINVAL if unknown. */
int mlap2p_topo_parse_family(const char *s, __u32 *family);
int mlap2p_topo_parse_pod(const char *s, __u32 *pod_type);
int mlap2p_topo_parse_edge(const char *s, __u32 *edge);

#endif /* MLAP2P_TOPO_H */
