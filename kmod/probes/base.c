// SPDX-License-Identifier: GPL-2.0
/* Must always compile: proves the probe compiler and flags work. */
#include <linux/module.h>

int mlap2p_probe(void);

int mlap2p_probe(void)
{
	return 0;
}
