#!/usr/bin/env python3
"""Fails if a BPF object that must load on kernels without BTF carries CO-RE relocations.

One CO-RE relocation in an object makes libbpf require the kernel's BTF for the whole object,
so its tracepoint and raw_tp programs, which need no BTF, would not load on such kernels either.
Objects whose programs all need BTF anyway (fentry, tp_btf-only) are named with --btf-only.

Usage: check_bpf_objects.py --btf-only NAME ... -- OBJECT.bpf.o ...
"""
import os
import struct
import subprocess
import sys
import tempfile


def core_relocation_bytes(obj):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "btf.ext")
        r = subprocess.run(["llvm-objcopy", f"--dump-section=.BTF.ext={out}", obj, os.devnull],
                           capture_output=True)
        if r.returncode != 0 or not os.path.exists(out):
            return 0  # no .BTF.ext section: no CO-RE
        data = open(out, "rb").read()
    _magic, _version, _flags, hdr_len = struct.unpack_from("<HBBI", data, 0)
    if hdr_len < 32:
        return 0
    return struct.unpack_from("<6I", data, 8)[5]


def main():
    args = sys.argv[1:]
    split = args.index("--")
    btf_only = set(a for a in args[:split] if a != "--btf-only")
    objects = args[split + 1:]
    bad = []
    for obj in objects:
        name = os.path.basename(obj).removesuffix(".bpf.o")
        core = core_relocation_bytes(obj)
        verdict = "allowed (needs BTF anyway)" if name in btf_only else ("OK" if core == 0 else "FAIL")
        print(f"{name:24} CO-RE relocation bytes {core:5d}  {verdict}")
        if core and name not in btf_only:
            bad.append(name)
    if bad:
        print(f"these objects would not load without kernel BTF: {', '.join(bad)}")
        return 1
    print(f"{len(objects)} objects checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
