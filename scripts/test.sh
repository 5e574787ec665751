#!/usr/bin/env bash
# Install what is missing, build, and run every test: unit tests (fixtures), integration tests
# (real kernel and real BPF, as root), golden /metrics and promtool checks; then the
# integration tests again with the kernel's BTF hidden (kernels without BTF); the daemon-level
# integration tests against an ASan + UBSan build of kpathd; and every libFuzzer target (the
# /proc, /sys and config parsers, under ASan + UBSan) for a few seconds.
# Environment: BUILD_DIR (default build), CTEST_ARGS (extra ctest arguments),
#   CMAKE_BUILD_TYPE        the build's type (default Release: -O3, as packagers build, where
#                           GCC 12 warns where RelWithDebInfo's -O2 does not; warnings are errors)
#   KPATH_SKIP_NOBTF=1      skip the no-BTF stage (the integration tests again with the kernel's
#                           BTF hidden, as on kernels built without it: ~1.5 minutes)
#   KPATH_QEMU=ci           the QEMU stage (the default): Debian 12's 6.1 and 6.12, Debian 11's
#                           5.10 and the 4.19 test kernel on x86_64, Debian 12's 6.1 and 4.19 on
#                           arm64 (cross-built by scripts/build-arm64.sh first: 10 minutes cold,
#                           one with a warm ccache) under QEMU, one test per fallback mechanism
#                           this kernel lacks (tests/qemu/run.sh, about 13 minutes: 8 for the x86 four at a host load of 2-3); full: every
#                           integration test there (over an hour; 2 fail on 6.12: docs/testing.md)
#   KPATH_SKIP_ARM64=1      leave the arm64 build and guests out of the QEMU stage
#   KPATH_SKIP_QEMU=1       skip the QEMU stage (also KPATH_QEMU=0); it skips by itself, saying
#                           why, where QEMU cannot run or the kernel package cannot be fetched
#   KPATH_SKIP_SANITIZE=1   skip the sanitizer stage (build-asan: an ASan + UBSan kpathd, which
#                           the integration tests of this build then start: ~10 minutes)
#   KPATH_SANITIZE_TESTS    Catch2 spec of integration tests run against the sanitized kpathd
#   KPATH_SKIP_FUZZ=1       skip the fuzz stage; KPATH_FUZZ_SECONDS per target (default 5)
#   KPATH_SKIP_CONTAINER=1  skip the container stage (tests/container/run.sh): kpathd run by
#                           podman as deploy/kubernetes/daemonset.yaml runs it, its figures
#                           compared with a kpathd on the host (hybrid cgroups; under a
#                           minute), then in a cgroup v2 QEMU guest under single-threaded TCG
#                           (a few minutes more; KPATH_CONTAINER_V2_GUEST=0 leaves it out); it
#                           skips by itself, saying why, when not root or the systemd stage's
#                           rootfs cannot be built
#   KPATH_SKIP_SYSTEMD=1    skip the systemd stage (tests/systemd/run.sh): the .deb under a real
#                           systemd as PID 1 (systemd-nspawn on a cached Debian 12 rootfs, about
#                           40 s; 1 to 3 minutes more the first time, to build the rootfs), then
#                           the seed 000 guest (tests/systemd/seed000-guest.sh, about 2 minutes
#                           under QEMU; 3 with its cleanup); it skips by itself,
#                           saying why, when not root or the rootfs cannot be built;
#                           KPATH_SKIP_SEED000_GUEST=1 runs the nspawn part only
set -euo pipefail
cd "$(dirname "$0")/.."
# Packagers build Release (-O3, where GCC 12 warns where RelWithDebInfo's -O2 does not): every
# target, the integration tests too (GCC 12's false -Wrestrict hid there), is built that way
# with warnings as errors, and every test runs against that build.
CMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-Release} scripts/build.sh --test
build_dir=${BUILD_DIR:-build}
# shellcheck source=scripts/ccache.sh
source scripts/ccache.sh
status=0
stage() { printf '\n=== %s (%s)\n' "$1" "$(date +%T)"; }

stage "unit, integration, golden, rules, deploy and e2e tests"
# Integration tests start daemons and load BPF programs: ctest runs them one at a time.
ctest --test-dir "$build_dir" --output-on-failure --timeout 300 ${CTEST_ARGS:-} || status=$?

# Kernels without BTF (4.19 often is): the same real-kernel integration tests with
# /sys/kernel/btf hidden under a tmpfs, in a mount namespace of their own (gone with it).
# kpathd and libbpf then find no vmlinux BTF: tp_btf and fentry are off, the tracepoint
# layouts come from tracefs, the comm from bpf_get_current_comm; raw_tp and classic tracepoints
# must attach (KPATH_EXPECT_MECHANISMS); tests of BTF itself skip.
if [[ "${KPATH_SKIP_NOBTF:-0}" == "1" ]]; then
  echo "no-BTF stage skipped (KPATH_SKIP_NOBTF=1)"
elif [[ ! -e /sys/kernel/btf/vmlinux ]]; then
  echo "no-BTF stage skipped: this kernel has no BTF, so the main stage already ran without it"
else
  stage "no BTF: the integration tests with /sys/kernel/btf hidden"
  (cd "$build_dir" && unshare --mount --propagation private sh -c '
      mount -t tmpfs -o size=64k kpath-no-btf /sys/kernel/btf &&
      exec env KPATH_EXPECT_MECHANISMS="percpu_alloc=raw_tp,tracepoint;cgroup_churn=raw_tp,tracepoint" \
        tests/integration/integration_test') || status=1
fi

if [[ "${KPATH_SKIP_SANITIZE:-0}" != "1" ]]; then
  stage "sanitizers: ASan + UBSan kpathd under the daemon-level integration tests"
  # (The /proc, /sys and config parsers run under ASan + UBSan in the fuzz stage.)
  asan_dir=${ASAN_BUILD_DIR:-build-asan}
  cmake -S . -B "$asan_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKPATH_SANITIZE=ON \
    -DKPATH_WERROR=ON "${ccache_args[@]}" >/dev/null
  # kpathd only: this build's integration tests start it (KPATH_KPATHD_BINARY).
  cmake --build "$asan_dir" -j "${JOBS:-$(nproc)}" --target kpathd
  # Any report fails the test that caused it: the sanitized process aborts.
  export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  # The daemon's own code paths: start and stop, scraping, parsing of /proc, /sys and the
  # configuration (fixture trees, garbled files), reload, the web server, the probes' user-space
  # halves. (Workload-heavy probe tests run in the main stage; the parsers run under ASan +
  # UBSan in the fuzz stage.)
  spec=${KPATH_SANITIZE_TESTS:-'[daemon],[golden],[config],[web],[slab],[hooks],[madvise]'}
  asan_kpathd=$(realpath "$asan_dir/daemon/kpathd") # before the cd: asan_dir may be relative
  (cd "$build_dir" && KPATH_KPATHD_BINARY="$asan_kpathd" \
    tests/integration/integration_test "$spec") || status=1
  unset ASAN_OPTIONS UBSAN_OPTIONS
else
  echo "sanitizer stage skipped (KPATH_SKIP_SANITIZE=1)"
fi

if [[ "${KPATH_SKIP_FUZZ:-0}" != "1" ]]; then
  stage "fuzz: every libFuzzer target for ${KPATH_FUZZ_SECONDS:-5} s (scripts/fuzz.sh)"
  scripts/fuzz.sh "${KPATH_FUZZ_SECONDS:-5}" || status=1
else
  echo "fuzz stage skipped (KPATH_SKIP_FUZZ=1)"
fi

# The same real-kernel tests on other kernels under QEMU: kprobes, fentry, the pre-6.10 percpu
# allocator (6.1, 5.10, 4.19) and pcpu_alloc_noprof (6.12), which this kernel lacks.
qemu_suite=${KPATH_QEMU:-ci}
[[ $qemu_suite == 1 ]] && qemu_suite=full # the opt-in spelling of before
if [[ "${KPATH_SKIP_QEMU:-0}" == "1" || $qemu_suite == 0 ]]; then
  echo "QEMU stage skipped (KPATH_SKIP_QEMU=1 or KPATH_QEMU=0)"
else
  qemu_status=0 arm64_status=0
  # The arm64 guests run the arm64 build: the cross build and its runtime root first.
  if [[ "${KPATH_SKIP_ARM64:-0}" == "1" ]]; then
    echo "arm64 guests skipped (KPATH_SKIP_ARM64=1)"
    export KPATH_QEMU_ARCHS=x86_64
  else
    stage "arm64 cross build for the arm64 guests (scripts/build-arm64.sh)"
    { scripts/install-deps.sh --arm64 && scripts/build-arm64.sh; } || arm64_status=1
    if ((arm64_status != 0)); then
      echo "arm64 build FAILED (above): the arm64 guests do not run"
      export KPATH_QEMU_ARCHS=x86_64
    fi
  fi
  stage "QEMU: Debian's 6.1, 6.12 and 5.10 and the 4.19 test kernel on x86_64, 6.1 and 4.19 on arm64, $qemu_suite suite (tests/qemu/run.sh)"
  qemu_log=$(mktemp)
  BUILD_DIR="$build_dir" KPATH_QEMU_SUITE="$qemu_suite" tests/qemu/run.sh | tee "$qemu_log" ||
    qemu_status=$?
  # A guest that stalls with no test failed (docs/testing.md, "Known hang": TCG re-executing an int3 the
  # kernel's text patching already removed) gets one more run of that kernel, when nothing else
  # failed; any test failure does not.
  read -ra stalled <<<"$(sed -n 's/^qemu: stalled with no test failed: //p' "$qemu_log")"
  if ((qemu_status != 0 && ${#stalled[@]} > 0)) && ! grep -v 'FAIL: the guest stalled' "$qemu_log" | grep -q -E '^--- FAIL|^qemu: .*FAIL'; then
    echo "QEMU: ${stalled[*]} stalled with no test failed (see docs/testing.md, Known hang): once more"
    qemu_status=0
    BUILD_DIR="$build_dir" KPATH_QEMU_SUITE="$qemu_suite" tests/qemu/run.sh "${stalled[@]}" || qemu_status=$?
  fi
  rm -f "$qemu_log"
  ((qemu_status == 0 && arm64_status == 0)) || status=1
fi
# kpathd in a container as the DaemonSet runs it (its own mount and cgroup namespaces, the host's
# /sys/fs/cgroup, tracefs and debugfs, the manifest's capabilities), against a kpathd on the
# host: every figure equal (tests/container/run.sh).
if [[ "${KPATH_SKIP_CONTAINER:-0}" == "1" ]]; then
  echo "container stage skipped (KPATH_SKIP_CONTAINER=1)"
else
  stage "container: kpathd as the DaemonSet runs it, against the host's (tests/container/run.sh)"
  container_status=0
  BUILD_DIR="$build_dir" timeout --kill-after=30 1200 tests/container/run.sh || container_status=$?
  case $container_status in
  0) ;;
  2) echo "container stage skipped (reason above)" ;;
  *) status=1 ;;
  esac
fi
# The .deb under a real systemd as PID 1: the unit's notify, watchdog, reload and stop protocol,
# its sandbox, and the maintainer scripts (tests/systemd/run.sh). It loads BPF programs on this
# kernel, so it runs after every other stage that does.
if [[ "${KPATH_SKIP_SYSTEMD:-0}" == "1" ]]; then
  echo "systemd stage skipped (KPATH_SKIP_SYSTEMD=1)"
else
  stage "systemd: the .deb under systemd as PID 1 (tests/systemd/run.sh)"
  systemd_status=0
  BUILD_DIR="$build_dir" timeout --kill-after=60 "${KPATH_SYSTEMD_TIMEOUT:-1800}" tests/systemd/run.sh ||
    systemd_status=$?
  case $systemd_status in
  0) ;;
  2) echo "systemd stage skipped (reason above)" ;;
  *) status=1 ;;
  esac
fi
stage "done: exit status $status"
exit "$status"
