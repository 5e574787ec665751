#!/usr/bin/env bash
# Installs every Debian 12 package kpathd needs to build, run and test. Idempotent: installs only
# what is missing, and runs `apt-get update` only when something must be installed.
# Usage: scripts/install-deps.sh [--test] [--bench] [--arm64]   (--test adds what the test suite
# needs, --bench what bench/run-all.sh compares kpathd with, --arm64 the cross compiler and the
# arm64 QEMU of scripts/build-arm64.sh and tests/qemu/run.sh's arm64 kernels)
set -euo pipefail

build_pkgs=(
  build-essential cmake pkg-config git xz-utils
  clang llvm libbpf-dev bpftool linux-libc-dev
  libelf-dev zlib1g-dev
  prometheus-cpp-dev libcivetweb-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libabsl-dev
  libssl-dev libcrypt-dev
  catch2
)
test_pkgs=(
  prometheus prometheus-alertmanager curl python3 iproute2 procps bpftrace
  # tests/integration/web_test.cpp: certificates for the TLS tests (openssl CLI)
  openssl
  # tests/deploy: systemd-analyze (the unit's sandbox), strace (its system-call filter),
  # dpkg-dev (dpkg-shlibdeps for the CPack .deb)
  systemd strace dpkg-dev
  # tests/systemd: a real systemd as PID 1 (systemd-nspawn, and QEMU with systemd as init) on a
  # Debian 12 root filesystem made by mmdebstrap (tests/systemd/rootfs.sh)
  systemd-container mmdebstrap
  # tests/container: kpathd as deploy/kubernetes/daemonset.yaml runs it, under a real container
  # runtime (podman with runc: Debian 12's crun 1.8 refuses hybrid cgroup hosts)
  podman runc
  # tests/qemu: other kernels under QEMU (virtiofsd ships with qemu-system-common), a static
  # busybox and cpio for the guest's initramfs
  qemu-system-x86 busybox-static cpio
  # tests/qemu/build-irqoff-module.sh: the compiler of Debian 12's kernels, for the IRQ-off test
  # module (their headers are fetched with apt-get download, not installed)
  gcc-12 make
  # the suite's builds (x86, sanitizers, fuzz, arm64) through a compiler cache: scripts/ccache.sh
  ccache
  # tests/deploy/kubernetes-kubectl-test.sh: the Kubernetes API's schema (1.22) for the manifests
  python3-kubernetes
)

# bench/: node_exporter, the exporter kpathd's scrape time and memory are compared with (the
# bench starts its own on a free port; the package's service is not started, see below);
# bpftrace, the tracer of the case studies.
bench_pkgs=(prometheus-node-exporter bpftrace python3)

# The arm64 libraries are not installed: scripts/build-arm64.sh extracts them into a sysroot.
arm64_pkgs=(g++-aarch64-linux-gnu ccache qemu-system-arm busybox-static cpio)

# Debian 12's kubectl (kubernetes-client, 1.20) for tests/deploy/kubernetes-kubectl-test.sh,
# fetched with apt-get download and unpacked into a cache, not installed: another package's
# /usr/bin/kubectl (a cloud SDK's, of another version) would block the install, and the test must
# run Debian's 1.20 whatever else is on PATH. KPATH_KUBECTL_CACHE (default
# /var/cache/kpathd-kubectl) holds usr/bin/kubectl.
kubectl_cache=${KPATH_KUBECTL_CACHE:-/var/cache/kpathd-kubectl}
fetch_kubectl() {
  [[ -x $kubectl_cache/usr/bin/kubectl ]] && return 0
  if [[ $EUID -ne 0 ]]; then
    echo "install-deps: no $kubectl_cache/usr/bin/kubectl; run as root to fetch it" >&2
    return 1
  fi
  echo "install-deps: fetching Debian's kubernetes-client into $kubectl_cache"
  mkdir -p "$kubectl_cache/debs"
  rm -f "$kubectl_cache"/debs/kubernetes-client_*.deb
  (cd "$kubectl_cache/debs" && { apt-get download -qq kubernetes-client 2>/dev/null ||
    { apt-get update -qq && apt-get download -qq kubernetes-client; }; })
  dpkg-deb -x "$kubectl_cache"/debs/kubernetes-client_*.deb "$kubectl_cache"
}

want=("${build_pkgs[@]}")
for arg in "$@"; do
  case "$arg" in
    --test) want+=("${test_pkgs[@]}"); want_kubectl=1 ;;
    --bench) want+=("${bench_pkgs[@]}") ;;
    --arm64) want+=("${arm64_pkgs[@]}") ;;
  esac
done

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#want[@]} packages present"
  if [[ -n ${want_kubectl:-} ]]; then fetch_kubectl; fi
  exit 0
fi

if [[ $EUID -ne 0 ]]; then
  echo "install-deps: missing packages (${missing[*]}); run as root to install them" >&2
  exit 1
fi

echo "install-deps: installing ${#missing[@]} missing packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Prometheus, Alertmanager and node_exporter are only used as tools in tests and benchmarks: do
# not start their services.
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
if [[ -n ${want_kubectl:-} ]]; then fetch_kubectl; fi
echo "install-deps: done"
