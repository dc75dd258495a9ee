#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Run the mlap2p tests in each DIR and print KTAP: one plan for all.
#
#   run_tests.sh [--host|--vm] [DIR...]
#
# Runs every executable *_test of the DIRs, then every *.sh (not this
# script), each in name order across the DIRs (so the kernel ABI's
# selftests and the library's test/ interleave as when they shared one
# folder), each with a timeout, from inside its DIR.  DIR defaults to this
# script's folder.  A program's exit status
# decides its line: 0 ok, 4 ok # SKIP, 124 (timeout) or anything else not ok.
# Its own output is shown indented with "# ", as kselftest's runner does.
#
# --vm: the kernel log is ours.  A marker goes to /dev/kmsg before each
# program; a program after whose marker the log shows a splat (WARNING, BUG,
# Oops, KASAN, lockdep, kmemleak, UBSAN, general protection) fails, and a
# final "kernel_log" test checks the whole run.  --host (the default): tests
# that need the module skip themselves; the log is not checked.
#
# Environment:
#   MLAP2P_TEST_FILTER   glob(s), space separated: run only matching programs
#   MLAP2P_TEST_TIMEOUT  seconds per program (default: the largest
#                        "timeout=" in the DIRs' settings, else 300)
#   MLAP2P_TEST_COUNTS   file to write "passed failed skipped" to
#
# A program still running a minute after its timeout (unkillable, or its
# output held open by a leftover process) ends the run: "Bail out!", the
# blocked tasks (sysrq w) in the VM, exit 137.
#
# Exit status 0 only when nothing failed.  Runs under bash, dash and busybox sh.

set -u

mode=host
dirs=
me=$(basename "$0")
splat='WARNING:|BUG:|Oops|KASAN|lockdep|possible circular|kmemleak|UBSAN|general protection'

usage() {
	sed -n '4,32p' "$0" | sed 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
	case $1 in
	--host) mode=host ;;
	--vm) mode=vm ;;
	-h | --help) usage; exit 0 ;;
	-*) echo "$me: unknown option '$1'" >&2; usage >&2; exit 2 ;;
	*)
		[ -d "$1" ] || { echo "$me: '$1' is not a directory" >&2; exit 2; }
		dirs="$dirs$(cd "$1" && pwd)
"
		;;
	esac
	shift
done
[ -n "$dirs" ] || dirs="$(cd "$(dirname "$0")" && pwd)
"
# For messages: the DIRs on one line.
dir=$(printf '%s' "$dirs" | tr '\n' ' ' | sed 's/ $//')

tmo=${MLAP2P_TEST_TIMEOUT:-}
if [ -z "$tmo" ]; then
	tmo=$(printf '%s' "$dirs" | while IFS= read -r d; do
		[ -r "$d/settings" ] &&
			sed -n 's/^timeout=\([0-9][0-9]*\).*/\1/p' "$d/settings" | tail -n 1
	done | sort -n | tail -n 1)
fi
tmo=${tmo:-300}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mlap2p-tests.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# coreutils' timeout kills the whole process group and exits 124;
# busybox's signals the program only and exits 128+signal.
if timeout --version >/dev/null 2>&1; then
	run_timeout() { timeout -k 10 "$tmo" "$@"; }
else
	run_timeout() { timeout "$tmo" "$@"; }
fi

# sed -u streams line by line where it exists (GNU); busybox sed writes to
# the console line by line anyway.
if echo | sed -u 's/^//' >/dev/null 2>&1; then
	indent() { sed -u 's/^/# /'; }
else
	indent() { sed 's/^/# /'; }
fi

matches() {
	[ -n "${MLAP2P_TEST_FILTER:-}" ] || return 0
	for pat in $MLAP2P_TEST_FILTER; do
		# shellcheck disable=SC2254 # the pattern is a glob on purpose
		case $1 in $pat) return 0 ;; esac
	done
	return 1
}

# The tests, in order: C programs, then scripts, each by name; a line is
# "NAME DIR".
: >"$tmp/progs"
: >"$tmp/scripts"
printf '%s' "$dirs" | while IFS= read -r d; do
	for f in "$d"/*_test "$d"/*.sh; do
		[ -f "$f" ] || continue
		name=$(basename "$f")
		[ "$name" = "$me" ] && continue
		[ "$name" = run_tests.sh ] && continue
		case $name in *.sh) ;; *) [ -x "$f" ] || continue ;; esac
		matches "$name" || continue
		case $name in
		*.sh) echo "$name $d" >>"$tmp/scripts" ;;
		*) echo "$name $d" >>"$tmp/progs" ;;
		esac
	done
done
{ sort -k1,1 "$tmp/progs"; sort -k1,1 "$tmp/scripts"; } >"$tmp/list"
ntests=$(wc -l <"$tmp/list" | tr -d ' ')

kmsg_ok=0
if [ -w /dev/kmsg ] && echo "mlap2p-selftests: run $$ starting in $dir" >/dev/kmsg 2>/dev/null; then
	kmsg_ok=1
fi
checklog=0
if [ $mode = vm ]; then
	if [ $kmsg_ok = 1 ] && dmesg >/dev/null 2>&1; then
		checklog=1
	else
		echo "# warning: cannot write /dev/kmsg or read dmesg; kernel log not checked"
	fi
fi

# Kernel log lines after the last line containing marker $1 (the whole log
# when the marker has scrolled out), filtered for splats.
log_since() {
	dmesg >"$tmp/dmesg" 2>/dev/null
	if grep -qF "$1" "$tmp/dmesg"; then
		awk -v m="$1" 'index($0, m) { n = NR } { l[NR] = $0 }
			END { for (i = n + 1; i <= NR; i++) print l[i] }' "$tmp/dmesg"
	else
		cat "$tmp/dmesg"
	fi
}
splats_since() {
	log_since "$1" | grep -E "$splat" >"$tmp/splats"
	[ -s "$tmp/splats" ]
}

echo "TAP version 13"
if [ "$ntests" = 0 ]; then
	echo "1..0"
	if [ -n "${MLAP2P_TEST_FILTER:-}" ]; then
		echo "# no test in $dir matches MLAP2P_TEST_FILTER='$MLAP2P_TEST_FILTER'"
	else
		echo "# no tests (*_test, *.sh) in $dir"
	fi
	echo "selftests: 0 passed, 1 failed"
	exit 1
fi
[ $checklog = 1 ] && ntests=$((ntests + 1))
echo "1..$ntests"
echo "# mlap2p selftests ($mode), $dir, timeout ${tmo}s per program"

# A program still there a minute after its timeout cannot be killed (stuck
# in the kernel), or left something holding its output open.  Show what is
# blocked (sysrq w, in the VM) and give up the run: what would follow could
# not be trusted.
watchdog() { # number name
	i=0
	while [ $i -lt $((tmo + 60)) ]; do
		sleep 1
		[ -f "$tmp/done.$1" ] && exit 0
		[ -d "$tmp" ] || exit 0
		i=$((i + 1))
	done
	echo "not ok $1 $2 # HUNG: still running $((tmo + 60))s after it started"
	if [ $mode = vm ]; then
		echo "# processes:"
		ps 2>/dev/null | sed 's/^/#   /'
	fi
	if [ $mode = vm ] && [ -w /proc/sysrq-trigger ]; then
		echo w >/proc/sysrq-trigger
		sleep 2
		echo "# blocked tasks (sysrq w) at the end of the kernel log:"
		dmesg | tail -n 150 | sed 's/^/#   /'
	fi
	echo "Bail out! $2 hung"
	kill -KILL $$
}

n=0
failed=0
cases_pass=0
cases_fail=0
cases_skip=0
run_start=$(date +%s)
while read -r name d; do
	n=$((n + 1))
	marker="mlap2p-selftests: run $$ test $n $name"
	[ $kmsg_ok = 1 ] && echo "$marker" >/dev/kmsg 2>/dev/null
	echo "# selftests: mlap2p: $name"
	t0=$(date +%s)
	rm -f "$tmp/rc"
	watchdog $n "$name" &
	wd=$!
	(
		cd "$d" || exit 2
		if [ -x "$name" ]; then
			run_timeout "./$name" </dev/null 2>&1
		else
			run_timeout sh "./$name" </dev/null 2>&1
		fi
		echo $? >"$tmp/rc"
	) | tee "$tmp/out" | indent
	: >"$tmp/done.$n"
	kill "$wd" 2>/dev/null
	wait "$wd" 2>/dev/null
	rc=$(cat "$tmp/rc" 2>/dev/null || echo 2)
	secs=$(($(date +%s) - t0))

	timed_out=0
	case $rc in
	124) timed_out=1 ;;
	137 | 143) [ $secs -ge "$tmo" ] && timed_out=1 ;;
	esac

	# The program's own counts (kselftest's "# Totals:" line), if any.
	totals=$(grep -E '^# Totals: pass:[0-9]+ fail:[0-9]+' "$tmp/out" | tail -n 1)
	p=0 f=0 s=0
	if [ -n "$totals" ]; then
		p=$(echo "$totals" | sed 's/^# Totals: pass:\([0-9]*\).*/\1/')
		f=$(echo "$totals" | sed 's/.* fail:\([0-9]*\).*/\1/')
		s=$(echo "$totals" | sed 's/.* skip:\([0-9]*\).*/\1/')
		case $s in *[!0-9]* | "") s=0 ;; esac
	fi

	logbad=0
	if [ $checklog = 1 ] && splats_since "$marker"; then
		logbad=1
	fi

	echo "# $name: exit $rc after ${secs}s"
	if [ $timed_out = 1 ]; then
		echo "not ok $n $name # TIMEOUT ${tmo}s"
	elif [ $logbad = 1 ]; then
		echo "# kernel log after $name:"
		sed 's/^/#   /' "$tmp/splats"
		echo "not ok $n $name # kernel log shows a splat"
	elif [ "$rc" = 0 ]; then
		echo "ok $n $name"
	elif [ "$rc" = 4 ]; then
		echo "ok $n $name # SKIP"
	else
		echo "not ok $n $name # exit=$rc"
	fi

	# Without a Totals line the program counts as one case.
	if [ -z "$totals" ]; then
		case $rc in 0) p=1 ;; 4) s=1 ;; *) f=1 ;; esac
	fi
	if { [ "$rc" != 0 ] && [ "$rc" != 4 ]; } || [ $timed_out = 1 ] || [ $logbad = 1 ]; then
		failed=$((failed + 1))
		[ -n "$totals" ] || p=0 s=0
		[ "$f" -gt 0 ] || f=1
	fi
	cases_pass=$((cases_pass + p))
	cases_fail=$((cases_fail + f))
	cases_skip=$((cases_skip + s))
done <"$tmp/list"

if [ $checklog = 1 ]; then
	n=$((n + 1))
	if splats_since "mlap2p-selftests: run $$ starting"; then
		echo "# kernel log since the start of the run:"
		sed 's/^/#   /' "$tmp/splats"
		echo "not ok $n kernel_log"
		failed=$((failed + 1))
		cases_fail=$((cases_fail + 1))
	else
		echo "ok $n kernel_log"
		cases_pass=$((cases_pass + 1))
	fi
fi

echo "# $n programs in $(($(date +%s) - run_start))s, $failed failed"
echo "# Totals: pass:$cases_pass fail:$cases_fail xfail:0 xpass:0 skip:$cases_skip error:0"
echo "selftests: $cases_pass passed, $cases_fail failed, $cases_skip skipped"
if [ -n "${MLAP2P_TEST_COUNTS:-}" ]; then
	echo "$cases_pass $cases_fail $cases_skip" >"$MLAP2P_TEST_COUNTS"
fi
[ $failed = 0 ]
