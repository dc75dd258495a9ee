// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * info: GET_INFO from /dev/mlap2p and whether the genl family answers.
 */
#include <inttypes.h>
#include <stdio.h>

#include "ctl.h"

static const struct {
	__u64 bit;
	const char *name;
} features[] = {
	{ MLAP2P_FEAT_IPC_HANDLE,	"ipc-handle" },
	{ MLAP2P_FEAT_RDONLY,		"rdonly" },
	{ MLAP2P_FEAT_HUGE_2M,		"huge-2m" },
	{ MLAP2P_FEAT_LOCALITY,		"locality" },
	{ MLAP2P_FEAT_GENL,		"genl" },
	{ MLAP2P_FEAT_REGION_INFO,	"region-info" },
};

static void print_features(struct ctl *c, __u64 f)
{
	bool first = true;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(features); i++) {
		if (!(f & features[i].bit))
			continue;
		printf(c->json ? "%s\"%s\"" : "%s%s", first ? "" :
		       c->json ? "," : " ", features[i].name);
		first = false;
		f &= ~features[i].bit;
	}
	if (f)
		printf(c->json ? "%s\"0x%" PRIx64 "\"" : "%s0x%" PRIx64,
		       first ? "" : c->json ? "," : " ", (uint64_t)f);
}

int cmd_info(struct ctl *c, int argc, char **argv)
{
	struct mlap2p_info in = { 0 };
	char b1[16], b2[16], b3[32], b4[32];
	const char *genl;
	int ret;

	(void)argv;
	if (argc)
		return CMD_USAGE;
	ret = dev_ioctl(c, MLAP2P_IOC_GET_INFO, &in);
	if (ret)
		return ret;
	genl = (in.features & MLAP2P_FEAT_GENL) && !ctl_genl(c) ?
	       "yes" : "no";
	c->hint = NULL;

	if (c->json) {
		printf("{\"abi\":\"%u.%u\",\"features\":[", in.abi_major,
		       in.abi_minor);
		print_features(c, in.features);
		printf("],\"genl\":%s,\"family\":\"%s\",\"num_devices\":%u,"
		       "\"cores_per_device\":%u,\"lnc\":%u,\"pod\":\"%s\","
		       "\"pod_nodes\":%u,\"node\":%u,\"cores_per_node\":%u,"
		       "\"dev_capacity\":%" PRIu64
		       ",\"max_bytes_per_file\":%" PRIu64
		       ",\"max_regions_per_file\":%u,\"generation\":%u}\n",
		       genl[0] == 'y' ? "true" : "false",
		       mlap2p_topo_family_name(in.family) ?: "unknown",
		       in.num_devices, in.cores_per_device, in.lnc,
		       mlap2p_topo_pod_name(in.pod_type) ?: "unknown",
		       in.pod_nodes, in.node, in.cores_per_node,
		       (uint64_t)in.dev_capacity,
		       (uint64_t)in.max_bytes_per_file,
		       in.max_regions_per_file, in.topo_generation);
		return 0;
	}

	printf("abi          %u.%u\n", in.abi_major, in.abi_minor);
	printf("features     ");
	print_features(c, in.features);
	printf("\ngenl         %s (family \"%s\")\n", genl, MLAP2P_GENL_NAME);
	printf("family       %s, %u MLAs per node, %u cores per MLA, LNC %u\n",
	       name_or_num(mlap2p_topo_family_name(in.family), in.family,
			   b1, sizeof(b1)),
	       in.num_devices, in.cores_per_device, in.lnc);
	printf("cores        %u logical cores per node\n", in.cores_per_node);
	printf("pod          %s, %u node%s, this host is node %u\n",
	       name_or_num(mlap2p_topo_pod_name(in.pod_type), in.pod_type,
			   b2, sizeof(b2)),
	       in.pod_nodes, in.pod_nodes == 1 ? "" : "s", in.node);
	printf("capacity     %s per MLA\n",
	       fmt_bytes(in.dev_capacity, b3, sizeof(b3)));
	printf("limits       %u regions and %s per open file\n",
	       in.max_regions_per_file,
	       fmt_bytes(in.max_bytes_per_file, b4, sizeof(b4)));
	printf("generation   %u\n", in.topo_generation);
	return 0;
}
