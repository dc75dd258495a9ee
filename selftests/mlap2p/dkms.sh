#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# dkms.sh: the module DKMS built and installed (make dkms-install on the
# host, for the VM's kernel) loads and works, in the VM.
# tools/install-check copies the file DKMS installed to the same path in
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
	echo "SKIP: no MLAP2P_DKMS_MODULE (run by tools/install-check)"
	exit 4
fi
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 4; }
kmod=$(command -v kmod) ||
	{ echo "FAIL: kmod not in the VM (tools/install-check copies it)"; exit 1; }
if [ -d /sys/module/mlap2p ]; then
	echo "FAIL: mlap2p is already loaded; this test loads the DKMS one"
	exit 1
fi

# kmod's tools by their names (kmod looks at argv[0]), called by path:
# the VM's busybox shell runs its own applets ahead of PATH.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in modprobe depmod modinfo; do
	ln -s "$kmod" "$tmp/$t"
done
modprobe() { "$tmp/modprobe" "$@"; }
depmod() { "$tmp/depmod" "$@"; }
modinfo() { "$tmp/modinfo" "$@"; }

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

for t in version_test ioctl_test; do
	if [ -x "$here/$t" ]; then
		"$here/$t" >"$tmp/out" 2>&1
		rc=$?
		sed 's/^/  /' "$tmp/out"
		check "$t on the DKMS module" test $rc = 0
	else
		echo "  no $t beside $0"
	fi
done
check "modprobe -r mlap2p" modprobe -r mlap2p

echo "dkms: $pass passed, $fail failed"
[ $fail = 0 ]
