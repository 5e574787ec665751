#!/usr/bin/env bash
# Seed 000 end to end, paging for real. A QEMU guest boots Debian 12's 6.1 cloud kernel with
# systemd as PID 1 on a copy of the cached Debian 12 rootfs (tests/systemd/rootfs.sh), shared
# read-write over virtiofs; cgroup v2 with the memory controller. kpathd is installed from the
# real .deb (dpkg -i in the copy) and started at boot by the guest's systemd through the shipped
# unit. Then a systemd timer fires every second (OnUnitActiveSec=1s, AccuracySec=1ms) and starts
# a oneshot service (StartLimitIntervalSec=0) that writes a new 64 KiB file each run: the page
# cache charged to each run's memory cgroup keeps it dying after the service is gone, as in
# seed 000. On the host, a real Prometheus scrapes the guest's kpathd through QEMU's user-net
# port forward on 127.0.0.1 and evaluates a test copy of deploy/prometheus/kpathd-rules.yml, and
# a real Alertmanager receives what fires. Both run on free 127.0.0.1 ports with temporary
# storage; Alertmanager binds nothing else (--cluster.listen-address=), its only receiver has no
# integration (the alerts are read from its /api/v2/alerts), and the guest's network is
# restricted (restrict=on): 127.0.0.1 is the only address anything here talks to.
#
# The test copy of the rules: every `for:` duration and every range window `[...]` of the
# shipped file divided by the scale (ci: 30, so 30m becomes 60s, 10m 20s, 5m 10s); nothing else
# changes, and the script checks that (both files with their durations blanked are identical),
# so the expressions and thresholds are the shipped ones. Prometheus scrapes and evaluates every
# 15 s / scale (at least 1 s).
#
# The guest has 2 vCPUs and 40 possible CPUs (-smp 2,maxcpus=40), the size of seed 000's host:
# a memory cgroup's per-CPU memory is allocated for every possible CPU, so the Percpu growth per
# service start is the one a 40-CPU host sees (with 2 possible CPUs the same churn grows Percpu
# about 20 times slower, under KpathPercpuGrowing's absolute 20 KiB/s).
#
# It passes when Alertmanager has received KpathPercpuGrowing and KpathCgroupChurnHigh with
# unit="seed000-tick.service" (the full variant also waits for KpathDyingCgroupsPilingUp), and
# `kpathd diagnose` run in the guest names seed000-tick.service, mem_cgroup_css_alloc and the
# seed's fixes (a long-running service instead of a second-level timer, merged timers,
# accounting off). It prints the alerts Alertmanager received with their labels, the diagnose
# output, `systemctl status kpathd` from the guest and the timings.
#
# Usage: tests/systemd/seed000-guest.sh DEB_PATH
# Exit: 0 pass, 1 fail, 2 skip (cannot run here: not root, no QEMU/virtiofsd/Prometheus/
# Alertmanager, the kernel cannot be fetched or the rootfs cannot be built; the reason is printed).
# Environment:
#   KPATH_SYSTEMD_SEED000   ci (default): windows scaled by 30, about 2.5 minutes under TCG (3 on
#                           a loaded host), at most KPATH_SEED000_TIMEOUT (default 345 s);
#                           full: the shipped rules unchanged (scale 1), scraped every 15 s, and
#                           KpathDyingCgroupsPilingUp required too: it needs over 1000 dying memory
#                           cgroups (about 18 minutes of churn here) and then `for: 30m`; about
#                           55 minutes (timeout 6000 s)
#   KPATH_SEED000_SCALE     another divisor for the windows (a whole number)
#   KPATH_SEED000_TIMEOUT   seconds for the whole test, boot to verdict. A guest that stalls (the
#                           QEMU 7.2 TCG hang on text-patched code, docs/testing.md "Known hang") is dumped and
#                           booted once more if at least half of this is left.
#   KPATH_SEED000_POSSIBLE_CPUS  the guest's possible CPUs (default 40, seed 000's host; 2 vCPUs
#                           run whatever the number)
#   KPATH_QEMU_TCG_THREAD   single (default) or multi: TCG's threading (multi risks the Known hang)
#   KPATH_SEED000_KEEP      a directory to copy the console, journal and server logs to
#   KPATH_QEMU_CACHE        kernel packages (default /var/cache/kpathd-qemu)
#   KPATH_SYSTEMD_CACHE     the rootfs (default /var/cache/kpathd-systemd)
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
log() { echo "seed000-guest: $*"; }
skip() {
  log "SKIP: $*"
  exit 2
}
fail() {
  log "FAIL: $*"
  exit 1
}

deb=${1:-}
[[ -n "$deb" ]] || fail "usage: $0 DEB_PATH (the kpathd .deb: tests/systemd/package.sh or cpack -G DEB)"
[[ -f "$deb" ]] || fail "$deb: no such package"
deb=$(realpath "$deb")
variant=${KPATH_SYSTEMD_SEED000:-ci}
case $variant in
  ci) scale=${KPATH_SEED000_SCALE:-30} timeout=${KPATH_SEED000_TIMEOUT:-345} ;;
  full) scale=${KPATH_SEED000_SCALE:-1} timeout=${KPATH_SEED000_TIMEOUT:-6000} ;;
  *) fail "KPATH_SYSTEMD_SEED000 is ci or full, not '$variant'" ;;
esac
[[ $scale =~ ^[1-9][0-9]*$ ]] || fail "KPATH_SEED000_SCALE is a whole number >= 1, not '$scale'"
interval=$((15 / scale))
((interval >= 1)) || interval=1
unit=seed000-tick.service
possible_cpus=${KPATH_SEED000_POSSIBLE_CPUS:-40}
[[ $possible_cpus =~ ^[1-9][0-9]*$ ]] && ((possible_cpus >= 2)) ||
  fail "KPATH_SEED000_POSSIBLE_CPUS is a whole number >= 2, not '$possible_cpus'"

[[ $(uname -m) == x86_64 ]] || skip "the guest is x86_64 and runs on x86_64 hosts only"
((EUID == 0)) || skip "needs root (virtiofsd, dpkg -i into the rootfs copy)"
qemu=$(command -v qemu-system-x86_64 || true)
virtiofsd=/usr/lib/qemu/virtiofsd
[[ -n "$qemu" && -x "$virtiofsd" ]] || skip "qemu-system-x86 is not installed (scripts/install-deps.sh --test)"
"$qemu" --version >/dev/null 2>&1 || skip "$qemu does not run here"
busybox=/bin/busybox
[[ -x $busybox ]] && ! ldd "$busybox" >/dev/null 2>&1 ||
  skip "busybox-static is not installed (scripts/install-deps.sh --test)"
for tool in cpio curl python3 prometheus prometheus-alertmanager promtool; do
  command -v "$tool" >/dev/null || skip "$tool is not installed (scripts/install-deps.sh --test)"
done

cache=${KPATH_QEMU_CACHE:-/var/cache/kpathd-qemu}
mkdir -p "$cache/debs" "$cache/kernels"
work=$(mktemp -d /tmp/kpath-seed000.XXXXXX)
prom_pid="" am_pid="" console="$work/console.log"
# Single-threaded TCG (lib.sh's qemu_tcg_thread), as every x86 guest of tests/qemu/run.sh: multi-
# threaded, this guest hung in CI on 2026-12-03 (stop 32) in docs/testing.md's Known hang, vCPU 1
# at bpf_trace_run4+0x42 (the bpf_stats_enabled_key site kpathd's sampled BPF statistics flip
# every refresh) with interrupts off, vCPU 0 with interrupts off in
# native_queued_spin_lock_slowpath+0x30 waiting for the lock vCPU 1 held.
qemu_tcg_thread=${KPATH_QEMU_TCG_THREAD:-single}
# shellcheck source=tests/qemu/lib.sh
source "$repo/tests/qemu/lib.sh"
stop_servers() {
  local pid
  for pid in $prom_pid $am_pid; do kill "$pid" 2>/dev/null || true; done
  for pid in $prom_pid $am_pid; do wait "$pid" 2>/dev/null || true; done
  prom_pid="" am_pid=""
}
cleanup() {
  stop_guest
  stop_servers
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

started_all=$SECONDS
deadline=$((SECONDS + timeout))
rootfs_status=0
rootfs=$("$repo/tests/systemd/rootfs.sh") || rootfs_status=$?
((rootfs_status == 0)) || skip "the Debian 12 rootfs could not be built (tests/systemd/rootfs.sh exit $rootfs_status)"
kdir=$(fetch_kernel cloud-amd64) ||
  skip "linux-image-cloud-amd64: the kernel package could not be fetched (apt-get download failed)"
kernel=$(ls "$kdir"/boot/vmlinuz-* | head -1)
kver=${kernel##*/vmlinuz-}

# --- The rules: the shipped file, durations scaled, nothing else. ---------------------------
shipped="$repo/deploy/prometheus/kpathd-rules.yml"
rules="$work/kpathd-rules.yml"
mapping=$(python3 - "$shipped" "$rules" "$scale" <<'PYEOF'
import re, sys
src, dst, scale = sys.argv[1], sys.argv[2], int(sys.argv[3])
units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
changed = {}
def scaled(m):
    old = m.group("d")
    seconds = int(old[:-1]) * units[old[-1]]
    new = f"{max(1, round(seconds / scale))}s" if scale > 1 else old
    changed[old] = new
    return m.group("pre") + new + m.group("post")
text = open(src).read()
for_re = r"(?m)^(?P<pre>\s*for: )(?P<d>\d+[smhd])(?P<post>\s*)$"
range_re = r"(?P<pre>\[)(?P<d>\d+[smhd])(?P<post>\])"
out = re.sub(range_re, scaled, re.sub(for_re, scaled, text))
# Only durations moved: with every duration blanked, the two files are the same.
blank = lambda t: re.sub(range_re, "[D]", re.sub(for_re, r"\g<pre>D", t))
if blank(out) != blank(text):
    sys.exit("something other than a duration changed")
open(dst, "w").write(
    "# TEST COPY of deploy/prometheus/kpathd-rules.yml made by tests/systemd/seed000-guest.sh:\n"
    f"# every `for:` and range window divided by {scale}; expressions and thresholds unchanged.\n" + out)
print(", ".join(f"{k} -> {v}" for k, v in sorted(changed.items(), key=lambda kv: -int(kv[1][:-1])))
      if scale > 1 else "unchanged (scale 1)")
PYEOF
) || fail "could not derive the test rules"
log "test rules: durations of $shipped divided by $scale: $mapping"
promtool check rules "$rules" >"$work/promtool.log" 2>&1 || {
  cat "$work/promtool.log"
  fail "promtool rejects the test copy of the rules"
}

# --- The guest's files, written into each fresh copy of the rootfs. ---------------------------
guest_files() {
  local root=$1
  mkdir -p "$root/usr/local/sbin" "$root/etc/systemd/system/sockets.target.wants" "$root/var/tmp/seed000"
  cat >"$root/usr/local/sbin/seed000-tick" <<'EOF'
#!/bin/sh
# seed 000's job: short-lived, and it leaves page cache charged to its own memory cgroup, which
# therefore stays (dying) after the service is gone.
head -c 65536 /dev/zero >"/var/tmp/seed000/$(date +%s.%N)"
EOF
  cat >"$root/etc/systemd/system/seed000-tick.service" <<'EOF'
[Unit]
Description=seed 000: a short-lived job started by a second-level timer
StartLimitIntervalSec=0

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/seed000-tick
EOF
  cat >"$root/etc/systemd/system/seed000-tick.timer" <<'EOF'
[Unit]
Description=seed 000: a timer firing every second

[Timer]
OnActiveSec=1s
OnUnitActiveSec=1s
AccuracySec=1ms
EOF
  # The host's commands: one line per connection, answered on the connection.
  cat >"$root/usr/local/sbin/seed000-control" <<'EOF'
#!/bin/sh
exec 2>&1
read -r cmd arg || exit 0
case $cmd in
  ready) systemctl is-active kpathd ;;
  churn) systemctl start seed000-tick.timer && systemctl is-active seed000-tick.timer ;;
  diagnose) kpathd diagnose --duration "${arg}s"; echo "diagnose exit status $?" ;;
  status) systemctl status kpathd --no-pager -l; echo "--- systemctl show kpathd"
    systemctl show kpathd -p ActiveState,SubState,Result,NRestarts,ExecMainPID,StatusText ;;
  facts) echo "possible CPUs $(cat /sys/devices/system/cpu/possible), online $(cat /sys/devices/system/cpu/online)"
    grep -E '^(nr_descendants|nr_dying_descendants)' /sys/fs/cgroup/cgroup.stat
    grep -E '^memory' /proc/cgroups; grep -E '^Percpu' /proc/meminfo
    echo "timer: $(systemctl show seed000-tick.timer -p ActiveState --value), runs: $(ls /var/tmp/seed000 | wc -l)" ;;
  journal) journalctl -b --no-pager -o short-monotonic ;;
  *) echo "unknown command $cmd" ;;
esac
EOF
  chmod 0755 "$root/usr/local/sbin/seed000-tick" "$root/usr/local/sbin/seed000-control"
  cat >"$root/etc/systemd/system/seed000-control.socket" <<'EOF'
[Unit]
Description=seed 000 test: commands from the host

[Socket]
ListenStream=9478
Accept=yes

[Install]
WantedBy=sockets.target
EOF
  cat >"$root/etc/systemd/system/seed000-control@.service" <<'EOF'
[Unit]
Description=seed 000 test: one command from the host

[Service]
ExecStart=/usr/local/sbin/seed000-control
StandardInput=socket
StandardOutput=socket
EOF
  ln -sf /etc/systemd/system/seed000-control.socket "$root/etc/systemd/system/sockets.target.wants/"
}

initramfs_tree "$work/initramfs" "$kdir" "$kver" virtio_pci virtiofs virtio_net
echo "KPATH_GUEST_ROOT=systemd" >"$work/initramfs/kpath-guest.env"
initramfs_pack "$work/initramfs" "$work/initrd.gz"

free_ports() {
  python3 -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}

# One command to the guest's control socket; its answer on stdout.
guest() {
  local seconds=$1
  shift
  timeout "$seconds" bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && echo "$2" >&3 && cat <&3' \
    guest "$control_port" "$*"
}

# Waits until `url` answers, `seconds` at most; 0 when it does.
wait_http() {
  local url=$1 deadline=$((SECONDS + $2))
  while ((SECONDS < deadline)); do
    curl -sf --max-time 5 -o /dev/null "$url" && return 0
    sleep 1
  done
  return 1
}

# Alertmanager's alerts, one line each: name, then the labels (without alertname).
alert_lines() {
  curl -sf --max-time 5 "http://127.0.0.1:$am_port/api/v2/alerts" | python3 -c '
import json, sys
for a in json.load(sys.stdin):
    labels = dict(a["labels"]); name = labels.pop("alertname")
    print(name, a["status"]["state"], " ".join(f"{k}={v}" for k, v in sorted(labels.items())),
          "startsAt=" + a["startsAt"])'
}

# A PromQL query's result, one "labels value" line per series.
prom_query() {
  curl -sf --max-time 10 "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" |
    python3 -c '
import json, sys
for r in json.load(sys.stdin)["data"]["result"]:
    m = r["metric"]
    print(" ".join(f"{k}={v}" for k, v in sorted(m.items()) if k not in ("instance", "job")) or "-",
          r["value"][1])'
}

# Whether the alerts the test waits for are there, for this guest's kpathd (instance).
have_alerts() {
  local lines instance=" instance=127.0.0.1:$kpathd_port "
  lines=$(grep -F -- "$instance" <<<"$1") || return 1
  grep -q '^KpathPercpuGrowing ' <<<"$lines" || return 1
  grep -E -q "^KpathCgroupChurnHigh .* unit=$unit( |$)" <<<"$lines" || return 1
  [[ $variant != full ]] || grep -q '^KpathDyingCgroupsPilingUp ' <<<"$lines"
}

# Prints what a stuck guest's vCPUs execute and what its kernel said.
report_stall() {
  dump_stalled_guest "$(ls "$kdir"/boot/System.map-* | head -1)" "$work/stalled-vcpus.txt"
  grep -E '^(vCPU|\(System.map)' "$work/stalled-vcpus.txt" | sed 's/^/  | /' || true
  grep -a -E 'BUG: soft lockup|rcu: INFO|self-detected stall|hung_task|Oops|BUG:' "$console" |
    tr -d '\r' | awk '!seen[$0]++' | head -5 | sed 's/^/  | kernel: /' || true
}

keep_logs() {
  [[ -n "${KPATH_SEED000_KEEP:-}" ]] || return 0
  mkdir -p "$KPATH_SEED000_KEEP"
  cp "$work"/*.log "$KPATH_SEED000_KEEP/" 2>/dev/null || true
  cp "$rules" "$KPATH_SEED000_KEEP/" 2>/dev/null || true
  # What the alerts saw, every 5 s of the run (for a slow or missing alert).
  [[ -n "$prom_pid" ]] || return 0
  local expr
  for expr in kpath_percpu_bytes "deriv(kpath_percpu_bytes[$((1800 / scale))s])" \
    "rate(kpath_cgroup_mkdir_total[$((600 / scale))s])" 'kpath_cgroups{controller="memory"}' \
    'ALERTS{alertstate="firing"}'; do
    echo "# $expr"
    curl -sf --max-time 10 "http://127.0.0.1:$prom_port/api/v1/query_range" --data-urlencode "query=$expr" \
      --data-urlencode "start=$(($(date +%s) - 900))" --data-urlencode "end=$(date +%s)" \
      --data-urlencode step=5 | python3 -c '
import json, sys, time
for r in json.load(sys.stdin)["data"]["result"]:
    print(" ".join(f"{k}={v}" for k, v in sorted(r["metric"].items()) if k not in ("instance", "job")))
    for t, v in r["values"]:
        print("  " + time.strftime("%H:%M:%S", time.gmtime(t)), v)' || true
  done >"$KPATH_SEED000_KEEP/series.txt"
}

# One attempt, boot to verdict. 0 pass, 1 fail, 3 the guest stalled.
attempt() {
  local t0=$SECONDS root="$work/root" sock="$work/virtiofs.sock"
  rm -rf "$root"
  cp -a "$rootfs" "$root"
  rm -f "$root/.complete"
  local t_copy=$((SECONDS - t0))
  cp "$deb" "$root/root/kpathd.deb"
  chroot "$root" dpkg -i /root/kpathd.deb >"$work/dpkg.log" 2>&1 || {
    cat "$work/dpkg.log"
    log "FAIL: dpkg -i of $deb in the rootfs copy failed"
    return 1
  }
  [[ -L "$root/etc/systemd/system/multi-user.target.wants/kpathd.service" ]] || {
    log "FAIL: the package's postinst did not enable kpathd.service"
    return 1
  }
  guest_files "$root"

  read -r kpathd_port control_port prom_port am_port <<<"$(free_ports 4)"
  rm -f "$sock"
  "$virtiofsd" --socket-path="$sock" -o source="$root" -o cache=always -o sandbox=chroot \
    -o log_level=err >"$work/virtiofsd.log" 2>&1 &
  virtiofsd_pid=$!
  wait_virtiofsd "$sock" || return 1
  local t_boot=$SECONDS
  qemu_smp="2,maxcpus=$possible_cpus"
  start_qemu "${KPATH_QEMU_ACCEL:-tcg}" "$kernel" "$work/initrd.gz" "$console" "$sock" rootfs \
    "console=ttyS0 loglevel=4 panic=-1 mitigations=off nokaslr rw systemd.unified_cgroup_hierarchy=1" \
    -netdev "user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:$kpathd_port-:9477,hostfwd=tcp:127.0.0.1:$control_port-:9478" \
    -device virtio-net-pci,netdev=n0
  log "booting $kver under $qemu_tcg_thread-threaded TCG (2 vCPUs, $possible_cpus possible), the rootfs copy took ${t_copy} s"

  # Up when systemd has kpathd.service active (READY=1: probes attached, first collection
  # published) and /metrics answers; stuck when the console has said nothing new for 60 s before
  # (a normal boot prints systemd's progress every few seconds, kpathd's start takes about 10).
  local size last=-1 changed=$SECONDS metrics="http://127.0.0.1:$kpathd_port/metrics"
  until [[ $(guest 10 ready 2>/dev/null) == active ]] && curl -sf --max-time 5 -o /dev/null "$metrics"; do
    kill -0 "$qemu_pid" 2>/dev/null || {
      log "FAIL: QEMU exited during boot: $(tail -3 "$work/qemu.log")"
      tail -n 30 "$console" | tr -d '\r' | sed 's/^/  | /'
      return 1
    }
    size=$(stat -c %s "$console")
    ((size != last)) && last=$size changed=$SECONDS
    if ((SECONDS - changed > 60 || SECONDS >= deadline)); then
      log "the guest did not bring kpathd up within $((SECONDS - t_boot)) s (console quiet for $((SECONDS - changed)) s):"
      tail -n 15 "$console" | tr -d '\r' | sed 's/^/  | /'
      # A guest that still answers is not stalled: kpathd's unit says why it is not up.
      local unit
      if unit=$(guest 20 status 2>/dev/null) && [[ -n $unit ]]; then
        log "the guest answers; kpathd's unit there:"
        tail -n 40 <<<"$unit" | sed 's/^/  | /'
      fi
      report_stall
      return 3
    fi
    sleep 1
  done
  local t_up=$((SECONDS - t_boot))
  log "kpathd.service active in the guest, /metrics on 127.0.0.1:$kpathd_port, ${t_up} s after QEMU started"

  # Alertmanager, then Prometheus, on the host; new storage for each attempt (Prometheus would
  # restore the alerts of a stalled guest's attempt from its TSDB).
  rm -rf "$work/am" "$work/prometheus"
  cat >"$work/alertmanager.yml" <<'EOF'
# Test receiver: no integration, nothing is sent anywhere; the test reads /api/v2/alerts.
route:
  receiver: test
  group_wait: 1s
receivers:
  - name: test
EOF
  prometheus-alertmanager --config.file="$work/alertmanager.yml" --storage.path="$work/am" \
    --web.listen-address="127.0.0.1:$am_port" --cluster.listen-address= --log.level=warn \
    >"$work/alertmanager.log" 2>&1 &
  am_pid=$!
  cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: ${interval}s
  scrape_timeout: ${interval}s
  evaluation_interval: ${interval}s
rule_files: ['$rules']
alerting:
  alertmanagers:
    - static_configs:
        - targets: ['127.0.0.1:$am_port']
scrape_configs:
  - job_name: kpathd
    static_configs:
      - targets: ['127.0.0.1:$kpathd_port']
EOF
  prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/prometheus" \
    --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$work/prometheus.log" 2>&1 &
  prom_pid=$!
  wait_http "http://127.0.0.1:$am_port/-/ready" 60 || {
    cat "$work/alertmanager.log"
    log "FAIL: Alertmanager did not become ready"
    return 1
  }
  wait_http "http://127.0.0.1:$prom_port/-/ready" 60 || {
    cat "$work/prometheus.log"
    log "FAIL: Prometheus did not become ready"
    return 1
  }

  # The churn.
  local answer
  answer=$(guest 60 churn) || true
  [[ $answer == active ]] || {
    log "FAIL: the guest did not start seed000-tick.timer: ${answer:-no answer}"
    return 1
  }
  local t_churn=$SECONDS
  log "seed000-tick.timer started in the guest; Prometheus (127.0.0.1:$prom_port) scrapes every ${interval} s"
  # diagnose runs after the alerts: its own per-CPU BPF maps (megabytes with 40 possible CPUs),
  # allocated and freed while Prometheus watches, would move Percpu under the alert.
  local diag_secs=30
  [[ $variant == full ]] && diag_secs=120

  # Wait for the alerts; a guest whose kpathd stops answering for 60 s is stuck.
  local lines="" ok=0 down_since=""
  while ((SECONDS < deadline - diag_secs - 45)); do
    lines=$(alert_lines || true)
    if have_alerts "$lines"; then
      ok=1
      break
    fi
    if curl -sf --max-time 5 -o /dev/null "$metrics"; then
      down_since=""
    else
      down_since=${down_since:-$SECONDS}
      if ((SECONDS - down_since > 60)); then
        log "kpathd in the guest stopped answering for 60 s"
        report_stall
        return 3
      fi
    fi
    sleep 2
  done
  local t_alerts=$((SECONDS - t_churn))
  local t_diag=$SECONDS
  guest $((diag_secs + 45)) diagnose "$diag_secs" >"$work/diagnose.txt" 2>&1 || true
  t_diag=$((SECONDS - t_diag))
  if ! grep -q "diagnose exit status" "$work/diagnose.txt" &&
    ! curl -sf --max-time 10 -o /dev/null "$metrics"; then
    log "kpathd diagnose did not finish within $((diag_secs + 45)) s and kpathd stopped answering"
    report_stall
    return 3
  fi
  local facts status figures callers
  callers=$(prom_query "kpath_percpu_alloc_bytes_total{comm=\"systemd\",caller=\"mem_cgroup_css_alloc\"} > 0" || true)
  figures=$(
    echo "kpath_percpu_bytes: $(prom_query kpath_percpu_bytes)"
    echo "deriv(kpath_percpu_bytes[$((1800 / scale))s]): $(prom_query "deriv(kpath_percpu_bytes[$((1800 / scale))s])")"
    echo "rate(kpath_cgroup_mkdir_total{unit=\"$unit\"}[$((600 / scale))s]): $(prom_query "rate(kpath_cgroup_mkdir_total{unit=\"$unit\"}[$((600 / scale))s])")"
    prom_query 'kpath_cgroups{controller="memory"}' | sed 's/^/kpath_cgroups /'
    prom_query 'topk(3, kpath_percpu_outstanding_bytes)' | sed 's/^/kpath_percpu_outstanding_bytes /'
  )
  facts=$(guest 30 facts || true)
  status=$(guest 30 status || true)
  guest 60 journal >"$work/journal.log" 2>/dev/null || true
  local t_end=$SECONDS

  echo
  echo "=== Alertmanager /api/v2/alerts (name state labels), $t_alerts s after the timer started"
  if [[ -n "$lines" ]]; then sed 's/^/  /' <<<"$lines"; else echo "  (none)"; fi
  echo "=== kpathd diagnose --duration ${diag_secs}s in the guest"
  sed 's/^/  /' "$work/diagnose.txt"
  echo "=== systemctl status kpathd in the guest"
  sed 's/^/  /' <<<"$status"
  echo "=== Prometheus at the end"
  sed 's/^/  /' <<<"$figures"
  echo "=== guest facts at the end"
  sed 's/^/  /' <<<"$facts"
  echo "=== timings: rootfs copy ${t_copy} s; QEMU start to kpathd.service active ${t_up} s; timer start to alerts ${t_alerts} s; diagnose ${t_diag} s; whole attempt $((t_end - t0)) s"
  echo

  local failed=0
  if ((!ok)); then
    log "FAIL: Alertmanager did not receive KpathPercpuGrowing and KpathCgroupChurnHigh{unit=\"$unit\"}$([[ $variant == full ]] && echo ' and KpathDyingCgroupsPilingUp') within $t_alerts s"
    failed=1
  fi
  local want
  for want in "$unit" mem_cgroup_css_alloc "one long-running service" \
    "Merge several second-level timers" "CPUAccounting=no, MemoryAccounting=no"; do
    grep -q -F -- "$want" "$work/diagnose.txt" || {
      log "FAIL: kpathd diagnose does not name '$want'"
      failed=1
    }
  done
  # The daemon, sandboxed by the shipped unit, must name the kernel function too (it reads
  # /proc/kallsyms inside the unit's namespace).
  [[ -n "$callers" ]] || {
    log "FAIL: kpathd.service does not attribute systemd's per-CPU allocations to mem_cgroup_css_alloc (kpath_percpu_alloc_bytes_total; /proc/kallsyms hidden by the unit?)"
    failed=1
  }
  grep -q -F "Active: active (running)" <<<"$status" || {
    log "FAIL: kpathd.service is not active (running) in the guest"
    failed=1
  }
  return "$failed"
}

status=0
attempt || status=$?
if ((status == 3 && deadline - SECONDS >= timeout / 2)); then
  log "the guest stalled (see above); running once more with a new guest ($((deadline - SECONDS)) s left)"
  keep_logs
  stop_guest
  stop_servers
  status=0
  attempt || status=$?
fi
if ((status == 3)); then
  log "FAIL: the guest stalled$( ((deadline - SECONDS < timeout / 2)) && echo ", too late to boot another within ${timeout} s")"
  status=1
fi
keep_logs
if ((status == 0)); then
  log "PASS in $((SECONDS - started_all)) s ($variant, windows / $scale)"
else
  log "FAIL in $((SECONDS - started_all)) s ($variant, windows / $scale)"
fi
exit "$status"
