#!/usr/bin/env bash
# Builds (once, cached) the Debian 12 root filesystem that the systemd stage boots: systemd as
# PID 1 under systemd-nspawn (tests/systemd/) and under QEMU (tests/systemd/ seed 000 guest).
# It holds systemd, D-Bus and the run-time libraries kpathd's .deb depends on, and nothing of
# kpathd: the tests install the real package into a copy or an overlay of it.
#
# Prints the rootfs directory on stdout (progress goes to stderr). The cache key is the package
# list below: editing it builds a new rootfs beside the old one. Exit 0 with the path, 1 when
# mmdebstrap fails (its log is printed), 2 when it cannot run here (the reason is printed).
#
# Environment:
#   KPATH_SYSTEMD_CACHE   where rootfs trees are kept (default /var/cache/kpathd-systemd)
set -euo pipefail

cache=${KPATH_SYSTEMD_CACHE:-/var/cache/kpathd-systemd}
suite=bookworm
# systemd and D-Bus: PID 1 and systemctl. The libraries: what dpkg-shlibdeps derives for kpathd.
# curl scrapes /metrics from inside; bpftool lists programs as a service (systemd-run) sees them;
# procps and iproute2 for the checks.
packages=(
  systemd systemd-sysv dbus curl bpftool procps iproute2 less ca-certificates
  libbpf1 libelf1 zlib1g libyaml-cpp0.7 libspdlog1.10 libfmt9 libcivetweb1
  libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libssl3 libabsl20220623
)
key=$(printf '%s\n' "$suite" "${packages[@]}" | sha256sum | cut -c1-12)
dir="$cache/rootfs-$suite-$key"

if [[ -e "$dir/.complete" ]]; then
  echo "$dir"
  exit 0
fi
if [[ $EUID -ne 0 ]]; then
  echo "rootfs: not root: cannot build $dir" >&2
  exit 2
fi
if ! command -v mmdebstrap >/dev/null; then
  echo "rootfs: mmdebstrap is not installed (scripts/install-deps.sh --test installs it)" >&2
  exit 2
fi

mkdir -p "$cache"
# One builder at a time; a second caller waits and then finds the finished tree.
exec 9>"$cache/.rootfs.lock"
flock 9
if [[ -e "$dir/.complete" ]]; then
  echo "$dir"
  exit 0
fi
rm -rf "$dir" "$dir.tmp"
log="$cache/rootfs-$key.log"
echo "rootfs: building $dir with mmdebstrap (about 3 minutes, once; log $log)" >&2
start=$SECONDS
include=$(
  IFS=,
  echo "${packages[*]}"
)
if ! mmdebstrap --variant=minbase --include="$include" "$suite" "$dir.tmp" >"$log" 2>&1; then
  tail -30 "$log" >&2
  echo "rootfs: FAIL: mmdebstrap failed (log above)" >&2
  rm -rf "$dir.tmp"
  exit 1
fi
echo kpathd-guest >"$dir.tmp/etc/hostname"
chroot "$dir.tmp" passwd -d root >/dev/null
# A machine id is made at first boot of each copy.
rm -f "$dir.tmp/etc/machine-id"
# minbase has no udev: the serial and console gettys would wait 90 s for their devices.
chroot "$dir.tmp" systemctl mask serial-getty@ttyS0.service console-getty.service \
  getty@tty1.service >/dev/null 2>&1
# No network to wait for, and no clock to set from it.
chroot "$dir.tmp" systemctl mask systemd-networkd-wait-online.service \
  systemd-timesyncd.service >/dev/null 2>&1 || true
mv "$dir.tmp" "$dir"
touch "$dir/.complete"
echo "rootfs: built in $((SECONDS - start)) s: $(du -sh "$dir" | cut -f1)" >&2
echo "$dir"
