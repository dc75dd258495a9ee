#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# mlap2pctl against the loaded module: --version and usage, info, topo (the
# table, the picture, JSON), peer, regions and stats while a process holds
# a region, monitor, and topo set with its refusals.  Exit statuses are
# checked exactly (0 success, 1 failure, 2 usage), and so is the error
# format: "mlap2pctl: <command>: <strerror>", then "kernel reports: <text>".
# The topology is put back as it was at the end, whatever happens.
#
# mlap2pctl is $MLAP2PCTL, else the one on PATH, else ../tools/mlap2pctl
# (build/tools beside build/selftests).  hold_helper comes from this
# directory.  Exits 4 (skip) without mlap2pctl, the module, its genl family
# or root.  KTAP output.

set -u

KSFT_SKIP=4
here=$(cd "$(dirname "$0")" && pwd)
helper=$here/hold_helper

ctl=${MLAP2PCTL:-}
[ -n "$ctl" ] || ctl=$(command -v mlap2pctl 2>/dev/null)
if [ -z "$ctl" ] && [ -x "$here/../tools/mlap2pctl" ]; then
	ctl=$here/../tools/mlap2pctl
fi

skip() {
	echo "TAP version 13"
	echo "1..0 # SKIP $*"
	exit $KSFT_SKIP
}
[ -n "$ctl" ] || skip "mlap2pctl not found (set MLAP2PCTL)"
[ -e /dev/mlap2p ] || skip "/dev/mlap2p missing (module not loaded?)"
[ "$(id -u)" = 0 ] || skip "needs root (topo set, monitor, every region)"
[ -x "$helper" ] || skip "hold_helper not found in $here"
"$ctl" info 2>/dev/null | grep -q '^genl *yes' ||
	skip "the module has no genl family"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mlap2pctl-test.XXXXXX") || exit 1
hpid=
mpid=
restore_cmd=

cleanup() {
	[ -n "$mpid" ] && kill "$mpid" 2>/dev/null
	[ -n "$hpid" ] && kill "$hpid" 2>/dev/null
	wait 2>/dev/null
	# shellcheck disable=SC2086 # one word per key=value
	[ -n "$restore_cmd" ] && "$ctl" topo set $restore_cmd >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ------------------------------------------------------------------
# Helpers: each check prints what went wrong as "# " lines, returns 1.
# ------------------------------------------------------------------

# run RC ARGS...: mlap2pctl ARGS must exit RC; output in $tmp/out, $tmp/err.
run() {
	want=$1
	shift
	"$ctl" "$@" >"$tmp/out" 2>"$tmp/err"
	got=$?
	[ "$got" = "$want" ] && return 0
	echo "# mlap2pctl $*: exit $got, expected $want"
	sed 's/^/#   out: /' "$tmp/out" | head -n 20
	sed 's/^/#   err: /' "$tmp/err" | head -n 20
	return 1
}

# has out|err REGEX: a line of that output matches the extended regex.
has() {
	grep -Eq -- "$2" "$tmp/$1" && return 0
	echo "# $1 of the last command lacks /$2/:"
	sed 's/^/#   /' "$tmp/$1" | head -n 30
	return 1
}

# line out|err N TEXT: line N of that output is exactly TEXT.
line() {
	got=$(sed -n "$2p" "$tmp/$1")
	[ "$got" = "$3" ] && return 0
	echo "# $1 line $2: '$got', expected '$3'"
	return 1
}

# count out|err REGEX: how many lines match.
count() {
	grep -Ec -- "$2" "$tmp/$1"
}

# Wait up to 10 s for file $1 to exist.
wait_file() {
	i=0
	while [ ! -e "$1" ] && [ $i -lt 100 ]; do
		sleep 0.1 2>/dev/null || sleep 1
		i=$((i + 1))
	done
	[ -e "$1" ]
}

# wait_grep FILE REGEX: wait up to 10 s for a line of FILE to match.
wait_grep() {
	i=0
	while ! grep -Eq -- "$2" "$1" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1 2>/dev/null || sleep 1
		i=$((i + 1))
	done
	grep -Eq -- "$2" "$1" 2>/dev/null
}

# Start hold_helper (one mapped 4 KiB region); its pid in $hpid.
hold_start() {
	rm -f "$tmp/ready"
	"$helper" "$tmp/ready" &
	hpid=$!
	wait_file "$tmp/ready" || { echo "# hold_helper did not start"; return 1; }
}

hold_stop() {
	kill "$hpid" 2>/dev/null
	wait "$hpid" 2>/dev/null
	hpid=
}

# Is GET_INFO what it was at the start, but for the generation?
same_as_found() {
	"$ctl" --json info | sed 's/"generation":[0-9]*//' >"$tmp/now"
	sed 's/"generation":[0-9]*//' "$tmp/info0" >"$tmp/was"
	cmp -s "$tmp/was" "$tmp/now"
}

n=0
fails=0
tcase() { # NAME FUNCTION
	n=$((n + 1))
	if "$2"; then
		echo "ok $n $1"
	else
		fails=$((fails + 1))
		echo "not ok $n $1"
	fi
}

# ------------------------------------------------------------------
# The topology as found: the restore command and the expectations.
# ------------------------------------------------------------------

"$ctl" --json info >"$tmp/info0" 2>&1 || { echo "# info failed"; exit 1; }
jnum() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" "$tmp/info0"; }
jstr() { sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p" "$tmp/info0"; }
family=$(jstr family)
pod=$(jstr pod)
devices=$(jnum num_devices)
cpd=$(jnum cores_per_device)
lnc=$(jnum lnc)
pod_nodes=$(jnum pod_nodes)
node=$(jnum node)
capacity=$(jnum dev_capacity)
restore_cmd="family=$family devices=$devices cores_per_device=$cpd lnc=$lnc pod=$pod pod_nodes=$pod_nodes node=$node capacity=$capacity"
cpm=$((cpd / lnc))			# logical cores per MLA
mla0=$((node * devices))		# this node's first MLA
core0=$((mla0 * cpm))			# its first core

# ------------------------------------------------------------------
# The tests.
# ------------------------------------------------------------------

t_version() {
	run 0 --version && has out '^mlap2pctl [0-9]+\.[0-9]+\.[0-9]+$'
}

t_usage() {
	run 2 || return 1
	has err '^Usage: mlap2pctl ' || return 1
	run 2 frobnicate && line err 1 "mlap2pctl: unknown command 'frobnicate'" || return 1
	run 2 --frob info && line err 1 "mlap2pctl: unknown option '--frob'" || return 1
	run 0 --help || return 1
	for c in info 'topo \[--json\]' 'topo set key=value' 'peer CORE_A CORE_B' \
		 regions stats monitor; do
		has out "^  $c" || return 1
	done
}

t_info() {
	run 0 info || return 1
	has out '^abi +1\.[0-9]+$' &&
	has out '^features .*genl' &&
	has out '^genl +yes' &&
	has out "^family +$family, $devices MLAs per node, $cpd cores per MLA, LNC $lnc$" &&
	has out "^pod +$pod, $pod_nodes nodes?, this host is node $node$" &&
	has out '^capacity +[0-9.]+ [KMGT]?i?B per MLA$' &&
	has out '^generation +[0-9]+$' &&
	run 2 info extra
}

t_topo() {
	run 0 topo || return 1
	line out 1 "family $family, $devices MLAs per node, $cpd cores per MLA, LNC $lnc ($((devices * cpm)) logical cores per node)" || return 1
	has out "^pod $pod, $pod_nodes nodes?, this host is node $node; " || return 1
	rows=$(count out '^ +[0-9]+ +[0-9]+ +([0-9]+|-) +([0-9]+|-) +([0-9]+|-) [0-9]')
	[ "$rows" = "$devices" ] || { echo "# $rows MLA rows, expected $devices"; return 1; }
	case $family in
	trn1 | trn2) has out "^node $node: 4x4 torus" && has out '<-\[' ;;
	trn3) has out "^node $node: ring of $devices MLAs" ;;
	esac
}

t_topo_json() {
	run 0 --json topo || return 1
	has out "^\{\"family\":\"$family\",\"num_devices\":$devices," || return 1
	mlas=$(grep -o '"mla":' "$tmp/out" | wc -l)
	[ "$mlas" = $((devices * pod_nodes)) ] ||
		{ echo "# $mlas MLAs in JSON, expected $((devices * pod_nodes))"; return 1; }
	# The command-local spelling gives the same document.
	cp "$tmp/out" "$tmp/json1"
	run 0 topo --json && cmp -s "$tmp/out" "$tmp/json1"
}

t_peer() {
	if [ "$devices" -lt 4 ]; then
		echo "# fewer than 4 MLAs per node: no relay to ask about"
		return 0
	fi
	run 0 peer "$core0" "$core0" || return 1
	line out 1 "core $core0 (MLA $mla0) -> core $core0 (MLA $mla0): LOCAL" &&
	line out 2 "path: MLA $mla0 (same MLA)" &&
	line out 3 "p2p: yes" &&
	line out 4 "seed: Channel 00 : 0[$core0] -> 1[$core0] via P2P/IPC" || return 1
	# MLA +1 is a neighbour (the peer pair, torus row or ring).
	c1=$((core0 + cpm))
	run 0 peer "$core0" "$c1" || return 1
	line out 1 "core $core0 (MLA $mla0) -> core $c1 (MLA $((mla0 + 1))): D2D" &&
	line out 2 "path: MLA $mla0 -> MLA $((mla0 + 1))" &&
	line out 4 "seed: Channel 00 : 0[$core0] -> 1[$c1] via P2P/IPC" || return 1
	# MLA +2 is two hops along the row or ring: a relay through MLA +1.
	c2=$((core0 + 2 * cpm))
	run 0 peer "$core0" "$c2" || return 1
	line out 1 "core $core0 (MLA $mla0) -> core $c2 (MLA $((mla0 + 2))): RELAY" &&
	line out 2 "path: MLA $mla0 -> MLA $((mla0 + 1)) -> MLA $((mla0 + 2)) (relay through MLA $((mla0 + 1)))" || return 1
	# The seed's indirect line: the relay rank's busId (its core) in hex.
	line out 4 "seed: Channel 00 : 0[$core0] -> 1[$c2] via P2P/indirect/2[$(printf %x "$c1")] (rank 2 on core $c1)" || return 1
	run 0 --json peer "$core0" "$c2" &&
	has out "\"edge\":\"RELAY\",\"access\":true,\"path\":\[$mla0,$((mla0 + 1)),$((mla0 + 2))\],\"seed\":\"Channel 00 : 0\[$core0\] -> 1\[$c2\] via P2P/indirect/2\[$(printf %x "$c1")\]" || return 1
	# A core past the pod, then bad arguments.
	run 1 peer 0 999999 && line err 1 "mlap2pctl: peer: Invalid argument" || return 1
	run 2 peer 0 && run 2 peer a b && run 2 peer 0 1 2
}

# With hold_helper holding a region: regions, its filters, stats, and
# topo set refused while it lives.
t_regions_held() {
	run 0 regions || return 1
	line out 1 "      id   MLA       size      pid importers mappings exported" || return 1
	has out "^ +[0-9]+ +$mla0 +4 KiB +$hpid +0 +1 no$" || return 1
	id=$(sed -n "s/^ *\([0-9]*\) *$mla0 *4 KiB *$hpid .*/\1/p" "$tmp/out" | head -n 1)
	run 0 regions id="$id" || return 1
	[ "$(count out "^ +$id ")" = 1 ] || { echo "# id=$id: not one row"; return 1; }
	run 0 regions device="$mla0" && has out "^ +$id +$mla0 " || return 1
	run 0 regions device="$((mla0 + 1))" || return 1
	[ "$(count out "^ +$id ")" = 0 ] || { echo "# device filter let $id through"; return 1; }
	run 0 --json regions || return 1
	has out "\{\"id\":$id,\"device\":$mla0,\"size\":4096,\"owner_pid\":$hpid,\"importers\":0,\"mappings\":1,\"exported\":false\}" || return 1
	run 0 stats || return 1
	has out '^live_regions +[1-9][0-9]*$' && has out '^allocs +[1-9]' &&
	has out '^hwm_regions +[1-9][0-9]*$' &&
	has out '^hwm_mappings +[1-9][0-9]*$' || return 1
	# Per MLA: live bytes, their high-water mark (at least this 4 KiB),
	# capacity.
	has out '^  MLA       live        hwm   capacity$' || return 1
	has out "^ +$mla0 +4 KiB +[0-9.]+ [KMG]iB +[0-9.]+ [KMG]iB$" || return 1
	[ "$(count out '^ +[0-9]+ +[0-9.]+ ([KMG]i)?B +[0-9.]+ ([KMG]i)?B +[0-9.]+ [KMG]iB$')" = "$devices" ] ||
		{ echo "# stats: not one row per MLA of the node ($devices)"; return 1; }
	run 0 --json stats || return 1
	has out '"hwm_regions":[1-9][0-9]*,"hwm_mappings":[1-9][0-9]*,"devices":\[' &&
	has out "\{\"mla\":$mla0,\"capacity\":[0-9]+,\"used\":4096,\"live\":4096,\"hwm\":[0-9]+\}" || return 1
	# Changing the topology under a live region is refused.
	run 1 topo set capacity=64M || return 1
	line err 1 "mlap2pctl: topo set: Device or resource busy" || return 1
	line err 2 "kernel reports: regions are live; the topology changes only while none exists"
}

t_regions() {
	hold_start || return 1
	t_regions_held
	rc=$?
	hold_stop
	[ $rc = 0 ] || return 1
	# The region is gone from its MLA's live bytes, not from the mark.
	run 0 stats && has out "^ +$mla0 +0 B +[0-9.]+ [KMG]iB +[0-9.]+ [KMG]iB$" || return 1
	run 1 regions id="$id" || return 1
	line err 1 "mlap2pctl: regions: No such file or directory" || return 1
	line err 2 "kernel reports: no such region" || return 1
	run 2 regions frob=1 && run 2 regions id=x
}

t_monitor() {
	rm -f "$tmp/mon"
	"$ctl" monitor >"$tmp/mon" 2>"$tmp/monerr" &
	mpid=$!
	# Joined the group once it sleeps in poll(2) for events (no wchan:
	# 10 s, as long a wait as is safe).
	wait_grep "/proc/$mpid/wchan" poll
	hold_start || return 1
	h=$hpid
	hold_stop
	# Both events delivered, not a second's guess.
	wait_grep "$tmp/mon" "^region-free id=[0-9]+ .* pid=$h$"
	kill -INT "$mpid"
	wait "$mpid"
	rc=$?
	mpid=
	[ $rc = 0 ] || { echo "# monitor exited $rc after SIGINT"; sed 's/^/#   /' "$tmp/monerr"; return 1; }
	cp "$tmp/mon" "$tmp/out"
	has out "^region-new id=[0-9]+ device=$mla0 size=4096 owner_pid=$h pid=$h$" &&
	has out "^region-free id=[0-9]+ device=$mla0 size=4096 owner_pid=0 pid=$h$" || return 1
	first=$(grep -n '^region-' "$tmp/out" | head -n 1)
	case $first in *region-new*) ;; *) echo "# first event: $first"; return 1 ;; esac
}

t_topo_set_refusals() {
	run 1 topo set lnc=3 &&
	line err 1 "mlap2pctl: topo set: Numerical result out of range" &&
	has err '^kernel reports: .+' || return 1
	if [ "$family" != trn3 ]; then
		run 1 topo set devices=8 &&
		line err 1 "mlap2pctl: topo set: Invalid argument" &&
		line err 2 "kernel reports: MLA count not valid for this family (torus size, pairs)" ||
			return 1
	fi
	run 1 topo set node="$pod_nodes" &&
	line err 1 "mlap2pctl: topo set: Invalid argument" &&
	has err '^kernel reports: ' || return 1
	run 2 topo set && has err '^  topo set key=value' || return 1
	run 2 topo set lnc=abc && line err 1 "mlap2pctl: topo set: bad value for lnc: 'abc'" || return 1
	run 2 topo set frob=1 && line err 1 "mlap2pctl: topo set: unknown setting 'frob=1'" || return 1
	run 2 topo set lnc=1 lnc=2 && line err 1 "mlap2pctl: topo set: lnc given twice" || return 1
	run 2 topo set family=trn9 || return 1
	# Nothing changed.
	same_as_found || { echo "# the topology changed"; return 1; }
}

t_topo_set() {
	run 0 topo set capacity=64M && [ ! -s "$tmp/out" ] &&
	run 0 info && has out '^capacity +64 MiB per MLA$' || return 1
	run 0 topo set family=trn3 pod=switch pod_nodes=2 node=1 || return 1
	run 0 topo &&
	has out '^family trn3, 16 MLAs per node, 8 cores per MLA, LNC 2 ' &&
	has out '^pod switch, 2 nodes, this host is node 1; 64 MiB per MLA; ' &&
	has out '^node 1: ring of 16 MLAs' && has out '^  \[switch\]$' &&
	has out '^    `-- node 1\*  MLAs 16-31$' || return 1
	run 0 -v topo || return 1
	[ "$(count out '^ +[0-9]+ +[01] +[0-9]+ +- +- ')" = 32 ] ||
		{ echo "# -v should list both nodes' 32 MLAs"; return 1; }
	# shellcheck disable=SC2086 # one word per key=value
	run 0 topo set $restore_cmd || return 1
	same_as_found ||
		{ echo "# not restored:"; sed 's/^/#   /' "$tmp/now"; return 1; }
}

echo "TAP version 13"
echo "1..10"
echo "# $ctl; $family, $devices MLAs/node, LNC $lnc, pod $pod x$pod_nodes, node $node"
tcase version t_version
tcase usage t_usage
tcase info t_info
tcase topo t_topo
tcase topo_json t_topo_json
tcase peer t_peer
tcase regions_and_stats t_regions
tcase monitor t_monitor
tcase topo_set_refusals t_topo_set_refusals
tcase topo_set t_topo_set
echo "# Totals: pass:$((n - fails)) fail:$fails xfail:0 xpass:0 skip:0 error:0"
[ $fails = 0 ]
