#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# Check the module's locality answers against docs/topology.md for every
# family, LNC and pod type: reload mlap2p.ko with each parameter set, run
# locality_test (which compares CAN_ACCESS_PEER and DEV_INFO with
# common/mlap2p_topo.c and GET_INFO with what was asked for), and check that
# inconsistent parameter sets are refused.  At the end the module is put
# back as it was: reloaded with the parameters it had (read from
# /sys/module/mlap2p/parameters), or left unloaded if it was not loaded.
#
# Needs root and the module file:  MLAP2P_KO=/path/to/mlap2p.ko (default:
# /lib/modules/$(uname -r)/extra/mlap2p.ko when that exists, as the VM
# runner installs it).
# Optional: LOCALITY_TEST=/path/to/locality_test (default: next to this
# script).  Exits 4 (skip) without root or MLAP2P_KO; KTAP output.

set -u

KSFT_PASS=0
KSFT_FAIL=1
KSFT_SKIP=4

here=$(cd "$(dirname "$0")" && pwd)
test_bin=${LOCALITY_TEST:-$here/locality_test}
ko=${MLAP2P_KO:-}
if [ -z "$ko" ] && [ -f "/lib/modules/$(uname -r)/extra/mlap2p.ko" ]; then
	ko=/lib/modules/$(uname -r)/extra/mlap2p.ko
fi
sysmod=/sys/module/mlap2p

skip() {
	echo "TAP version 13"
	echo "1..0 # SKIP $*"
	exit $KSFT_SKIP
}

[ "$(id -u)" = 0 ] || skip "needs root"
[ -n "$ko" ] || skip "MLAP2P_KO is not set and no installed mlap2p.ko"
[ -f "$ko" ] || skip "MLAP2P_KO=$ko: no such file"
if ! command -v insmod >/dev/null || ! command -v rmmod >/dev/null; then
	skip "insmod/rmmod not found"
fi
if [ ! -x "$test_bin" ]; then
	echo "TAP version 13"
	echo "1..0 # locality_test not found at $test_bin"
	exit $KSFT_FAIL
fi

# Valid parameter sets: each one loads and locality_test passes on it.
# Every family with its default and every LNC it allows, every pod type it
# allows with a few node counts (4 nodes make a P2P ring with unlinked
# nodes), trn3 rings of other sizes, names in other case.
VALID='
family=trn1
family=trn1 cores_per_device=4
family=trn2 lnc=1
family=trn2 lnc=2
family=trn2 cores_per_device=2 lnc=2
family=trn2 lnc=2 pod=p2p pod_nodes=2 node=1
family=trn2 lnc=2 pod=p2p pod_nodes=4 node=3
family=trn2 lnc=1 pod=p2p pod_nodes=3 node=0
family=trn3 lnc=1
family=trn3 lnc=2
family=trn3 devices=2
family=trn3 devices=6 cores_per_device=2 lnc=2
family=trn3 lnc=2 pod=switch pod_nodes=2 node=1
family=trn3 lnc=1 devices=4 pod=switch pod_nodes=3 node=2
family=TRN2 pod=P2P pod_nodes=2
'

# Inconsistent sets: insmod must fail (docs/topology.md, "Validation").
INVALID='
family=trn4
family=trn2 pod=mesh pod_nodes=2
family=trn1 lnc=2
family=trn2 lnc=3
family=trn2 cores_per_device=7 lnc=2
family=trn3 cores_per_device=17 lnc=1
family=trn2 devices=8
family=trn1 devices=32
family=trn3 devices=3
family=trn3 devices=66
family=trn1 pod=p2p pod_nodes=2
family=trn2 pod=switch pod_nodes=2
family=trn3 pod=p2p pod_nodes=2
family=trn2 pod=p2p
family=trn2 pod_nodes=2
family=trn3 pod=switch pod_nodes=65
family=trn3 pod=switch pod_nodes=2 node=2
family=trn2 node=1
'

count() {
	echo "$1" | grep -c .
}

# The module's current parameters, to restore them at the end.
orig_loaded=0
orig_params=
if [ -d "$sysmod" ]; then
	orig_loaded=1
	for p in "$sysmod"/parameters/*; do
		[ -r "$p" ] || continue
		v=$(cat "$p" 2>/dev/null) || continue
		case "$v" in
		""|*" "*|"(null)") continue ;;
		esac
		orig_params="$orig_params ${p##*/}=$v"
	done
fi

unload() {
	[ -d "$sysmod" ] || return 0
	rmmod mlap2p 2>/dev/null && return 0
	# The device may still be closing; one more try.
	sleep 1
	rmmod mlap2p
}

# Environment for locality_test: MLAP2P_EXPECT_<PARAM>=value per param.
expect_env() {
	for kv in $1; do
		k=$(echo "${kv%%=*}" | tr '[:lower:]' '[:upper:]')
		printf 'MLAP2P_EXPECT_%s=%s ' "$k" "${kv#*=}"
	done
}

n=0
fails=0
ok() {
	n=$((n + 1))
	echo "ok $n $*"
}
notok() {
	n=$((n + 1))
	fails=$((fails + 1))
	echo "not ok $n $*"
}

# Put the module back as it was.
restore() {
	if [ $orig_loaded -eq 1 ]; then
		unload
		# shellcheck disable=SC2086 # one word per parameter
		if out=$(insmod "$ko" $orig_params 2>&1); then
			ok "restored:${orig_params:- defaults}"
		elif out2=$(insmod "$ko" 2>&1); then
			echo "# insmod$orig_params: $out"
			notok "restored: defaults only (the original parameters failed)"
		else
			echo "# insmod: $out2"
			notok "restored: module could not be reloaded"
		fi
	else
		unload
		ok "restored: module left unloaded as found"
	fi
}

echo "TAP version 13"
echo "1..$(( $(count "$VALID") + $(count "$INVALID") + 1 ))"

if ! unload; then
	echo "# cannot unload mlap2p (in use?); giving up"
	exit $KSFT_FAIL
fi

while IFS= read -r params; do
	[ -n "$params" ] || continue
	# shellcheck disable=SC2086 # one word per parameter
	if ! out=$(insmod "$ko" $params 2>&1); then
		echo "# insmod $params: $out"
		notok "locality: $params (insmod failed)"
		continue
	fi
	# shellcheck disable=SC2046 # word splitting of the env list is intended
	out=$(env $(expect_env "$params") "$test_bin" 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# /'
	if [ $rc -eq 0 ]; then
		ok "locality: $params"
	else
		notok "locality: $params (exit $rc)"
	fi
	if ! unload; then
		echo "# rmmod failed after: $params; giving up"
		restore
		exit $KSFT_FAIL
	fi
done <<EOF
$VALID
EOF

while IFS= read -r params; do
	[ -n "$params" ] || continue
	# shellcheck disable=SC2086 # one word per parameter
	if out=$(insmod "$ko" $params 2>&1); then
		notok "refused: $params (insmod succeeded)"
		unload
	else
		echo "# insmod $params: $out"
		ok "refused: $params"
	fi
done <<EOF
$INVALID
EOF

restore

echo "# Totals: pass:$((n - fails)) fail:$fails xfail:0 xpass:0 skip:0 error:0"
[ $fails -eq 0 ] && exit $KSFT_PASS
exit $KSFT_FAIL
