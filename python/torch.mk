# SPDX-License-Identifier: MIT
#
# python/torch.mk: the PyTorch backend (python/mlap2p_torch), included by
# the top-level Makefile.
#
#   make torch          build mlap2p_torch (C++ extension, ahead of time)
#                       into build/python/lib with $(PYTHON)
#   make check-torch    its tests, 2 and 4 processes (skips, saying so,
#                       when $(PYTHON) has no torch)
#   make check-vm-torch the operation tests in the VM, on the module
#   make bench-torch    all_reduce and a DDP step, mlap2p beside Gloo
#   make install-torch  (part of make install) into $(PYSITEDIR)
#
# PYTHON is Debian's interpreter: the python3 first on PATH may be another
# one (pyenv) that does not see python3-torch.  PYTHON=... picks another.

PYTHON ?= /usr/bin/python3
TORCH_B := $(B)/python
TORCH_LIB := $(TORCH_B)/lib
PYVER = $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
PYSITEDIR ?= $(PREFIX)/lib/python$(PYVER)/dist-packages
TORCH_SRCS := $(wildcard $(TOP)/python/setup.py $(TOP)/python/mlap2p_torch/*.py \
	$(TOP)/python/mlap2p_torch/csrc/*)
# The tree's libmlap2p first, then the just-built package.
TORCH_ENV = LD_LIBRARY_PATH=$(B)/lib$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH} \
	PYTHONPATH=$(TORCH_LIB)$${PYTHONPATH:+:$$PYTHONPATH}
# The Debian packages $(PYTHON) lacks for the backend, empty when none.
torch_missing = $$($(PYTHON) $(TOP)/python/probe.py 2>/dev/null || \
	{ [ -x "$(PYTHON)" ] || echo python3; })

.PHONY: torch check-torch check-vm-torch bench-torch install-torch uninstall-torch

torch: lib
	@m="$(torch_missing)"; [ -z "$$m" ] || { echo "mlap2p: torch: $(PYTHON)" \
		"lacks $$m (make deps installs them)" >&2; exit 1; }
	cd $(TOP)/python && MLAP2P_INCLUDE=$(TOP)/lib/include/nccl:$(TOP)/lib/include \
		MLAP2P_LIBDIR=$(B)/lib MLAP2P_VERSION=$(MLAP2P_VERSION) \
		$(PYTHON) setup.py -q build --build-base $(TORCH_B)/build \
		--build-lib $(TORCH_LIB) --build-temp $(TORCH_B)/tmp
	$(TORCH_ENV) $(PYTHON) -c 'import mlap2p_torch, torch.distributed as d; \
		assert "mlap2p" in d.Backend._plugins or "MLAP2P" in d.Backend._plugins'

# torch 1.13's torchrun on Python 3.11 fails with its default --redirects 0
# and --tee 0 (Std.from_str: 3.11's IntFlag iteration skips NONE, so "0"
# maps to None: "'NoneType' object has no attribute 'get'"); "1" parses.
# Standard output then goes to a log file under --log_dir and, teed, to
# the terminal.
TORCHRUN_FLAGS := --redirects 1 --tee 1

# 2 and 4 ranks (tcp://, file://, env:// through torchrun), training,
# faults.  MLAP2P_TORCH_QUICK=1 shortens training.
TORCH_TESTS := $(TOP)/python/tests
check-torch:
	@m="$(torch_missing)"; if [ -n "$$m" ]; then \
		echo "ok 1 check-torch # SKIP $(PYTHON) lacks $$m (make deps installs it)"; \
		exit 0; fi; \
	$(MAKE) torch && \
	cd $(TORCH_TESTS) && export $(TORCH_ENV) && \
	set -e; \
	nice $(PYTHON) torch_ops.py --nprocs 2 --init tcp; \
	nice $(PYTHON) torch_ops.py --nprocs 4 --init file; \
	rm -rf $(TORCH_B)/torchrun; \
	nice $(PYTHON) -m torch.distributed.run $(TORCHRUN_FLAGS) \
		--log_dir $(TORCH_B)/torchrun --standalone --nproc_per_node 2 \
		torch_ops.py --quick; \
	nice $(PYTHON) torch_train.py --nprocs 2 $(if $(MLAP2P_TORCH_QUICK),--quick); \
	nice $(PYTHON) torch_fault.py --nprocs 2; \
	echo "check-torch: passed"

# The operation tests once more in the VM, on the module's runtime, with
# this python3 and torch from the host's / (scripts/vm/check --torch).
check-vm-torch: all
	@m="$(torch_missing)"; if [ -n "$$m" ]; then \
		echo "ok 1 check-vm-torch # SKIP $(PYTHON) lacks $$m (make deps installs it)"; \
		exit 0; fi; \
	$(TOP)/scripts/vm/check --torch

bench-torch:
	@m="$(torch_missing)"; if [ -n "$$m" ]; then \
		echo "bench-torch: skipped: $(PYTHON) lacks $$m"; exit 0; fi; \
	$(MAKE) torch && mkdir -p $(B)/bench && export $(TORCH_ENV) && \
	$(PYTHON) $(TOP)/bench/torch_bench.py --json $(B)/bench/torch.json

install-torch:
	@m="$(torch_missing)"; if [ -n "$$m" ]; then \
		echo "install-torch: skipped: $(PYTHON) lacks $$m"; exit 0; fi; \
	$(MAKE) torch && \
	echo "install mlap2p_torch -> $(DESTDIR)$(PYSITEDIR)/mlap2p_torch" && \
	rm -rf $(DESTDIR)$(PYSITEDIR)/mlap2p_torch && \
	mkdir -p $(DESTDIR)$(PYSITEDIR) && \
	cp -r $(TORCH_LIB)/mlap2p_torch $(DESTDIR)$(PYSITEDIR)/ && \
	find $(DESTDIR)$(PYSITEDIR)/mlap2p_torch -name __pycache__ -prune -exec rm -rf {} + && \
	rm -rf $(DESTDIR)$(PYSITEDIR)/mlap2p_torch/csrc

uninstall-torch:
	rm -rf $(DESTDIR)$(PYSITEDIR)/mlap2p_torch

install: install-torch
uninstall: uninstall-torch
