#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# nm -D of libmlap2p: every function <nccl.h> declares is exported, as a
# weak plain name and its p-prefixed twin, both with a symbol version
# (the version map lists them by name), plus the stream calls.
# Exit 0 pass, 1 fail, 4 skip.

set -u
here=$(cd "$(dirname "$0")" && pwd)
case $(basename "$here") in
test-nccl-*) lib=$here/../lib-${here##*/test-nccl-} ;;
*) lib=$here/../lib ;;
esac
so=$lib/libmlap2p.so
hdr=$here/nccl.h
command -v nm > /dev/null || { echo "# SKIP: no nm"; exit 4; }
[ -r "$so" ] && [ -r "$hdr" ] || { echo "# SKIP: no $so or $hdr"; exit 4; }

syms=$(nm -D --defined-only "$so") || exit 1
names=$(sed -n 's/^MLAP2P_NCCL_API([^,]*, *\(nccl[A-Za-z]*\),.*/\1/p' "$hdr")
n=0
fail=0
for f in $names; do
	n=$((n + 1))
	echo "$syms" | grep -Eq "^[0-9a-f]+ [TW] $f@@MLAP2P_" ||
		{ echo "# missing: $f"; fail=1; }
	echo "$syms" | grep -Eq "^[0-9a-f]+ T p$f@@MLAP2P_" ||
		{ echo "# missing: p$f"; fail=1; }
done
for f in mlap2p_stream_create mlap2p_stream_destroy mlap2p_stream_synchronize \
	 mlap2p_stream_query mlap2p_stream_launch mlap2p_comm_split \
	 mlap2p_nccl_comm mlap2p_nccl_ipost; do
	echo "$syms" | grep -Eq "^[0-9a-f]+ T $f@@MLAP2P_" ||
		{ echo "# missing: $f"; fail=1; }
done
# The issue's list: 27 calls of NCCL 2.18 and ncclAlltoAll.
[ "$n" -eq 28 ] || { echo "# $n functions in nccl.h, want 28"; fail=1; }
echo "# $n NCCL functions and their p twins checked"
exit $fail
