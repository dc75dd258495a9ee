# SPDX-License-Identifier: GPL-2.0
#
# scripts/install.mk: installing mlap2p, included by the top-level Makefile
# (which sets TOP, B, KDIR and the version from Makefile.common).
#
#   make install        module, library, headers, mlap2p.pc, tools, man
#                       pages, udev rule, modprobe.d example
#   make uninstall      remove what install put there
#   make dkms-install   the module through DKMS (/usr/src/mlap2p-<version>),
#                       loaded when KVER is the running kernel
#   make dkms-remove    undo dkms-install, for every kernel
#   make check-man      every page in docs/ renders without a warning, and
#                       libmlap2p(3) names every variable lib/ reads
#   make check-install  make install into a fresh root, then in the VM
#                       modprobe -d from it and the selftests on it
#   make check-dkms     dkms-install for the VM's kernel, then the
#                       DKMS-built module loaded and tested in the VM
#   make check-6.12     the VM selftests on Debian's newest 6.12 kernel,
#                       the module built with W=1 and no warning
#
# Variables (on the command line):
#   DESTDIR=    staging root; nothing outside it is touched, depmod and
#               udevadm are not run (use depmod -b DESTDIR KVER)
#   PREFIX=     /usr/local; tools in PREFIX/bin and PREFIX/sbin, library,
#               headers and mlap2p.pc under PREFIX/lib and PREFIX/include,
#               man pages in PREFIX/share/man (also BINDIR, SBINDIR,
#               LIBDIR, INCLUDEDIR, MANDIR)
#   KVER=       kernel release to build and install the module for.
#               Default: the release of KDIR (the running kernel when its
#               headers are installed).  A KVER other than KDIR's builds in
#               build/kbuild/KVER/ against /lib/modules/KVER/build or
#               /usr/src/linux-headers-KVER, leaving the in-tree build alone
#   UDEVDIR=    /lib/udev (rules in UDEVDIR/rules.d; udev ignores PREFIX)
#   MODPROBEDIR=/etc/modprobe.d
#
# The module goes to /lib/modules/KVER/updates/, which depmod ranks above
# the kernel's own tree.  The udev rule and the modprobe.d file are outside
# PREFIX because udev and modprobe only read their fixed directories.

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
UDEVDIR ?= /lib/udev
MODPROBEDIR ?= /etc/modprobe.d
DESTDIR ?=

# The release KDIR was configured as; empty when KDIR has no build tree.
kdir_release = $(shell cat $(KDIR)/include/config/kernel.release 2>/dev/null)

ifeq ($(origin KVER),command line)
kver_given := 1
else ifeq ($(origin KVER),environment)
kver_given := 1
endif

ifdef kver_given
# A named kernel: its own build directory, and KDIR when KDIR is that
# release's tree (KDIR is exported to sub-makes, so its origin says
# nothing), else the release's installed headers.
KVER_KDIR := $(if $(filter $(KVER),$(kdir_release)),$(KDIR),$(patsubst %/Makefile,%,\
	$(firstword $(wildcard /lib/modules/$(KVER)/build/Makefile \
			       /usr/src/linux-headers-$(KVER)/Makefile))))
MODULE_KO = $(B)/kbuild/$(KVER)/mlap2p.ko
MODULE_TARGET = module-kver
else
KVER = $(kdir_release)
MODULE_KO = $(TOP)/mlap2p.ko
MODULE_TARGET = module
endif

MODDIR = /lib/modules/$(KVER)/updates
MANPAGES := $(sort $(wildcard $(TOP)/docs/*.[1-8]))
UDEV_RULE := 60-mlap2p.rules
DEPMOD ?= /sbin/depmod
LDCONFIG ?= /sbin/ldconfig

.PHONY: install install-module install-lib install-tools install-man \
	install-udev install-modprobe uninstall module-kver dkms-install \
	dkms-remove check-man check-install check-dkms check-6.12

install: install-module install-lib install-tools install-man install-udev \
	install-modprobe

# The module for a named KVER, built in a copy of its sources in
# build/kbuild/KVER/, under the lock scripts/vm/check takes for its lanes
# there too (several people may share build/).
module-kver:
	@test -n "$(KVER_KDIR)" || { echo "mlap2p: no build tree for kernel" \
		"'$(KVER)' (install linux-headers-$(KVER), or set KDIR)" >&2; exit 1; }
	@mkdir -p $(B)/kbuild/$(KVER)
	flock $(B)/kbuild/$(KVER).lock sh -c '$(TOP)/scripts/kmod-src \
		$(B)/kbuild/$(KVER) && $(MAKE) -C $(KVER_KDIR) \
		M=$(B)/kbuild/$(KVER) modules'

install-module: $(MODULE_TARGET)
	@test -n "$(KVER)" || { echo "mlap2p: cannot tell the kernel release;" \
		"set KVER" >&2; exit 1; }
	install -D -m 0644 $(MODULE_KO) $(DESTDIR)$(MODDIR)/mlap2p.ko
ifeq ($(DESTDIR),)
	$(DEPMOD) -a $(KVER)
endif

# ldconfig so programs find libmlap2p.so.1 in LIBDIR (when ld.so.conf
# names it: /usr/local/lib does on Debian).
install-lib: lib
	$(MAKE) -C $(TOP)/lib install DESTDIR=$(DESTDIR) PREFIX=$(PREFIX) \
		LIBDIR=$(LIBDIR) INCLUDEDIR=$(INCLUDEDIR)
ifeq ($(DESTDIR),)
	-$(LDCONFIG)
endif

install-tools: tools
	install -D -m 0755 $(B)/tools/mlap2pctl $(DESTDIR)$(SBINDIR)/mlap2pctl
	install -D -m 0755 $(B)/tools/mlap2p-perf $(DESTDIR)$(BINDIR)/mlap2p-perf

# docs/NAME.N goes to MANDIR/manN/.
install-man:
	@set -e; for p in $(MANPAGES); do \
		s=$${p##*.}; \
		echo "install -D -m 0644 $${p#$(TOP)/} $(DESTDIR)$(MANDIR)/man$$s/$${p##*/}"; \
		install -D -m 0644 $$p $(DESTDIR)$(MANDIR)/man$$s/$${p##*/}; \
	done

install-udev:
	install -D -m 0644 $(TOP)/packaging/$(UDEV_RULE) \
		$(DESTDIR)$(UDEVDIR)/rules.d/$(UDEV_RULE)
ifeq ($(DESTDIR),)
	-@if command -v udevadm >/dev/null && [ -e /run/udev/control ]; then \
		udevadm control --reload && \
		udevadm trigger --subsystem-match=misc --sysname-match=mlap2p; \
	fi
endif

# A configuration file: an existing one (maybe edited) is kept.
install-modprobe:
	@if [ -e $(DESTDIR)$(MODPROBEDIR)/mlap2p.conf ]; then \
		echo "mlap2p: keeping $(DESTDIR)$(MODPROBEDIR)/mlap2p.conf"; \
	else \
		echo "install -D -m 0644 packaging/modprobe.d/mlap2p.conf $(DESTDIR)$(MODPROBEDIR)/mlap2p.conf"; \
		install -D -m 0644 $(TOP)/packaging/modprobe.d/mlap2p.conf \
			$(DESTDIR)$(MODPROBEDIR)/mlap2p.conf; \
	fi

# Removes exactly what install puts there; the modprobe.d file only when
# it is still the example.  The module of KVER only (default as above).
uninstall:
	rm -f $(DESTDIR)$(MODDIR)/mlap2p.ko
ifeq ($(DESTDIR),)
	@if [ -n "$(KVER)" ] && [ -d /lib/modules/$(KVER) ]; then \
		echo "$(DEPMOD) -a $(KVER)"; $(DEPMOD) -a $(KVER); fi
endif
	$(MAKE) -C $(TOP)/lib uninstall DESTDIR=$(DESTDIR) PREFIX=$(PREFIX) \
		LIBDIR=$(LIBDIR) INCLUDEDIR=$(INCLUDEDIR)
ifeq ($(DESTDIR),)
	-$(LDCONFIG)
endif
	rm -f $(DESTDIR)$(SBINDIR)/mlap2pctl $(DESTDIR)$(BINDIR)/mlap2p-perf
	@set -e; for p in $(MANPAGES); do \
		f=$(DESTDIR)$(MANDIR)/man$${p##*.}/$${p##*/}; \
		echo "rm -f $$f"; rm -f $$f; \
	done
	rm -f $(DESTDIR)$(UDEVDIR)/rules.d/$(UDEV_RULE)
	@f=$(DESTDIR)$(MODPROBEDIR)/mlap2p.conf; \
	if [ -e $$f ]; then \
		if cmp -s $(TOP)/packaging/modprobe.d/mlap2p.conf $$f; then \
			echo "rm -f $$f"; rm -f $$f; \
		else \
			echo "mlap2p: keeping $$f: it differs from the example"; \
		fi; \
	fi

dkms-install:
	@test -n "$(KVER)" || { echo "mlap2p: cannot tell the kernel release;" \
		"set KVER" >&2; exit 1; }
	$(TOP)/scripts/mlap2p-dkms install $(MLAP2P_VERSION) $(KVER)

dkms-remove:
	$(TOP)/scripts/mlap2p-dkms remove $(MLAP2P_VERSION)

check-man:
	$(TOP)/scripts/check-man $(MANPAGES)
	$(TOP)/scripts/check-man --env $(TOP)/docs/libmlap2p.3 $(wildcard $(TOP)/lib/*.c $(TOP)/lib/*/*.c)

check-install: deps all
	$(TOP)/scripts/install-check install $(if $(kver_given),$(KVER))

check-dkms: deps
	$(TOP)/scripts/install-check dkms $(if $(kver_given),$(KVER))

check-6.12: deps
	$(TOP)/scripts/vm/check --kernel-series 6.12 --strict
