"""Helpers shared by kpathd's benchmarks: a free local port, /metrics scraped and parsed, waiting
with a timeout, the probe names of the shipped configuration. Imported by the bench scripts
(they run from any directory: each puts its own directory on sys.path)."""
import os
import re
import socket
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


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
