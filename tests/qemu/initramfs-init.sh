#!/bin/sh
# /init of the QEMU guest's initramfs (busybox): loads the kernel's own virtio and virtiofs
# modules, then either (tests/qemu/run.sh) mounts the host's root filesystem (shared read-only
# over virtiofs, or 9p for kernels without it; for an arm64 guest, the arm64 runtime root with the checkout and build inside it,
# over virtiofs or 9p: KPATH_GUEST_SHARE) under a tmpfs overlay so that the guest can write anywhere
# without touching the host, and hands over to the guest script from the repository
# (tests/qemu/guest.sh) running on that root; or, with KPATH_GUEST_ROOT=systemd in the env file (tests/systemd/seed000-guest.sh),
# mounts a throw-away root filesystem shared read-write over virtiofs (tag "rootfs"), gives
# eth0 QEMU user networking's fixed address (there is no udev or DHCP client in that root) and
# hands over to systemd as PID 1.
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
if [ "${KPATH_GUEST_ROOT:-}" = systemd ]; then
  mount -t virtiofs rootfs /newroot || fail "mount virtiofs rootfs"
  if [ -e /sys/class/net/eth0 ]; then
    ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 ||
      fail "eth0"
  fi
  umount /proc /sys
  umount /dev
  exec switch_root /newroot /lib/systemd/systemd
  fail "switch_root to systemd"
fi
mkdir -p /lower /upper /newroot
if [ "${KPATH_GUEST_SHARE:-virtiofs}" = 9p ]; then
  # Kernels without virtiofs (before 5.4): QEMU's own 9p server; the share is read-only, so
  # the guest may cache it as it likes (cache=loose); large messages for the test binaries.
  mount -t 9p -o ro,trans=virtio,version=9p2000.L,cache=loose,msize=262144 hostroot /lower ||
    fail "mount 9p hostroot"
else
  mount -t virtiofs -o ro hostroot /lower || fail "mount virtiofs hostroot"
fi
mount -t tmpfs -o mode=0755 tmpfs /upper || fail "mount tmpfs"
mkdir -p /upper/data /upper/work
if ! mount -t overlay -o lowerdir=/lower,upperdir=/upper/data,workdir=/upper/work overlay /newroot; then
  fail "overlayfs over ${KPATH_GUEST_SHARE:-virtiofs}"
fi
mkdir -p /newroot/run /newroot/tmp
mount -t tmpfs -o mode=0755 tmpfs /newroot/run
cp /kpath-guest.env /newroot/run/kpath-guest.env
umount /proc /sys
umount /dev
exec switch_root /newroot /bin/bash "$KPATH_GUEST_SCRIPT"
fail "switch_root"
