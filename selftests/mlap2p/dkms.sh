#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# dkms.sh: the module DKMS built and installed (make dkms-install on the
# host, for the VM's kernel) loads and works, in the VM.
# scripts/install-check copies the file DKMS installed to the same path in
# the VM (/lib/modules/<release>/updates/dkms/mlap2p.ko, or .ko.xz where
# the kernel compresses its modules, as Debian's 6.12 does) and boots it;
# anywhere else (no MLAP2P_DKMS_MODULE) this skips.
#
#   - kmod's depmod and modprobe, as on the host (the VM's busybox reads no
#     compressed modules), load it from updates/dkms/;
#   - the loaded module is that file: srcversion as DKMS built it, version
#     MLAP2P_EXPECT_VERSION;
#   - version_test and ioctl_test (beside this script) pass;
#   - modprobe -r unloads it.
#
# Environment: MLAP2P_DKMS_MODULE (the path DKMS installed the module at),
# MLAP2P_DKMS_SRCVERSION (its modinfo srcversion), MLAP2P_EXPECT_VERSION
# (Makefile.common's version).
#
# Exit: 0 all passed, 1 a check failed, 4 skipped.

set -u

ko=${MLAP2P_DKMS_MODULE:-}
src=${MLAP2P_DKMS_SRCVERSION:-}
want=${MLAP2P_EXPECT_VERSION:-}
here=$(cd "$(dirname "$0")" && pwd)

if [ -z "$ko" ]; then
	echo "SKIP: no MLAP2P_DKMS_MODULE (run by scripts/install-check)"
	exit 4
fi
# shellcheck source=selftests/mlap2p/pkg_common.inc
. "$here/pkg_common.inc"
pkg_start "from DKMS"

kver=$(uname -r)
case $ko in
"/lib/modules/$kver/updates/dkms/mlap2p.ko"*) dkms_path=1 ;;
*) dkms_path=0 ;;
esac
check "$ko is DKMS's place for Linux $kver" test $dkms_path = 1
check "the DKMS module is there" test -f "$ko"
check "depmod -a" depmod -a
check "modules.dep names it" \
	grep -q "^updates/dkms/${ko##*/}:" "/lib/modules/$kver/modules.dep"
check "modinfo finds it first" same filename "$(modinfo -F filename mlap2p)" "$ko"
check "modprobe mlap2p" modprobe mlap2p
pkg_loaded_or_stop
check "the loaded module is the DKMS build" \
	same srcversion "$(cat /sys/module/mlap2p/srcversion)" "$src"
pkg_version
pkg_dev_node

pkg_tests_beside "on the DKMS module"
check "modprobe -r mlap2p" modprobe -r mlap2p

pkg_summary dkms
