#!/usr/bin/env python3
"""How kpathd's collection cost grows with what the host holds: memory cgroups, other agents'
BPF programs, slab caches. Prints kpath_collector_duration_seconds per collector at each size,
its cost per item, and flags growth faster than linear.

Usage (root, from the repository root, after building kpathd and kpath-bench-bpf-crowd):
    bench/growth.py [--build build] [--quick] [--samples 7] [--only cgroups|bpf|slab]

  cgroups  N live memory cgroups of the bench's own (created flat under one parent, removed
           afterwards), kpathd with the shipped probes.
  bpf      N trivial BPF programs of another process (kpath-bench-bpf-crowd), each attached to a
           raw tracepoint that rarely fires, as an agent's hooks are.
  slab     N slab caches. A kernel makes new caches only for new kinds of objects (modules,
           drivers), so this one is synthetic: kpathd (BPF off, hooks off) reads a sysfs tree of
           the bench's whose kernel/slab holds N caches with SLUB's attribute files.
kpathd samples every 1 s, and rebuilds the hook inventory on every sample (hooks.refresh_interval
1s, statistics slice 250 ms); slab caches are read every 1 s in the slab dimension ("slab read":
kpath_slab_read_duration_seconds, since they are read on a timer of their own), hourly in the
others. At each size the bench waits three
samples, then reads --samples of them; figures are the median (and the maximum, for collectors
that do more work on some samples, such as the hooks' full owner scan every 4th refresh).
"Per item" is (duration - duration at 0) / N; a collector whose median grows with every size, and
whose per-item cost at the largest N is more than 1.5 x that at the middle N and at least 1 ms in
total, is flagged superlinear.
Leaves nothing behind.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kpath_bench import (BenchCgroup, Kpathd, bench_arguments, build_binary, median,  # noqa: E402
                         samples, table)

# Slab caches are read on a timer of their own (kpath_slab_read_duration_seconds, shown as
# "slab read"): hourly in the cgroups and bpf dimensions, so that the host's slab reads (50-100 ms
# on this VM under load) do not blur them; every second in the slab dimension.
CONFIG = ("sampling_interval: 1s\n"
          "hooks:\n  refresh_interval: 1s\n  bpf_stats_slice: 250ms\n"
          "slab:\n  interval: 1h\n")
SLAB_CONFIG = "sampling_interval: 1s\nslab:\n  interval: 1s\n"


def durations(kp, count):
    """collector -> list of `count` durations, one per sample (1 s apart)."""
    time.sleep(3.2)
    out = {}
    for _ in range(count):
        body = kp.metrics()
        for lbl, v in samples(body, "kpath_collector_duration_seconds"):
            out.setdefault(lbl["collector"], []).append(v)
        for _, v in samples(body, "kpath_slab_read_duration_seconds"):
            out.setdefault("slab read", []).append(v)
        time.sleep(1.0)
    return out


def cgroups_dimension(args, sizes):
    rows = {}
    with Kpathd(args.build, CONFIG) as kp, BenchCgroup("growth") as cg:
        made = 0
        for n in sizes:
            for i in range(made, n):
                os.mkdir(os.path.join(cg.path, f"g{i}"))
            made = max(made, n)
            print(f"growth: {n} cgroups", file=sys.stderr, flush=True)
            rows[n] = durations(kp, args.samples)
    return rows


def bpf_dimension(args, sizes):
    crowd = build_binary(args.build, "kpath-bench-bpf-crowd", "bench/kpath-bench-bpf-crowd")
    rows = {}
    with Kpathd(args.build, CONFIG) as kp:
        for n in sizes:
            print(f"growth: {n} foreign BPF programs", file=sys.stderr, flush=True)
            p = None
            if n:
                p = subprocess.Popen([crowd, "--programs", str(n)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
                line = p.stdout.readline()
                if not line.startswith("ready"):
                    p.wait()
                    raise RuntimeError(f"kpath-bench-bpf-crowd {n}: did not load")
            try:
                rows[n] = durations(kp, args.samples)
            finally:
                if p:
                    p.stdin.close()
                    p.wait(30)
    return rows


def slab_tree(root, n):
    """A sysfs tree under `root` with n slab caches (and the real /sys for the rest)."""
    slab = os.path.join(root, "kernel", "slab")
    os.makedirs(slab, exist_ok=True)
    have = len(os.listdir(slab))
    for i in range(have, n):
        d = os.path.join(slab, f"kb_cache_{i}")
        os.mkdir(d)
        for name, value in (("total_objects", 1000 + i), ("objects", 900 + i),
                            ("slabs", 10 + i % 50), ("order", i % 4), ("object_size", 64),
                            ("slab_size", 64)):
            with open(os.path.join(d, name), "w") as f:
                f.write(f"{value}\n")
    for entry in ("devices", "fs", "bus"):
        link = os.path.join(root, entry)
        if not os.path.lexists(link):
            os.symlink(f"/sys/{entry}", link)


def slab_dimension(args, sizes):
    rows = {}
    root = tempfile.mkdtemp(prefix="kpath-bench-sysfs-")
    try:
        slab_tree(root, 0)
        config = (SLAB_CONFIG + f"paths:\n  sysfs: {root}\nbpf:\n  enabled: false\n"
                  "hooks:\n  enabled: false\n")
        with Kpathd(args.build, config) as kp:
            for n in sizes:
                slab_tree(root, n)
                print(f"growth: {n} slab caches", file=sys.stderr, flush=True)
                rows[n] = durations(kp, args.samples)
    finally:
        shutil.rmtree(root)
    return rows


PERCPU_TYPES = {5: "percpu_hash", 6: "percpu_array", 10: "lru_percpu_hash"}


def percpu_maps(kp):
    """kpathd's per-CPU maps as loaded (/proc/PID/fdinfo, names from bpftool): what each holds per
    CPU. The kernel keeps max_entries x round_up(value_size, 8) bytes per possible CPU for each
    (hashes also a fixed element header each), and user space reads value_size x CPUs bytes per
    key it drains."""
    names = {}
    out = subprocess.run(["bpftool", "-j", "map", "show"], capture_output=True, text=True)
    if out.returncode == 0:
        import json
        names = {m["id"]: m.get("name", "?") for m in json.loads(out.stdout)}
    maps = {}
    for fd in os.listdir(f"/proc/{kp.pid}/fdinfo"):
        try:
            with open(f"/proc/{kp.pid}/fdinfo/{fd}") as f:
                info = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        except OSError:
            continue
        if "map_type" not in info:
            continue
        info = {k: v.strip() for k, v in info.items()}
        kind = PERCPU_TYPES.get(int(info["map_type"]))
        if kind:
            maps[int(info["map_id"])] = (names.get(int(info["map_id"]), "?"), kind,
                                         int(info["value_size"]), int(info["max_entries"]),
                                         int(info.get("memlock", 0)))
    return sorted(maps.values(), key=lambda m: -m[3] * ((m[2] + 7) // 8 * 8))


def report_percpu(maps):
    with open("/sys/devices/system/cpu/possible") as f:
        text = f.read().strip()
    possible = sum(int(b) - int(a) + 1 if "-" in r else 1
                   for r in text.split(",") for a, b in [r.split("-") if "-" in r else (r, r)])
    rows, per_cpu_total = [], 0
    for name, kind, value, entries, memlock in maps:
        per_cpu = entries * ((value + 7) // 8 * 8)
        per_cpu_total += per_cpu
        rows.append([name, kind, value, entries, f"{per_cpu / 1024:.1f}",
                     f"{memlock / 1024:.0f}", f"{per_cpu * 64 / 2**20:.2f}",
                     f"{per_cpu * 256 / 2**20:.2f}"])
    rows.append(["(all per-CPU maps)", "", "", "", f"{per_cpu_total / 1024:.1f}", "",
                 f"{per_cpu_total * 64 / 2**20:.2f}", f"{per_cpu_total * 256 / 2**20:.2f}"])
    print(f"\nkpathd's per-CPU BPF maps (shipped defaults; {possible} possible CPUs here): "
          "kernel memory per CPU, memlock reported now, and projected for 64 and 256 CPUs")
    print(table(rows, ["map", "type", "value B", "entries", "KiB/CPU", f"memlock KiB",
                       "MiB @64", "MiB @256"]))


def report(what, rows):
    sizes = sorted(rows)
    collectors = sorted({c for n in sizes for c in rows[n]})
    base = {c: median(rows[sizes[0]].get(c, [0])) for c in collectors}
    total = {n: sum(median(rows[n].get(c, [0])) for c in collectors if c != "slab read")
             for n in sizes}
    # Collectors whose cost moved by at least 0.3 ms (or 50 %) at the largest size.
    top = sizes[-1]
    moved = [c for c in collectors
             if median(rows[top].get(c, [0])) - base[c] > max(0.3e-3, 0.5 * base[c])]
    header = ["collector"] + [f"{n} {what}" for n in sizes] + ["us/item", "growth"]
    out = []
    flagged = []
    mid = sizes[len(sizes) // 2] if len(sizes) > 2 else None
    for c in moved + ["(all collectors)"]:
        if c == "(all collectors)":
            med = {n: total[n] for n in sizes}
            mx = med
        else:
            med = {n: median(rows[n].get(c, [0])) for n in sizes}
            mx = {n: max(rows[n].get(c, [0])) for n in sizes}
        per_top = (med[top] - med[sizes[0]]) / top if top else 0
        verdict = "linear"
        if mid:
            per_mid = (med[mid] - med[sizes[0]]) / mid
            monotonic = all(med[a] <= med[b] for a, b in zip(sizes, sizes[1:]))
            if (monotonic and per_mid > 0 and per_top > 1.5 * per_mid
                    and med[top] - med[sizes[0]] > 1e-3):
                verdict = f"SUPERLINEAR ({per_top / per_mid:.1f}x per item)"
                flagged.append(c)
            elif per_mid > 0:
                verdict = f"linear ({per_top / per_mid:.2f}x per item)"
        out.append([c] + [f"{med[n] * 1e3:.2f}" + (f" ({mx[n] * 1e3:.1f})" if mx[n] > 1.5 * med[n]
                                                     and mx[n] - med[n] > 0.5e-3 else "")
                          for n in sizes] + [f"{per_top * 1e6:.2f}", verdict])
    print(table(out, header))
    return flagged


def main():
    ap = bench_arguments(__doc__, "3 sizes per dimension, 5 samples")
    ap.add_argument("--samples", type=int, default=7)
    ap.add_argument("--only", choices=("cgroups", "bpf", "slab"))
    args = ap.parse_args()
    sizes = {"cgroups": [0, 1000, 2000, 4000, 8000], "bpf": [0, 100, 300, 600],
             "slab": [0, 500, 2000, 8000]}
    if args.quick:
        args.samples = 5
        sizes = {"cgroups": [0, 1000, 3000], "bpf": [0, 150, 450], "slab": [0, 1000, 4000]}
    dims = {"cgroups": (cgroups_dimension, "cgroups"), "bpf": (bpf_dimension, "progs"),
            "slab": (slab_dimension, "caches")}
    results = {}
    maps = []
    if not args.only:
        with Kpathd(args.build) as kp:
            time.sleep(2)
            maps = percpu_maps(kp)
    for name, (fn, _) in dims.items():
        if args.only and name != args.only:
            continue
        results[name] = fn(args, sizes[name])
    print(f"collection time per collector (kpath_collector_duration_seconds, ms: median of "
          f"{args.samples} samples, (max) where much higher); kernel {os.uname().release}, "
          f"{os.cpu_count()} CPUs")
    flagged = []
    for name, rows in results.items():
        print(f"\n{name}:")
        flagged += [f"{name}/{c}" for c in report(dims[name][1], rows)]
    print("\nfaster than linear: " + (", ".join(flagged) if flagged else "nothing"))
    if maps:
        report_percpu(maps)


if __name__ == "__main__":
    main()
