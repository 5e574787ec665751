#!/usr/bin/env python3
"""Compares the BPF cost of several kpathd builds, in interleaved rounds, on one churn shape; or
of ablations of one build: parts of its programs cut out, to see where the nanoseconds go.

Usage (root, from the repository root):
    bench/bpf_cost_ab.py [--rounds 20] [--churn 2000] [--shape fixed[,unique]] BUILD_DIR [...]
    bench/bpf_cost_ab.py [--rounds 10] --ablate return,count,track,count+track BUILD_DIR
    bench/bpf_cost_ab.py --shape fixed,unique --ablate return,count,count+name,count+shape,\
        count+shape+slot,count+slot BUILD_DIR        # the cgroup programs' floor, step by step

Each BUILD_DIR holds daemon/kpathd and bench/kpath-bench-empty (a build tree, or a copy of those
two files made before changing the BPF code). --ablate builds, beside the first BUILD_DIR, one
tree per variant (BUILD_DIR-ablate-<variant>, configured from this source tree with
-DKPATH_BPF_ABLATION, built with ccache) and compares them with it. The parts
(KPATH_ABLATE_* in probes/bpf/kpath_bpf.h): return (the program returns once it has read the
event's arguments), count (no counting by key), track (percpu: no live-allocation table;
cgroups: no path tail sent); for the percpu allocation log's order stamp: order (none),
clock (bpf_ktime_get_ns instead), jiffies (bpf_jiffies64 instead); and for the cgroup programs
with count cut, what is kept of a unique name's path: name (the 64-byte name read), shape (read
and its digit-masked hash), slot (one per-CPU array slot counted by the key, or by the shape's
with shape); join parts with "+".
Several shapes (--shape fixed,unique) run in the same bpf_cost.py runs. Every round runs bench/bpf_cost.py once per
build, in turn, so that the host's load drifts over all builds alike; a single run varies by
+-20 % and more on a shared VM, so compare the medians printed at the end (x the empty program
of each run's own churn), never two single runs.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HOOKS = ["percpu_alloc_percpu", "percpu_free_percpu", "cgroup_mkdir", "cgroup_rmdir"]
# "<hook> kpathd <program> events ns/event empty-ns x-empty range" (bpf_cost.py's rows)
ROW = re.compile(r"^(\S+)\s+kpathd \S+\s+\d+\s+(\d+)\s+(\d+)\s+([\d.]+)", re.M)
SHAPE = re.compile(r"^shape (\S+)$", re.M)
PARTS = {"return": 1, "count": 2, "track": 4, "order": 8, "clock": 16, "jiffies": 32,
         "name": 64, "shape": 128, "slot": 256}


def one_run(build, churn, shape):
    """{(shape, hook): (ns, empty ns, x empty)} from one bpf_cost.py run, or None if it printed
    no rows; the run's header line (CPU model, kernel) in rows["header"]."""
    out = subprocess.run([sys.executable, os.path.join(HERE, "bpf_cost.py"), "--build", build,
                          "--churn", str(churn), "--rounds", "1", "--shapes", shape,
                          "--no-bpftrace"], capture_output=True, text=True)
    rows = {}
    sections = SHAPE.split(out.stdout)  # text, shape, section, shape, section...
    for name, section in zip(sections[1::2], sections[2::2]):
        rows.update({(name, m[1]): (float(m[2]), float(m[3]), float(m[4]))
                     for m in ROW.finditer(section)})
    if not rows:
        print(f"{build}: no rows (exit {out.returncode}): {out.stderr.strip()[-300:]}",
              file=sys.stderr)
        return None
    rows["header"] = out.stdout.splitlines()[0]
    return rows


def ablation_bits(variant):
    bits = 0
    for part in variant.split("+"):
        if part not in PARTS:
            sys.exit(f"--ablate: unknown part {part!r} (parts: {', '.join(PARTS)}; join with +)")
        bits |= PARTS[part]
    return bits


def build_ablation(base, variant):
    """BASE-ablate-VARIANT with kpathd and kpath-bench-empty built, ablation bits set."""
    out = f"{base.rstrip('/')}-ablate-{variant.replace('+', '-')}"
    print(f"building {out} (KPATH_BPF_ABLATION={ablation_bits(variant)})", file=sys.stderr,
          flush=True)
    # As scripts/build.sh --test builds with CMAKE_BUILD_TYPE=Release (scripts/test.sh), with
    # ccache's paths relative to the tree: only the BPF objects and what embeds them compile anew.
    env = dict(os.environ, CCACHE_BASEDIR=ROOT, CCACHE_NOHASHDIR="true")
    launcher = ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"] \
        if subprocess.run(["sh", "-c", "command -v ccache"], capture_output=True).returncode == 0 \
        else []
    subprocess.run(["cmake", "-S", ROOT, "-B", out, "-DCMAKE_BUILD_TYPE=Release",
                    "-DKPATH_WERROR=ON", f"-DKPATH_BPF_ABLATION={ablation_bits(variant)}"]
                   + launcher, check=True, stdout=subprocess.DEVNULL, env=env)
    subprocess.run(["cmake", "--build", out, "-j", str(os.cpu_count() or 2), "--target",
                    "kpathd", "kpath-bench-empty"], check=True, stdout=subprocess.DEVNULL, env=env)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--churn", type=int, default=2000, help="cgroup create/remove pairs a run")
    ap.add_argument("--shape", default="fixed",
                    help="bpf_cost.py's churn shapes, comma-separated (default fixed)")
    ap.add_argument("--ablate", default="",
                    help="comma-separated variants of the first build, parts joined by +")
    ap.add_argument("builds", nargs="+")
    args = ap.parse_args()
    names = {b: b for b in args.builds}
    builds = list(args.builds)
    for variant in [v for v in args.ablate.split(",") if v]:
        built = build_ablation(args.builds[0], variant)
        builds.append(built)
        names[built] = f"{args.builds[0]} without {variant}"
    for b in builds:
        for f in ("daemon/kpathd", "bench/kpath-bench-empty"):
            if not os.access(os.path.join(b, f), os.X_OK):
                sys.exit(f"{b}: no {f}")
    results = {b: [] for b in builds}
    for r in range(args.rounds):
        for b in builds:
            got = one_run(b, args.churn, args.shape)
            if got:
                results[b].append(got)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    width = max(len(n) for n in names.values())
    header = next((run["header"] for b in builds for run in results[b]), "")
    print(f"first run: {header}")
    for shape in args.shape.split(","):
        print(f"\nx the empty program (median, min-max over runs; empty ns median), shape {shape}, "
              f"{args.churn} pairs a run")
        print(f"{'build':{width}}  runs  " + "  ".join(f"{h:>24}" for h in HOOKS))
        for b in builds:
            runs = results[b]
            cols = []
            for hook in HOOKS:
                got = [run[(shape, hook)] for run in runs if (shape, hook) in run]
                ratios = [g[2] for g in got]
                empty = [g[1] for g in got]
                cols.append(f"{statistics.median(ratios):5.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
                            f" {statistics.median(empty):3.0f}ns" if ratios else "-")
            print(f"{names[b]:{width}}  {len(runs):4d}  " + "  ".join(f"{c:>24}" for c in cols))


if __name__ == "__main__":
    main()
