#!/usr/bin/env bash
# A real kernel's power cut, for the durability candidates of docs/findings/: a QEMU guest runs
# Debian's kernel with a Kafka node's log dir on an ext4 virtual disk; SIGKILL of the QEMU
# process is the power cut. What the guest kernel had not written to the virtual disk is lost;
# everything it had written is kept (the host's page cache holds it), so a loss seen here is
# the filesystem's, not the disk's.
#
# The guest runs under QEMU's software emulation by default: on this machine (itself a VM)
# KVM guests hang in early boot. The kernel's filesystem code is the same either way;
# VM_ACCEL=kvm uses KVM where it works.
#
# Sourced by the experiments beside it. Needs root, qemu-system-x86_64, kmod's depmod,
# cpio, busybox (static), e2fsprogs, apt-get (for the kernel package). The guest's root is
# this machine's own root, shared read-only over 9p, so the guest runs the same java and the
# same Kafka jars; only the data disk is the guest's.
set -eEuo pipefail

VM_CACHE=${VM_CACHE:-$HOME/.cache/logfork-vm}
VM_KERNEL_PACKAGE=${VM_KERNEL_PACKAGE:-linux-image-6.1.0-57-amd64}
# The modules the guest loads, in dependency order (modules.dep): virtio's PCI transport and
# block device, 9p over virtio for the shared root, ext4 with its checksums.
VM_MODULES="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci
virtio_blk 9pnet 9pnet_virtio netfs fscache 9p crc16 mbcache jbd2 crc32c_generic ext4"

vm_build() {  # the kernel and an initramfs in $VM_CACHE, once
  [[ -s $VM_CACHE/vmlinuz && -s $VM_CACHE/initrd ]] && return
  local tmp; tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download -q "$VM_KERNEL_PACKAGE" >/dev/null 2>&1)
  dpkg-deb -x "$tmp"/"$VM_KERNEL_PACKAGE"_*.deb "$tmp/pkg"
  local release; release=$(ls "$tmp/pkg/lib/modules")
  depmod -b "$tmp/pkg" "$release"
  mkdir -p "$tmp/initrd"/{bin,mods,proc,sys,dev,host}
  cp "$(command -v busybox)" "$tmp/initrd/bin/busybox"
  local m path
  for m in $VM_MODULES; do
    path=$(grep -E "/$m\.ko:" "$tmp/pkg/lib/modules/$release/modules.dep" | cut -d: -f1)
    cp "$tmp/pkg/lib/modules/$release/$path" "$tmp/initrd/mods/$m.ko"
  done
  echo "$VM_MODULES" > "$tmp/initrd/modules"
  cat > "$tmp/initrd/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in $(cat /modules); do insmod /mods/$m.ko; done
hostname localhost; ip link set lo up  # the node listens on 127.0.0.1
mount -t 9p -o trans=virtio,version=9p2000.L,ro host /host
mount -t proc proc /host/proc; mount -t sysfs sys /host/sys; mount -t devtmpfs dev /host/dev
mount -t tmpfs tmp /host/tmp
mount -t 9p -o trans=virtio,version=9p2000.L work /host/srv
mount -t ext4 /dev/vda /host/media
echo "LOGFORK-VM: up $(uname -r); $(grep ' /host/media ' /proc/mounts)"
chroot /host /bin/bash /srv/guest.sh > /dev/console 2>&1
echo "LOGFORK-VM: guest script exited $?"
sync; umount /host/media
echo "LOGFORK-VM: clean power-off"
poweroff -f
INIT
  chmod +x "$tmp/initrd/init"
  mkdir -p "$VM_CACHE"
  (cd "$tmp/initrd" && find . | cpio -o -H newc --quiet | gzip -1) > "$VM_CACHE/initrd"
  cp "$tmp/pkg/boot/vmlinuz-$release" "$VM_CACHE/vmlinuz"
  rm -rf "$tmp"
}

vm_disk() {  # DISK MiB: a fresh ext4 image with the defaults users get (data=ordered, delalloc)
  truncate -s "${2}M" "$1"
  mkfs.ext4 -q -F "$1"
}

VM_PID=
vm_kill() { [[ -n $VM_PID ]] && kill -9 "$VM_PID" 2>/dev/null; wait "$VM_PID" 2>/dev/null || true; VM_PID=; }

# vm_boot WORK DISK CONSOLE [CUT_MARKER]: boots the guest, which runs WORK/guest.sh (WORK is
# its /srv, DISK its /media). Without CUT_MARKER it returns when the guest powers off; with it,
# the power is cut (SIGKILL) as soon as the console shows the marker. Returns 3 if neither
# happens within VM_TIMEOUT seconds (or the guest powers off before its marker).
vm_boot() {
  local work=$1 disk=$2 console=$3 marker=${4:-} waited=0
  : > "$console"
  qemu-system-x86_64 -accel "${VM_ACCEL:-tcg}" -cpu max -m 1536 -smp 1 -no-reboot -display none \
    -monitor none -serial "file:$console" -nic none \
    -kernel "$VM_CACHE/vmlinuz" -initrd "$VM_CACHE/initrd" \
    -append "console=ttyS0 panic=-1 quiet rdinit=/init" \
    -virtfs local,path=/,mount_tag=host,security_model=none,readonly=on \
    -virtfs "local,path=$work,mount_tag=work,security_model=none" \
    -drive "file=$disk,format=raw,if=virtio,cache=writeback" &
  VM_PID=$!
  while (( waited < ${VM_TIMEOUT:-300} * 10 )); do
    if [[ -n $marker ]] && grep -qF "$marker" "$console"; then vm_kill; return 0; fi
    if ! kill -0 "$VM_PID" 2>/dev/null; then  # powered off: a failure if a cut was awaited
      wait "$VM_PID" || true; VM_PID=; [[ -z $marker ]] && return 0; return 3
    fi
    sleep 0.1; waited=$((waited + 1))
  done
  vm_kill; return 3
}
trap vm_kill EXIT
