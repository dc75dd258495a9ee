// SPDX-License-Identifier: GPL-2.0
/*
 * mlap2p generic netlink family "mlap2p" (uapi/linux/mlap2p.h): topology
 * get/set, region dump, counters and region events.
 *
 * Not built in yet: init reports -EOPNOTSUPP, so the module runs without
 * the family and GET_INFO leaves MLAP2P_FEAT_GENL clear.  The hooks are
 * already called where events happen (see mlap2p.h).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/errno.h>

#include "mlap2p.h"

int mlap2p_genl_init(void)
{
	return -EOPNOTSUPP;
}

void mlap2p_genl_exit(void)
{
}

void mlap2p_genl_notify(u8 cmd, const struct mlap2p_region *r)
{
}
