#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# dkms.sh: the module DKMS built and installed (make dkms-install on the
# host, for the VM's kernel) loads and works, in the VM.
# tools/install-check copies the DKMS-built mlap2p.ko to the same place in
# the VM (/lib/modules/<release>/updates/dkms/) and boots it; anywhere else
# (no MLAP2P_DKMS_SRCVERSION) this skips.
#
#   - depmod and modprobe (the VM's busybox) load it from updates/dkms/;
#   - the loaded module is that file: srcversion and version as DKMS built
#     them, version MLAP2P_EXPECT_VERSION;
#   - version_test and ioctl_test (beside this script) pass;
#   - rmmod unloads it.
#
# Environment: MLAP2P_DKMS_SRCVERSION (modinfo -F srcversion of the
# DKMS-built file), MLAP2P_EXPECT_VERSION (Makefile.common's version).
#
# Exit: 0 all passed, 1 a check failed, 4 skipped.

set -u

src=${MLAP2P_DKMS_SRCVERSION:-}
want=${MLAP2P_EXPECT_VERSION:-}
here=$(cd "$(dirname "$0")" && pwd)

if [ -z "$src" ]; then
	echo "SKIP: no MLAP2P_DKMS_SRCVERSION (run by tools/install-check)"
	exit 4
fi
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 4; }
if [ -d /sys/module/mlap2p ]; then
	echo "FAIL: mlap2p is already loaded; this test loads the DKMS one"
	exit 1
fi

pass=0
fail=0
check() { # description command...
	desc=$1
	shift
	if "$@"; then
		echo "ok: $desc"
		pass=$((pass + 1))
	else
		echo "FAILED: $desc"
		fail=$((fail + 1))
	fi
}
same() { # what seen expected
	[ "$2" = "$3" ] && return 0
	echo "  $1: got '$2', expected '$3'"
	return 1
}

kver=$(uname -r)
ko=/lib/modules/$kver/updates/dkms/mlap2p.ko
check "DKMS module at $ko" test -f "$ko"
check "depmod" depmod
check "modules.dep names updates/dkms/mlap2p.ko" \
	grep -q "updates/dkms/mlap2p.ko:" "/lib/modules/$kver/modules.dep"
check "modprobe mlap2p" modprobe mlap2p
[ -d /sys/module/mlap2p ] || {
	dmesg | tail -n 20
	echo "not ok: the module did not load; stopping"
	exit 1
}
check "the loaded module is the DKMS build" \
	same srcversion "$(cat /sys/module/mlap2p/srcversion)" "$src"
if [ -n "$want" ]; then
	check "module version is $want" \
		same version "$(cat /sys/module/mlap2p/version)" "$want"
fi
i=0
while [ ! -c /dev/mlap2p ] && [ $i -lt 20 ]; do sleep 0.1; i=$((i + 1)); done
check "/dev/mlap2p exists" test -c /dev/mlap2p

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for t in version_test ioctl_test; do
	if [ -x "$here/$t" ]; then
		"$here/$t" >"$tmp" 2>&1
		rc=$?
		sed 's/^/  /' "$tmp"
		check "$t on the DKMS module" test $rc = 0
	else
		echo "  no $t beside $0"
	fi
done
check "rmmod mlap2p" rmmod mlap2p

echo "dkms: $pass passed, $fail failed"
[ $fail = 0 ]
