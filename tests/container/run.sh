#!/usr/bin/env bash
# The container stage: kpathd run the way deploy/kubernetes/daemonset.yaml runs it, by a real
# container runtime from Debian 12 (podman 4.3 with runc 1.1), beside a kpathd on the host, and
# every figure the two export compared (docs/testing.md, "Container stage").
#
# The container gets what the manifest gives the pod:
#   namespaces   its own mount, cgroup (--cgroupns=private, as containerd and CRI-O on cgroup v2
#                and Kubernetes 1.25+ everywhere), network, UTS and IPC ones; the host's PID
#                namespace (hostPID: true)
#   mounts       /proc and /sys as the runtime mounts them (a procfs of the host's PID namespace,
#                sysfs read-only), the runtime's own cgroup mounts (the container's subtree) under
#                the host's /sys/fs/cgroup (hostPath, readOnly), /sys/kernel/tracing and
#                /sys/kernel/debug (hostPath, mountPropagation HostToContainer: rslave), the
#                configuration read-only at /etc/kpathd
#   security     capabilities: all dropped, then BPF, PERFMON, SYS_ADMIN, SYS_RESOURCE, SYS_PTRACE,
#                DAC_READ_SEARCH, SYSLOG (read from the manifest); no privilege escalation
#                (no_new_privs), read-only root filesystem, uid 0, the runtime's default seccomp
#                profile (containers-common's, as RuntimeDefault is containerd's), not privileged
# The container's root is the Debian 12 rootfs of the systemd stage (tests/systemd/rootfs.sh:
# mmdebstrap from Debian's archive, with kpathd's run-time libraries) under an overlay: nothing
# comes from a registry. The kpathd under test is this build's, bound in read-only (the
# same file as the host's kpathd runs, so each sees the other's BPF programs as kpathd's own, as
# it does any kpathd of its executable, and neither counts them as foreign hooks).
#
# Checks: the container's kpath_cgroups (live and dying per controller and for the v2 hierarchy),
# the churn of a test unit by process and unit, the churner's percpu allocations by caller,
# hidden kprobes, foreign hooks and the hook set's fingerprint, what each probe attached by, the
# madvise calls and bytes of a process making a known number of calls (both kpathds on the
# syscall tracepoint), and the IRQ-off detector (method, threshold, resolution) with the regions
# of a fixture thread holding IRQs off (their count; the culprit is each detector's own), all equal to the host kpathd's at the same moment (both
# scraped back to back until they agree, at most KPATH_CONTAINER_TRIES times); then a container
# without the host's /sys/fs/cgroup (the runtime's own, namespaced cgroup mounts only) must
# export no figure for the v1 hierarchies it sees only a subtree of, rather than count every live
# cgroup outside as dying. Then all of it again in a QEMU guest with cgroup v2 only, under
# single-threaded TCG: multi-threaded, the guest hung once in CI's rehearsal of 2026-12-03 in
# docs/testing.md's Known hang (one vCPU in exc_int3, the other at bpf_trace_run4+0x42, a
# bpf_stats_enabled_key site, both with interrupts off: QEMU 7.2 re-running a stale int3 of the
# kernel's text patching, which both kpathds' sampled BPF statistics, on and off every second,
# do all through the stage).
#
# Runs in a private mount namespace of its own (tracefs mounted there); leaves no container,
# cgroup, mount or BPF program behind. Exit 0 pass, 1 fail, 2 skipped (reason printed).
# Environment: BUILD_DIR (default build), KPATH_CONTAINER_TRIES (default 40),
#   KPATH_CONTAINER_V2_GUEST  1 (default): also run in a cgroup v2 QEMU guest; 0: not
#   KPATH_QEMU_TCG_THREAD  the guest's TCG threading (default single; multi risks the hang above)
#   KPATH_CONTAINER_CACHE  podman's storage (default /var/cache/kpathd-container)
# Functions below are called through traps: shellcheck cannot see it.
# shellcheck disable=SC2317
set -Eeuo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build_dir=${BUILD_DIR:-build}
[[ $build_dir == /* ]] || build_dir=$src/$build_dir
kpathd=$build_dir/daemon/kpathd

if [[ $EUID -ne 0 ]]; then
  echo "[container] skipped: not root (a rootful runtime and BPF need root)"
  exit 2
fi
for tool in podman runc curl python3 unshare nsenter; do
  if ! command -v "$tool" >/dev/null; then
    echo "[container] skipped: no $tool (scripts/install-deps.sh --test installs it)"
    exit 2
  fi
done
[[ -x $kpathd ]] || {
  echo "[container] FAIL: no $kpathd (build first)"
  exit 1
}

# Everything below in a private mount namespace: tracefs mounted for this run only, and podman's
# overlay and volume mounts gone with the namespace whatever happens.
if [[ -z ${KPATH_CONTAINER_INNER:-} ]]; then
  exec unshare --mount --propagation private env KPATH_CONTAINER_INNER=1 "$0" "$@"
fi
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
mountpoint -q /sys/kernel/debug || mount -t debugfs nodev /sys/kernel/debug

stage_name=container
# shellcheck source=tests/lib/stage.sh
source "$src/tests/lib/stage.sh"

work=$(mktemp -d /tmp/kpathd-container.XXXXXX)
# podman's state in a store of this stage's own; other podman users of the host are not touched.
# Its run-time state (which podman expects on a tmpfs emptied at boot) is on a tmpfs of this
# mount namespace, gone with it; a container left by a killed run is removed first.
store=${KPATH_CONTAINER_CACHE:-/var/cache/kpathd-container}
mkdir -p "$store"
# A QEMU guest's root is an overlay (tests/qemu), where podman's overlay driver cannot stack: the
# store then lives on a tmpfs of this run.
if [[ $(stat -f -c %T "$store") == overlayfs ]]; then
  mount -t tmpfs -o size=1g kpathd-container-store "$store"
fi
mkdir -p "$store/storage" "$store/run"
mount -t tmpfs -o size=16m kpathd-container-run "$store/run"
podman_() {
  podman --root "$store/storage" --runroot "$store/run/storage" --tmpdir "$store/run/libpod" \
    --runtime runc --cgroup-manager cgroupfs --events-backend none "$@"
}
podman_ rm -a -f -t 0 >/dev/null 2>&1 || true
host_pid=
ctr_names=()
# The churn's slice: in the memory hierarchy (v1), or in the unified one on a pure v2 host, with
# memory enabled below it (the churner then returns to the root between cgroups: v2 allows no
# process in a cgroup that delegates a controller).
churn_dir=/sys/fs/cgroup/memory/kpath-ctr-test.slice
churn_home=$churn_dir
if [[ -e /sys/fs/cgroup/cgroup.controllers ]]; then
  churn_dir=/sys/fs/cgroup/kpath-ctr-test.slice
  churn_home=/sys/fs/cgroup
fi
cleanup() {
  set +e
  for name in "${ctr_names[@]}"; do podman_ rm -f -t 2 "$name" >/dev/null 2>&1; done
  [[ -n $host_pid ]] && kill "$host_pid" 2>/dev/null && wait "$host_pid" 2>/dev/null
  [[ -d $churn_dir ]] && find "$churn_dir" -depth -type d -exec rmdir {} + 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'fail "line $LINENO: $BASH_COMMAND"' ERR

# The image: the systemd stage's cached Debian 12 rootfs (mmdebstrap from Debian's archive), as
# the container's root through an overlay (--rootfs DIR:O), so the cached tree is never written.
# (A `podman import` of it works too, but takes 20 s here and over 6 minutes in a TCG guest.)
status=0
rootfs=$("$src/tests/systemd/rootfs.sh") || status=$?
if ((status != 0)); then
  echo "[container] skipped: no Debian 12 rootfs (tests/systemd/rootfs.sh said why above)"
  exit 2
fi

# The manifest's capabilities, read from it, so a change there is what runs here.
manifest=$src/deploy/kubernetes/daemonset.yaml
caps=$(sed -n 's/^ *add: *\[\(.*\)\]/\1/p' "$manifest" | tr -d ' ')
[[ -n $caps ]] || {
  fail "no capabilities list (add: [...]) in $manifest"
  exit 1
}
log "capabilities from the manifest: $caps"

mkdir -p "$work/config"
# madvise by the syscall tracepoint: the development host has neither kprobes nor fentry, so with
# the default mechanisms both kpathds would leave it off and there would be nothing to compare;
# with only the tracepoint listed, both count by the same mechanism on every kernel.
cat >"$work/config/kpathd.yaml" <<'EOF'
listen_address: "0.0.0.0:9477"
sampling_interval: 1s
hooks:
  refresh_interval: 1s
probes:
  madvise:
    mechanisms: [tracepoint]
EOF

# podman's default rlimits (nofile and nproc 1048576) exceed what this host allows (no
# CAP_SYS_RESOURCE here): the host's nofile, and nproc no higher than conmon's own (32768 here,
# measured; the runtime cannot raise it above that).
nproc=$(ulimit -Hu)
[[ $nproc == unlimited || $nproc -gt 32768 ]] && nproc=32768
limits=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit "nproc=$nproc:$nproc")

# Starts a kpathd container named $1; further arguments are podman run options.
start_container() {
  local name=$1
  shift
  ctr_names+=("$name")
  podman_ run -d --name "$name" "${limits[@]}" \
    --pid host --network none --cgroupns private --uts private --ipc private \
    --cap-drop ALL --cap-add "$caps" --security-opt no-new-privileges --read-only --user 0 \
    -v "$work/config:/etc/kpathd:ro" \
    -v /sys/kernel/tracing:/sys/kernel/tracing:rslave \
    -v /sys/kernel/debug:/sys/kernel/debug:rslave \
    -v "$kpathd:/usr/sbin/kpathd:ro" \
    "$@" --rootfs "$rootfs:O" /usr/sbin/kpathd --config /etc/kpathd/kpathd.yaml >/dev/null
}
container_pid() { podman_ inspect -f '{{.State.Pid}}' "$1"; }
# /metrics of a container, through its network namespace (--network none: no CNI needed).
scrape_container() {
  nsenter --net="/proc/$(container_pid "$1")/ns/net" curl -sf --max-time 5 http://127.0.0.1:9477/metrics
}
host_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
scrape_host() { curl -sf --max-time 5 "http://127.0.0.1:$host_port/metrics"; }
wait_ready() { # name scrape-command
  local i
  for ((i = 0; i < 60; i++)); do
    if "${@:2}" 2>/dev/null | grep -q '^kpath_last_sample_timestamp_seconds'; then return 0; fi
    sleep 1
  done
  fail "$1 served no snapshot within 60 s"
  return 1
}

log "starting kpathd on the host (127.0.0.1:$host_port) and in the container"
"$kpathd" --config "$work/config/kpathd.yaml" --listen "127.0.0.1:$host_port" \
  >"$work/host.log" 2>&1 &
host_pid=$!
start_container kpathd-ctr -v /sys/fs/cgroup:/sys/fs/cgroup:ro,rbind
wait_ready host scrape_host
wait_ready container scrape_container kpathd-ctr
podman_ logs kpathd-ctr >"$work/container.log" 2>&1 || true
grep -E 'capabilities after start|warn|error' "$work/container.log" | sed 's/^/  container: /' | head -20

# The workload: a process named kpath-ctrchurn makes a unit's cgroup, enters it, leaves it and
# removes it, N times (what it allocated inside stays charged: the memcg stays dying).
churns=200
mkdir -p "$churn_dir"
[[ $churn_home == "$churn_dir" ]] || echo +memory >"$churn_dir/cgroup.subtree_control"
log "churning $churn_dir/kpath-ctr-churn.service $churns times"
python3 - "$churn_dir/kpath-ctr-churn.service" "$churns" "$churn_home" <<'EOF'
import os, sys
path, n, home = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open("/proc/self/comm", "w") as f:
    f.write("kpath-ctrchurn")
for _ in range(n):
    os.mkdir(path)
    with open(path + "/cgroup.procs", "w") as f:
        f.write(str(os.getpid()))
    with open(home + "/cgroup.procs", "w") as f:
        f.write(str(os.getpid()))
    os.rmdir(path)
EOF

# madvise: a process named kpath-ctrmadv calls madvise(MADV_DONTNEED) on 64 KiB N times, and no
# other madvise (counted so with bpftrace on this host's syscall tracepoint: 5000 of 5000).
madvise_calls=5000 madvise_len=65536
log "madvise(MADV_DONTNEED) of $madvise_len bytes $madvise_calls times from kpath-ctrmadv"
python3 - "$madvise_calls" "$madvise_len" <<'EOF'
import mmap, sys
with open("/proc/self/comm", "w") as f:
    f.write("kpath-ctrmadv")
n, length = int(sys.argv[1]), int(sys.argv[2])
m = mmap.mmap(-1, length)
for _ in range(n):
    m[0] = 1
    m.madvise(mmap.MADV_DONTNEED)
EOF

# IRQ-off regions: a thread named kpath-ctrirqoff holds IRQs off for 30 ms, 3 times, on the last
# CPU, three times the 10 ms threshold, so both detectors (each with its own per-CPU timer) close
# the same regions. By the tests' fixtures: the BPF one (kfuncs bpf_local_irq_save/restore,
# Linux 6.14+: this host) or, in a QEMU guest of an older kernel, tests/qemu's module (guest.sh
# loads it and names its file in KPATH_IRQOFF_MODULE_FILE).
irqoff_holds=3 irqoff_made=0
irqoff_hold=$build_dir/tests/integration/irqoff_fixture/kpath-irqoff-hold
last_cpu=$(($(nproc) - 1))
if [[ -w ${KPATH_IRQOFF_MODULE_FILE:-} ]]; then
  log "IRQ-off: $irqoff_holds regions of 30 ms on CPU $last_cpu by $KPATH_IRQOFF_MODULE_FILE"
  python3 - "$KPATH_IRQOFF_MODULE_FILE" "$irqoff_holds" "$last_cpu" <<'EOF'
import os, sys, time
path, n, cpu = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.sched_setaffinity(0, {cpu})
with open("/proc/self/comm", "w") as f:
    f.write("kpath-ctrirqoff")
for _ in range(n):
    with open(path, "w") as f:
        f.write("30000")
    time.sleep(0.2)
EOF
  irqoff_made=1
elif [[ -x $irqoff_hold ]]; then
  status=0
  "$irqoff_hold" --hold-ms 30 --count "$irqoff_holds" --gap-ms 200 --cpu "$last_cpu" \
    --name kpath-ctrirqoff >"$work/irqoff.out" 2>&1 || status=$?
  if ((status == 0)); then
    log "IRQ-off: $irqoff_holds regions on CPU $last_cpu by the BPF fixture: $(grep -c held "$work/irqoff.out") held"
    irqoff_made=1
  else
    log "IRQ-off: no region made (kpath-irqoff-hold exit $status: $(tail -1 "$work/irqoff.out")); the detectors compared only"
  fi
else
  log "IRQ-off: no fixture ($irqoff_hold not built, no module); the detectors compared only"
fi

# Compares the two scrapes; prints what differs. Families and the series compared:
compare() { # host-metrics-file container-metrics-file
  python3 - "$1" "$2" "$churns" "$madvise_calls" "$madvise_len" "$irqoff_made" <<'EOF'
import re, sys
def parse(path):
    series = {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        m = re.match(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)', line)
        if m:
            series[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return series
host, ctr, churns = parse(sys.argv[1]), parse(sys.argv[2]), int(sys.argv[3])
madvise_calls, madvise_len, irqoff_made = map(int, sys.argv[4:7])
# Exact counts only. Not compared: regions' lengths (kpath_irqoff_seconds, _max_seconds: each
# detector's estimate, +-period/2 of its own timer) and regions of other processes (late ticks of
# a shared or emulated CPU, which two timers need not both see).
wanted = [
    ("kpath_cgroups", lambda l: True),
    ("kpath_cgroup_mkdir_total", lambda l: 'comm="kpath-ctrchurn"' in l),
    ("kpath_cgroup_rmdir_total", lambda l: 'comm="kpath-ctrchurn"' in l),
    ("kpath_percpu_alloc_bytes_total", lambda l: 'comm="kpath-ctrchurn"' in l),
    ("kpath_percpu_allocs_total", lambda l: 'comm="kpath-ctrchurn"' in l),
    ("kpath_hidden_kprobes", lambda l: True),
    ("kpath_hidden_kprobes_disabled", lambda l: True),
    ("kpath_foreign_hooks", lambda l: True),
    ("kpath_foreign_hook_set_info", lambda l: True),
    ("kpath_probe_attached", lambda l: True),
    ("kpath_madvise_calls_total", lambda l: 'comm="kpath-ctrmadv"' in l),
    ("kpath_madvise_bytes_total", lambda l: 'comm="kpath-ctrmadv"' in l),
    ("kpath_irqoff_detector_info", lambda l: True),
    ("kpath_irqoff_threshold_seconds", lambda l: True),
    ("kpath_irqoff_resolution_seconds", lambda l: True),
]
# The fixture's regions are compared by count, summed over culprit: the culprit is each detector's
# own estimate, as the length is, from where its own late tick landed. On a VM that delivers a
# pending timer at its next exit, one kpathd's tick can land in the holder's next page fault while
# the other's lands in user code (CI's rehearsal of 4bbbd72: host culprit
# __alloc_frozen_pages_noprof 1 and unknown 2, container unknown 3).
folded = {"kpath_irqoff_regions_total": re.compile(r',?culprit="[^"]*"')}
if irqoff_made:
    wanted.append(("kpath_irqoff_regions_total", lambda l: 'comm="kpath-ctrirqoff"' in l))
def select(series, family, keep):
    out = {}
    for k, v in series.items():
        if k[0] != family or not keep(k[1]):
            continue
        if family in folded:
            k = (family, folded[family].sub("", k[1]).replace("{,", "{"))
        out[k] = out.get(k, 0.0) + v
    return out
bad = 0
for family, keep in wanted:
    h = select(host, family, keep)
    c = select(ctr, family, keep)
    if not h and family not in ("kpath_hidden_kprobes", "kpath_hidden_kprobes_disabled"):
        print("  host exports no %s series compared" % family)
        bad += 1
    for k in sorted(set(h) | set(c)):
        if h.get(k) != c.get(k):
            print("  %s%s: host %s, container %s" % (k[0], k[1], h.get(k), c.get(k)))
            bad += 1
for family in ("kpath_cgroup_mkdir_total", "kpath_cgroup_rmdir_total"):
    key = (family, '{comm="kpath-ctrchurn",unit="kpath-ctr-churn.service"}')
    if host.get(key) != churns:
        print("  %s%s: host %s, not the %d made" % (key[0], key[1], host.get(key), churns))
        bad += 1
for family, want in (("kpath_madvise_calls_total", madvise_calls),
                     ("kpath_madvise_bytes_total", madvise_calls * madvise_len)):
    key = (family, '{comm="kpath-ctrmadv",advice="dontneed"}')
    if host.get(key) != want:
        print("  %s%s: host %s, not the %d made" % (key[0], key[1], host.get(key), want))
        bad += 1
sys.exit(1 if bad else 0)
EOF
}

tries=${KPATH_CONTAINER_TRIES:-40}
ok=0
for ((i = 1; i <= tries; i++)); do
  # Back to back; the snapshots are at most a sampling interval (1 s) apart, and others' churn
  # or the kernel freeing dying cgroups can fall between them: the next try then agrees.
  scrape_host >"$work/host.metrics" && scrape_container kpathd-ctr >"$work/ctr.metrics" &&
    compare "$work/host.metrics" "$work/ctr.metrics" >"$work/diff" && {
    ok=1
    break
  }
  sleep 0.7
done
if ((ok)); then
  pass "every compared figure equal to the host kpathd's (try $i of $tries):"
  grep -E '^kpath_cgroups\{controller="(memory|pids|cgroup2)"|^kpath_cgroup_mkdir_total\{comm="kpath-ctrchurn"|^kpath_percpu_alloc_bytes_total\{comm="kpath-ctrchurn"|^kpath_hidden_kprobes |^kpath_foreign_hooks\{.*\} [1-9]|^kpath_foreign_hook_set_info|^kpath_madvise_(calls|bytes)_total\{comm="kpath-ctrmadv"|^kpath_irqoff_regions_total\{comm="kpath-ctrirqoff"|^kpath_irqoff_detector_info|^kpath_probe_attached\{probe="(madvise|irqoff)"' \
    "$work/ctr.metrics" | sed 's/^/  /'
else
  fail "the container's figures differ from the host's after $tries tries; last differences:"
  cat "$work/diff"
fi

# Without the host's /sys/fs/cgroup the container sees only its own subtree of each v1
# hierarchy: no figure for them, and a warning saying why, rather than every live cgroup outside
# counted as dying.
start_container kpathd-ctr-own-cgroup
wait_ready container-own-cgroup scrape_container kpathd-ctr-own-cgroup
scrape_container kpathd-ctr-own-cgroup >"$work/own.metrics"
podman_ logs kpathd-ctr-own-cgroup >"$work/own.log" 2>&1 || true
# (v1: the memory hierarchy's figures; pure v2: the hierarchy's own and memory's.)
subtree='(memory|cgroup v2) hierarchy is mounted only as a subtree'
if grep -E '^kpath_cgroups\{controller="(memory|cgroup2)"' "$work/own.metrics" >"$work/own.wrong"; then
  fail "with its own cgroup namespace's mounts only, the container still reports cgroups:"
  sed 's/^/  /' "$work/own.wrong"
elif ! grep -q -E "$subtree" "$work/own.log"; then
  fail "no warning about a hierarchy seen only as a subtree; the log:"
  sed 's/^/  /' "$work/own.log" | head -30
else
  pass "with only its own cgroup namespace's mounts: no memory or v2 figures, and the warning:"
  grep -E "$subtree" "$work/own.log" | sed 's/^/  /'
fi

if ((failures > 0)); then
  log "FAIL: $failures check(s) failed; host log:"
  tail -20 "$work/host.log" | sed 's/^/  /'
fi

# The same on a pure cgroup v2 host: this script in a QEMU guest of Debian 12's 6.1 kernel
# booted with KPATH_QEMU_CGROUP=unified (tests/qemu/run.sh; the guest runs on this host's root,
# so the same podman, runc, rootfs and build).
if [[ ${KPATH_CONTAINER_V2_GUEST:-1} == 1 ]]; then
  log "cgroup v2: this stage in a QEMU guest (tests/qemu/run.sh cloud-amd64, cgroup v2 only)"
  guest_status=0
  # Single-threaded TCG: one host thread runs both vCPUs in turn, so no vCPU translates code
  # while the other patches it (the hang above). KPATH_QEMU_TEST_TIMEOUT bounds the run in the
  # guest (about 1 to 3 minutes; a stall is declared 60 s after it).
  BUILD_DIR="$build_dir" KPATH_QEMU_CGROUP=unified KPATH_QEMU_TEST_TIMEOUT=420 \
    KPATH_QEMU_TCG_THREAD="${KPATH_QEMU_TCG_THREAD:-single}" \
    KPATH_QEMU_ARCHS=x86_64 KPATH_QEMU_VERBOSE=1 \
    KPATH_QEMU_COMMAND="KPATH_CONTAINER_V2_GUEST=0 BUILD_DIR=$(printf %q "$build_dir") $(printf %q "$src/tests/container/run.sh")" \
    "$src/tests/qemu/run.sh" cloud-amd64 2>&1 | tr -d '\r' >"$work/guest.log" || guest_status=$?
  grep -a -E '^\[container|^  ' "$work/guest.log" | grep -a -v -E 'KPATH-|^\s*$' | sed 's/^/  v2 guest: /'
  if grep -a -q -E '^\[container +[0-9.]+s\] PASS' "$work/guest.log"; then
    pass "cgroup v2 guest: PASS"
  elif grep -a -q 'SKIP: ' "$work/guest.log" && ! grep -a -q '^\[container' "$work/guest.log"; then
    log "cgroup v2 guest skipped: $(grep -a -m1 'SKIP: ' "$work/guest.log")"
  else
    fail "cgroup v2 guest did not pass (tests/qemu/run.sh exit $guest_status); its last lines:"
    grep -a -v '^\[ ' "$work/guest.log" | tail -20 | sed 's/^/  /'
  fi
fi

((failures == 0)) || exit 1
log "PASS"
