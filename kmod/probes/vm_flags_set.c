// SPDX-License-Identifier: GPL-2.0
/* vm_flags_set()/vm_flags_clear() (6.3+): vm_flags may not be written. */
#include <linux/mm.h>

void mlap2p_probe(struct vm_area_struct *vma);

void mlap2p_probe(struct vm_area_struct *vma)
{
	vm_flags_set(vma, VM_DONTCOPY);
	vm_flags_clear(vma, VM_MAYWRITE);
}
