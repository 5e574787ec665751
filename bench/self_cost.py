#!/usr/bin/env python3
"""kpathd's own CPU at idle and under 100k events per second, with node_exporter's beside it.

Usage (root, from the repository root, after building kpathd and kpath-bench-event-load;
node_exporter from scripts/install-deps.sh --bench):
    bench/self_cost.py [--build build] [--quick] [--rounds 3] [--window 60]
                       [--madvise-rate 100000] [--cgroup-rate 30]

kpathd (shipped defaults: 5 s sampling, every probe; plus the madvise probe's opt-in syscall
tracepoint, its only mechanism on a kernel without fentry and kprobes) and node_exporter (defaults) run side by
side, each scraped every 15 s as Prometheus would. Each round measures one idle window and one
load window (order alternating): kpath-bench-event-load makes madvise(MADV_DONTNEED) calls at
--madvise-rate per second (each also fires kpathd's tlb_flush program) and creates and removes
--cgroup-rate memory cgroups per second (percpu allocations and cgroup mkdir/rmdir events).
CPU is user + system time of the whole process (/proc/PID/stat, every thread; the same source
as process_cpu_seconds_total) over the window, in percent of one core; figures are medians over
rounds. kpathd's BPF programs run in the context of the processes that trigger them, so their
time is not in kpathd's figure: one more load window, under a kpathd that holds the kernel's
BPF run-time statistics on (hooks.bpf_stats: always; the sysctl kernel.bpf_stats_enabled is
left alone), reads it from kpathd's own kpath_bpf_program_run_seconds_total.
Targets (issue 8): kpathd under 0.5 % of one core idle and under 2 % under load. Leaves nothing
behind.
"""
import os
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kpath_bench import (MADVISE_TRACEPOINT, BenchCgroup, Kpathd, NodeExporter,  # noqa: E402
                         bench_arguments, build_binary, median, metrics, proc_cpu_seconds, samples,
                         table)

SCRAPE_INTERVAL = 15
INTERVAL = 5  # kpathd's shipped sampling_interval, seconds


class Scraper(threading.Thread):
    """Scrapes every port every SCRAPE_INTERVAL seconds until stopped."""

    def __init__(self, ports):
        super().__init__(daemon=True)
        self.ports = ports
        self.stopped = threading.Event()

    def run(self):
        while not self.stopped.is_set():
            for port in self.ports:
                metrics(port, timeout=10)
            self.stopped.wait(SCRAPE_INTERVAL)

    def stop(self):
        self.stopped.set()
        self.join()


def cpu_window(pids, seconds, load=None):
    """Percent of one core each pid used over `seconds` (with `load` running, a command)."""
    before = {p: proc_cpu_seconds(p) for p in pids}
    t0 = time.monotonic()
    out = ""
    if load:
        out = subprocess.run(load, capture_output=True, text=True, check=True).stdout
    else:
        time.sleep(seconds)
    wall = time.monotonic() - t0
    return {p: (proc_cpu_seconds(p) - before[p]) / wall * 100 for p in pids}, wall, out


def bpf_seconds(body):
    return {lbl["program"]: v for lbl, v in samples(body, "kpath_bpf_program_run_seconds_total")}


def main():
    ap = bench_arguments(__doc__, "2 rounds of 20 s windows")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--window", type=float, default=60, help="seconds per measurement window")
    ap.add_argument("--madvise-rate", type=float, default=100000)
    ap.add_argument("--cgroup-rate", type=float, default=30,
                    help="memory cgroups created and removed per second (about 35 is the most\n"
                    "one thread manages on the 2-CPU VM of bench/README.md)")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.window = 2, 20
    load_bin = build_binary(args.build, "kpath-bench-event-load", "bench/kpath-bench-event-load")

    idle, load, rates = {"kp": [], "ne": []}, {"kp": [], "ne": []}, []
    with Kpathd(args.build, MADVISE_TRACEPOINT) as kp, NodeExporter() as ne, \
            BenchCgroup("load") as cg:
        scraper = Scraper([kp.port, ne.port])
        scraper.start()
        try:
            time.sleep(10)  # past kpathd's start-up work and first hooks refresh
            command = [load_bin, "--seconds", str(args.window), "--madvise-rate",
                       str(args.madvise_rate), "--cgroup-dir", cg.path, "--cgroup-rate",
                       str(args.cgroup_rate)]
            for r in range(args.rounds):
                for kind in (("idle", "load") if r % 2 == 0 else ("load", "idle")):
                    print(f"self cost: round {r + 1}, {kind}", file=sys.stderr, flush=True)
                    cpu, wall, out = cpu_window([kp.pid, ne.pid], args.window,
                                                command if kind == "load" else None)
                    into = idle if kind == "idle" else load
                    into["kp"].append(cpu[kp.pid])
                    into["ne"].append(cpu[ne.pid])
                    if out:
                        got = dict(re.findall(r"(\w+)=([\d.]+)", out))
                        rates.append((float(got["madvise_calls"]) / wall,
                                      float(got["cgroups"]) / wall))
            own = samples(kp.metrics(), "process_cpu_seconds_total")
        finally:
            scraper.stop()

    # kpathd's BPF time, from its own metric: a kpathd holding the kernel's run-time statistics
    # on itself (hooks.bpf_stats: always, a BPF_ENABLE_STATS descriptor), so that nothing else on
    # the machine writing kernel.bpf_stats_enabled can switch them off mid-window, and nothing
    # here writes that sysctl.
    with Kpathd(args.build, "hooks:\n  bpf_stats: always\n" + MADVISE_TRACEPOINT) as kp, \
            BenchCgroup("bpf") as cg:
        time.sleep(INTERVAL + 1)
        b0, t0 = bpf_seconds(kp.metrics()), time.monotonic()
        subprocess.run([load_bin, "--seconds", str(min(args.window, 20)), "--madvise-rate",
                        str(args.madvise_rate), "--cgroup-dir", cg.path, "--cgroup-rate",
                        str(args.cgroup_rate)], check=True, capture_output=True)
        time.sleep(INTERVAL + 0.5)  # the next sample holds the totals
        body = kp.metrics()
        b1, wall_bpf = bpf_seconds(body), time.monotonic() - t0
        stats_metric = samples(body, "kpath_bpf_stats_enabled")

    madvise_rate = median([r[0] for r in rates])
    cgroup_rate = median([r[1] for r in rates])
    print(f"kpathd's own CPU (shipped defaults) and node_exporter's (defaults), both scraped every "
          f"{SCRAPE_INTERVAL} s; kernel {os.uname().release}, {os.cpu_count()} CPUs; "
          f"{args.rounds} rounds x {args.window:g} s windows, medians")
    rows = [["idle", f"{median(idle['kp']):.3f}", f"{min(idle['kp']):.3f}",
             f"{max(idle['kp']):.3f}", f"{median(idle['ne']):.3f}",
             f"{median(idle['kp']) / max(median(idle['ne']), 1e-9):.2f}", "0.50"],
            [f"load: {madvise_rate / 1000:.0f}k madvise/s + {cgroup_rate:.0f} memcg/s",
             f"{median(load['kp']):.3f}", f"{min(load['kp']):.3f}", f"{max(load['kp']):.3f}",
             f"{median(load['ne']):.3f}",
             f"{median(load['kp']) / max(median(load['ne']), 1e-9):.2f}", "2.00"]]
    print(table(rows, ["condition", "kpathd %CPU", "min", "max", "node %CPU", "kp/node",
                       "target"]))
    print(f"load / idle for kpathd: {median(load['kp']) / max(median(idle['kp']), 1e-9):.2f}")
    total = sum(b1.get(p, 0) - b0.get(p, 0) for p in b1)
    print(f"kpathd's BPF programs under the same load (hooks.bpf_stats: always, from "
          f"kpath_bpf_program_run_seconds_total; charged to the workload, not to kpathd): "
          f"{total / wall_bpf * 100:.3f} % of one core; kpath_bpf_stats_enabled "
          f"{stats_metric[0][1] if stats_metric else '?':g}; process_cpu_seconds_total "
          f"{'exported' if own else 'MISSING'}")
    for prog in sorted(b1, key=lambda p: b0.get(p, 0) - b1[p])[:6]:
        print(f"  {prog}: {(b1[prog] - b0.get(prog, 0)) / wall_bpf * 100:.3f} %")
    kp_idle, kp_load = median(idle["kp"]), median(load["kp"])
    print(f"kpathd: idle {kp_idle:.3f} % (target < 0.5: {'met' if kp_idle < 0.5 else 'MISSED'}), "
          f"load {kp_load:.3f} % (target < 2: {'met' if kp_load < 2 else 'MISSED'})")


if __name__ == "__main__":
    main()
