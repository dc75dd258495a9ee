# SPDX-License-Identifier: GPL-2.0
# Helpers shared by scripts/vm/run and scripts/vm/check.  Sourced, not run.
#
# Expects TOP (repository root) to be set; sets B and VMDIR if unset.

B=${B:-$TOP/build}
VMDIR=${VMDIR:-$B/vm}

vm_say() { echo "vm: $*" >&2; }
vm_die() { echo "vm: error: $*" >&2; exit 2; }

# The release string a bzImage was built as ("6.1.0-56-amd64"), read from
# the setup header: a 16-bit pointer at 0x20e, relative to 0x200.
vm_kernel_release() {
	local img=$1 ptr
	ptr=$(od -An -tu2 -j 526 -N 2 "$img" 2>/dev/null | tr -d ' ')
	[ -n "$ptr" ] && [ "$ptr" -gt 0 ] || return 1
	dd if="$img" bs=1 skip=$((ptr + 512)) count=128 status=none |
		tr '\0' '\n' | sed -n 1p | cut -d' ' -f1
}

# The kernel release a module was built for, from its vermagic.
vm_module_release() {
	local v
	v=$(/sbin/modinfo -F vermagic "$1" 2>/dev/null) ||
		v=$(strings "$1" | sed -n 's/^vermagic=//p' | sed -n 1p)
	echo "${v%% *}"
}

# Newest Debian stock kernel of a series ("6.1", "6.12") in /boot whose
# headers are installed too: prints its release, or nothing.
vm_stock_release() {
	local series=$1 img rel best=
	for img in /boot/vmlinuz-"$series".*-amd64; do
		[ -e "$img" ] || continue
		rel=${img#/boot/vmlinuz-}
		[ -d "/usr/src/linux-headers-$rel" ] || continue
		best+="$rel"$'\n'
	done
	printf '%s' "$best" | sort -V | tail -n 1
}

# Accelerator for qemu: "kvm" when a short probe boot under KVM reaches
# user space, else "tcg".  On some hosts /dev/kvm opens but the guest never
# runs, so the probe boots a marker-printing initramfs with a deadline.  The
# answer is cached per host boot in $VMDIR/accel.  MLAP2P_VM_ACCEL=kvm|tcg
# skips the probe.
vm_accel() {
	local kernel=$1 cache=$VMDIR/accel boot_id
	if [ -n "${MLAP2P_VM_ACCEL:-}" ]; then
		echo "$MLAP2P_VM_ACCEL"
		return
	fi
	boot_id=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo none)
	if [ -r "$cache" ]; then
		local id acc
		read -r id acc <"$cache" || true
		if [ "$id" = "$boot_id" ] && [ -n "$acc" ]; then
			echo "$acc"
			return
		fi
	fi
	mkdir -p "$VMDIR"
	local acc=tcg
	if [ -r /dev/kvm ] && [ -w /dev/kvm ] && vm_probe_kvm "$kernel"; then
		acc=kvm
	fi
	echo "$boot_id $acc" >"$cache"
	echo "$acc"
}

vm_probe_kvm() {
	local kernel=$1 dir pid t marker=MLAP2P-KVM-PROBE-OK
	local deadline=${MLAP2P_KVM_PROBE_TIMEOUT:-25}
	dir=$(mktemp -d "$VMDIR/kvm-probe.XXXXXX")
	mkdir -p "$dir/root/bin" "$dir/root/dev" "$dir/root/proc"
	cp /bin/busybox "$dir/root/bin/busybox"
	ln -s busybox "$dir/root/bin/sh"
	printf '#!/bin/sh\n/bin/busybox echo %s\n/bin/busybox poweroff -f\n' \
		"$marker" >"$dir/root/init"
	chmod +x "$dir/root/init"
	(cd "$dir/root" && find . | cpio -o -H newc --quiet) >"$dir/initrd"
	vm_say "probing KVM (up to ${deadline}s)..."
	qemu-system-x86_64 -accel kvm -cpu host -smp 1 -m 256 -nographic \
		-nodefaults -no-reboot -serial "file:$dir/console" \
		-kernel "$kernel" -initrd "$dir/initrd" \
		-append "console=ttyS0 quiet panic=-1" \
		</dev/null >"$dir/qemu.log" 2>&1 &
	pid=$!
	for ((t = 0; t < deadline * 2; t++)); do
		grep -q "$marker" "$dir/console" 2>/dev/null && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.5
	done
	local ok=1
	grep -q "$marker" "$dir/console" 2>/dev/null && ok=0
	# A hung KVM guest may not die at once; never wait for it.
	kill -KILL "$pid" 2>/dev/null
	disown "$pid" 2>/dev/null || true
	if [ $ok = 0 ]; then
		vm_say "KVM works"
	else
		vm_say "KVM probe got no answer in $((t / 2)) s; using TCG (slower)"
	fi
	rm -rf "$dir"
	return $ok
}
