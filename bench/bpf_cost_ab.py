#!/usr/bin/env python3
"""Compares the percpu programs' BPF cost of several kpathd builds, in interleaved rounds.

Usage (root, from the repository root):
    bench/bpf_cost_ab.py [--rounds 20] [--churn 2000] BUILD_DIR [BUILD_DIR ...]

Each BUILD_DIR holds daemon/kpathd and bench/kpath-bench-empty (a build tree, or a copy of those
two files made before changing the BPF code). Every round runs bench/bpf_cost.py once per build,
in turn, so that the host's load drifts over all builds alike; a single run varies by +-20 % and
more on a shared VM, so compare the medians printed at the end (x the empty program of each
run's own churn), never two single runs.
"""
import argparse
import re
import statistics
import subprocess
import sys
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROW = r"kpathd {}\S*\s+\d+\s+\d+\s+([\d.]+)"


def one_run(build, churn):
    """(alloc, free) x empty from one bpf_cost.py run, or None if it printed no such rows."""
    out = subprocess.run([sys.executable, os.path.join(HERE, "bpf_cost.py"), "--build", build,
                          "--churn", str(churn)], capture_output=True, text=True)
    alloc = re.search(ROW.format("percpu_alloc"), out.stdout)
    free = re.search(ROW.format("percpu_free"), out.stdout)
    if not alloc or not free:
        print(f"{build}: no percpu rows (exit {out.returncode}): {out.stderr.strip()[-300:]}",
              file=sys.stderr)
        return None
    return float(alloc.group(1)), float(free.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--churn", type=int, default=2000, help="cgroup create/remove pairs a run")
    ap.add_argument("builds", nargs="+")
    args = ap.parse_args()
    for b in args.builds:
        for f in ("daemon/kpathd", "bench/kpath-bench-empty"):
            if not os.access(os.path.join(b, f), os.X_OK):
                sys.exit(f"{b}: no {f}")
    results = {b: [] for b in args.builds}
    for r in range(args.rounds):
        for b in args.builds:
            got = one_run(b, args.churn)
            if got:
                results[b].append(got)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    width = max(len(b) for b in args.builds)
    print(f"{'build':{width}}  runs  alloc median (min-max)  free median (min-max)   x empty")
    for b in args.builds:
        runs = results[b]
        if not runs:
            print(f"{b:{width}}  0")
            continue
        cols = []
        for values in ([a for a, _ in runs], [f for _, f in runs]):
            cols.append(f"{statistics.median(values):5.2f} ({min(values):.2f}-{max(values):.2f})")
        print(f"{b:{width}}  {len(runs):4d}  {cols[0]:>21}  {cols[1]:>21}")


if __name__ == "__main__":
    main()
