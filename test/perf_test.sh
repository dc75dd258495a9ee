#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# mlap2p-perf's tests and its output: every row of a byte-checked run has
# 0 wrong bytes and the expected sizes and protocols, -t latency writes one
# row with its baseline and ratio, and bad options exit with the documented
# status and message.  Runs with the module (kmod runtime) and without it
# (mlap2p-perf then sets MLAP2P_RUNTIME=host itself).
#
# mlap2p-perf is $MLAP2P_PERF, else the one on PATH, else
# ../tools/mlap2p-perf (build/tools beside build/test).  Exits 4
# (skip) without it.  KTAP output.

set -u

KSFT_SKIP=4
here=$(cd "$(dirname "$0")" && pwd)
perf=${MLAP2P_PERF:-}
[ -n "$perf" ] || perf=$(command -v mlap2p-perf 2>/dev/null)
if [ -z "$perf" ] && [ -x "$here/../tools/mlap2p-perf" ]; then
	perf=$here/../tools/mlap2p-perf
fi
if [ -z "$perf" ]; then
	echo "TAP version 13"
	echo "1..0 # SKIP mlap2p-perf not found (set MLAP2P_PERF)"
	exit $KSFT_SKIP
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/perf-test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n $1"; }
not_ok() {
	n=$((n + 1))
	failed=$((failed + 1))
	echo "not ok $n $1"
	shift
	for l in "$@"; do echo "# $l"; done
	sed 's/^/# | /' "$tmp/out" "$tmp/err" 2>/dev/null | tail -n 20
}

# rows FILE: the JSON result rows, one per line (mlap2p-perf writes them so)
rows() { grep '"test":' "$1"; }
# field NAME: that field's value in each row on stdin
field() { sed -n "s/.*\"$1\": \"\{0,1\}\([^,\"}]*\).*/\1/p"; }

echo "TAP version 13"
echo "1..5"

# 1: pingpong, every size from 1 B to 64 KiB by 4, every byte checked
if "$perf" -t pingpong -b 1 -e 64K -f 4 -c -i 50 -w 2 \
	--json "$tmp/pp.json" >"$tmp/out" 2>"$tmp/err"; then
	sizes=$(rows "$tmp/pp.json" | field bytes | tr '\n' ' ')
	wrong=$(rows "$tmp/pp.json" | field wrong | sort -u | tr '\n' ' ')
	protos=$(rows "$tmp/pp.json" | field proto | uniq | tr '\n' ' ')
	if [ "$sizes" = "1 4 16 64 256 1024 4096 16384 65536 " ] &&
	   [ "$wrong" = "0 " ] && [ "$protos" = "LL LL128 SIMPLE " ]; then
		ok "pingpong_checked_sizes_and_protocols"
	else
		not_ok "pingpong_checked_sizes_and_protocols" \
			"sizes '$sizes' wrong '$wrong' protocols '$protos'"
	fi
else
	not_ok "pingpong_checked_sizes_and_protocols" "exit status $?"
fi

# 2: a ring exchange of 4 threads, odd sizes, checked
if "$perf" -t sendrecv -n 4 --threads -b 7 -e 1M -f 16 -c -i 20 -w 2 \
	--json "$tmp/sr.json" >"$tmp/out" 2>"$tmp/err"; then
	sizes=$(rows "$tmp/sr.json" | field bytes | tr '\n' ' ')
	wrong=$(rows "$tmp/sr.json" | field wrong | sort -u | tr '\n' ' ')
	if [ "$sizes" = "7 112 1792 28672 458752 " ] && [ "$wrong" = "0 " ]; then
		ok "sendrecv_threads_checked"
	else
		not_ok "sendrecv_threads_checked" "sizes '$sizes' wrong '$wrong'"
	fi
else
	not_ok "sendrecv_threads_checked" "exit status $?"
fi

# 3: -t latency: one row, 8 bytes over LL, with its baseline and ratio
if "$perf" -t latency -i 100 --json "$tmp/lat.json" \
	>"$tmp/out" 2>"$tmp/err"; then
	row=$(rows "$tmp/lat.json")
	cnt=$(rows "$tmp/lat.json" | wc -l | tr -d ' ')
	t=$(echo "$row" | field test)
	b=$(echo "$row" | field bytes)
	p=$(echo "$row" | field proto)
	line=$(echo "$row" | field line_us)
	ratio=$(echo "$row" | field ratio)
	if [ "$cnt" = 1 ] && [ "$t" = latency ] && [ "$b" = 8 ] &&
	   [ "$p" = LL ] &&
	   awk -v l="$line" -v r="$ratio" 'BEGIN { exit !(l > 0 && r > 0) }' &&
	   grep -q '^# latency: one-way, beside a cache-line ping-pong' "$tmp/out"; then
		ok "latency_row_with_baseline_and_ratio"
	else
		not_ok "latency_row_with_baseline_and_ratio" \
			"rows $cnt: test '$t' bytes '$b' proto '$p' line_us '$line' ratio '$ratio'"
	fi
else
	not_ok "latency_row_with_baseline_and_ratio" "exit status $?"
fi

# 4: an unknown test: status 1 and the message
"$perf" -t nosuch >"$tmp/out" 2>"$tmp/err"
st=$?
if [ $st = 1 ] && grep -qx "mlap2p-perf: unknown test 'nosuch'" "$tmp/err"; then
	ok "unknown_test_fails_with_message"
else
	not_ok "unknown_test_fails_with_message" "exit status $st"
fi

# 5: an unknown option: status 2 and the usage on stderr
"$perf" --nosuch >"$tmp/out" 2>"$tmp/err"
st=$?
if [ $st = 2 ] && grep -q '^usage: mlap2p-perf' "$tmp/err"; then
	ok "unknown_option_prints_usage"
else
	not_ok "unknown_option_prints_usage" "exit status $st"
fi

echo "# Totals: pass:$((n - failed)) fail:$failed xfail:0 xpass:0 skip:0 error:0"
[ $failed = 0 ]
