#!/usr/bin/env bash
# Installs every Debian 12 package kpathd needs to build, run and test. Idempotent: installs only
# what is missing, and runs `apt-get update` only when something must be installed.
# Usage: scripts/install-deps.sh [--test]   (--test adds what the test suite needs)
set -euo pipefail

build_pkgs=(
  build-essential cmake pkg-config git xz-utils
  clang llvm libbpf-dev bpftool linux-libc-dev
  libelf-dev zlib1g-dev
  prometheus-cpp-dev libcivetweb-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libabsl-dev
  libsystemd-dev libssl-dev
  catch2
)
test_pkgs=(
  prometheus prometheus-alertmanager curl python3 iproute2 procps bpftrace
  # tests/deploy: systemd-analyze (the unit's sandbox), strace (its system-call filter),
  # dpkg-dev (dpkg-shlibdeps for the CPack .deb)
  systemd strace dpkg-dev
  # tests/qemu: other kernels under QEMU (virtiofsd ships with qemu-system-common), a static
  # busybox and cpio for the guest's initramfs
  qemu-system-x86 busybox-static cpio
)

want=("${build_pkgs[@]}")
if [[ "${1:-}" == "--test" ]]; then
  want+=("${test_pkgs[@]}")
fi

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#want[@]} packages present"
  exit 0
fi

if [[ $EUID -ne 0 ]]; then
  echo "install-deps: missing packages (${missing[*]}); run as root to install them" >&2
  exit 1
fi

echo "install-deps: installing ${#missing[@]} missing packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Prometheus and Alertmanager are only used as tools in tests: do not start their services.
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
