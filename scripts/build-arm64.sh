#!/usr/bin/env bash
# Cross-builds kpathd and its integration tests for arm64 (aarch64) on a Debian 12 amd64 host,
# into build-arm64/, and prepares the arm64 runtime root that tests/qemu/run.sh boots arm64
# kernels on. Everything comes from Debian 12's archive through apt:
#   1. the cross toolchain (g++-aarch64-linux-gnu) and ccache, installed (scripts/install-deps.sh
#      --arm64), after `dpkg --add-architecture arm64`;
#   2. the :arm64 packages kpathd builds against (libbpf-dev, prometheus-cpp-dev, ... and every
#      package they depend on), `apt-get download`ed into a cache and extracted with dpkg-deb -x
#      into a sysroot (the :arm64 -dev packages are not co-installable with the host's amd64
#      ones, see cmake/toolchain-aarch64.cmake); absolute symbolic links inside it are made
#      relative, so that they point into the sysroot and not at the host's amd64 files;
#   3. the arm64 runtime root: libc6, bash, coreutils, ... and kpathd's run-time libraries,
#      extracted the same way into another directory (tests/qemu/run.sh shares it with the guest,
#      see "arm64" there);
#   4. cmake -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake and a build of kpathd,
#      integration_test and the test helpers, with ccache.
# Idempotent: downloaded packages are kept (by name and version), a tree is extracted again only
# when its package list changed, and the build is incremental.
#
# Usage: scripts/build-arm64.sh [--deps-only]   (--deps-only: steps 1 to 3, no build)
# Environment:
#   BUILD_DIR            build directory (default build-arm64)
#   KPATH_ARM64_CACHE    packages, sysroot and runtime root (default /var/cache/kpathd-arm64)
#   CMAKE_BUILD_TYPE     default RelWithDebInfo, as scripts/build.sh
#   JOBS                 parallel compile jobs (default 2)
#   KPATH_ARM64_TARGETS  what to build (default: kpathd integration_test hook_agent)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
cache=${KPATH_ARM64_CACHE:-/var/cache/kpathd-arm64}
build_dir=${BUILD_DIR:-build-arm64}
jobs=${JOBS:-2}
targets=${KPATH_ARM64_TARGETS:-kpathd integration_test hook_agent}
deps_only=0
for arg in "$@"; do
  case $arg in
    --deps-only) deps_only=1 ;;
    *)
      echo "usage: scripts/build-arm64.sh [--deps-only]" >&2
      exit 2
      ;;
  esac
done

started=$SECONDS
say() { echo "build-arm64: [$((SECONDS - started))s] $*"; }
die() {
  echo "build-arm64: ERROR: $*" >&2
  exit 1
}

# What kpathd and its tests build against (CMakeLists.txt's find_package/pkg_check_modules,
# daemon/web's OpenSSL, libcrypt and civetweb, tests' Catch2). Their dependencies are added below.
build_pkgs=(libbpf-dev libelf-dev zlib1g-dev prometheus-cpp-dev libcivetweb-dev libyaml-cpp-dev
  libspdlog-dev libfmt-dev libabsl-dev libssl-dev libcrypt-dev catch2)
# The cross toolchain brings these for arm64 (libc6-dev-arm64-cross, libstdc++-12-dev-arm64-cross,
# linux-libc-dev-arm64-cross): a second copy in the sysroot would shadow its headers.
toolchain_pkgs=(libc6 libc6-dev libc-dev-bin linux-libc-dev libgcc-s1 libstdc++6 gcc-12-base
  rpcsvc-proto libtirpc-dev libnsl-dev)
# The runtime root of the arm64 guest: what tests/qemu/guest.sh and the integration tests run
# (bash, coreutils, mount, ip, sysctl, dmesg, bpftool, bpftrace for the seed 000 witness and the
# kernel UAPI headers it parses where the kernel has no BTF (4.19), curl
# and openssl for the web tests, prometheus for promtool, busybox for insmod/rmmod and the
# initramfs) and kpathd's run-time libraries (the non -dev packages of the sysroot's closure).
root_pkgs=(libc6 libstdc++6 libgcc-s1 bash coreutils util-linux mount iproute2 procps kmod
  findutils grep sed mawk dash base-passwd libc-bin gzip xz-utils diffutils hostname
  busybox-static bpftool bpftrace linux-libc-dev curl openssl libssl3 ca-certificates prometheus)

[[ $(dpkg --print-architecture) == amd64 ]] || die "this cross build runs on an amd64 Debian 12 host"
((EUID == 0)) || die "needs root (apt-get install, dpkg --add-architecture; the cache is $cache)"

# 1. Toolchain.
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  say "dpkg --add-architecture arm64 (package lists only: no arm64 package gets installed)"
  dpkg --add-architecture arm64
  apt-get update -qq || die "apt-get update failed"
fi
if [[ -z $(apt-cache policy libc6:arm64 2>/dev/null | awk '/Candidate:/ && $2 != "(none)"') ]]; then
  say "apt-get update (no arm64 package lists yet)"
  apt-get update -qq || die "apt-get update failed"
fi
say "host packages: $(scripts/install-deps.sh --arm64 | sed 's/^install-deps: //')"
command -v aarch64-linux-gnu-g++ >/dev/null || die "aarch64-linux-gnu-g++ missing after install"

# 2-3. Packages. The closure of a package set, resolved for an empty arm64 system (so the answer
# does not depend on what this host has installed): "name version arch" lines.
closure() {
  apt-get -o APT::Architecture=arm64 -o APT::Architectures::=arm64 -o Dir::State::status=/dev/null \
    install --simulate --no-install-recommends -q "$@" 2>"$cache/apt-simulate.err" |
    awk '/^Inst / && match($0, /\[[a-z0-9]+\]\)/) {
      v = $3; sub(/^\(/, "", v); print $2, v, substr($0, RSTART + 1, RLENGTH - 3) }' || true
}
# Downloads (once) the .deb of each "name version arch" line; prints the files.
deb_file() { echo "$cache/debs/${1}_${2//:/%3a}_$3.deb"; }
download() {
  local name version arch missing=()
  while read -r name version arch; do
    [[ -e $(deb_file "$name" "$version" "$arch") ]] && continue
    if [[ $arch == all ]]; then missing+=("$name=$version"); else missing+=("$name:$arch=$version"); fi
  done <"$1"
  if ((${#missing[@]} > 0)); then
    say "downloading ${#missing[@]} packages into $cache/debs" >&2
    # apt-get download writes into the current directory; _apt cannot write to a root-owned cache.
    (cd "$cache/debs" && apt-get download -q -o APT::Sandbox::User=root "${missing[@]}" >"$cache/download.log" 2>&1) ||
      die "apt-get download failed ($cache/download.log): $(tail -3 "$cache/download.log")"
  fi
  while read -r name version arch; do
    deb_file "$name" "$version" "$arch"
  done <"$1"
}
# Extracts the .debs listed in $2 into the tree $1, again only if the list changed.
extract() {
  local tree=$1 list=$2 deb
  if [[ -e "$tree/.kpath-debs" ]] && cmp -s "$list" "$tree/.kpath-debs"; then
    say "$tree: up to date ($(wc -l <"$list") packages)"
    return 0
  fi
  say "extracting $(wc -l <"$list") packages into $tree"
  rm -rf "$tree"
  mkdir -p "$tree"
  while read -r deb; do
    dpkg-deb -x "$deb" "$tree" || die "dpkg-deb -x $deb failed"
  done <"$list"
  cp "$list" "$tree/.kpath-debs"
}
# Absolute symbolic links (libfoo.so -> /usr/lib/aarch64-linux-gnu/libfoo.so.1) would point at
# the host's amd64 files from the sysroot: make each relative to its own directory.
relativize_links() {
  local tree=$1 link target fixed=0
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    [[ $target == /* ]] || continue
    ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$tree$target")" "$link"
    fixed=$((fixed + 1))
  done < <(find "$tree" -type l -print0)
  say "$tree: $fixed absolute symbolic links made relative"
}

mkdir -p "$cache/debs"
closure "${build_pkgs[@]}" >"$cache/build.closure"
[[ -s "$cache/build.closure" ]] || die "apt could not resolve the arm64 build packages: $(cat "$cache/apt-simulate.err")"
awk 'NR == FNR { skip[$1]; next } !($1 in skip)' <(printf '%s\n' "${toolchain_pkgs[@]}") \
  "$cache/build.closure" >"$cache/sysroot.closure"
# The runtime root: its own packages, and the sysroot closure's libraries (no -dev, headers or tools).
closure "${root_pkgs[@]}" >"$cache/root.closure.own"
[[ -s "$cache/root.closure.own" ]] || die "apt could not resolve the arm64 runtime packages: $(cat "$cache/apt-simulate.err")"
awk '$1 !~ /-dev$/ && $1 != "catch2" && $1 != "civetweb"' "$cache/build.closure" |
  cat - "$cache/root.closure.own" | sort -u >"$cache/root.closure"
download "$cache/sysroot.closure" >"$cache/sysroot.debs"
download "$cache/root.closure" >"$cache/root.debs"
say "packages: $(wc -l <"$cache/sysroot.debs") for the sysroot, $(wc -l <"$cache/root.debs") for the runtime root (cache $cache/debs, $(du -sh "$cache/debs" | cut -f1))"

sysroot=$cache/sysroot
if ! [[ -e "$sysroot/.kpath-debs" ]] || ! cmp -s "$cache/sysroot.debs" "$sysroot/.kpath-debs"; then
  extract "$sysroot" "$cache/sysroot.debs"
  relativize_links "$sysroot"
else
  say "$sysroot: up to date ($(wc -l <"$cache/sysroot.debs") packages)"
fi
extract "$cache/root" "$cache/root.debs"
# What the maintainer scripts, which dpkg-deb -x does not run, would have made: /bin/sh (dash),
# awk (mawk, an alternative), /etc/passwd and /etc/group (base-passwd), the CA bundle that
# update-ca-certificates writes (curl fails with 77 instead of 60 on an untrusted peer without it).
ln -sfn dash "$cache/root/bin/sh"
ln -sfn mawk "$cache/root/usr/bin/awk"
for f in passwd group; do
  [[ -e "$cache/root/etc/$f" ]] || cp "$cache/root/usr/share/base-passwd/$f.master" "$cache/root/etc/$f"
done
mkdir -p "$cache/root/etc/ssl/certs"
cat "$cache/root/usr/share/ca-certificates/mozilla/"*.crt >"$cache/root/etc/ssl/certs/ca-certificates.crt"
# The runtime root's /usr/sbin/ldconfig cannot run here (arm64): the guest's ld.so finds the
# libraries in its default directories (/lib/aarch64-linux-gnu, /usr/lib/aarch64-linux-gnu).
for lib in libbpf.so.1 libprometheus-cpp-pull.so.1.0 libcivetweb.so.1.15.0 libyaml-cpp.so.0.7 libstdc++.so.6; do
  [[ -n $(find "$cache/root" -name "$lib*" -print -quit) ]] || die "runtime root: $lib missing"
done
[[ -x "$cache/root/bin/busybox" ]] || die "runtime root: no /bin/busybox (busybox-static:arm64)"
((deps_only)) && { say "done (--deps-only): sysroot $sysroot, runtime root $cache/root"; exit 0; }

# 4. Configure and build.
# shellcheck source=scripts/ccache.sh
source scripts/ccache.sh
if [[ ! -e "$build_dir/CMakeCache.txt" ]]; then
  say "configuring $build_dir (cmake/toolchain-aarch64.cmake, sysroot $sysroot)"
  cmake -S . -B "$build_dir" -DCMAKE_TOOLCHAIN_FILE="$repo/cmake/toolchain-aarch64.cmake" \
    -DKPATH_ARM64_SYSROOT="$sysroot" -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-RelWithDebInfo}" \
    "${ccache_args[@]}" >"$cache/cmake-configure.log" 2>&1 ||
    die "cmake configure failed: $(tail -20 "$cache/cmake-configure.log")"
fi
say "building $targets (-j$jobs, nice; about 15 min from an empty ccache on 2 cores)"
build_started=$SECONDS
# shellcheck disable=SC2086  # targets: a list of target names
if ! nice -n 15 cmake --build "$build_dir" -j "$jobs" --target $targets >"$build_dir/build.log" 2>&1; then
  grep -E -A5 'error|Error' "$build_dir/build.log" | head -40 >&2
  die "build failed (whole log: $build_dir/build.log)"
fi
say "built in $((SECONDS - build_started)) s: $(file -b "$build_dir/daemon/kpathd" | cut -d, -f1-2)"
command -v ccache >/dev/null && say "ccache, all builds so far: $(ccache -s 2>/dev/null | grep -E -i 'hits|misses' | tr -s ' ' | paste -sd ';')"
say "done: $build_dir/daemon/kpathd, $build_dir/tests/integration/integration_test; runtime root $cache/root"
