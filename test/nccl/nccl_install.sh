#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The installed <nccl.h>: `make -C lib install` into a scratch root, then a
# program that includes <nccl.h> and <mlap2p/transport.h> (one
# ncclResult_t) builds with only `pkg-config --cflags --libs mlap2p-nccl`
# of that root and runs; nccl.h lives in include/mlap2p/nccl, never in
# include/ itself.  Needs the source tree two levels up (skips without).

set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$here/.." && pwd)
top=$(cd "$build/.." && pwd)
[ -f "$top/lib/Makefile" ] && [ -f "$top/lib/include/nccl/nccl.h" ] ||
	{ echo "# SKIP: no source tree at $top"; exit 4; }
for t in make cc pkg-config; do
	command -v $t > /dev/null || { echo "# SKIP: needs $t"; exit 4; }
done
dest=$(mktemp -d "$build/nccl-install-XXXXXX") || exit 1
trap 'rm -rf "$dest"' EXIT
make -s -C "$top/lib" install TOP="$top" B="$build" DESTDIR="$dest" \
	PREFIX=/usr > /dev/null || { echo "# install failed"; exit 1; }
[ -f "$dest/usr/include/mlap2p/nccl/nccl.h" ] || { echo "# no nccl.h"; exit 1; }
[ ! -e "$dest/usr/include/nccl.h" ] || { echo "# nccl.h shadows NCCL"; exit 1; }
cat > "$dest/prog.c" <<'PROG'
#include <stdio.h>
#include <string.h>
#include <nccl.h>
#include <mlap2p/transport.h>

int main(void)
{
	ncclResult_t r = ncclInvalidUsage;
	ncclUniqueId id;
	ncclComm_t comm;
	int v = 0, dev = -1;

	if (ncclGetVersion(&v) || v != NCCL_VERSION_CODE ||
	    strcmp(ncclGetErrorString(r), "invalid usage (run with NCCL_DEBUG=WARN for details)"))
		return 1;
	if (ncclGetUniqueId(&id) || ncclCommInitRank(&comm, 1, id, 0) ||
	    ncclCommCuDevice(comm, &dev) || ncclCommDestroy(comm))
		return 2;
	printf("installed nccl.h %d works\n", v);
	return 0;
}
PROG
pc="env PKG_CONFIG_PATH=$dest/usr/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$dest pkg-config"
flags=$($pc --cflags --libs mlap2p-nccl) || { echo "# pkg-config failed"; exit 1; }
case $flags in
*"-I$dest/usr/include/mlap2p/nccl"*) ;;
*) echo "# --cflags lacks include/mlap2p/nccl: $flags"; exit 1 ;;
esac
(cd "$dest" && cc -std=c11 -Wall -Wextra -Werror -o prog prog.c $flags) ||
	{ echo "# the program does not build"; exit 1; }
[ -n "${MLAP2P_RUNTIME:-}" ] || [ -e /dev/mlap2p ] || export MLAP2P_RUNTIME=host
out=$(cd "$dest" && LD_LIBRARY_PATH=$dest/usr/lib ./prog) ||
	{ echo "# the program failed"; exit 1; }
echo "# $out"
echo "$out" | grep -q '^installed nccl.h 21803 works$'
