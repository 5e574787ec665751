#!/usr/bin/env python3
"""Serving /metrics: kpathd against node_exporter on the same host, at 1x, 10x and 100x kpathd's
own number of series. Prints median and 99th-percentile scrape times as kpathd/node_exporter
ratios, both processes' resident memory, and the series each served.

Usage (root, from the repository root, after building kpathd, kpath-bench-scrape and
kpath-bench-comm-storm; node_exporter from scripts/install-deps.sh --bench):
    bench/serving.py [--build build] [--quick] [--rounds 9] [--scrapes 30] [--scales 1,10,100]

How the series are made:
  1x    both at their defaults (node_exporter's textfile directory empty).
  Nx    kpathd's label limits raised (labels.comm 10000) and N times its 1x series driven by a
        real workload: kpath-bench-comm-storm forks short-lived processes, each with its own
        name, each making madvise calls and creating and removing a memory cgroup (so each name
        is a comm in kpath_madvise_*, kpath_percpu_alloc*, kpath_cgroup_mkdir/rmdir_total),
        paced to what kpathd's BPF hashes hold per sampling interval (sampling_interval: 2s).
        node_exporter gets, through its textfile collector, series of the same shape until it
        serves as many as kpathd (it parses that file on every scrape, as it always does).
Scraping: one scraper process per batch (kpath-bench-scrape: a fresh connection per scrape,
Prometheus 2.42's request headers, gzip accepted), timed from connect to the last byte. Each
round scrapes kpathd then node_exporter (order alternating) `--scrapes` times; the p50 ratio is
the median over rounds of the two rounds' medians' ratio, the p99 ratio that of the pooled
samples. Resident memory (VmRSS) after the rounds; kpathd also with web.max_connections: 4 (the
fewest civetweb threads), to show what its threads cost.
Targets (issue 8): kpathd's scrape time at most half node_exporter's; its memory at most
node_exporter's. Leaves nothing behind (processes stopped, cgroups removed, files deleted).
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kpath_bench import (MADVISE_TRACEPOINT, BenchCgroup, Kpathd, NodeExporter,  # noqa: E402
                         bench_arguments, build_binary, median, percentile, proc_status, rss_bytes,
                         series_count, table)

# kpathd with room for many label values; 2 s sampling keeps each BPF hash's keys per interval
# within its size at the storm's pace, and names stay exported for ~2 minutes after their last
# event (FoldedCounters forgets values idle for long).
SCALED_CONFIG = ("sampling_interval: 2s\n"
                 "labels:\n  comm: 10000\n  caller: 1000\n  unit: 1000\n" + MADVISE_TRACEPOINT)


def scrape(binary, port, count):
    out = subprocess.run([binary, "--port", str(port), "--count", str(count)],
                         capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in out.splitlines()]
    return [float(r[0]) for r in rows], int(rows[-1][1]), rows[-1][2]


def textfile_series(n):
    """n series shaped like kpathd's per-process counters, for node_exporter's textfile."""
    lines = ["# HELP kpath_bench_madvise_calls_total Stand-in series for the comparison.",
             "# TYPE kpath_bench_madvise_calls_total counter"]
    for i in range(n):
        lines.append(f'kpath_bench_madvise_calls_total{{comm="kb-tf-{i}",advice="dontneed"}} '
                     f"{1000 + i}")
    return "\n".join(lines) + "\n"


def drive_series(storm, kpathd, target, prefix, cgroup, rate, max_names, log):
    """Runs the storm in batches until kpathd serves `target` series; returns names used."""
    names, batch = 0, 100
    series = series_count(kpathd.metrics())
    while series < target and names < max_names:
        n = min(batch, max_names - names)
        subprocess.run([storm, "--names", str(n), "--first", str(names), "--prefix", prefix,
                        "--madvise-calls", "100", "--cgroup-dir", cgroup, "--rate", str(rate)],
                       check=True, capture_output=True, text=True)
        names += n
        time.sleep(2.5)  # one sampling interval: the batch's counts drained and exported
        before, series = series, series_count(kpathd.metrics())
        if names == n and series > before:
            # Size the next batches from the series this one added.
            per_name = (series - before) / n
            batch = max(100, min(1000, int((target - series) / per_name / 3) or 100))
        log(f"  {names} names -> {series} series (target {target})")
    return names, series


def measure(scraper, servers, rounds, per_round):
    """servers: name -> port. Returns name -> (per-round medians, pooled samples, bytes, enc)."""
    times = {n: [] for n in servers}
    round_medians = {n: [] for n in servers}
    info = {}
    for name, port in servers.items():  # warm-up: connections, caches, the Go runtime's heap
        scrape(scraper, port, 5)
    names = list(servers)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            t, size, enc = scrape(scraper, servers[name], per_round)
            times[name] += t
            round_medians[name].append(median(t))
            info[name] = (size, enc)
    return {n: (round_medians[n], times[n]) + info[n] for n in servers}


def main():
    ap = bench_arguments(__doc__, "5 rounds x 20 scrapes")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--scrapes", type=int, default=30, help="scrapes of each server per round")
    ap.add_argument("--scales", default="1,10,100", help="multiples of kpathd's 1x series")
    ap.add_argument("--storm-rate", type=float, default=40,
                    help="new process names per second (kpathd's BPF hashes per interval)")
    ap.add_argument("--max-names", type=int, default=9000)
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.scrapes = 5, 20
    scraper = build_binary(args.build, "kpath-bench-scrape", "bench/kpath-bench-scrape")
    storm = build_binary(args.build, "kpath-bench-comm-storm", "bench/kpath-bench-comm-storm")
    scales = [int(s) for s in args.scales.split(",")]

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    rows, results = [], {}
    base_series = None
    with NodeExporter() as ne:
        ne_default = series_count(ne.metrics())
        for scale in scales:
            config = "" if scale == 1 else SCALED_CONFIG
            log(f"serving: {scale}x")
            with Kpathd(args.build, config) as kp, BenchCgroup(f"storm{scale}") as cg:
                time.sleep(6)  # past the first sampling intervals and the hooks' first refresh
                series = series_count(kp.metrics())
                names = 0
                if base_series is None:
                    base_series = series
                if scale > 1:
                    names, series = drive_series(storm, kp, scale * base_series, f"kb{scale}-",
                                                 cg.path, args.storm_rate, args.max_names, log)
                extra = max(0, series - ne_default) if scale > 1 else 0
                ne.set_textfile(textfile_series(extra) if extra else "")
                ne_series = series_count(ne.metrics())
                m = measure(scraper, {"kpathd": kp.port, "node_exporter": ne.port},
                            args.rounds, args.scrapes)
                series_after = series_count(kp.metrics())
                r = dict(scale=scale, names=names, kp_series=series, kp_series_after=series_after,
                         ne_series=ne_series, kp_rss=rss_bytes(kp.pid), ne_rss=rss_bytes(ne.pid),
                         kp_threads=proc_status(kp.pid, "Threads"),
                         ne_threads=proc_status(ne.pid, "Threads"), m=m)
                kp_m, ne_m = m["kpathd"], m["node_exporter"]
                r["p50_ratio"] = median([a / b for a, b in zip(kp_m[0], ne_m[0])])
                r["p99_ratio"] = percentile(kp_m[1], 99) / percentile(ne_m[1], 99)
                results[scale] = r
            if scale == 1:
                # The same 1x kpathd with the fewest civetweb threads: what the threads cost.
                with Kpathd(args.build, "web:\n  max_connections: 4\n") as small:
                    time.sleep(6)
                    scrape(scraper, small.port, 20)
                    results["small"] = dict(rss=rss_bytes(small.pid),
                                            threads=proc_status(small.pid, "Threads"))

    print(f"/metrics scrape time and memory, kpathd against node_exporter "
          f"(prometheus-node-exporter {ne_version()}, defaults); kernel {os.uname().release}, "
          f"{os.cpu_count()} CPUs; {args.rounds} rounds x {args.scrapes} scrapes each, "
          f"Prometheus' request headers (gzip accepted)")
    for scale in scales:
        r = results[scale]
        kp_m, ne_m = r["m"]["kpathd"], r["m"]["node_exporter"]
        reached = r["kp_series"] / results[scales[0]]["kp_series"] * scales[0]
        after = f"->{r['kp_series_after']}" if r["kp_series_after"] != r["kp_series"] else ""
        rows.append([f"{scale}x" + (f" ({reached:.3g}x)" if abs(reached / scale - 1) > 0.1 else ""),
                     f"{r['kp_series']}{after}",
                     r["ne_series"], r["names"],
                     f"{median(kp_m[1]) * 1e3:.2f}", f"{median(ne_m[1]) * 1e3:.2f}",
                     f"{r['p50_ratio']:.2f}",
                     f"{percentile(kp_m[1], 99) * 1e3:.2f}", f"{percentile(ne_m[1], 99) * 1e3:.2f}",
                     f"{r['p99_ratio']:.2f}",
                     f"{kp_m[2] / 1024:.0f}/{kp_m[3]}", f"{ne_m[2] / 1024:.0f}/{ne_m[3]}",
                     f"{r['kp_rss'] / 2**20:.1f}", f"{r['ne_rss'] / 2**20:.1f}",
                     f"{r['kp_rss'] / r['ne_rss']:.2f}"])
    print(table(rows, ["scale", "kpathd series", "node series", "names", "kp p50 ms",
                       "node p50 ms", "p50 ratio", "kp p99 ms", "node p99 ms", "p99 ratio",
                       "kp KiB/enc", "node KiB/enc", "kp RSS MiB", "node RSS MiB", "RSS ratio"]))
    r1 = results[scales[0]]
    small = results.get("small")
    print(f"threads: kpathd {r1['kp_threads']} (shipped web.max_connections), "
          f"node_exporter {r1['ne_threads']}")
    if small:
        print(f"kpathd with web.max_connections: 4: {small['threads']} threads, RSS "
              f"{small['rss'] / 2**20:.1f} MiB ({small['rss'] / r1['ne_rss']:.2f} x "
              f"node_exporter's 1x RSS; {r1['kp_rss'] / 2**20:.1f} MiB with the default)")
    worst_p50 = max(results[s]["p50_ratio"] for s in scales)
    worst_p99 = max(results[s]["p99_ratio"] for s in scales)
    worst_rss = max(results[s]["kp_rss"] / results[s]["ne_rss"] for s in scales)
    print(f"worst ratios kpathd/node_exporter: p50 {worst_p50:.2f}, p99 {worst_p99:.2f} "
          f"(target 0.50 or less); RSS {worst_rss:.2f} (target 1.00 or less)")


def ne_version():
    out = subprocess.run([NodeExporter.BINARY, "--version"], capture_output=True, text=True)
    text = (out.stdout + out.stderr).split()
    return text[2] if len(text) > 2 else "?"


if __name__ == "__main__":
    main()
