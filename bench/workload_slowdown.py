#!/usr/bin/env python3
"""How much kpathd slows real workloads down, against bpftrace doing the case studies' kind of
tracing, in one run (issue 8).

Four loops, each a single thread pinned to one CPU (build/bench/kpath-bench-cpu-loop and
kpath-bench-madvise-loop), each run untraced, under kpathd with its shipped defaults (every
probe), under kpathd with the madvise probe's syscall tracepoint opted in as well (not in the
defaults: while attached, every system call of the host takes the syscall-tracing path; on a
kernel without fentry and kprobes it is the madvise probe's only mechanism), under empty BPF
programs on the hooks kpathd attaches for that loop (the physical limit
of tracing those events at all; cgroup and madvise loops), and under a bpftrace script of the
kind the seed that loop stands for used:

  loop      what it does                              bpftrace (seed)
  cgroup    mkdir + rmdir of a memory cgroup          percpu bytes and calls by comm, frees by
                                                      comm, cgroup mkdir/rmdir by comm and
                                                      path (000)
  madvise   touch a page, madvise(MADV_DONTNEED) it   madvise calls by comm and advice (003)
  openclose open and close /etc/hostname              openat of /proc/slabinfo by comm (001)
  spin      xorshift steps (CPU only)                 kernel stacks at 499 Hz (001, 004: where
                                                      the CPU is, for lack of an irqsoff tracer)

Speed is iterations per second of the loop thread's own CPU time: a tracer's cost is spent in
the thread that triggers its events (system time, and interrupt time on kernels without
CONFIG_IRQ_TIME_ACCOUNTING), while other work on a shared machine only preempts the loop (the
wall-clock figure is printed too). Rounds run every configuration once in a rotating order;
each figure is the median over rounds of the ratio to the same round's untraced speed.
Targets: kpathd keeps at least 0.90 of the madvise loop and 0.98 of the others (shipped
defaults).

Usage (root, from the repository root):
    bench/workload_slowdown.py [--build build] [--rounds 7] [--seconds 1] [--cpu N]
                               [--only cgroup,madvise,openclose,spin] [--quick]
Leaves nothing behind: tracers stopped, the bench's cgroup removed.
"""
import os
import signal
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bpf_cost import HOOKS  # noqa: E402
from kpath_bench import (MADVISE_TRACEPOINT, BenchCgroup, Kpathd, attached_mechanism,  # noqa: E402
                         bench_arguments, build_binary, start_bpftrace, stop_process, table,
                         wait_for)
from madvise_overhead import BPFTRACE as MADVISE_BPFTRACE  # noqa: E402

BPFTRACE = {
    "cgroup": " ".join(hook[2] for hook in HOOKS.values()),
    "madvise": MADVISE_BPFTRACE,
    "openclose": 'tracepoint:syscalls:sys_enter_openat /str(args->filename) == "/proc/slabinfo"/ '
                 "{ @readers[comm, pid] = count(); }",
    "spin": "profile:hz:499 { @stacks[kstack] = count(); }",
}
TARGET = {"cgroup": 0.98, "madvise": 0.90, "openclose": 0.98, "spin": 0.98}
# The hooks kpathd attaches that the loop triggers, as kpath-bench-empty takes them (the tp_btf
# mechanism this kernel gives kpathd; madvise: the opt-in syscall tracepoint).
EMPTY = {
    "cgroup": ["tp_btf:percpu_alloc_percpu", "tp_btf:percpu_free_percpu", "tp_btf:cgroup_mkdir",
               "tp_btf:cgroup_rmdir"],
    "madvise": ["tracepoint:syscalls:sys_enter_madvise", "tp_btf:tlb_flush"],
}
CONFIGS = ("untraced", "kpathd", "kpathd+tp", "empty", "bpftrace")


def start_empty(build, hooks):
    p = subprocess.Popen([build_binary(build, "kpath-bench-empty", "bench/kpath-bench-empty")] +
                         hooks, stdout=subprocess.PIPE, text=True)
    for line in p.stdout:
        if line.strip() == "ready":
            return p
    stop_process(p)
    raise RuntimeError(f"kpath-bench-empty did not attach {hooks}")


def main():
    ap = bench_arguments(__doc__, "3 rounds")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=1.0, help="length of each loop run")
    ap.add_argument("--cpu", type=int, default=os.cpu_count() - 1, help="CPU the loops run on")
    ap.add_argument("--only", default=",".join(BPFTRACE), help="loops to run, comma-separated")
    args = ap.parse_args()
    rounds = 3 if args.quick else args.rounds
    loops = [w for w in args.only.split(",") if w]
    for w in loops:
        if w not in BPFTRACE:
            sys.exit(f"unknown loop {w!r}: one of {', '.join(BPFTRACE)}")
    cpu_loop = build_binary(args.build, "kpath-bench-cpu-loop", "bench/kpath-bench-cpu-loop")
    madvise_loop = build_binary(args.build, "kpath-bench-madvise-loop",
                                "bench/kpath-bench-madvise-loop")
    common = ["--seconds", str(args.seconds), "--cpu", str(args.cpu)]

    with BenchCgroup("slowdown") as cg:
        # On cgroup v2 the loop's cgroups get a memory controller only if their parent enables it.
        control = os.path.join(cg.path, "cgroup.subtree_control")
        if os.path.exists(control):
            with open(control, "w") as f:
                f.write("+memory")
        command = {
            "cgroup": [cpu_loop, "cgroup", "--dir", cg.path] + common,
            "madvise": [madvise_loop] + common,
            "openclose": [cpu_loop, "openclose"] + common,
            "spin": [cpu_loop, "spin"] + common,
        }
        speeds = {(w, c): [] for w in loops for c in CONFIGS}
        wall = {key: [] for key in speeds}
        for r in range(rounds):
            configs = list(CONFIGS[r % len(CONFIGS):] + CONFIGS[:r % len(CONFIGS)])
            for config in configs:
                print(f"round {r + 1}/{rounds}: {config}", file=sys.stderr, flush=True)
                # kpathd serves every loop of the round; bpftrace runs each loop's own script.
                kpathd = (Kpathd(args.build) if config == "kpathd" else
                          Kpathd(args.build, MADVISE_TRACEPOINT) if config == "kpathd+tp" else None)
                try:
                    if kpathd:
                        kpathd.__enter__()
                        wait_for(lambda: attached_mechanism(kpathd.metrics(), "percpu_alloc"), 30,
                                 "kpathd's probes")
                    for w in loops:
                        if config == "empty" and w not in EMPTY:
                            continue
                        tracer = (start_bpftrace(BPFTRACE[w]) if config == "bpftrace" else
                                  start_empty(args.build, EMPTY[w]) if config == "empty" else None)
                        try:
                            out = subprocess.run(command[w], capture_output=True, text=True,
                                                 check=True)
                        finally:
                            stop_process(tracer, signal.SIGINT)
                        cpu_rate, wall_rate = (float(x) for x in out.stdout.split())
                        speeds[(w, config)].append(cpu_rate)
                        wall[(w, config)].append(wall_rate)
                finally:
                    if kpathd:
                        kpathd.__exit__()

    print(f"Workload slowdown, {rounds} rounds x {args.seconds:g} s per loop on CPU {args.cpu}; "
          f"kernel {os.uname().release}, {os.cpu_count()} CPUs; kpathd with its shipped "
          "defaults; ratios to the untraced loop (CPU-time speed; wall-clock in brackets)")
    rows, verdicts = [], []
    for w in loops:
        base, base_wall = speeds[(w, "untraced")], wall[(w, "untraced")]
        cells = [w, f"{statistics.median(base):.0f}/s"]
        for config in ("kpathd", "kpathd+tp", "empty", "bpftrace"):
            if not speeds[(w, config)]:
                cells += ["-", "-"]
                continue
            ratios = [s / b for s, b in zip(speeds[(w, config)], base)]
            wall_ratios = [s / b for s, b in zip(wall[(w, config)], base_wall)]
            cells.append(f"{statistics.median(ratios):.3f} ({statistics.median(wall_ratios):.3f})")
            cells.append(f"{min(ratios):.3f}-{max(ratios):.3f}")
            if config == "kpathd":
                kept = statistics.median(ratios)
        cells.append(f">= {TARGET[w]:.2f}")
        rows.append(cells)
        verdicts.append(f"{w}: kpathd keeps {kept:.3f} (target {TARGET[w]:.2f}: "
                        f"{'met' if kept >= TARGET[w] else 'missed'})")
    print(table(rows, ["loop", "untraced", "kpathd", "range", "kpathd+tp", "range", "empty programs",
                       "range", "bpftrace", "range", "target"]))
    print("kpathd+tp: kpathd with the madvise probe's syscall tracepoint opted in")
    print("\n".join(verdicts))


if __name__ == "__main__":
    main()
