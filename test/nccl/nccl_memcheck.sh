#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The <nccl.h> programs of this folder that bound no time under valgrind's
# memcheck: no invalid access, no branch on an uninitialised value, no
# uninitialised byte handed to a system call (the bootstrap's sockets
# carry what the library sends to other processes), no block definitely
# lost.  Each program checks its own results as well.  (nccl_api_test and
# nccl_stream_test assert that things end within 1-20 s, which a program
# run 20-50 times slower on a loaded machine need not do: under load one
# such bound failed here, so they stay out.)  Runs on the plain build;
# the sanitizer lanes' builds skip (valgrind does not run ASan or TSan
# code).  Exit 0 pass, 1 fail, 4 skip.

set -u
here=$(cd "$(dirname "$0")" && pwd)
case $(basename "$here") in
test-nccl-*) echo "# SKIP: memcheck runs on the plain build"; exit 4 ;;
esac
command -v valgrind > /dev/null ||
	{ echo "# valgrind is missing (make deps installs it)"; exit 1; }
[ -n "${MLAP2P_RUNTIME:-}" ] || [ -e /dev/mlap2p ] || export MLAP2P_RUNTIME=host

fail=0
for p in nccl_examples_test nccl_p2p_test; do
	log=$(mktemp)
	valgrind -q --trace-children=yes --error-exitcode=9 \
		--leak-check=full --errors-for-leak-kinds=definite \
		"$here/$p" > "$log" 2>&1
	rc=$?
	if [ $rc -ne 0 ]; then
		echo "# $p under memcheck: exit $rc"
		sed 's/^/# /' "$log" | head -n 60
		fail=1
	else
		echo "# $p: memcheck clean"
	fi
	rm -f "$log"
done
exit $fail
