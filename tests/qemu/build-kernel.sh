#!/usr/bin/env bash
# Builds a small test kernel for the QEMU matrix's prebuilt/<version>-<arch> flavours (the
# 4.19 kernels of seed 002's fleet: no BTF, no global data, no virtiofs) from a kernel source
# tree, as the images in ../shared/kernels/ were built (their README has the timings): `make
# tinyconfig`, then tests/qemu/kernels/kpath-4.19.fragment merged on top (filesystems, cgroups,
# namespaces, tracing, kprobes and BPF built in, so the guest needs no modules), `olddefconfig`,
# and the image. Every option of the fragment is then checked against the final .config.
#
# Usage: tests/qemu/build-kernel.sh SOURCE ARCH OUT_DIR
#   SOURCE   a kernel source tree, or a bare git repository of one (its HEAD is exported), e.g.
#            the public GitHub snapshot HengBu/linux-4.19.79 (docs/testing.md)
#   ARCH     x86_64 or arm64 (cross-built with Debian's gcc-aarch64-linux-gnu)
#   OUT_DIR  gets linux-<version>-<arch>.bzImage (x86_64) or .Image.gz (arm64) and .config;
#            point KPATH_QEMU_PREBUILT at it
# KPATH_KERNEL_CONFIG_ONLY=1 stops after the .config (seconds). About 20-25 minutes on 2 cores. Needs: gcc, make, flex, bison, bc, libelf-dev, libssl-dev
# (installed here when missing).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
(($# == 3)) || { echo "usage: $0 SOURCE ARCH OUT_DIR" >&2; exit 2; }
src=$1 arch=$2 out=$(realpath -m "$3")
fragment="$repo/tests/qemu/kernels/kpath-4.19.fragment"
need=(gcc make flex bison bc)
[[ $arch == arm64 ]] && need+=(aarch64-linux-gnu-gcc)
missing=()
for tool in "${need[@]}"; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if ((${#missing[@]})); then
  echo "build-kernel: installing what is missing (${missing[*]})"
  pkgs=(build-essential flex bison bc libelf-dev libssl-dev)
  [[ $arch == arm64 ]] && pkgs+=(gcc-aarch64-linux-gnu)
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q "${pkgs[@]}" >/dev/null
fi
work=$(mktemp -d /tmp/kpath-kernel.XXXXXX)
trap 'rm -rf "$work"' EXIT
if [[ -d $src/objects && -e $src/HEAD ]]; then
  # Blob by blob: the GitHub snapshots are partial clones (4 amdgpu headers of HengBu's
  # 4.19.79 are absent, which nothing here builds), where `git archive` stops at the first.
  echo "build-kernel: exporting HEAD of the git repository $src (about 20 s)"
  mkdir "$work/src"
  python3 - "$src" "$work/src" <<'PYEOF'
import os, subprocess, sys
git, out = sys.argv[1], sys.argv[2]
tree = subprocess.run(["git", "--git-dir", git, "ls-tree", "-r", "-z", "HEAD"], check=True,
                      capture_output=True).stdout.split(b"\0")
entries = [e.split(b"\t", 1) for e in tree if e]
cat = subprocess.Popen(["git", "--git-dir", git, "cat-file", "--batch"], stdin=subprocess.PIPE,
                       stdout=subprocess.PIPE)
missing = 0
for meta, path in entries:
    mode, kind, sha = meta.split()
    if kind != b"blob":
        continue
    cat.stdin.write(sha + b"\n")
    cat.stdin.flush()
    header = cat.stdout.readline().split()
    if header[-1] == b"missing":
        missing += 1
        continue
    data = cat.stdout.read(int(header[2]))
    cat.stdout.read(1)
    target = os.path.join(out.encode(), path)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if mode == b"120000":
        os.symlink(data, target)
    else:
        with open(target, "wb") as f:
            f.write(data)
        if mode == b"100755":
            os.chmod(target, 0o755)
print(f"build-kernel: {len(entries)} files, {missing} absent from the repository")
PYEOF
  src="$work/src"
fi
[[ -f $src/Makefile ]] || { echo "build-kernel: $src is not a kernel source tree" >&2; exit 1; }
version=$(make -s -C "$src" kernelversion)
build="$work/build"
mkdir -p "$build" "$out"
make_args=(-C "$src" O="$build")
case $arch in
  x86_64) image=arch/x86/boot/bzImage target=bzImage name="linux-$version-x86_64.bzImage" ;;
  arm64)
    # gcc 10+ defaults to -fno-common (4.19's dtc defines yylloc twice); Debian's aarch64 gcc
    # 12 outlines atomics into libgcc calls the kernel does not link.
    export ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-
    make_args+=(HOSTCFLAGS=-fcommon KCFLAGS=-mno-outline-atomics)
    image=arch/arm64/boot/Image target=Image name="linux-$version-arm64.Image.gz"
    ;;
  *) echo "build-kernel: ARCH is x86_64 or arm64, not $arch" >&2; exit 2 ;;
esac
echo "build-kernel: $version for $arch: tinyconfig + $(basename "$fragment")"
make "${make_args[@]}" tinyconfig >/dev/null
"$src/scripts/kconfig/merge_config.sh" -m -O "$build" "$build/.config" "$fragment" >/dev/null
make "${make_args[@]}" olddefconfig >/dev/null
# Options of the fragment the final .config does not have as asked (those of the other
# architecture are expected here: kconfig drops what does not exist).
grep -E '^CONFIG_[A-Z0-9_]+=' "$fragment" | while IFS= read -r line; do
  grep -qxF "$line" "$build/.config" || echo "build-kernel: note: $line not in the final .config"
done
if [[ "${KPATH_KERNEL_CONFIG_ONLY:-0}" == 1 ]]; then
  cp "$build/.config" "$out/linux-$version-$arch.config"
  echo "build-kernel: KPATH_KERNEL_CONFIG_ONLY=1: $out/linux-$version-$arch.config written, no image"
  exit 0
fi
echo "build-kernel: compiling ($(nproc) jobs; about 20-25 minutes on 2 cores)"
started=$SECONDS
make "${make_args[@]}" -j "$(nproc)" "$target" >"$work/make.log" 2>&1 || {
  tail -n 40 "$work/make.log"
  echo "build-kernel: FAILED (log above)" >&2
  exit 1
}
if [[ $arch == arm64 ]]; then gzip -9 -c "$build/$image" >"$out/$name"; else cp "$build/$image" "$out/$name"; fi
cp "$build/.config" "$out/linux-$version-$arch.config"
echo "build-kernel: $out/$name in $((SECONDS - started)) s"
