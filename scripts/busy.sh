#!/bin/sh
# Runs a command on a busy machine: the load that once failed five tests for load alone (two
# compilers and a QEMU guest beside `.ci/run`, load 6-7), kept running until the command ends.
#
#   scripts/busy.sh [--compilers N] [--no-qemu] -- COMMAND [ARGS...]
#
# The load: N (default 2) loops of `gcc -O2` over a generated C file, and a TCG guest that boots
# the newest kernel cached by the QEMU suite (/var/cache/kpathd-qemu) with no root file system, so
# that it panics and reboots over and over. Every piece runs in a process group of its own and is
# killed when COMMAND exits, whatever way it exits; the exit status is COMMAND's. Used to check
# that the suite holds on a shared machine (docs/testing.md, "A busy machine").
set -eu

compilers=2
qemu=yes
while [ $# -gt 0 ]; do
  case "$1" in
    --compilers) compilers="$2"; shift 2 ;;
    --no-qemu) qemu=no; shift ;;
    --) shift; break ;;
    *) echo "busy.sh: unknown option $1 (usage: busy.sh [--compilers N] [--no-qemu] -- COMMAND)" >&2
       exit 2 ;;
  esac
done
if [ $# -eq 0 ]; then
  echo "busy.sh: no command given (usage: busy.sh [--compilers N] [--no-qemu] -- COMMAND)" >&2
  exit 2
fi

tmp=$(mktemp -d /tmp/kpath-busy-XXXXXX)
pieces=0
# A piece of the load in a session of its own, its process group written to $tmp/group.N.
start_piece() {
  pieces=$((pieces + 1))
  # shellcheck disable=SC2016  # expanded by the inner shell
  setsid sh -c 'echo $$ >"$0"; exec "$@"' "$tmp/group.$pieces" "$@" >/dev/null 2>&1 &
}
# shellcheck disable=SC2317  # run by the EXIT trap
stop_load() {
  for group in "$tmp"/group.*; do
    if [ -f "$group" ]; then /bin/kill -s KILL -- "-$(cat "$group")" 2>/dev/null || true; fi
  done
  wait
  rm -rf "$tmp"
}
trap stop_load EXIT
trap 'exit 130' INT TERM

i=0
while [ $i -lt 300 ]; do
  echo "int f$i(int *a, int n) { int s = $i; for (int j = 0; j < n; j++) {" \
       "s += a[j] * $((i % 97 + 1)) ^ (s >> 3); if (s & 1) s = s * 7 + j; } return s; }"
  i=$((i + 1))
done >"$tmp/load.c"

i=0
while [ $i -lt "$compilers" ]; do
  start_piece sh -c "while :; do gcc -O2 -c '$tmp/load.c' -o '$tmp/load$i.o'; done"
  i=$((i + 1))
done
echo "busy.sh: $compilers compiler loop(s) (gcc -O2) running" >&2

if [ "$qemu" = yes ]; then
  arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
  kernel=$(find /var/cache/kpathd-qemu/kernels/ -path "*-$arch/boot/vmlinuz-*" 2>/dev/null |
    sort | tail -n 1)
  system=qemu-system-$(uname -m)
  if [ -n "$kernel" ] && command -v "$system" >/dev/null; then
    start_piece "$system" -accel tcg -smp 1 -m 256 -nodefaults -no-user-config -display none \
      -serial null -kernel "$kernel" -append "console=ttyS0 panic=1"
    echo "busy.sh: a QEMU TCG guest booting $kernel over and over" >&2
  else
    echo "busy.sh: no QEMU guest in the load (no cached kernel or no $system)" >&2
  fi
fi

status=0
"$@" || status=$?
exit "$status"
