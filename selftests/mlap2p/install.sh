#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# install.sh: what `make install DESTDIR=ROOT` put in ROOT works when used
# from there, in the VM.  scripts/install-check stages ROOT on the host and
# boots the VM with it; anywhere else (no MLAP2P_INSTALL_ROOT) this skips.
#
#   - depmod -b ROOT, then `modprobe -d ROOT mlap2p` (kmod's modprobe: the
#     VM's busybox has no -d) loads ROOT's module, whose version is
#     MLAP2P_EXPECT_VERSION and whose node /dev/mlap2p appears;
#   - the installed modprobe.d example loads as shipped (all commented out:
#     defaults) and with its first example uncommented (the parameters
#     arrive);
#   - the installed mlap2pctl and libmlap2p, found through ROOT only, agree
#     on the version and talk to the module;
#   - version_test and ioctl_test (beside this script) pass against the
#     installed module and library;
#   - `modprobe -d ROOT -r mlap2p` unloads it.
#
# Environment: MLAP2P_INSTALL_ROOT (ROOT), MLAP2P_INSTALL_PREFIX (the
# PREFIX it was installed with, default /usr/local), MLAP2P_EXPECT_VERSION
# (Makefile.common's MLAP2P_VERSION).
#
# Exit: 0 all passed, 1 a check failed, 4 skipped.

set -u

root=${MLAP2P_INSTALL_ROOT:-}
prefix=${MLAP2P_INSTALL_PREFIX:-/usr/local}
want=${MLAP2P_EXPECT_VERSION:-}
here=$(cd "$(dirname "$0")" && pwd)

if [ -z "$root" ]; then
	echo "SKIP: no MLAP2P_INSTALL_ROOT (run by scripts/install-check)"
	exit 4
fi
[ -d "$root" ] || { echo "FAIL: $root is not a directory"; exit 1; }
# shellcheck source=selftests/mlap2p/pkg_common.inc
. "$here/pkg_common.inc"
pkg_start "from $root"

unload() {
	modprobe -d "$root" -r mlap2p && [ ! -d /sys/module/mlap2p ]
}

kver=$(uname -r)
ko=$root/lib/modules/$kver/updates/mlap2p.ko
conf=$root/etc/modprobe.d

check "module installed as $ko" test -f "$ko"
check "depmod -b $root $kver" depmod -b "$root" "$kver"
check "modinfo finds it in $root" \
	same filename "$(modinfo -b "$root" -F filename mlap2p 2>&1)" "$ko"

# 1. As installed: the shipped modprobe.d file changes nothing.
check "modprobe -d $root -C $conf mlap2p" \
	modprobe -d "$root" -C "$conf" mlap2p
pkg_loaded_or_stop
pkg_dev_node
pkg_version
check "default parameters (example is all comments)" \
	same family "$(cat /sys/module/mlap2p/parameters/family)" trn2

# 2. The installed tools and library, found through ROOT only.
lib=$root$prefix/lib
ctl=$root$prefix/sbin/mlap2pctl
check "mlap2pctl installed" test -x "$ctl"
out=$(LD_LIBRARY_PATH=$lib "$ctl" --version 2>&1)
check "mlap2pctl --version" same version "$out" "mlap2pctl ${want:-${out#mlap2pctl }}"
out=$(LD_LIBRARY_PATH=$lib "$ctl" info 2>&1)
rc=$?
echo "$out" | sed 's/^/  /'
check "mlap2pctl info talks to the module" test $rc = 0
pkg_tests_beside "against the installed module and library" \
	env LD_LIBRARY_PATH="$lib" MLAP2P_LIBDIR="$lib" MLAP2PCTL="$ctl"
check "modprobe -d $root -r mlap2p" unload

# 3. The example's first "options" lines, uncommented, reach the module.
mkdir -p "$tmp/conf"
sed -n 's/^#options /options /p' "$conf/mlap2p.conf" | head -n 2 >"$tmp/conf/mlap2p.conf"
sed 's/^/  /' "$tmp/conf/mlap2p.conf"
check "modprobe with the example's options" \
	modprobe -d "$root" -C "$tmp/conf" mlap2p
if [ -d /sys/module/mlap2p ]; then
	p=/sys/module/mlap2p/parameters
	# shellcheck disable=SC2013 # one key=value per word
	for kv in $(sed 's/^options mlap2p //' "$tmp/conf/mlap2p.conf"); do
		check "parameter ${kv%%=*}" same "${kv%%=*}" "$(cat "$p/${kv%%=*}")" "${kv#*=}"
	done
	check "modprobe -d $root -r mlap2p" unload
fi

pkg_summary install
