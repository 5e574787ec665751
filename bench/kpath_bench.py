"""Helpers shared by kpathd's benchmarks: a free local port, /metrics scraped and parsed, waiting
with a timeout, the probe names of the shipped configuration; kpathd and node_exporter started
and stopped, a memory cgroup of the bench's own, a process's CPU time and memory, medians and
percentiles, aligned tables. Imported by the bench scripts (they run from any directory: each
puts its own directory on sys.path)."""
import argparse
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


# kpathd configuration text that adds the madvise probe's syscall tracepoint to its mechanisms.
# It is left out by default (it taxes every system call of the host); on a kernel without fentry
# and kprobes (the development VM) the madvise probe is otherwise off, and the benches that
# measure madvise, or need its series, opt in with this.
MADVISE_TRACEPOINT = "probes:\n  madvise:\n    mechanisms: [fentry, kprobe, tracepoint]\n"


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def metrics(port, timeout=2):
    """kpathd's /metrics on 127.0.0.1:port, or "" when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as r:
            return r.read().decode()
    except OSError:
        return ""


def samples(body, name, **labels):
    """(labels dict, value) of every sample of `name` whose labels include `labels`."""
    out = []
    for line in body.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        lbl = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0])) if "{" in line else {}
        if all(lbl.get(k) == v for k, v in labels.items()):
            out.append((lbl, float(line.rsplit(" ", 1)[1])))
    return out


def attached_mechanism(body, probe):
    """The mechanism kpathd's `probe` attached with, or None."""
    for lbl, value in samples(body, "kpath_probe_attached", probe=probe):
        if value == 1:
            return lbl.get("mechanism")
    return None


def wait_for(predicate, timeout, what):
    """Polls `predicate` every 50 ms; RuntimeError naming `what` after `timeout` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def probe_names():
    """The probes listed under `probes:` in the shipped config/kpathd.yaml."""
    names, in_probes = [], False
    with open(os.path.join(HERE, "..", "config", "kpathd.yaml")) as f:
        for line in f:
            if line.startswith("probes:"):
                in_probes = True
            elif in_probes and re.match(r"^  ([a-z_]+):\s*$", line):
                names.append(line.strip().rstrip(":"))
            elif in_probes and re.match(r"^\S", line):
                in_probes = False
    return names


# ---------------------------------------------------------------------------------------------
# Processes, configurations and figures shared by serving.py, self_cost.py and growth.py.

def bench_arguments(doc, quick_help):
    """The options of every bench run-all.sh calls: --build and --quick; SystemExit unless root
    (checked when parsed: --help works for anyone)."""
    ap = RootArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--quick", action="store_true", help=quick_help)
    return ap


class RootArgumentParser(argparse.ArgumentParser):
    def parse_args(self, *args, **kwargs):
        parsed = super().parse_args(*args, **kwargs)
        if os.geteuid() != 0:
            raise SystemExit("run as root")
        return parsed


def median(values):
    values = sorted(values)
    if not values:
        return float("nan")
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def percentile(values, q):
    """The q-th percentile (0-100) of `values`, by linear interpolation between ranks."""
    values = sorted(values)
    if not values:
        return float("nan")
    rank = (len(values) - 1) * q / 100
    lo = int(rank)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (rank - lo)


def series_count(body):
    """Samples in a text exposition (lines that are neither comments nor empty)."""
    return sum(1 for line in body.splitlines() if line and not line.startswith("#"))


def proc_cpu_seconds(pid):
    """User + system CPU seconds of process `pid` (all its threads, live and exited)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_status(pid, field):
    """A numeric field of /proc/PID/status (VmRSS in kB, Threads, ...)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def rss_bytes(pid):
    return proc_status(pid, "VmRSS") * 1024


def memory_cgroup_root():
    """Mount point of the cgroup hierarchy with the memory controller (v1 or v2)."""
    v2 = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            dash = fields.index("-")
            fstype = fields[dash + 1]
            opts = fields[dash + 3] if len(fields) > dash + 3 else ""
            if fstype == "cgroup" and "memory" in opts.split(","):
                return fields[4]
            if fstype == "cgroup2" and v2 is None:
                try:
                    with open(os.path.join(fields[4], "cgroup.controllers")) as c:
                        if "memory" in c.read().split():
                            v2 = fields[4]
                except OSError:
                    pass
    if v2:
        return v2
    raise RuntimeError("no memory cgroup hierarchy mounted")


def remove_cgroup_tree(path):
    """Removes a cgroup directory and every cgroup under it, deepest first."""
    if not os.path.isdir(path):
        return
    for dirpath, dirnames, _ in os.walk(path, topdown=False):
        for d in dirnames:
            try:
                os.rmdir(os.path.join(dirpath, d))
            except FileNotFoundError:
                pass
    os.rmdir(path)


class BenchCgroup:
    """A memory cgroup of the bench's own (`<root>/kpath-bench-<what>-<pid>.slice`), removed with
    everything under it on exit."""

    def __init__(self, what):
        self.path = os.path.join(memory_cgroup_root(), f"kpath-bench-{what}-{os.getpid()}.slice")

    def __enter__(self):
        os.mkdir(self.path)
        return self

    def __exit__(self, *exc):
        remove_cgroup_tree(self.path)


def build_binary(build, target, path):
    """`<build>/<path>`, or SystemExit naming the target to build."""
    binary = os.path.join(build, path)
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"{binary} missing: cmake --build {build} -j2 --target {target}")
    return binary


def write_temp(text, suffix):
    """A 0644 temporary file holding `text` (kpathd refuses a world-writable config)."""
    f = tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False)
    f.write(text)
    f.close()
    os.chmod(f.name, 0o644)
    return f.name


def stop_process(p, sig=signal.SIGTERM, timeout=15):
    if p is None or p.poll() is not None:
        return
    p.send_signal(sig)
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


class ServedProcess:
    """A process serving /metrics on 127.0.0.1:<free port>: started by the subclass's _start()
    on entering, waited for until its /metrics shows MARKER, stopped (SIGTERM) and cleaned up
    (_cleanup()) on leaving."""

    NAME, MARKER, TIMEOUT = "?", "", 30

    def __init__(self):
        self.port = free_port()
        self.proc = None

    def __enter__(self):
        try:
            self.proc = self._start()
            wait_for(lambda: self.MARKER in metrics(self.port) or self.proc.poll() is not None,
                     self.TIMEOUT, f"{self.NAME}'s /metrics")
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.NAME} exited with {self.proc.returncode}")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        stop_process(self.proc)
        self._cleanup()

    @property
    def pid(self):
        return self.proc.pid

    def metrics(self):
        return metrics(self.port, timeout=10)


class Kpathd(ServedProcess):
    """kpathd with `config` (YAML text; "" = the built-in defaults)."""

    NAME, MARKER, TIMEOUT = "kpathd", "kpath_build_info", 60

    def __init__(self, build, config=""):
        super().__init__()
        self.binary = build_binary(build, "kpathd", "daemon/kpathd")
        self.config = config
        self._config_path = None

    def _start(self):
        args = [self.binary, "--listen", f"127.0.0.1:{self.port}", "--log-level", "warn"]
        if self.config:
            self._config_path = write_temp(self.config, ".yaml")
            args[1:1] = ["--config", self._config_path]
        return subprocess.Popen(args)

    def _cleanup(self):
        if self._config_path:
            os.unlink(self._config_path)
            self._config_path = None


class NodeExporter(ServedProcess):
    """prometheus-node-exporter (Debian's package) with its defaults, its textfile collector
    reading a temporary directory of the bench's: `set_textfile(text)` puts series there (read
    on every scrape, as node_exporter does)."""

    NAME, MARKER = "node_exporter", "node_exporter_build_info"
    BINARY = "/usr/bin/prometheus-node-exporter"

    def __init__(self):
        if not os.access(self.BINARY, os.X_OK):
            raise SystemExit(f"{self.BINARY} missing: scripts/install-deps.sh --bench")
        super().__init__()
        self.textfile_dir = None

    def _start(self):
        self.textfile_dir = tempfile.mkdtemp(prefix="kpath-bench-textfile-")
        return subprocess.Popen(
            [self.BINARY, f"--web.listen-address=127.0.0.1:{self.port}",
             f"--collector.textfile.directory={self.textfile_dir}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _cleanup(self):
        if self.textfile_dir:
            for name in os.listdir(self.textfile_dir):
                os.unlink(os.path.join(self.textfile_dir, name))
            os.rmdir(self.textfile_dir)
            self.textfile_dir = None

    def set_textfile(self, text):
        path = os.path.join(self.textfile_dir, "kpath_bench.prom")
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.rename(path + ".tmp", path)


BPFTRACE_ATTACHED = "kpath-bench: bpftrace attached"


def start_bpftrace(script):
    """bpftrace running `script`, once every probe of it is attached: its BEGIN probe, which
    bpftrace runs only after attaching the rest, prints a marker (bpftrace 0.17 prints its own
    "Attaching N probes" line before it attaches). Its later output (the maps it prints on
    exit) is read and dropped, so that a full pipe never blocks its exit. Stop it with
    stop_process(p, signal.SIGINT)."""
    begin = f'BEGIN {{ printf("{BPFTRACE_ATTACHED}\\n"); }} '
    p = subprocess.Popen(["bpftrace", "-e", begin + script], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    for line in p.stdout:
        if line.strip() == BPFTRACE_ATTACHED:
            threading.Thread(target=lambda: p.stdout.read(), daemon=True).start()
            return p
    stop_process(p)
    raise RuntimeError(f"bpftrace did not attach: {script}")


def table(rows, header):
    """Rows (lists of cells) as aligned text: first column left-aligned, the rest right-aligned."""
    cells = [[str(c) for c in r] for r in [header] + rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for r in cells:
        lines.append("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])
                               for i, c in enumerate(r)).rstrip())
    return "\n".join(lines)
