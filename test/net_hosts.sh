#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# NET across emulated hosts.  Two network namespaces joined by a veth pair
# are two hosts; every rank runs in its host's namespace and in a UTS
# namespace of its own carrying the host's name, so hostHash (hostname +
# boot id) tells the hosts apart and the ranks of one host share it.  Each
# rank is a net_helper process; they meet through NCCL_COMM_ID on host A.
#
#   ring_2x2          4 ranks (A: 0 1, B: 2 3) in a ring over 2 channels:
#                     same-host hops take P2P, cross-host hops NET (checked in
#                     the helpers' path lines and the NCCL_DEBUG=INFO lines),
#                     and every protocol moves the data-plane test sizes
#                     byte-exact.
#   coll_2x2          the same 4 ranks run every collective (net_helper coll),
#                     connecting on first use: each result checked, the
#                     ring's same-host hops P2P and cross-host hops NET.
#   p2p_disabled      NCCL_P2P_DISABLE=1 on host B: its pair falls through to
#                     NET instead of failing; host A stays on P2P.
#   cut_link          the ranks stream round the ring; the veth goes down
#                     mid-transfer; every rank must fail within
#                     MLAP2P_PEER_TIMEOUT plus slack, naming its peer, and the
#                     NET proxy must say which path went silent.
#
# Needs root, `ip netns` and unshare(1); exits 4 (skip) otherwise.  KTAP
# output.  Environment: NET_HELPER (default: net_helper next to this
# script), NET_HOSTS_KEEP=1 keeps the logs directory.

set -u

KSFT_PASS=0
KSFT_FAIL=1
KSFT_SKIP=4

here=$(cd "$(dirname "$0")" && pwd)
helper=${NET_HELPER:-$here/net_helper}
id=$$
nsa=mlnet$id-a
nsb=mlnet$id-b
# veth names are at most 15 bytes; both start with "mn" so one
# NCCL_SOCKET_IFNAME prefix picks each host's link and never lo.
va=mn${id}a
vb=mn${id}b
net=10.$((id % 200 + 20)).$((id / 200 % 250)).
ipa=${net}1
ipb=${net}2
logs=
pids=
failed=0
ntest=0

skip() {
	echo "TAP version 13"
	echo "1..0 # SKIP $*"
	exit $KSFT_SKIP
}

cleanup() {
	for p in $pids; do
		kill -9 "$p" 2>/dev/null
	done
	ip netns del "$nsa" 2>/dev/null
	ip netns del "$nsb" 2>/dev/null
	if [ -n "$logs" ] && [ "${NET_HOSTS_KEEP:-0}" != 1 ]; then
		rm -rf "$logs"
	elif [ -n "$logs" ]; then
		echo "# logs kept in $logs"
	fi
}

[ "$(id -u)" = 0 ] || skip "needs root"
command -v ip >/dev/null 2>&1 || skip "no ip(8)"
command -v unshare >/dev/null 2>&1 || skip "no unshare(1)"
[ -x "$helper" ] || skip "no $helper"
trap cleanup EXIT
trap 'exit 1' INT TERM

ip netns add "$nsa" 2>/dev/null || skip "ip netns add failed (no network namespaces?)"
ip netns add "$nsb" || skip "ip netns add failed"
ip link add "$va" type veth peer name "$vb" 2>/dev/null || skip "no veth support"
ip link set "$va" netns "$nsa" && ip link set "$vb" netns "$nsb" &&
ip -n "$nsa" addr add "$ipa/24" dev "$va" &&
ip -n "$nsb" addr add "$ipb/24" dev "$vb" &&
ip -n "$nsa" link set lo up && ip -n "$nsb" link set lo up &&
ip -n "$nsa" link set "$va" up && ip -n "$nsb" link set "$vb" up ||
	skip "cannot configure the veth pair"
# Both ends carrier-up before anyone connects.
i=0
while [ $i -lt 50 ] && ! ip -n "$nsb" link show "$vb" | grep -q LOWER_UP; do
	sleep 0.1
	i=$((i + 1))
done
unshare --uts true 2>/dev/null || skip "unshare --uts is not permitted"
logs=$(mktemp -d /tmp/net_hosts.XXXXXX)

echo "TAP version 13"
echo "1..4"

ok() {
	ntest=$((ntest + 1))
	echo "ok $ntest $1"
}

not_ok() {
	ntest=$((ntest + 1))
	failed=1
	echo "not ok $ntest $1"
}

show() {	# indent a log into the TAP stream
	sed 's/^/# /' "$1"
}

# rank NS HOSTNAME RANK CORE LOG ARGS... (background; env passes through)
rank() {
	ns=$1 hn=$2 r=$3 core=$4 log=$5
	shift 5
	ip netns exec "$ns" unshare --uts sh -c \
		'hostname "$1" && shift && exec "$@"' sh "$hn" \
		"$helper" "$@" --nranks 4 --rank "$r" --core "$core" \
		>"$log" 2>&1 &
	pids="$pids $!"
}

# Wait for every pid in $pids, at most RANK_TIMEOUT seconds in all; fail
# (return 1) if any exits non-zero.  Ranks still running then are hung:
# they print their connections' state (SIGUSR1, MLAP2P_DUMP_SIGNAL) into
# their logs, are killed, and each log's tail goes into the TAP stream.
RANK_TIMEOUT=${NET_HOSTS_RANK_TIMEOUT:-60}
wait_ranks() {
	local deadline left hung= p
	deadline=$(($(date +%s) + RANK_TIMEOUT))	# sh has no $SECONDS
	rc=0
	while :; do
		left=
		for p in $pids; do
			kill -0 "$p" 2>/dev/null && left="$left $p"
		done
		[ -z "$left" ] && break
		if [ "$(date +%s)" -ge $deadline ]; then
			hung=$left
			break
		fi
		sleep 0.2
	done
	if [ -n "$hung" ]; then
		echo "# ranks still running after ${RANK_TIMEOUT}s (pids$hung): hung; their state:"
		for p in $hung; do
			pkill -USR1 -P "$p" 2>/dev/null
			kill -USR1 "$p" 2>/dev/null
		done
		sleep 1
		for p in $hung; do
			pkill -9 -P "$p" 2>/dev/null
			kill -9 "$p" 2>/dev/null
		done
		for f in "$logs"/*; do
			[ -f "$f" ] || continue
			grep -v 'NCCL INFO' "$f" | tail -n 12 | sed "s|^|# $(basename "$f"): |"
		done
		rc=1
	fi
	for p in $pids; do
		wait "$p" || rc=1
	done
	pids=
	return $rc
}

common_env() {
	export MLAP2P_RUNTIME=host
	export NCCL_SOCKET_IFNAME=mn
	export MLAP2P_BOOTSTRAP_TIMEOUT=60s
	export NCCL_DEBUG=INFO
	export NCCL_DEBUG_SUBSYS=INIT,NET,P2P
	unset NCCL_P2P_DISABLE MLAP2P_NET_DISABLE FI_PROVIDER 2>/dev/null
	port=$((20000 + (id + ntest * 7919) % 30000))
	export NCCL_COMM_ID=$ipa:$port
}

# expect LOG PATTERN WHAT: the log must contain a line matching PATTERN.
expect() {
	if ! grep -q -- "$2" "$1"; then
		echo "# $(basename "$1"): no line matching '$2' ($3)"
		return 1
	fi
	return 0
}

# The same with an extended regular expression.
expect_re() {
	if ! grep -qE -- "$2" "$1"; then
		echo "# $(basename "$1"): no line matching '$2' ($3)"
		return 1
	fi
	return 0
}

# start_2x2 TEST ARGS...: net_helper ARGS on ranks 0 and 1 on host A and
# 2 and 3 on host B, rank r on core r % 2, logs $logs/TEST.r.
start_2x2() {
	local t=$1 i
	shift
	for i in 0 1 2 3; do
		if [ $i -lt 2 ]; then
			rank "$nsa" hosta $i $((i % 2)) "$logs/$t.$i" "$@"
		else
			rank "$nsb" hostb $i $((i % 2)) "$logs/$t.$i" "$@"
		fi
	done
}

# paths_2x2 TEST: the ring of start_2x2's ranks, in their path lines, is
# P2P inside a host and NET across.
paths_2x2() {
	local bad=0
	expect "$logs/$1.0" "path next=1 P2P/IPC" "0 -> 1 same host" || bad=1
	expect "$logs/$1.1" "path next=2 NET" "1 -> 2 across hosts" || bad=1
	expect "$logs/$1.2" "path next=3 P2P/IPC" "2 -> 3 same host" || bad=1
	expect "$logs/$1.3" "path next=0 NET" "3 -> 0 across hosts" || bad=1
	return $bad
}

# report TEST RES: ok, or not ok with each rank's log tail.
report() {
	local i
	if [ "$2" = 0 ]; then
		ok "$1"
		return
	fi
	for i in 0 1 2 3; do
		grep -v "NCCL INFO" "$logs/$1.$i" | tail -n 15 | sed "s/^/# $i: /"
	done
	not_ok "$1"
}

# ---- ring_2x2 ----
t=ring_2x2
common_env
start_2x2 "$t" ring --channels 2
res=0
wait_ranks || res=1
# P2P inside each host, NET across: the helpers' own view...
paths_2x2 "$t" || res=1
# ...and NCCL's INFO lines.
expect "$logs/$t.0" "0\[0\] -> 1\[1\] via P2P/IPC" "INFO P2P line" || res=1
expect "$logs/$t.1" "1\[1\] -> 2\[0\] \[send\] via NET/Libfabric/" "INFO NET send line" || res=1
expect "$logs/$t.2" "1\[1\] -> 2\[0\] \[receive\] via NET/Libfabric/" "INFO NET receive line" || res=1
for r in 0 1 2 3; do
	expect "$logs/$t.$r" "rank $r on host[ab]" "hostname" || res=1
	for p in LL LL128 SIMPLE; do
		for s in 0 1 7 8 4095 4096 4097 1048589 67108864; do
			expect "$logs/$t.$r" "rank $r: ok $p $s\$" "$p $s bytes" || res=1
		done
	done
	expect "$logs/$t.$r" "rank $r: done" "clean destroy" || res=1
done
report "$t" $res

# ---- coll_2x2 ----
t=coll_2x2
common_env
start_2x2 "$t" coll
res=0
wait_ranks || res=1
paths_2x2 "$t" || res=1
for r in 0 1 2 3; do
	for c in all_reduce broadcast reduce all_gather reduce_scatter all_to_all; do
		expect "$logs/$t.$r" "rank $r: ok $c (" "$c" || res=1
	done
	expect "$logs/$t.$r" "rank $r: done" "clean destroy" || res=1
done
report "$t" $res

# ---- p2p_disabled ----
t=p2p_disabled
common_env
for r in 0 1 2 3; do
	if [ $r -lt 2 ]; then
		rank "$nsa" hosta $r $r "$logs/$t.$r" ring --sizes 0,1,4097,1M+13
	else
		export NCCL_P2P_DISABLE=1
		rank "$nsb" hostb $r $((r - 2)) "$logs/$t.$r" \
			ring --sizes 0,1,4097,1M+13
		unset NCCL_P2P_DISABLE
	fi
done
res=0
wait_ranks || res=1
expect "$logs/$t.0" "path next=1 P2P/IPC" "host A keeps P2P" || res=1
expect "$logs/$t.2" "path next=3 NET" "host B falls through to NET" || res=1
expect "$logs/$t.3" "path prev=2 NET" "host B falls through to NET" || res=1
expect "$logs/$t.2" "2\[0\] -> 3\[1\] \[send\] via NET/Libfabric/" "INFO NET line" || res=1
for r in 0 1 2 3; do
	expect "$logs/$t.$r" "rank $r: ok SIMPLE 1048589" "data" || res=1
	expect "$logs/$t.$r" "rank $r: done" "clean destroy" || res=1
done
report "$t" $res

# ---- cut_link ----
t=cut_link
common_env
export NCCL_DEBUG=WARN
export MLAP2P_PEER_TIMEOUT=2s
start_2x2 "$t" stream --bytes 262144 --seconds 90
res=0
i=0
while [ $i -lt 600 ]; do
	n=0
	for r in 0 1 2 3; do
		grep -q "rank $r: streaming" "$logs/$t.$r" 2>/dev/null && n=$((n + 1))
	done
	[ $n = 4 ] && break
	sleep 0.1
	i=$((i + 1))
done
if [ $n != 4 ]; then
	echo "# the ring never started streaming"
	res=1
fi
start=$(date +%s)
ip -n "$nsa" link set "$va" down
wait_ranks
end=$(date +%s)
unset MLAP2P_PEER_TIMEOUT
if [ $((end - start)) -gt 10 ]; then
	echo "# the ranks took $((end - start)) s to notice (MLAP2P_PEER_TIMEOUT=2s)"
	res=1
fi
# Every rank fails naming a ring neighbour and what happened to it: the
# NET one (across the cut) behind a failed network path, or the P2P one
# (same host) because that one has exited after its own failure.
for r in 0 1 2 3; do
	case $r in
	0) p2p=1 net=3 ;;
	1) p2p=0 net=2 ;;
	2) p2p=3 net=1 ;;
	3) p2p=2 net=0 ;;
	esac
	expect_re "$logs/$t.$r" "rank $r: error after [0-9]* exchanges: [^:]*: rank $r: (the network path to peer rank $net failed|peer rank $p2p \(pid [0-9]*\) died)" \
		"rank $r's error names its NET or its P2P neighbour" || res=1
done
# A NET proxy on each host says which path went silent.  Every rank
# has a path across the cut (0-3 and 1-2), so either rank of a host may
# be the first to say it; the other may exit first on the error of its
# P2P neighbour, which has exited after its own NET failure.
cat "$logs/$t.0" "$logs/$t.1" > "$logs/$t.hosta"
cat "$logs/$t.2" "$logs/$t.3" > "$logs/$t.hostb"
expect_re "$logs/$t.hosta" "NET: rank (0: the network path to rank 3|1: the network path to rank 2) \(.*\) failed: nothing arrived" "NET WARN on host A" || res=1
expect_re "$logs/$t.hostb" "NET: rank (2: the network path to rank 1|3: the network path to rank 0) \(.*\) failed: nothing arrived" "NET WARN on host B" || res=1
if [ $res = 0 ]; then
	echo "# every rank failed $((end - start)) s after the cut"
	for r in 0 1 2 3; do grep "error after" "$logs/$t.$r" | sed 's/^/# /'; done
	ok $t
else
	for r in 0 1 2 3; do tail -n 15 "$logs/$t.$r" | sed "s/^/# $r: /"; done
	not_ok $t
fi

[ $failed = 0 ] && exit $KSFT_PASS
exit $KSFT_FAIL
