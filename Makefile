# mlap2p: kernel module, libmlap2p, tools and selftests.
#
#   make               module + library + tools + tests (test/, selftests/)
#   make deps          install the Debian packages the build and tests need
#   make check         deps, build, host tests, torch tests, VM selftests, the
#                      torch tests in the VM (the CI job)
#   make demo          deps, build, then show mlap2p at work in the VM
#   make help          every target
#
# KDIR selects the kernel tree the module builds against; by default the
# running kernel's build tree when it exists, else the newest installed
# Debian linux-headers-*-amd64.

include Makefile.common

TOP := $(CURDIR)
B := $(TOP)/build
KDIR ?= $(shell $(TOP)/scripts/find-kdir)
include Makefile.quiet

export TOP B KDIR V MLAP2P_VERSION MLAP2P_VERSION_MAJOR \
	MLAP2P_VERSION_MINOR MLAP2P_VERSION_PATCH

.PHONY: all module lib tools selftests ksft deps check check-host check-net-none check-vm \
	check-debug demo bench bench-deps vm-shell clean help checkpatch

all: module lib tools selftests

module:
	@test -n "$(KDIR)" || { echo "mlap2p: no kernel build tree found; run 'make deps' or set KDIR" >&2; exit 1; }
	$(MAKE) -C $(KDIR) M=$(TOP) modules

# The kernel's kselftest_harness.h, lib.mk and checkpatch.pl, taken from
# Debian's linux-source-6.1 at build time (never committed).
ksft:
	@$(TOP)/scripts/extract-ksft $(B)/ksft

lib:
	$(MAKE) -C lib

tools: lib
	$(MAKE) -C tools

# Both suites: the library's (test/) and the kernel ABI's (selftests/).
selftests: ksft lib
	$(MAKE) -C test
	$(MAKE) -C selftests/mlap2p
	$(MAKE) -C test/nccl

deps:
	@$(TOP)/scripts/deps

checkpatch: ksft
	$(B)/ksft/scripts/checkpatch.pl --no-tree --strict --terse -f \
		$(wildcard kmod/*.c kmod/*.h) uapi/linux/mlap2p.h common/mlap2p_stats.h common/mlap2p_topo.c \
		common/mlap2p_topo.h

check: deps
	$(MAKE) all
	$(MAKE) check-host
	$(MAKE) check-torch
	$(MAKE) check-vm
	$(MAKE) check-vm-torch
	$(MAKE) check-man
	$(MAKE) check-install
	$(MAKE) check-dkms

# The host part: every test of both suites plain, then under ASan/UBSan,
# and the threaded ones (all in test/) under TSan (the library rebuilt with
# the same sanitizer).  Tests that need the module skip here and run in
# the VM.  One run_tests.sh over both folders: one plan, one total.
TSAN_TESTS := lib_modes_test lib_bootstrap_test lib_ring_test lib_teardown_test dp_proto_test net_test \
	coll_test nccl_stream_test nccl_p2p_test nccl_api_test nccl_examples_test
RUN_TESTS := $(TOP)/selftests/mlap2p/run_tests.sh

check-host: selftests
	$(TOP)/scripts/check-layers $(B)/lib/.obj
	$(MAKE) check-net-none
	$(RUN_TESTS) --host $(B)/test $(B)/test-nccl $(B)/selftests
	$(MAKE) -C lib SAN=asan
	$(MAKE) -C test SAN=asan
	$(MAKE) -C selftests/mlap2p SAN=asan
	$(MAKE) -C test/nccl SAN=asan
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		$(RUN_TESTS) --host $(B)/test-asan $(B)/test-nccl-asan $(B)/selftests-asan
	$(MAKE) -C lib SAN=tsan
	$(MAKE) -C test SAN=tsan
	$(MAKE) -C test/nccl SAN=tsan
	TSAN_OPTIONS=halt_on_error=1 MLAP2P_TEST_QUICK=1 MLAP2P_TEST_TIMEOUT=900 \
	MLAP2P_TEST_FILTER='$(TSAN_TESTS)' \
		$(RUN_TESTS) --host $(B)/test-tsan $(B)/test-nccl-tsan

# libmlap2p built without libfabric (NET=none, into build/lib-nonet): the
# NET entry says no and the seed's terminal error follows.
check-net-none: ksft
	$(MAKE) -C lib NET=none
	$(MAKE) -C test NET=none
	$(RUN_TESTS) --host $(B)/test-nonet

check-vm: all
	$(TOP)/scripts/vm/check

check-debug: deps
	$(TOP)/scripts/vm/check --debug

# A shell in the VM of check-vm: stock kernel, module loaded, selftests in
# /root/selftests, tools and lib installed.
vm-shell: all
	$(TOP)/scripts/vm/check --shell

demo: deps
	$(MAKE) all
	$(TOP)/scripts/demo

# mlap2p-perf beside the baselines, ratios from one run (docs/performance.md);
# bench-deps installs the optional Open MPI and UCX baselines.
bench: lib tools
	$(MAKE) -C bench
	$(TOP)/bench/run
	$(MAKE) bench-torch

bench-deps:
	$(TOP)/bench/run --deps

clean:
	-$(MAKE) -C $(KDIR) M=$(TOP) clean 2>/dev/null
	rm -rf $(B)

help:
	@sed -n '2,12p' Makefile | sed 's/^# \{0,1\}//'

# Installing and packaging: install, uninstall, dkms-install, dkms-remove,
# check-man, check-install, check-dkms, check-6.12 (see scripts/install.mk).
include scripts/install.mk

# The PyTorch backend: torch, check-torch, check-vm-torch, bench-torch,
# install-torch (python/torch.mk).  make check runs check-torch and
# check-vm-torch, which print a TAP SKIP line naming the missing package
# when Debian's python3 has no torch.
include python/torch.mk
