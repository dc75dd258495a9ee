#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# rmmod.sh: the mlap2p module cannot be removed while anything uses it (an
# open file, or only a mapping whose file was closed) and is removed
# cleanly once nothing does; it then loads again with the parameters it
# had, and comes back with fresh counters.  KTAP output.
#
# Needs root, a loaded module (/dev/mlap2p) and MLAP2P_KO, the path of
# mlap2p.ko to load it back with (MLAP2P_KO_PARAMS overrides the
# parameters, which are otherwise read back from /sys/module/mlap2p/
# parameters).  Skips (exit 4) otherwise.  Always leaves the module loaded.
# Runs under busybox sh.

set -u

ksft_skip=4
mod=mlap2p
dev=/dev/mlap2p
sysdir=/sys/class/misc/mlap2p
here=$(cd "$(dirname "$0")" && pwd)
helper=$here/hold_helper

skip_all() {
	echo "TAP version 13"
	echo "1..0 # SKIP $*"
	exit $ksft_skip
}

[ -e $dev ] || skip_all "$dev absent (module not loaded)"
[ "$(id -u)" = 0 ] || skip_all "not root"
[ -n "${MLAP2P_KO:-}" ] || skip_all "MLAP2P_KO (path of mlap2p.ko) not set"
[ -f "$MLAP2P_KO" ] || skip_all "MLAP2P_KO=$MLAP2P_KO is not a file"
grep -q "^$mod " /proc/modules || skip_all "$mod is built in, not a module"

# The parameters to load it back with.
if [ -n "${MLAP2P_KO_PARAMS+set}" ]; then
	params=$MLAP2P_KO_PARAMS
else
	params=
	for p in "/sys/module/$mod/parameters"/*; do
		[ -r "$p" ] || continue
		params="$params $(basename "$p")=$(cat "$p")"
	done
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mlap2p-rmmod.XXXXXX") || exit 1
hold_pid=

loaded() { grep -q "^$mod " /proc/modules; }

# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	exec 3<&- 2>/dev/null
	if [ -n "$hold_pid" ]; then
		kill "$hold_pid" 2>/dev/null
		wait "$hold_pid" 2>/dev/null
	fi
	# shellcheck disable=SC2086 # parameters are split on purpose
	loaded || insmod "$MLAP2P_KO" $params
	rm -rf "$tmp"
}
trap cleanup EXIT

n=0
failed=0
result() { # status description [diagnostic]
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n $2"
	else
		[ -n "${3:-}" ] && echo "# $3"
		echo "not ok $n $2"
		failed=$((failed + 1))
	fi
}
skip() { # description reason
	n=$((n + 1))
	echo "ok $n $1 # SKIP $2"
}

# Wait up to 5 s for a path to appear (1) or disappear (0).
wait_path() {
	i=0
	while [ $i -lt 50 ]; do
		if [ "$2" = 1 ]; then
			[ -e "$1" ] && return 0
		else
			[ -e "$1" ] || return 0
		fi
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

echo "TAP version 13"
echo "1..4"
echo "# module $MLAP2P_KO, parameters:$params"

# 1. An open file pins the module.  (A failed exec redirection would end
# the shell, so look first.)
if [ -r $dev ]; then
	exec 3<$dev
	if rmmod $mod 2>"$tmp/err"; then
		result 1 "rmmod_refused_while_a_file_is_open" \
			"rmmod succeeded with $dev open"
	else
		loaded && [ -e $dev ]
		result $? "rmmod_refused_while_a_file_is_open" \
			"module or node gone after a refused rmmod"
	fi
	exec 3<&-
else
	result 1 "rmmod_refused_while_a_file_is_open" "cannot open $dev"
fi

# 2. A mapping alone (its descriptor closed) pins the module.
if [ -x "$helper" ]; then
	"$helper" "$tmp/ready" &
	hold_pid=$!
	if wait_path "$tmp/ready" 1; then
		if rmmod $mod 2>"$tmp/err"; then
			result 1 "rmmod_refused_while_a_mapping_is_held" \
				"rmmod succeeded under a live mapping"
		else
			loaded
			result $? "rmmod_refused_while_a_mapping_is_held" \
				"module gone after a refused rmmod"
		fi
	else
		result 1 "rmmod_refused_while_a_mapping_is_held" \
			"hold_helper did not get ready"
	fi
	kill "$hold_pid" 2>/dev/null
	wait "$hold_pid" 2>/dev/null
	hold_pid=
else
	skip "rmmod_refused_while_a_mapping_is_held" "no $helper"
fi

# 3. Unused, it goes, and takes its node and sysfs directory along.
if rmmod $mod 2>"$tmp/err"; then
	! loaded && wait_path $dev 0 && [ ! -e $sysdir ]
	result $? "rmmod_succeeds_when_unused" \
		"after rmmod: $(loaded && echo 'still in /proc/modules') $(ls -d $dev $sysdir 2>/dev/null)"
else
	result 1 "rmmod_succeeds_when_unused" "rmmod: $(cat "$tmp/err")"
fi

# 4. It loads again, with fresh counters.
if loaded; then
	skip "reload_starts_from_zero" "module still loaded"
else
	# shellcheck disable=SC2086 # parameters are split on purpose
	if insmod "$MLAP2P_KO" $params 2>"$tmp/err" && wait_path $dev 1; then
		bad=
		for c in live_regions live_bytes live_mappings live_handles \
			 allocs frees exports opens closes rejected hwm_bytes; do
			v=$(cat $sysdir/$c 2>/dev/null)
			[ "$v" = 0 ] || bad="$bad $c=${v:-missing}"
		done
		[ -z "$bad" ]
		result $? "reload_starts_from_zero" "counters not zero:$bad"
	else
		result 1 "reload_starts_from_zero" "insmod: $(cat "$tmp/err")"
	fi
fi

echo "# Totals: pass:$((n - failed)) fail:$failed"
[ $failed = 0 ] && exit 0
exit 1
