#!/usr/bin/env python3
"""kpathd's memory and CPU as the DaemonSet's resources see them (deploy/kubernetes/daemonset.yaml).

Usage (root, from the repository root, after building kpathd and kpath-bench-event-load):
    bench/pod_resources.py [--build build] [--quick] [--window 120]

kpathd runs with the DaemonSet's configuration (the ConfigMap's kpathd.yaml), scraped every 30 s
as the ServiceMonitor scrapes it, through two windows: idle (the host's own work only), then the
seed workloads together: kpath-bench-event-load's madvise(MADV_DONTNEED) calls at 100,000 per
second (seed 003) and memory cgroups created and removed at 30 per second (seed 000), and a reader
opening /proc/slabinfo every second (seed 001's `ss`). Prints, per window, kpathd's CPU (user +
system of every thread over the window, /proc/PID/stat, in millicores: the unit of a CPU request)
and its resident memory at the end, and VmHWM, the peak resident memory of the whole run (what a
memory limit must stay above). Leaves nothing behind.
"""
import os
import re
import sys
import threading
import time

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kpath_bench import (BenchCgroup, Kpathd, bench_arguments, build_binary, metrics,  # noqa: E402
                         proc_status, series_count)
from self_cost import cpu_window  # noqa: E402

SCRAPE_INTERVAL = 30  # deploy/kubernetes/servicemonitor.yaml


def configmap_config():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "deploy", "kubernetes", "configmap.yaml")) as f:
        text = yaml.safe_load(f)["data"]["kpathd.yaml"]
    # The pod listens on 0.0.0.0:9477; the bench's kpathd on its own free port (--listen wins).
    return text


class Background(threading.Thread):
    def __init__(self, interval, action):
        super().__init__(daemon=True)
        self.interval, self.action = interval, action
        self.stopped = threading.Event()

    def run(self):
        while not self.stopped.is_set():
            self.action()
            self.stopped.wait(self.interval)

    def stop(self):
        self.stopped.set()
        self.join()


def read_slabinfo():
    with open("/proc/slabinfo") as f:
        f.read()


def window(pid, seconds, command=None):
    """kpathd's CPU in millicores over the window, its RSS (MiB) at the end, the command's output."""
    cpu, _, out = cpu_window([pid], seconds, command)
    return cpu[pid] * 10, proc_status(pid, "VmRSS") / 1024, out


def main():
    ap = bench_arguments(__doc__, "30 s windows")
    ap.add_argument("--window", type=float, default=120, help="seconds per window")
    args = ap.parse_args()
    if args.quick:
        args.window = 30
    load_bin = build_binary(args.build, "kpath-bench-event-load", "bench/kpath-bench-event-load")
    rows = []
    with Kpathd(args.build, configmap_config()) as kp, BenchCgroup("pod") as cg:
        scraper = Background(SCRAPE_INTERVAL, lambda: metrics(kp.port, timeout=10))
        scraper.start()
        try:
            time.sleep(10)  # past the start-up work and the first hooks refresh
            cpu, rss, _ = window(kp.pid, args.window)
            rows.append(("idle", cpu, rss, ""))
            reader = Background(1, read_slabinfo)
            reader.start()
            try:
                cpu, rss, out = window(kp.pid, args.window, [
                    load_bin, "--seconds", str(args.window), "--madvise-rate", "100000",
                    "--cgroup-dir", cg.path, "--cgroup-rate", "30"])
            finally:
                reader.stop()
            got = dict(re.findall(r"(\w+)=([\d.]+)", out))
            took = float(got["seconds"])  # longer than the window on a busy host
            rows.append(("seeds 000+001+003", cpu, rss,
                         f"{float(got['madvise_calls']) / took:.0f} madvise/s, "
                         f"{float(got['cgroups']) / took:.1f} memcg/s, slabinfo 1/s, {took:.0f} s"))
            series = series_count(kp.metrics())
            hwm = proc_status(kp.pid, "VmHWM") / 1024
            threads = proc_status(kp.pid, "Threads")
        finally:
            scraper.stop()
    print(f"kpathd with the DaemonSet's configuration, scraped every {SCRAPE_INTERVAL} s; "
          f"{os.cpu_count()} CPUs; {args.window:.0f} s windows")
    print(f"{'window':<20} {'CPU millicores':>14} {'RSS MiB':>8}  workload")
    for name, cpu, rss, what in rows:
        print(f"{name:<20} {cpu:>14.2f} {rss:>8.1f}  {what}")
    print(f"peak RSS (VmHWM) {hwm:.1f} MiB; {threads} threads; {series} series on /metrics")


if __name__ == "__main__":
    main()
