#!/bin/sh
# /init of the QEMU guest's initramfs (busybox): loads the kernel's own virtio and virtiofs
# modules, mounts the host's root filesystem (shared read-only over virtiofs) under a tmpfs
# overlay so that the guest can write anywhere without touching the host, and hands over to the
# guest script from the repository (tests/qemu/guest.sh) running on that root.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
. /kpath-guest.env
echo "KPATH-GUEST: initramfs on $(uname -r)"
fail() {
  echo "KPATH-GUEST: FATAL $*"
  echo o > /proc/sysrq-trigger
  sleep 5
}
for m in $(cat /modules/order); do
  insmod "/modules/$m.ko" || fail "insmod $m"
done
mkdir -p /lower /upper /newroot
mount -t virtiofs -o ro hostroot /lower || fail "mount virtiofs hostroot"
mount -t tmpfs -o mode=0755 tmpfs /upper || fail "mount tmpfs"
mkdir -p /upper/data /upper/work
if ! mount -t overlay -o lowerdir=/lower,upperdir=/upper/data,workdir=/upper/work overlay /newroot; then
  fail "overlayfs over virtiofs"
fi
mkdir -p /newroot/run /newroot/tmp
mount -t tmpfs -o mode=0755 tmpfs /newroot/run
cp /kpath-guest.env /newroot/run/kpath-guest.env
umount /proc /sys
umount /dev
exec switch_root /newroot /bin/bash "$KPATH_GUEST_SCRIPT"
fail "switch_root"
