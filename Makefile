# mlap2p: kernel module, libmlap2p, tools and selftests.
#
#   make               module + library + tools + selftests
#   make deps          install the Debian packages the build and tests need
#   make check         deps, build, host tests, VM selftests (the CI job)
#   make demo          deps, build, then show mlap2p at work in the VM
#   make help          every target
#
# KDIR selects the kernel tree the module builds against; by default the
# running kernel's build tree when it exists, else the newest installed
# Debian linux-headers-*-amd64.

include Makefile.common

TOP := $(CURDIR)
B := $(TOP)/build
KDIR ?= $(shell $(TOP)/tools/find-kdir)
V ?= 0

export TOP B KDIR V MLAP2P_VERSION MLAP2P_VERSION_MAJOR \
	MLAP2P_VERSION_MINOR MLAP2P_VERSION_PATCH

.PHONY: all module lib tools selftests ksft deps check check-host check-vm \
	check-debug demo bench bench-deps vm-shell clean help checkpatch

all: module lib tools selftests

module:
	@test -n "$(KDIR)" || { echo "mlap2p: no kernel build tree found; run 'make deps' or set KDIR" >&2; exit 1; }
	$(MAKE) -C $(KDIR) M=$(TOP) modules

# The kernel's kselftest_harness.h, lib.mk and checkpatch.pl, taken from
# Debian's linux-source-6.1 at build time (never committed).
ksft:
	@$(TOP)/tools/extract-ksft $(B)/ksft

lib:
	$(MAKE) -C lib

tools: lib
	$(MAKE) -C tools

selftests: ksft lib
	$(MAKE) -C selftests/mlap2p

deps:
	@$(TOP)/tools/deps

checkpatch: ksft
	$(B)/ksft/scripts/checkpatch.pl --no-tree --strict --terse -f \
		$(wildcard kmod/*.c kmod/*.h) uapi/linux/mlap2p.h common/mlap2p_topo.c common/mlap2p_topo.h

check: deps
	$(MAKE) all
	$(MAKE) check-host
	$(MAKE) check-vm
	$(MAKE) check-man
	$(MAKE) check-install
	$(MAKE) check-dkms
	$(MAKE) check-torch

# The host part: every test plain, then under ASan/UBSan, and the threaded
# ones under TSan (the library rebuilt with the same sanitizer).  Tests that need the module
# skip here and run in the VM.
TSAN_TESTS := lib_modes_test lib_bootstrap_test lib_ring_test lib_teardown_test dp_proto_test net_test

check-host: selftests
	$(TOP)/selftests/mlap2p/run_tests.sh --host $(B)/selftests
	$(MAKE) -C lib SAN=asan
	$(MAKE) -C selftests/mlap2p SAN=asan
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		$(TOP)/selftests/mlap2p/run_tests.sh --host $(B)/selftests-asan
	$(MAKE) -C lib SAN=tsan
	$(MAKE) -C selftests/mlap2p SAN=tsan
	TSAN_OPTIONS=halt_on_error=1 MLAP2P_TEST_QUICK=1 MLAP2P_TEST_TIMEOUT=900 \
	MLAP2P_TEST_FILTER='$(TSAN_TESTS)' \
		$(TOP)/selftests/mlap2p/run_tests.sh --host $(B)/selftests-tsan

check-vm: all
	$(TOP)/tools/vm/check

check-debug: deps
	$(TOP)/tools/vm/check --debug

# A shell in the VM of check-vm: stock kernel, module loaded, selftests in
# /root/selftests, tools and lib installed.
vm-shell: all
	$(TOP)/tools/vm/check --shell

demo: deps
	$(MAKE) all
	$(TOP)/tools/demo

# mlap2p-perf beside the baselines, ratios from one run (docs/performance.md);
# bench-deps installs the optional Open MPI and UCX baselines.
bench: lib tools
	$(MAKE) -C bench
	$(TOP)/tools/bench
	$(MAKE) bench-torch

bench-deps:
	$(TOP)/tools/bench --deps

clean:
	-$(MAKE) -C $(KDIR) M=$(TOP) clean 2>/dev/null
	rm -rf $(B)

help:
	@sed -n '2,12p' Makefile | sed 's/^# \{0,1\}//'

# Installing and packaging: install, uninstall, dkms-install, dkms-remove,
# check-man, check-install, check-dkms, check-6.12 (see tools/install.mk).
include tools/install.mk

# The PyTorch backend: torch, check-torch, bench-torch, install-torch.
include python/torch.mk
