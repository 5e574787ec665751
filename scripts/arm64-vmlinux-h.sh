#!/usr/bin/env bash
# Regenerates probes/bpf/vmlinux/arm64/vmlinux.h.xz, the vendored vmlinux.h of arm64 builds
# (scripts/build-arm64.sh), from the BTF inside Debian 12's arm64 cloud kernel package.
#
# Debian's arm64 vmlinuz is a raw arm64 Image, not an ELF file, so bpftool cannot read its .BTF
# section by name; the section is in the Image verbatim. It is found by its header: magic
# 0xeB9F, version 1, hdr_len 24, type_off 0 and str_off == type_len (the string section follows
# the types), and is as long as hdr_len + str_off + str_len. That blob is exactly what the
# booted kernel serves as /sys/kernel/btf/vmlinux (4,223,462 bytes on 6.1.0-57-cloud-arm64).
# CO-RE relocates every field access against the running kernel's BTF at load time, so the
# header's kernel need not match the target's (the objects built from it load on 6.12 as well).
#
# Usage: scripts/arm64-vmlinux-h.sh [kernel-package]
#   (default: the kernel linux-image-cloud-arm64:arm64 depends on, its -unsigned package)
# Environment: KPATH_ARM64_CACHE (default /var/cache/kpathd-arm64): the downloaded package.
# Needs: dpkg --add-architecture arm64 (scripts/build-arm64.sh does it), bpftool, python3, xz.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${KPATH_ARM64_CACHE:-/var/cache/kpathd-arm64}
out=$repo/probes/bpf/vmlinux/arm64/vmlinux.h.xz
say() { echo "arm64-vmlinux-h: $*"; }
die() {
  echo "arm64-vmlinux-h: ERROR: $*" >&2
  exit 1
}

pkg=${1:-}
if [[ -z $pkg ]]; then
  image=$(apt-cache depends linux-image-cloud-arm64:arm64 2>/dev/null |
    awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
  [[ -n $image ]] || die "apt knows no linux-image-cloud-arm64:arm64 (dpkg --add-architecture arm64 && apt-get update)"
  pkg=${image%:arm64}-unsigned:arm64
fi
mkdir -p "$cache/kernel"
name=${pkg%:arm64}
deb=$(ls "$cache/kernel/${name}"_*_arm64.deb 2>/dev/null | tail -1 || true)
if [[ -z $deb ]]; then
  say "downloading $pkg"
  (cd "$cache/kernel" && apt-get download -q "$pkg" >/dev/null 2>&1) || die "apt-get download $pkg failed"
  deb=$(ls "$cache/kernel/${name}"_*_arm64.deb | tail -1)
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
say "extracting the Image from $(basename "$deb")"
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" --wildcards './boot/vmlinuz-*'
image_file=$(ls "$tmp"/boot/vmlinuz-* | head -1)
# Debian 12 ships the arm64 Image uncompressed; a gzip one (other kernels) is unpacked first.
if [[ $(head -c2 "$image_file" | od -An -tx1 | tr -d ' ') == 1f8b ]]; then
  gzip -dc "$image_file" >"$tmp/Image"
else
  mv "$image_file" "$tmp/Image"
fi
python3 - "$tmp/Image" "$tmp/vmlinux.btf" <<'EOF'
import struct, sys
data = open(sys.argv[1], "rb").read()
found = []
i = 0
while (i := data.find(b"\x9f\xeb\x01\x00", i)) >= 0:
    hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from("<IIIII", data, i + 4)
    if hdr_len == 24 and type_off == 0 and str_off == type_len and str_len > 100000:
        found.append((i, hdr_len + str_off + str_len))
    i += 1
if len(found) != 1:
    sys.exit(f"expected one BTF blob in the Image, found {len(found)}: {found}")
offset, size = found[0]
open(sys.argv[2], "wb").write(data[offset:offset + size])
print(f"arm64-vmlinux-h: BTF at offset {offset} of the Image, {size} bytes")
EOF
bpftool btf dump file "$tmp/vmlinux.btf" format c >"$tmp/vmlinux.h" || die "bpftool could not read the BTF"
grep -q 'struct user_pt_regs {' "$tmp/vmlinux.h" || die "no struct user_pt_regs: not an arm64 kernel's BTF?"
mkdir -p "$(dirname "$out")"
xz -9 -T1 -c "$tmp/vmlinux.h" >"$out"
say "wrote $out ($(wc -l <"$tmp/vmlinux.h") lines; from $(basename "$deb"))"
