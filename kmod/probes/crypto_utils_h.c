// SPDX-License-Identifier: GPL-2.0
/* <crypto/utils.h> declares crypto_memneq() (6.5+). */
#include <crypto/utils.h>

int mlap2p_probe(const void *a, const void *b);

int mlap2p_probe(const void *a, const void *b)
{
	return crypto_memneq(a, b, 16);
}
