#!/usr/bin/env python3
"""What one cache line of BPF map memory costs a program on the percpu allocation hook, on this
machine, in the churn bench/bpf_cost.py measures: the floor under any design that keeps a live
allocation's size and caller where its free can find them (a table the allocation writes and the
free reads, or a log a reader drains). Issue 23's target (2x the empty program) leaves the table
what remains of 2x after counting; this prints what a table line costs.

Usage (root, from the repository root, after scripts/build.sh):
    bench/memory_floor.py [--build build] [--churn 2000] [--rounds 5] [--cpu N]

Programs attached together on tp_btf/percpu_alloc_percpu beside the empty program, each with a
map of its own (kpath-bench-empty's touch hooks), each touching random 64-byte lines:
  1 line of 1               the same line every event: the touch machinery with a hot line
  1|4 of 128 lines          8 KiB, kmalloc'ed: lines on two or three pages
  1 of 128|512|2048 in a 65536  the first 8, 32 or 128 KiB (2, 8, 32 pages) of a 4 MiB map
  1 of 32|128 lines, 32|128 pages  2 or 8 KiB of lines, each on a page of its own (4160 bytes
                            apart): few lines, many pages, to tell data misses from TLB misses
  1|4 of 65536 lines        all of the 4 MiB map: each line touched on a page of its own
  log, N lines              a 16-byte record where the CPU's last one ended (four to a line) in
                            a per-CPU region of N lines; "read": a thread reads every line every
                            100 ms, as the reader of a per-CPU log design would; "timed": each
                            record carries bpf_ktime_get_ns(), the order across CPUs that matching
                            a free to its allocation needs
--cpu N pins the churn (and so the allocations and, through the per-CPU workqueue, the frees)
to CPU N: lines then never move between CPUs, and what remains is cache and TLB misses.
Figures are medians over interleaved rounds, x the empty program's ns in the same churn.
Leaves nothing behind: the programs are detached, the churn's cgroups removed, the sysctl
restored.
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpf_cost  # noqa: E402
import kpath_bench  # noqa: E402

HOOK = "tp_btf:percpu_alloc_percpu"
VARIANTS = [  # (label, map lines, lines touched, window, stride)
    ("1 line of 1", 1, 1, 1, 1),
    ("1 of 128 lines", 128, 1, 128, 1),
    ("4 of 128 lines", 128, 4, 128, 1),
    ("1 of 128 in a 65536 map", 65536, 1, 128, 1),
    ("1 of 512 in a 65536 map", 65536, 1, 512, 1),
    ("1 of 2048 in a 65536 map", 65536, 1, 2048, 1),
    ("1 of 32 lines, 32 pages", 65536, 1, 32, 65),
    ("1 of 128 lines, 128 pages", 65536, 1, 128, 65),
    ("1 of 65536 lines", 65536, 1, 65536, 1),
    ("4 of 65536 lines", 65536, 4, 65536, 1),
]
LOGS = [  # (label, kpath-bench-empty's log spec)
    ("log, 1024 lines a CPU", "log1024"),
    ("log, 1024 lines, read", "log1024r"),
    ("log, 16384 lines, read", "log16384r"),
    ("log, 16384, read, timed", "log16384tr"),
]


def main():
    parser = kpath_bench.RootArgumentParser(description=__doc__,
                                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--churn", type=int, default=2000, help="cgroup create/remove pairs")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cpu", type=int, help="pin the churn to this CPU")
    args = parser.parse_args()
    binary = kpath_bench.build_binary(args.build, "kpath-bench-empty", "bench/kpath-bench-empty")
    specs = [HOOK] + [f"touch{slots}x{lines}w{window}s{stride}+{HOOK}"
                      for _, slots, lines, window, stride in VARIANTS] + \
        [f"{spec}+{HOOK}" for _, spec in LOGS]
    stats_before = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    churn = bpf_cost.Churn(args.churn)
    proc = None
    try:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("1")
        if args.cpu is not None:
            os.sched_setaffinity(0, {args.cpu})
        proc = subprocess.Popen([binary] + specs, stdout=subprocess.PIPE, text=True)
        ids = {}
        for line in proc.stdout:
            words = line.split()
            if words[:1] == ["attached"]:
                ids[words[1]] = int(words[words.index("prog_id") + 1])
            if line.strip() == "ready":
                break
        if len(ids) != len(specs):
            sys.exit(f"kpath-bench-empty attached {len(ids)} of {len(specs)} programs")
        per_event = {spec: [] for spec in specs}
        churn.run("fixed", 200)()  # warm-up, not measured
        for r in range(args.rounds):
            runs = bpf_cost.churn_stats(churn, "fixed")
            for spec in specs:
                n, ns, _ = runs[ids[spec]]
                if n:
                    per_event[spec].append(ns / n)
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        kpath_bench.stop_process(proc)
        churn.clean()
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(stats_before)

    empty = kpath_bench.median(per_event[HOOK])
    hot = kpath_bench.median(per_event[specs[1]])
    print(f"Cost of map lines on {HOOK}: {args.churn} memory-cgroup pairs per churn, "
          f"{args.rounds} rounds (medians), kernel {os.uname().release}, {os.cpu_count()} CPUs: "
          f"{bpf_cost.cpu_model()}, churn "
          f"{'on CPU %d' % args.cpu if args.cpu is not None else 'unpinned'}")
    print(f"{'program':26} {'ns/event':>8} {'x empty':>7} {'ns/line beyond the hot line':>28}")
    print(f"{'empty':26} {empty:8.0f} {1:7.2f}")
    labels = [(label, lines) for label, _, lines, _, _ in VARIANTS] + [(label, 1) for label, _ in LOGS]
    for (label, lines), spec in zip(labels, specs[1:]):
        ns = kpath_bench.median(per_event[spec])
        extra = "" if spec == specs[1] else f"{(ns - hot) / lines:28.0f}"
        print(f"{label:26} {ns:8.0f} {ns / empty:7.2f} {extra}")


if __name__ == "__main__":
    main()
