#!/usr/bin/env python3
"""BPF cost per event of kpathd's programs, against an empty program on the same hook (the
physical limit) and a bpftrace script of the kind the case studies used, from the kernel's
per-program run-time statistics (kernel.bpf_stats_enabled), on churn shapes that do not flatter.

Usage (root, from the repository root, after scripts/build.sh):
    bench/bpf_cost.py [--build build] [--before BUILD] [--churn 2000] [--rounds 3]
                      [--shapes fixed,unique,systemd,parallel] [--no-bpftrace]
                      [--mechanism tp_btf|raw_tp|tracepoint[,...]] [--together]
                      [--kpathd-config YAML]

The empty program stays attached on every hook for the whole run; the churns' parent cgroups
too. After a tracer starts, a short churn of every shape (--warmup, not measured) and a drain. Each round runs every tracer
in turn (kpathd of --build; kpathd of --before, if given; bpftrace), each alone, and each tracer
churns every shape; so rounds interleave the tracers, and the host's drift falls on all alike.
Every figure is a median over the rounds: a tracer program's ns per event, the empty program's
ns per event in the same churn, and their ratio (with its range over the rounds). The shapes:
  fixed     one process creates and removes one memory cgroup name over and over (a timer's
            service, seed 000)
  unique    one process, a new name for every cgroup (run-u<N>.scope, as systemd-run and
            transient units make)
  systemd   a slice/service/scope tree: a fixed-name timer service, run-u<N>.service,
            session-<N>.scope and app-<N>.scope under user@1000.service/app.slice, in turn
  parallel  one process per CPU, each with a comm of its own, all at once, unique names
--before BUILD compares a build made before a change in the same rounds ("before" and "after"
rows). --mechanism tp_btf,raw_tp,tracepoint runs kpathd once per mechanism in each round (its
percpu and cgroup probes restricted to it), each against an empty program of the same mechanism,
all empty programs attached for the whole run: the fallbacks kernels without BTF get (raw_tp,
classic tracepoints: no name shapes there) measured beside tp_btf. --together runs bpftrace alongside kpathd in the same churns (they then evict each
other's data from the CPU caches), as the first version of this bench did.
Targets (issue 23): every kpathd program at most 2x the empty program, and below bpftrace.
Leaves nothing behind: every process is stopped, the test cgroups removed, the sysctl restored.
"""
import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from statistics import median

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpath_bench  # noqa: E402
from kpath_bench import memory_cgroup_root, remove_cgroup_tree, wait_for  # noqa: E402

# hook -> (kpathd program-name prefix, category, bpftrace probe with a seed-style action: bytes
# by process, or counts by process and path)
HOOKS = {
    "percpu_alloc_percpu": ("percpu_alloc", "percpu",
                            "tracepoint:percpu:percpu_alloc_percpu "
                            "{ @bytes[comm] = sum(args->bytes_alloc); @calls[comm] = count(); }"),
    "percpu_free_percpu": ("percpu_free", "percpu",
                           "tracepoint:percpu:percpu_free_percpu { @frees[comm] = count(); }"),
    "cgroup_mkdir": ("cgroup_mkdir", "cgroup",
                     "tracepoint:cgroup:cgroup_mkdir { @mkdir[comm, str(args->path)] = count(); }"),
    "cgroup_rmdir": ("cgroup_rmdir", "cgroup",
                     "tracepoint:cgroup:cgroup_rmdir { @rmdir[comm, str(args->path)] = count(); }"),
}
SHAPES = ["fixed", "unique", "systemd", "parallel"]
SYSTEMD_TREE = ["system.slice", "user.slice", "user.slice/user-1000.slice",
                "user.slice/user-1000.slice/user@1000.service",
                "user.slice/user-1000.slice/user@1000.service/app.slice"]


def empty_hook(hook, mechanism):
    """kpath-bench-empty's spec of `hook` through `mechanism`, the one kpathd attached with."""
    if mechanism == "tracepoint":
        return f"tracepoint:{HOOKS[hook][1]}:{hook}"
    return f"{mechanism}:{hook}"


def prog_ids_of(pid):
    ids = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fdinfo"):
            try:
                with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                    for line in f:
                        if line.startswith("prog_id:"):
                            ids.add(int(line.split()[1]))
            except OSError:
                pass
    except OSError:
        pass
    return ids


def prog_stats():
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                         check=True).stdout
    return {p["id"]: p for p in json.loads(out)}


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return os.uname().machine


def set_comm(name):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME


class Churn:
    """Memory cgroups made and removed under one parent of the bench's, in each shape. Names are
    unique over the whole run where the shape says so."""

    def __init__(self, pairs):
        self.pairs = pairs
        self.parent = os.path.join(memory_cgroup_root(), f"kpath-bench-{os.getpid()}.slice")
        # Six digits from the start: every name of a run has one digit count, so the shape the
        # warm-up taught kpathd is the one measured (run-u999 -> run-u1000 is a new shape, met
        # once in a host's life: counted in the round where it fell, it made that round 4x).
        self.serial = 100000

    def _next(self):
        self.serial += 1
        return self.serial

    def _pairs(self, paths):
        for path in paths:
            os.mkdir(path)
            os.rmdir(path)

    def run(self, shape, pairs=None):
        """The shape's churn of `pairs` (default: the run's) cgroups, as a function to call
        between the caller's statistics. The parents (the bench's slice, the systemd-like tree)
        are made once and stay for the whole run, as system.slice and user.slice stay on a host."""
        pairs = pairs or self.pairs
        if not os.path.isdir(self.parent):
            os.mkdir(self.parent)
            for d in SYSTEMD_TREE:
                os.mkdir(os.path.join(self.parent, d))
        p = self.parent
        if shape == "fixed":
            paths = [os.path.join(p, "kpath-bench-churn.service")] * pairs
            return lambda: self._pairs(paths)
        if shape == "unique":
            paths = [os.path.join(p, f"run-u{self._next()}.scope") for _ in range(pairs)]
            return lambda: self._pairs(paths)
        if shape == "systemd":
            user = os.path.join(p, "user.slice/user-1000.slice")
            kinds = [lambda n: os.path.join(p, f"system.slice/kpath-timer-{n % 8}.service"),
                     lambda n: os.path.join(p, f"system.slice/run-u{n}.service"),
                     lambda n: os.path.join(user, f"session-{n}.scope"),
                     lambda n: os.path.join(user, f"user@1000.service/app.slice/app-kpath-{n}.scope")]
            paths = [kinds[i % 4](self._next()) for i in range(pairs)]
            return lambda: self._pairs(paths)
        # parallel: one process per CPU, each its own comm and share of unique names.
        workers = max(os.cpu_count() or 1, 2)
        shares = [[os.path.join(p, f"run-u{self._next()}.scope")
                   for _ in range(pairs // workers)] for _ in range(workers)]

        def parallel():
            pids = []
            for i, share in enumerate(shares):
                pid = os.fork()
                if pid == 0:
                    code = 0
                    try:
                        set_comm(f"kpath-churn-{i}")
                        self._pairs(share)
                    except BaseException:
                        code = 1
                    os._exit(code)
                pids.append(pid)
            failed = [pid for pid in pids if os.waitpid(pid, 0)[1] != 0]
            if failed:
                raise RuntimeError(f"{len(failed)} churn worker(s) failed")
        return parallel

    def clean(self):
        remove_cgroup_tree(self.parent)


def warm_up(churn, shapes, pairs):
    """A short churn of each shape, then a drain: what a tracer that has run for a while knows
    (kpathd learns a transient name's shape at its first drain; a daemon meets each shape once
    in its life, not once per churn)."""
    for shape in shapes:
        churn.run(shape, pairs)()
    time.sleep(1.5)  # kpathd's sampling_interval is 1 s here


def churn_stats(churn, shape):
    """Per-program (runs, ns, name) over one churn of `shape`."""
    go = churn.run(shape)
    before = prog_stats()
    go()
    after = prog_stats()
    return {i: (q.get("run_cnt", 0) - before[i].get("run_cnt", 0),
                q.get("run_time_ns", 0) - before[i].get("run_time_ns", 0), q.get("name", ""))
            for i, q in after.items() if i in before}


def program(runs, ids, hook):
    """(name, runs, ns) of the one program among `ids` on `hook` (by name), or None."""
    for i in ids:
        if i in runs and runs[i][2].startswith(HOOKS[hook][0][:15]) and runs[i][0] > 0:
            return runs[i][2], runs[i][0], runs[i][1]
    return None


def kpathd_config(args, mechanism):
    text = "sampling_interval: 1s\n" + args.kpathd_config.replace("\\n", "\n")
    if mechanism != "tp_btf":
        text += "probes:\n" + "".join(f"  {p}:\n    mechanisms: [{mechanism}]\n"
                                      for p in ("percpu_alloc", "cgroup_churn"))
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--before", default="",
                    help="a build made before a change, run in the same rounds")
    ap.add_argument("--churn", type=int, default=2000, help="cgroup create/remove pairs a churn")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds; figures are the medians over them, the ratio with its range")
    ap.add_argument("--shapes", default=",".join(SHAPES),
                    help=f"comma-separated, of {', '.join(SHAPES)}")
    ap.add_argument("--no-bpftrace", action="store_true", help="leave bpftrace out")
    ap.add_argument("--warmup", type=int, default=200,
                    help="pairs of each shape churned after a tracer starts, not measured")
    ap.add_argument("--kpathd-config", default="",
                    help="YAML appended to kpathd's configuration (to compare settings)")
    ap.add_argument("--mechanism", default="tp_btf",
                    help="restrict kpathd's percpu and cgroup probes to this mechanism (tp_btf, "
                         "raw_tp, tracepoint), the empty program too; several, comma-separated: "
                         "kpathd runs once per mechanism in each round")
    ap.add_argument("--together", action="store_true",
                    help="run bpftrace alongside kpathd instead of after it")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root")
    shapes = [s for s in args.shapes.split(",") if s]
    if not shapes or any(s not in SHAPES for s in shapes):
        sys.exit(f"--shapes: a comma-separated list of {', '.join(SHAPES)}")
    if args.together and args.before:
        sys.exit("--together compares one build with bpftrace: leave out --before")
    mechanisms = [m for m in args.mechanism.split(",") if m]
    if not mechanisms or any(m not in ("tp_btf", "raw_tp", "tracepoint") for m in mechanisms) \
            or len(set(mechanisms)) != len(mechanisms):
        sys.exit("--mechanism: tp_btf, raw_tp or tracepoint, or several of them comma-separated")
    if args.together and len(mechanisms) > 1:
        sys.exit("--together compares one mechanism with bpftrace: give one --mechanism")
    builds = [("after" if args.before else "kpathd", args.build)]
    if args.before:
        builds.insert(0, ("before", args.before))
    for _, b in builds:
        kpath_bench.build_binary(b, "kpathd", "daemon/kpathd")
    empty_binary = kpath_bench.build_binary(args.build, "kpath-bench-empty",
                                            "bench/kpath-bench-empty")

    procs = []
    tracefs_mounted = False
    stats_before = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    churn = Churn(args.churn)
    try:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("1")
        if not os.path.exists("/sys/kernel/tracing/events"):
            subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], check=True)
            tracefs_mounted = True

        hooks = list(HOOKS)
        empty = subprocess.Popen([empty_binary] + [empty_hook(h, m) for m in mechanisms
                                                   for h in hooks],
                                 stdout=subprocess.PIPE, text=True)
        procs.append(empty)
        # (hook, mechanism) -> the empty program's id ("attached <hook spec> prog_id <id>")
        empty_ids = {}
        for line in empty.stdout:
            words = line.split()
            if words[:1] == ["attached"] and "prog_id" in words:
                empty_ids.update({(h, m): int(words[words.index("prog_id") + 1])
                                  for m in mechanisms for h in hooks
                                  if empty_hook(h, m) == words[1]})
            if line.strip() == "ready":
                break
        script = " ".join(HOOKS[h][2] for h in hooks)

        # results[(tracer, shape, hook)] = [(name, events, ns/event, empty ns/event), ...]
        results = {}

        def record(tracer, shape, runs, ids, mechanism=mechanisms[0]):
            # bpftrace (classic tracepoints) against the first mechanism's empty program, as
            # before there were several
            for hook in hooks:
                base = runs.get(empty_ids.get((hook, mechanism)))
                found = program(runs, ids, hook)
                if base and base[0] and found:
                    name, n, ns = found
                    results.setdefault((tracer, shape, hook), []).append(
                        (name, n, ns / n, base[1] / base[0]))

        def tracer_name(who, mechanism):
            return who if len(mechanisms) == 1 else f"{who} {mechanism}"

        runs_of = [(who, build, m) for who, build in builds for m in mechanisms]
        tracers = [tracer_name(who, m) for who, _, m in runs_of] + \
            ([] if args.no_bpftrace or args.together else ["bpftrace"])
        for r in range(args.rounds):
            for who, build, mechanism in runs_of:
                who = tracer_name(who, mechanism)
                with kpath_bench.Kpathd(build, kpathd_config(args, mechanism)) as kpathd:
                    wait_for(lambda: len(prog_ids_of(kpathd.pid)) > 0, 20, "kpathd's probes")
                    time.sleep(0.5)
                    ids = prog_ids_of(kpathd.pid)
                    tracer = kpath_bench.start_bpftrace(script) if args.together else None
                    try:
                        warm_up(churn, shapes, args.warmup)
                        for shape in shapes:
                            runs = churn_stats(churn, shape)
                            record(who, shape, runs, ids, mechanism)
                            if tracer:
                                record("bpftrace", shape, runs, prog_ids_of(tracer.pid))
                    finally:
                        kpath_bench.stop_process(tracer, signal.SIGINT)
            if "bpftrace" in tracers:
                tracer = kpath_bench.start_bpftrace(script)
                try:
                    warm_up(churn, shapes, args.warmup)
                    for shape in shapes:
                        record("bpftrace", shape, churn_stats(churn, shape),
                               prog_ids_of(tracer.pid))
                finally:
                    kpath_bench.stop_process(tracer, signal.SIGINT)
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
        if args.together:
            tracers.append("bpftrace")

        print(f"BPF cost per event: {args.churn} memory-cgroup create/remove pairs per churn "
              f"(after {args.warmup} of each shape unmeasured and a drain), "
              f"{args.rounds} interleaved round(s) (medians), kernel {os.uname().release}, "
              f"{os.cpu_count()} CPUs: {cpu_model()}, mechanism {', '.join(mechanisms)}, "
              f"{'kpathd and bpftrace together' if args.together else 'each tracer alone'}")
        worst = {}
        for shape in shapes:
            print(f"\nshape {shape}")
            print(f"{'hook':20} {'program':30} {'events':>7} {'ns/event':>8} {'empty ns':>8} "
                  f"{'x empty':>7} {'range':>11}")
            for hook in hooks:
                for tracer in tracers:
                    rows = results.get((tracer, shape, hook))
                    if not rows:
                        continue
                    ratios = [r[2] / r[3] for r in rows]
                    ratio = median(ratios)
                    if tracer != "bpftrace":
                        worst[(tracer, shape)] = max(worst.get((tracer, shape), 0), ratio)
                    print(f"{hook:20} {tracer + ' ' + rows[0][0]:30} "
                          f"{median(r[1] for r in rows):7.0f} {median(r[2] for r in rows):8.0f} "
                          f"{median(r[3] for r in rows):8.0f} {ratio:7.2f} "
                          f"{min(ratios):5.2f}-{max(ratios):.2f}")
        print()
        for (tracer, shape), ratio in worst.items():
            print(f"worst {tracer} program, shape {shape}: {ratio:.2f}x the empty program "
                  f"(target: 2.00x or less)")
        for shape in shapes:
            for hook in hooks:
                for m in mechanisms:
                    mine = results.get((tracer_name(builds[-1][0], m), shape, hook))
                    theirs = results.get(("bpftrace", shape, hook))
                    if mine and theirs:
                        a = median(r[2] / r[3] for r in mine)
                        b = median(r[2] / r[3] for r in theirs)
                        if a >= b:
                            print(f"not below bpftrace: {hook}, shape {shape}"
                                  f"{'' if len(mechanisms) == 1 else ', ' + m}: {a:.2f}x "
                                  f"against {b:.2f}x")
    finally:
        for p in reversed(procs):
            kpath_bench.stop_process(p, signal.SIGINT)
        churn.clean()
        if tracefs_mounted:
            subprocess.run(["umount", "/sys/kernel/tracing"])
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(stats_before)


if __name__ == "__main__":
    main()
