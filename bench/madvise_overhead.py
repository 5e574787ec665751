#!/usr/bin/env python3
"""What a madvise probe costs the process it watches: a tight single-thread madvise loop
(bench/madvise_loop.cpp) run untraced, under kpathd, under an empty BPF program on the hook
kpathd attached to, and under a bpftrace one-liner of the seed-003 kind (calls by process and
advice), in one run. Prints each speed as a ratio of the untraced one. kpathd runs twice: with
the shipped defaults (every probe, some of which sample every CPU or hook the loop's page faults
and TLB flushes too) and with only its madvise probe enabled; both with every madvise mechanism
(the syscall tracepoint is opt-in, and the only one on a kernel without fentry and kprobes).

Usage (root, from the repository root):
    bench/madvise_overhead.py [--build build] [--rounds 7] [--seconds 1] [--no-touch]

Speed is calls per second of the loop thread's own CPU time: a tracer's cost is all spent in the
calling thread (system time), while other work on a shared machine only preempts the loop, which
changes wall-clock speed but not CPU-time speed (both are printed). Each round runs every
configuration once, in a rotating order, with the tracer started before and stopped after its
run; a configuration's figure is the median over the rounds of its speed divided by the same
round's untraced speed (pairing cancels slow drifts).
Target (issue 6): kpathd keeps at least 0.90. Leaves nothing behind.
"""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kpath_bench import (MADVISE_TRACEPOINT, attached_mechanism, free_port,  # noqa: E402
                         metrics, probe_names, start_bpftrace, wait_for)

BPFTRACE = ("tracepoint:syscalls:sys_enter_madvise "
            "{ @calls[comm, args->behavior] = count(); }")


class Tracer:
    """Starts and stops one configuration's tracer around a run."""

    def __init__(self, name, start, stop=None):
        self.name, self._start, self._stop = name, start, stop
        self.proc = None

    def start(self):
        self.proc = self._start() if self._start else None

    def stop(self):
        p, self.proc = self.proc, None
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGTERM if self.name.startswith("kpathd") else signal.SIGINT)
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--seconds", type=float, default=1.0, help="length of each loop run")
    ap.add_argument("--no-touch", action="store_true",
                    help="madvise a never-mapped page: the bare system call, the worst case")
    ap.add_argument("--cpu", type=int, default=os.cpu_count() - 1,
                    help="CPU the loop runs on (tracers run where the scheduler puts them)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root")
    loop = [f"{args.build}/bench/kpath-bench-madvise-loop", "--seconds", str(args.seconds),
            "--cpu", str(args.cpu)] + (["--no-touch"] if args.no_touch else [])
    for binary in (loop[0], f"{args.build}/daemon/kpathd", f"{args.build}/bench/kpath-bench-empty"):
        if not os.access(binary, os.X_OK):
            sys.exit(f"{binary} missing: cmake --build {args.build} -j2 --target kpathd "
                     "kpath-bench-empty kpath-bench-madvise-loop")

    probes = probe_names()  # every probe kpathd knows, from the shipped configuration
    configs = {}
    for name, text in {
        "defaults": "# the defaults, as shipped, with every madvise mechanism\n" + MADVISE_TRACEPOINT,
        "madvise only": MADVISE_TRACEPOINT + "".join(f"  {p}:\n    enabled: false\n"
                                                     for p in probes if p != "madvise"),
    }.items():
        cfg = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
        cfg.write(text)
        cfg.close()
        os.chmod(cfg.name, 0o644)
        configs[name] = cfg.name
    port = free_port()
    mechanism = {}

    def start_kpathd(config):
        p = subprocess.Popen([f"{args.build}/daemon/kpathd", "--config", configs[config],
                              "--listen", f"127.0.0.1:{port}", "--log-level", "warn"])
        wait_for(lambda: attached_mechanism(metrics(port), "madvise") or p.poll() is not None, 30,
                 "kpathd's madvise probe")
        if p.poll() is not None:
            raise RuntimeError("kpathd exited")
        mechanism["kpathd"] = attached_mechanism(metrics(port), "madvise")
        return p

    def start_empty():
        p = subprocess.Popen([f"{args.build}/bench/kpath-bench-empty",
                              "tracepoint:syscalls:sys_enter_madvise"],
                             stdout=subprocess.PIPE, text=True)
        for line in p.stdout:
            if line.strip() == "ready":
                return p
        raise RuntimeError("kpath-bench-empty did not attach")

    tracers = [Tracer("untraced", None), Tracer("kpathd", lambda: start_kpathd("defaults")),
               Tracer("kpathd madvise", lambda: start_kpathd("madvise only")),
               Tracer("empty program", start_empty), Tracer("bpftrace", lambda: start_bpftrace(BPFTRACE))]
    speeds = {t.name: [] for t in tracers}
    wall = {t.name: [] for t in tracers}
    try:
        for r in range(args.rounds):
            order = tracers[r % len(tracers):] + tracers[:r % len(tracers)]
            for t in order:
                t.start()
                try:
                    out = subprocess.run(loop, capture_output=True, text=True, check=True)
                    cpu_rate, wall_rate = (float(x) for x in out.stdout.split())
                    speeds[t.name].append(cpu_rate)
                    wall[t.name].append(wall_rate)
                finally:
                    t.stop()
    finally:
        for t in tracers:
            t.stop()
        for path in configs.values():
            os.unlink(path)

    base = speeds["untraced"]
    print(f"madvise(MADV_DONTNEED) loop, {'bare call' if args.no_touch else 'touch + dontneed'}, "
          f"{args.rounds} rounds x {args.seconds:g} s on CPU {args.cpu}; kernel "
          f"{os.uname().release}, {os.cpu_count()} CPUs; hook: "
          f"{mechanism.get('kpathd', '?')} (empty program: tracepoint sys_enter_madvise)")
    print(f"{'configuration':15} {'calls/CPU-s':>12} {'ratio':>7} {'min':>6} {'max':>6}   "
          f"{'calls/wall-s':>12} {'ratio':>7}")
    for t in tracers:
        ratios = [s / b for s, b in zip(speeds[t.name], base)]
        wall_ratios = [s / b for s, b in zip(wall[t.name], wall["untraced"])]
        print(f"{t.name:15} {statistics.median(speeds[t.name]):12.0f} "
              f"{statistics.median(ratios):7.3f} {min(ratios):6.3f} {max(ratios):6.3f}   "
              f"{statistics.median(wall[t.name]):12.0f} {statistics.median(wall_ratios):7.3f}")
    kp = statistics.median([s / b for s, b in zip(speeds["kpathd"], base)])
    alone = statistics.median([s / b for s, b in zip(speeds["kpathd madvise"], base)])
    print(f"kpathd keeps {kp:.3f} of the untraced speed, {alone:.3f} with only its madvise probe "
          "(target: 0.90 or more)")


if __name__ == "__main__":
    main()
