#!/usr/bin/env bash
# Builds the IRQ-off test module (tests/qemu/irqoff_module/) for a Debian kernel of the QEMU
# matrix, without installing anything on the host: Debian's header packages of exactly that
# kernel (linux-headers-<release>, its linux-headers-<abi>-common[-rt] and linux-kbuild-<x.y>) are
# fetched with `apt-get download` into the QEMU cache, unpacked there with `dpkg-deb -x`, and the
# module is built out of tree with `make -C <headers> M=<copy of the sources>` and the compiler
# the headers name (gcc-12 for Debian 12). Everything, build files included, stays in the cache;
# a module already built from the same sources for the same kernel is reused.
#
# Usage: tests/qemu/build-irqoff-module.sh <kernel release> <package version> <cache dir>
#   e.g. 6.1.0-57-cloud-amd64 6.1.192-3 /var/cache/kpathd-qemu
# Prints the path of the .ko on stdout, what it does on stderr. Exit status: 0 built or cached,
# 2 cannot be built here (the packages cannot be fetched, no compiler: skip the module's tests),
# 1 the build failed (a bug of the fixture: its log is printed).
set -euo pipefail

kver=$1 version=$2 cache=$3
src=$(cd "$(dirname "$0")/irqoff_module" && pwd)
name=kpath_irqoff_fixture

say() { echo "qemu: irqoff module: $*" >&2; }
cannot() {
  say "SKIP: $*"
  exit 2
}

mkdir -p "$cache/debs" "$cache/headers" "$cache/irqoff-module"
# One build at a time per cache (runs of other work trees share it).
exec {lock}>"$cache/irqoff-module/.lock"
flock "$lock"

# The sources decide the build: a change to them builds anew.
digest=$(cat "$src/Kbuild" "$src/$name.c" | sha256sum | cut -c1-16)
out="$cache/irqoff-module/$kver-$digest"
if [[ -s "$out/$name.ko" ]]; then
  say "cached: $out/$name.ko"
  echo "$out/$name.ko"
  exit 0
fi

# The kernel's Debian release when it is not the host's (KPATH_QEMU_APT_SUITE, from run.sh).
# shellcheck source=tests/qemu/apt-options.sh
source "$(dirname "$0")/apt-options.sh"
apt_opts=()
mapfile -t apt_opts < <(apt_options "$cache" "${KPATH_QEMU_APT_SUITE:-}")

# apt-get download of one exact package version into the deb cache; its path on stdout.
fetch() {
  local pkg=$1 deb
  deb=$(ls "$cache/debs/${pkg}_${version}_"*.deb 2>/dev/null | tail -1 || true)
  if [[ -z "$deb" ]]; then
    (cd "$cache/debs" && apt-get "${apt_opts[@]}" download -q "$pkg=$version" >/dev/null 2>&1) ||
      (apt-get "${apt_opts[@]}" update -qq >/dev/null 2>&1 && cd "$cache/debs" &&
        apt-get "${apt_opts[@]}" download -q "$pkg=$version" >/dev/null 2>&1) ||
      return 1
    deb=$(ls "$cache/debs/${pkg}_${version}_"*.deb | tail -1)
  fi
  echo "$deb"
}

started=$SECONDS
headers_root="$cache/headers/$kver"
headers="$headers_root/usr/src/linux-headers-$kver"
if [[ ! -e "$headers_root/.unpacked" ]]; then
  say "fetching the headers of $kver ($version) into $cache/debs"
  flavour_deb=$(fetch "linux-headers-$kver") ||
    cannot "linux-headers-$kver=$version could not be fetched (apt-get download failed: no network or archive?)"
  # The flavour's package names the common headers and the kbuild tools it was built with.
  depends=$(dpkg-deb -f "$flavour_deb" Depends | tr ',' '\n' | sed -E 's/^ +//; s/ .*//')
  common=$(grep -m1 -E '^linux-headers-.*-common(-[a-z]+)?$' <<<"$depends" || true)
  kbuild=$(grep -m1 -E '^linux-kbuild-' <<<"$depends" || true)
  [[ -n "$common" && -n "$kbuild" ]] ||
    cannot "linux-headers-$kver does not depend on a -common headers and a linux-kbuild package (${depends//$'\n'/ })"
  debs=("$flavour_deb")
  for pkg in "$common" "$kbuild"; do
    deb=$(fetch "$pkg") || cannot "$pkg=$version could not be fetched (apt-get download failed)"
    debs+=("$deb")
  done
  rm -rf "$headers_root"
  mkdir -p "$headers_root"
  for deb in "${debs[@]}"; do dpkg-deb -x "$deb" "$headers_root"; done
  # The flavour's Makefile includes the common one by its installed path: point it at this copy
  # (the scripts/ and tools/ symbolic links are relative and hold inside the copy).
  sed -i -E "s|^include /usr/src/|include $headers_root/usr/src/|" "$headers/Makefile"
  touch "$headers_root/.unpacked"
  say "headers unpacked in $headers_root in $((SECONDS - started)) s"
fi
[[ -f "$headers/Makefile" && -f "$headers/Module.symvers" ]] ||
  cannot "no kernel headers in $headers"

# The compiler the kernel was built with (the headers' .kernelvariables name it, CC = ...gcc-12).
cc=$(sed -n -E 's/^CC = .*\)(gcc-[0-9]+)$/\1/p' "$headers/.kernelvariables" 2>/dev/null || true)
cc=${cc:-gcc}
# An older release's compiler (gcc-10 for Debian 11) is not in the host's release: the host's
# gcc builds a module that loads all the same (the headers' Module.symvers decides that); the
# version note below says so.
command -v "$cc" >/dev/null || cc=gcc
command -v "$cc" >/dev/null ||
  cannot "no gcc to build the module for $kver (scripts/install-deps.sh --test)"
want_version=$(sed -n 's/^CONFIG_GCC_VERSION=//p' "$headers/.config")
have_version=$("$cc" -dumpfullversion | awk -F. '{ printf "%d%02d%02d", $1, $2, $3 }')
[[ "$want_version" == "$have_version" ]] ||
  say "note: $kver was built with GCC $want_version, building with $cc $have_version"

rm -rf "$cache/irqoff-module/$kver-"* # older builds of other sources
mkdir -p "$out/src"
cp "$src/Kbuild" "$src/$name.c" "$out/src/"
say "building $name.ko for $kver with $cc"
# Kernels with CONFIG_DEBUG_INFO_BTF_MODULES (Debian's 6.12) give modules BTF with pahole: where
# it is not installed the module is built without (it loads the same; nothing needs its BTF).
no_btf=()
command -v pahole >/dev/null || no_btf=(CONFIG_DEBUG_INFO_BTF_MODULES=)
if ! make -C "$headers" M="$out/src" CC="$cc" "${no_btf[@]}" -j2 modules >"$out/build.log" 2>&1; then
  say "FAIL: the build failed ($out/build.log):"
  tail -n 40 "$out/build.log" | sed 's/^/  | /' >&2
  rm -f "$out/src/$name.ko"
  exit 1
fi
cp "$out/src/$name.ko" "$out/$name.ko"
say "built $out/$name.ko in $((SECONDS - started)) s ($(grep -a -o -m1 'vermagic=[^[:cntrl:]]*' "$out/$name.ko"))"
echo "$out/$name.ko"
