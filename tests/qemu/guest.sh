#!/bin/bash
# PID 1 of the QEMU guest (started by tests/qemu/initramfs-init.sh), on the host's root
# filesystem shared read-only over virtiofs under a tmpfs overlay: the same kpathd, test binaries
# and libraries as on the host, another kernel. Mounts what a Debian host has, runs the selected
# integration tests one process each, and reports on the serial console, one line per test:
#   KPATH-RESULT <PASS|FAIL|SKIP> <seconds> <test name>[ :: <why skipped>]
# followed, for a failure, by the test's output (lines prefixed "KPATH-OUT "). The host side
# (tests/qemu/run.sh) parses these lines.
set -u
source /run/kpath-guest.env
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
export KPATH_EXPECT_MECHANISMS KPATH_QEMU_KERNEL

say() { echo "KPATH-GUEST: $*"; }
power_off() {
  sync
  echo o > /proc/sysrq-trigger
  # Kernels without ACPI (the 4.19 test kernels) only halt: a reboot ends QEMU (-no-reboot).
  sleep 2
  echo b > /proc/sysrq-trigger
  sleep 10
}
trap power_off EXIT

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
ln -sfn /proc/self/fd /dev/fd
ln -sfn /proc/self/fd/0 /dev/stdin
ln -sfn /proc/self/fd/1 /dev/stdout
ln -sfn /proc/self/fd/2 /dev/stderr
# Empty /tmp and /var/tmp, unless the build is under one of them (a CI clone in /tmp): the
# overlay's own copy, writable, then stays visible.
for dir in /tmp /var/tmp; do
  case "$KPATH_BUILD_DIR/" in "$dir"/*) ;; *) mount -t tmpfs tmpfs "$dir" ;; esac
done
mount -t bpf bpf /sys/fs/bpf
# Cgroups as the development host has them (docs/kernel-facts.md): v1 controllers, each in its
# own hierarchy, and v2 at /sys/fs/cgroup/unified; or pure v2 with KPATH_QEMU_CGROUP=unified.
mount -t tmpfs -o mode=0755 tmpfs /sys/fs/cgroup
if [[ "${KPATH_QEMU_CGROUP:-hybrid}" == unified ]]; then
  umount /sys/fs/cgroup
  mount -t cgroup2 cgroup2 /sys/fs/cgroup
  echo "+memory +pids +cpu" > /sys/fs/cgroup/cgroup.subtree_control
else
  for c in cpu cpuacct cpuset memory devices freezer blkio pids; do
    mkdir -p /sys/fs/cgroup/$c
    mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c || say "cgroup v1 $c not mounted"
  done
  mkdir -p /sys/fs/cgroup/systemd /sys/fs/cgroup/unified
  mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd
  mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified
fi
# debugfs and tracefs stay unmounted, as on a fresh host: kpathd mounts what it needs.
ip link set lo up
hostname kpath-qemu
# The kernel package's own modules (shared with the rest of the host root), for modprobe.
if [[ -n "$KPATH_MODULES" ]]; then
  mkdir -p /lib/modules
  ln -sfn "$KPATH_MODULES" "/lib/modules/$(uname -r)"
  [[ -e "/lib/modules/$(uname -r)/modules.dep" ]] || busybox depmod 2>/dev/null || true
fi

features=()
[[ -e /sys/kernel/btf/vmlinux ]] && features+=(btf)
[[ -e /sys/bus/event_source/devices/kprobe ]] && features+=(kprobe-pmu)
[[ -e /sys/bus/event_source/devices/cpu ]] && features+=(hw-pmu)
grep -q ' pcpu_alloc$' /proc/kallsyms && features+=(pcpu_alloc)
grep -q ' __alloc_percpu_gfp$' /proc/kallsyms && features+=(__alloc_percpu_gfp)
grep -q ' pcpu_alloc_noprof$' /proc/kallsyms && features+=(pcpu_alloc_noprof)
say "booted $(uname -r) on $(nproc) CPUs, $(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) MiB; has: ${features[*]}"

# The IRQ-off test module (tests/qemu/irqoff_module/, built by the host for this kernel): its
# file is named to the tests, which fail if it is missing (an insmod that failed). Debian's
# kernels take an unsigned module (CONFIG_MODULE_SIG without _FORCE, no lockdown without Secure
# Boot) and mark themselves tainted (O, E), which is fine for a test VM. busybox's insmod and
# rmmod: the host root may have no kmod.
irqoff_module_name=kpath_irqoff_fixture
unload_irqoff_module() {
  [[ -n "${KPATH_IRQOFF_MODULE:-}" ]] || return 0
  if busybox rmmod "$irqoff_module_name" 2>/tmp/rmmod.err; then
    say "module $irqoff_module_name unloaded"
  else
    say "module $irqoff_module_name NOT unloaded: $(cat /tmp/rmmod.err)"
  fi
}
if [[ -n "${KPATH_IRQOFF_MODULE:-}" ]]; then
  export KPATH_IRQOFF_MODULE_FILE=/proc/$irqoff_module_name
  if busybox insmod "$KPATH_IRQOFF_MODULE" 2>/tmp/insmod.err; then
    say "module $irqoff_module_name loaded ($KPATH_IRQOFF_MODULE_FILE; kernel tainted $(cat /proc/sys/kernel/tainted): $(dmesg | grep -m1 -o "$irqoff_module_name: .*verification failed.*" || echo 'no signature message'))"
  else
    say "module $irqoff_module_name NOT loaded: $(cat /tmp/insmod.err; dmesg | tail -n 3 | tr '\n' ' ')"
  fi
fi

if [[ -n "${KPATH_QEMU_COMMAND:-}" ]]; then
  # A command of one's own instead of the tests (investigating a kernel by hand).
  say "running: $KPATH_QEMU_COMMAND"
  (cd /tmp && timeout -k 5 "$KPATH_TEST_TIMEOUT" bash -c "$KPATH_QEMU_COMMAND") 2>&1
  rc=$?
  unload_irqoff_module
  say "done: command exited $rc"
  exit 0
fi

bin="$KPATH_BUILD_DIR/tests/integration/integration_test"
if [[ ! -x "$bin" ]]; then
  say "FATAL no $bin"
  exit 1
fi
mapfile -t names < <(cd /tmp && "$bin" --list-test-names-only "$KPATH_TEST_SPEC" | sed '/^$/d')
say "running ${#names[@]} tests matching $KPATH_TEST_SPEC"

# Catch2 reads a test spec: escape what it would parse (as catch_discover_tests does).
escape() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//,/\\,}
  s=${s//[/\\[}
  s=${s//]/\\]}
  printf '%s' "$s"
}

passed=0 failed=0 skipped=0
for name in "${names[@]}"; do
  say "start $name"
  log=/tmp/kpath-test.log
  start=$(date +%s.%N)
  if [[ "${KPATH_QEMU_VERBOSE:-0}" == 1 ]]; then
    (cd /tmp && timeout -k 5 "$KPATH_TEST_TIMEOUT" "$bin" "$(escape "$name")") 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
  else
    (cd /tmp && timeout -k 5 "$KPATH_TEST_TIMEOUT" "$bin" "$(escape "$name")") > "$log" 2>&1
    rc=$?
  fi
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  # A test that returns early after WARN("skipped: ...") passes in Catch2 2.x: report it as SKIP.
  # Catch2 prints each warning's message, wrapped at 80 columns, on the indented lines after
  # "<file>:<line>: warning:": one note per warning, its lines joined with " | ".
  warnings=$(awk '/: warning:$/ { if (w != "") print w; w = ""; in_w = 1; next }
                  in_w && /^  / { sub(/^ +/, ""); w = (w == "" ? $0 : w " | " $0); next }
                  { if (w != "") print w; w = ""; in_w = 0 }
                  END { if (w != "") print w }' "$log" | awk '!seen[$0]++')
  why=$(grep -m1 -o 'skipped: .*' <<<"$warnings")
  if ((rc == 0)) && [[ -n "$why" ]]; then
    status=SKIP
  elif ((rc == 0)); then
    status=PASS
  else
    status=FAIL
  fi
  case $status in
    PASS) passed=$((passed + 1)); echo "KPATH-RESULT PASS $secs $name" ;;
    SKIP) skipped=$((skipped + 1)); echo "KPATH-RESULT SKIP $secs $name :: $why" ;;
    FAIL)
      failed=$((failed + 1))
      ((rc == 124 || rc == 137)) && echo "KPATH-OUT (timed out after ${KPATH_TEST_TIMEOUT} s)"
      tail -n 150 "$log" | sed 's/^/KPATH-OUT /'
      echo "KPATH-RESULT FAIL $secs $name"
      ;;
  esac
  [[ -n "$warnings" ]] && sed 's/^/KPATH-NOTE warning: /' <<<"$warnings" | head -20
  # Mechanism notes for the report: what each kpathd said it attached.
  grep -o 'probe [a-z_]*: attached with [^(]*' "$log" | sort -u | sed 's/^/KPATH-NOTE /' | head -20
done
unload_irqoff_module
say "done: $passed passed, $failed failed, $skipped skipped"
