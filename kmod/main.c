// SPDX-License-Identifier: GPL-2.0
/*
 * mlap2p: emulated ML-accelerator device memory, unforgeable IPC handles
 * and the MLA/pod locality rules, behind the misc device /dev/mlap2p.
 *
 * This file holds the topology parameters, the misc device and its sysfs
 * counters (/sys/class/misc/mlap2p/), and load/unload; the per-file limit
 * parameters live with the handle tables in handle.c.  The node may be
 * world-accessible: every operation checks its caller.
 *
 * Typical use:
 *   fd = open("/dev/mlap2p", O_RDWR);
 *   ioctl(fd, MLAP2P_IOC_MEM_ALLOC, &alloc);        handle, mmap cookie
 *   p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, cookie);
 *   ioctl(fd, MLAP2P_IOC_IPC_GET_HANDLE, &get);     64 bytes for a peer
 * and in the peer, IPC_OPEN_HANDLE, then mmap of its own cookie.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/device.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/slab.h>
#include <linux/stddef.h>
#include <linux/sysfs.h>

#include "mlap2p.h"

static char *family = "trn2";
module_param(family, charp, 0444);
MODULE_PARM_DESC(family, "Instance family: trn1, trn2 or trn3 (default trn2)");

static unsigned int devices;
module_param(devices, uint, 0444);
MODULE_PARM_DESC(devices, "MLAs per node (default 0: the family's)");

static unsigned int cores_per_device;
module_param(cores_per_device, uint, 0444);
MODULE_PARM_DESC(cores_per_device,
		 "Physical cores per MLA (default 0: the family's)");

static unsigned int lnc;
module_param(lnc, uint, 0444);
MODULE_PARM_DESC(lnc, "Logical core size, 1 or 2 (default 0: the family's)");

static char *pod = "none";
module_param(pod, charp, 0444);
MODULE_PARM_DESC(pod, "Pod type: none, p2p or switch (default none)");

static unsigned int pod_nodes;
module_param(pod_nodes, uint, 0444);
MODULE_PARM_DESC(pod_nodes, "Nodes in the pod (default 0: 1, no pod)");

static unsigned int node;
module_param(node, uint, 0444);
MODULE_PARM_DESC(node, "This host's node in the pod (default 0)");

static unsigned int dev_capacity_mb = 1024;
module_param(dev_capacity_mb, uint, 0444);
MODULE_PARM_DESC(dev_capacity_mb,
		 "Memory per MLA in MiB, 1..65536 (default 1024)");

/* The genl family is registered for as long as the module is loaded. */
u64 mlap2p_features(void)
{
	return MLAP2P_FEAT_IPC_HANDLE | MLAP2P_FEAT_RDONLY |
	       MLAP2P_FEAT_HUGE_2M | MLAP2P_FEAT_LOCALITY |
	       MLAP2P_FEAT_REGION_INFO | MLAP2P_FEAT_GENL;
}

/* Counters: a read-only file per mlap2p_stat_descs[] entry with sysfs. */
struct mlap2p_stat_attr {
	struct device_attribute attr;
	const struct mlap2p_stat_desc *desc;
};

static ssize_t mlap2p_stat_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	const struct mlap2p_stat_attr *sa =
		container_of(attr, struct mlap2p_stat_attr, attr);
	struct mlap2p_stats s;

	mlap2p_stats_read(&s);
	return sysfs_emit(buf, "%llu\n", mlap2p_stat_get(&s, sa->desc));
}

/* Filled from mlap2p_stat_descs[] at load, before the device exists. */
static struct mlap2p_stat_attr mlap2p_stat_attrs[MLAP2P_NR_STATS];
static struct attribute *mlap2p_attrs[MLAP2P_NR_STATS + 1];

static void mlap2p_stat_attrs_init(void)
{
	struct mlap2p_stat_attr *sa;
	size_t i, n = 0;

	for (i = 0; i < MLAP2P_NR_STATS; i++) {
		if (!mlap2p_stat_descs[i].sysfs)
			continue;
		sa = &mlap2p_stat_attrs[n];
		sa->desc = &mlap2p_stat_descs[i];
		sysfs_attr_init(&sa->attr.attr);
		sa->attr.attr.name = sa->desc->name;
		sa->attr.attr.mode = 0444;
		sa->attr.show = mlap2p_stat_show;
		mlap2p_attrs[n++] = &sa->attr.attr;
	}
}

static const struct attribute_group mlap2p_group = {
	.attrs	= mlap2p_attrs,
};

static const struct attribute_group *mlap2p_groups[] = {
	&mlap2p_group,
	NULL,
};

static int mlap2p_open(struct inode *inode, struct file *file)
{
	struct mlap2p_file *f;

	f = kzalloc(sizeof(*f), GFP_KERNEL_ACCOUNT);
	if (!f)
		return -ENOMEM;
	mlap2p_file_init(f);
	file->private_data = f;
	return nonseekable_open(inode, file);
}

/* After the last fd and the last mapping (VMAs pin the file) are gone. */
static int mlap2p_release(struct inode *inode, struct file *file)
{
	struct mlap2p_file *f = file->private_data;

	mlap2p_file_release(f);
	kfree(f);
	return 0;
}

const struct file_operations mlap2p_fops = {
	.owner		= THIS_MODULE,
	.open		= mlap2p_open,
	.release	= mlap2p_release,
	.unlocked_ioctl	= mlap2p_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.mmap		= mlap2p_mmap,
};

static struct miscdevice mlap2p_misc = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= MLAP2P_DEVICE_NAME,
	.fops	= &mlap2p_fops,
	.mode	= 0666,
	.groups	= mlap2p_groups,
};

/* Build the topology from the parameters; pr_err() and -EINVAL if bad. */
static int mlap2p_config_from_params(void)
{
	struct mlap2p_topo t;
	u32 fam, pod_type;

	if (mlap2p_topo_parse_family(family, &fam)) {
		pr_err("unknown family '%s' (trn1, trn2 or trn3)\n", family);
		return -EINVAL;
	}
	if (mlap2p_topo_parse_pod(pod, &pod_type)) {
		pr_err("unknown pod '%s' (none, p2p or switch)\n", pod);
		return -EINVAL;
	}
	if (!dev_capacity_mb ||
	    (u64)dev_capacity_mb << 20 > MLAP2P_CAPACITY_MAX) {
		pr_err("dev_capacity_mb=%u out of range (1..%llu)\n",
		       dev_capacity_mb, MLAP2P_CAPACITY_MAX >> 20);
		return -EINVAL;
	}

	mlap2p_topo_defaults(&t, fam);
	t.pod_type = pod_type;
	if (devices)
		t.num_devices = devices;
	if (cores_per_device)
		t.cores_per_device = cores_per_device;
	if (lnc)
		t.lnc = lnc;
	if (pod_nodes)
		t.pod_nodes = pod_nodes;
	t.node = node;

	if (mlap2p_config_set(&t, (u64)dev_capacity_mb << 20)) {
		pr_err("invalid topology: family=%s devices=%u cores_per_device=%u lnc=%u pod=%s pod_nodes=%u node=%u (see docs/topology.md)\n",
		       family, t.num_devices, t.cores_per_device, t.lnc, pod,
		       t.pod_nodes, t.node);
		return -EINVAL;
	}
	return 0;
}

static int __init mlap2p_init(void)
{
	int ret;

	ret = mlap2p_config_from_params();
	if (ret)
		return ret;

	mlap2p_stat_attrs_init();

	ret = mlap2p_genl_init();
	if (ret)
		return ret;

	/* The user-visible node goes last. */
	ret = misc_register(&mlap2p_misc);
	if (ret)
		goto out_genl_exit;
	return 0;

out_genl_exit:
	mlap2p_genl_exit();
	return ret;
}

static void __exit mlap2p_exit(void)
{
	misc_deregister(&mlap2p_misc);
	mlap2p_genl_exit();
}

module_init(mlap2p_init);
module_exit(mlap2p_exit);

MODULE_AUTHOR("mlap2p developers");
MODULE_DESCRIPTION("Emulated ML-accelerator device memory, IPC handles and locality");
MODULE_LICENSE("GPL");
MODULE_VERSION(MLAP2P_VERSION);
