#!/usr/bin/env python3
"""Soak kpathd: run cgroup churn, madvise storms under thousands of process names and
continuous scrapes against one kpathd for a while, and show that its resident memory and open
file descriptors stay flat.

Usage (root, after scripts/build.sh):
    scripts/soak.py [--build build] [--minutes 10] [--sample 10] [--scrapers 4]

Every --sample seconds it records kpathd's process_resident_memory_bytes, process_open_fds and
process_threads (its own /metrics), the series count and the scrape time, and prints a line.
At the end it prints the table's summary and a verdict:
  - file descriptors: the fewest in the last third of the run no more than the most by the end
    of warm-up (scrapers' sockets come and go; a leak raises the floor);
  - resident memory: growth from the end of warm-up (the first fifth of the run) to the end,
    which must stay under --max-rss-growth (default 10 %): label folding, drained maps and
    bounded caches should hold memory flat under endless new names.
Exit status 0 when both hold and kpathd never stopped answering, 1 otherwise. Leaves nothing
behind: the cgroups it made are removed, its child processes are reaped, kpathd is stopped.
"""
import argparse
import ctypes
import mmap
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
from kpath_bench import free_port, memory_cgroup_root, metrics, samples, wait_for  # noqa: E402

PR_SET_NAME = 15
MADV_DONTNEED = 4


class Workload:
    """Background load until stop(): churn, storms, scrapes. Counts what it did."""

    def __init__(self, port, scrapers, names_per_round):
        self.port, self.scrapers, self.names_per_round = port, scrapers, names_per_round
        self.stop_event = threading.Event()
        self.threads = []
        self.counts = {"cgroups": 0, "processes": 0, "madvise": 0, "scrapes": 0,
                       "scrape_errors": 0}
        self.lock = threading.Lock()
        try:
            root = memory_cgroup_root()
        except RuntimeError as e:
            print(f"soak: no cgroup churn: {e}")
            root = None
        self.parent = os.path.join(root, f"kpath-soak-{os.getpid()}") if root else None

    def add(self, key, n=1):
        with self.lock:
            self.counts[key] += n

    def churn(self):
        if not self.parent:
            return
        os.makedirs(self.parent, exist_ok=True)
        i = 0
        while not self.stop_event.is_set():
            path = os.path.join(self.parent, f"soak-{i % 50}.service")
            try:
                os.mkdir(path)
                os.rmdir(path)
                self.add("cgroups")
            except OSError:
                time.sleep(0.01)
            i += 1
            time.sleep(0.002)

    def storm(self):
        libc = ctypes.CDLL(None, use_errno=True)
        generation = 0
        while not self.stop_event.is_set():
            pids = []
            for n in range(self.names_per_round):
                pid = os.fork()
                if pid == 0:
                    try:
                        name = f"soak-{generation}-{n}".encode()[:15]
                        libc.prctl(PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)
                        m = mmap.mmap(-1, mmap.PAGESIZE)
                        for _ in range(200):
                            m[0] = 1
                            m.madvise(MADV_DONTNEED, 0, mmap.PAGESIZE)
                    finally:
                        os._exit(0)
                pids.append(pid)
            for pid in pids:
                os.waitpid(pid, 0)
            self.add("processes", len(pids))
            self.add("madvise", 200 * len(pids))
            generation += 1
            self.stop_event.wait(0.5)

    def scrape(self):
        while not self.stop_event.is_set():
            body = metrics(self.port, timeout=5)
            self.add("scrapes" if body else "scrape_errors")
            self.stop_event.wait(0.1)

    def start(self):
        targets = [self.churn, self.storm] + [self.scrape] * self.scrapers
        for t in targets:
            th = threading.Thread(target=t, daemon=True)
            th.start()
            self.threads.append(th)

    def stop(self):
        self.stop_event.set()
        for th in self.threads:
            th.join(30)
        if self.parent and os.path.isdir(self.parent):
            for entry in os.listdir(self.parent):
                p = os.path.join(self.parent, entry)
                if os.path.isdir(p):
                    try:
                        os.rmdir(p)
                    except OSError:
                        pass
            try:
                os.rmdir(self.parent)
            except OSError as e:
                print(f"soak: could not remove {self.parent}: {e}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--sample", type=float, default=10.0, help="seconds between samples")
    ap.add_argument("--scrapers", type=int, default=4)
    ap.add_argument("--names", type=int, default=100, help="new process names per round")
    ap.add_argument("--max-rss-growth", type=float, default=0.10)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root")
    kpathd = os.path.join(args.build, "daemon", "kpathd")
    if not os.access(kpathd, os.X_OK):
        sys.exit(f"{kpathd} missing: scripts/build.sh")

    port = free_port()
    cfg = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    # Every madvise mechanism: the syscall tracepoint is opt-in (kernels without fentry/kprobes).
    cfg.write("sampling_interval: 1s\nprobes:\n  madvise:\n    mechanisms: [fentry, kprobe, tracepoint]\n")
    cfg.close()
    os.chmod(cfg.name, 0o644)
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([kpathd, "--config", cfg.name, "--listen", f"127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    work = Workload(port, args.scrapers, args.names)
    rows, ok = [], True
    try:
        wait_for(lambda: samples(metrics(port), "kpath_build_info") or proc.poll() is not None,
                 60, "kpathd to serve")
        if proc.poll() is not None:
            raise RuntimeError("kpathd exited at start")
        work.start()
        print(f"soak: kpathd pid {proc.pid} on port {port}, {args.minutes:g} min, "
              f"{args.scrapers} scrapers, {args.names} new process names every round")
        print(f"{'min':>6} {'rss MiB':>8} {'fds':>5} {'threads':>7} {'series':>7} "
              f"{'scrape ms':>9} {'cgroups':>8} {'procs':>7} {'madvise':>9} {'scrapes':>8}")
        start = time.time()
        end = start + args.minutes * 60
        while time.time() < end:
            time.sleep(min(args.sample, max(0.0, end - time.time())))
            t0 = time.time()
            body = metrics(port, timeout=10)
            took = (time.time() - t0) * 1000
            if proc.poll() is not None or not body:
                print("soak: kpathd stopped answering")
                ok = False
                break
            value = lambda name: (samples(body, name) or [({}, float("nan"))])[0][1]  # noqa: E731
            series = sum(1 for line in body.splitlines() if line and not line.startswith("#"))
            with work.lock:
                c = dict(work.counts)
            row = ((time.time() - start) / 60, value("process_resident_memory_bytes") / 2**20,
                   value("process_open_fds"), value("process_threads"), series, took)
            rows.append(row)
            print(f"{row[0]:6.1f} {row[1]:8.1f} {row[2]:5.0f} {row[3]:7.0f} {row[4]:7d} "
                  f"{row[5]:9.1f} {c['cgroups']:8d} {c['processes']:7d} {c['madvise']:9d} "
                  f"{c['scrapes']:8d}", flush=True)
    finally:
        work.stop()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        os.unlink(cfg.name)
    if len(rows) < 3:
        print("soak: too few samples for a verdict")
        return 1
    warm = rows[max(0, len(rows) // 5 - 1)]
    last = rows[-1]
    rss_growth = (last[1] - warm[1]) / warm[1]
    # Scrapers' connections come and go (one socket each): a leak shows as the fewest fds of
    # the last third exceeding the most seen by the end of warm-up.
    warm_fds = max(r[2] for r in rows[:max(1, len(rows) // 5)])
    last_fds = min(r[2] for r in rows[-max(1, len(rows) // 3):])
    fd_growth = last_fds - warm_fds
    with work.lock:
        c = dict(work.counts)
    print(f"soak: {last[0]:.1f} min; {c['cgroups']} cgroups created and removed, "
          f"{c['processes']} processes with distinct names, {c['madvise']} madvise calls, "
          f"{c['scrapes']} scrapes ({c['scrape_errors']} failed)")
    print(f"soak: resident memory {warm[1]:.1f} MiB after warm-up -> {last[1]:.1f} MiB "
          f"({rss_growth * 100:+.1f} %, limit {args.max_rss_growth * 100:.0f} %); open fds at most "
          f"{warm_fds:.0f} after warm-up, at least {last_fds:.0f} in the last third; peak "
          f"{max(r[1] for r in rows):.1f} MiB")
    if rss_growth > args.max_rss_growth:
        print("soak: FAIL: resident memory grew")
        ok = False
    if fd_growth > 0:
        print("soak: FAIL: open file descriptors grew")
        ok = False
    if c["scrape_errors"]:
        print("soak: FAIL: scrapes failed")
        ok = False
    print("soak: PASS" if ok else "soak: FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
