# shellcheck shell=bash disable=SC2154  # repo, work, cache, qemu, virtiofsd, busybox: set by the caller
# Sourced by tests/qemu/run.sh (the kernel matrix) and tests/systemd/seed000-guest.sh (systemd
# as PID 1 on Debian 12's kernel): fetching and unpacking Debian's kernels, the busybox
# initramfs that loads their own virtio/virtiofs modules, starting and stopping QEMU with
# virtiofsd, and looking at a guest that stopped making progress.
#
# The caller sets: repo (the checkout), work (its temporary directory), cache (kernel packages
# and unpacked trees), qemu, virtiofsd, busybox (a static busybox of the guest's architecture),
# log (a function printing one line). The library keeps qemu_pid and virtiofsd_pid (empty when
# not running); qemu_smp (default 2) is QEMU's -smp value; qemu_arch (x86_64, the default, or
# arm64) the guest's architecture; qemu_share (virtiofs, the default, or 9p) how start_qemu
# shares a directory with the guest; qemu_tcg_thread TCG's threading: multi (the default: a host
# thread per vCPU) or single (one thread runs every vCPU in turn: slower, but no vCPU executes
# code that another is patching at that moment).

# shellcheck source=tests/qemu/apt-options.sh
source "$repo/tests/qemu/apt-options.sh"
qemu_pid="" virtiofsd_pid="" qemu_smp=${qemu_smp:-2} qemu_arch=${qemu_arch:-x86_64}
qemu_share=${qemu_share:-virtiofs} qemu_tcg_thread=${qemu_tcg_thread:-multi}

# The architecture of a kernel flavour's packages: arm64 for Debian's arm64 flavours
# (cloud-arm64, arm64, rt-arm64, 6.12-cloud-arm64, bookworm/cloud-arm64), else x86_64.
flavour_arch() {
  case ${1##*/} in
    *arm64*) echo arm64 ;;
    *) echo x86_64 ;;
  esac
}

# The package name and unpacked tree of the current kernel of a flavour; empty on failure. A
# flavour "SUITE/FLAVOUR" (bullseye/cloud-amd64) takes the kernel of that Debian release; an
# arm64 flavour (flavour_arch) the :arm64 package (dpkg --add-architecture arm64 first).
fetch_kernel() {
  local flavour=$1 suite="" image pkg deb dir qualifier=""
  if [[ $flavour == */* ]]; then suite=${flavour%%/*} flavour=${flavour#*/}; fi
  [[ $(flavour_arch "$flavour") == arm64 ]] && qualifier=:arm64
  local opts=()
  mapfile -t opts < <(apt_options "$cache" "$suite")
  image=$(apt-cache "${opts[@]}" depends "linux-image-$flavour$qualifier" 2>/dev/null |
    awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
  if [[ -z "$image" ]]; then
    apt-get "${opts[@]}" update -qq >/dev/null 2>&1 || true
    image=$(apt-cache "${opts[@]}" depends "linux-image-$flavour$qualifier" 2>/dev/null |
      awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
  fi
  [[ -n "$image" ]] || return 1
  image=${image%:*} # apt names a foreign architecture's package name:arch
  pkg=$image-unsigned # the same kernel without the Secure Boot signature wrapper
  dir="$cache/kernels/${image#linux-image-}"
  if [[ ! -e "$dir/.unpacked" ]]; then
    deb=$(ls "$cache/debs/${pkg}"_*.deb 2>/dev/null | tail -1 || true)
    if [[ -z "$deb" ]]; then
      (cd "$cache/debs" && apt-get "${opts[@]}" download -q "$pkg$qualifier" >/dev/null 2>&1) ||
        (apt-get "${opts[@]}" update -qq >/dev/null 2>&1 && cd "$cache/debs" &&
          apt-get "${opts[@]}" download -q "$pkg$qualifier" >/dev/null 2>&1) ||
        return 1
      deb=$(ls "$cache/debs/${pkg}"_*.deb | tail -1)
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    dpkg-deb -x "$deb" "$dir" || return 1
    touch "$dir/.unpacked"
  fi
  echo "$dir"
}

# A module file's contents, whether stored plain or compressed (Debian's 6.12 ships .ko.xz).
module_bytes() {
  case $1 in
    *.ko.xz) xz -dc "$1" ;;
    *.ko.zst) zstd -dcq "$1" ;;
    *.ko.gz) gzip -dc "$1" ;;
    *) cat "$1" ;;
  esac
}

# Modules to load in the initramfs, dependencies first (from each .ko's modinfo `depends=`).
module_order() {
  local moddir=$1
  shift
  declare -A seen=()
  local out=()
  visit() {
    local name=$1 path deps d
    [[ -n "${seen[$name]:-}" ]] && return 0
    seen[$name]=1
    path=$(find "$moddir" \( -name "$name.ko" -o -name "$name.ko.xz" -o -name "$name.ko.zst" \
      -o -name "$name.ko.gz" \) -print -quit)
    [[ -n "$path" ]] || return 0 # built in
    deps=$(module_bytes "$path" | tr '\0' '\n' | sed -n 's/^depends=//p' | head -1)
    for d in ${deps//,/ }; do visit "$d"; done
    out+=("$path")
  }
  for m in "$@"; do visit "$m"; done
  ((${#out[@]} == 0)) || printf '%s\n' "${out[@]}"
}

# Shell-quotes a value for the guest's env file (busybox sh and bash read it).
quote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# The initramfs tree in `root`: busybox, the kernel's modules named (with their dependencies,
# in load order) and tests/qemu/initramfs-init.sh as /init. The caller adds /kpath-guest.env.
initramfs_tree() {
  local root=$1 kdir=$2 kver=$3 path name
  shift 3
  rm -rf "$root"
  mkdir -p "$root"/{bin,proc,sys,dev,modules,lower,upper,newroot}
  cp "$busybox" "$root/bin/busybox"
  for applet in sh mount umount mkdir insmod cat echo sleep switch_root uname cp ip; do
    ln -s busybox "$root/bin/$applet"
  done
  : >"$root/modules/order"
  # busybox's insmod takes plain .ko files: compressed ones are unpacked on the way.
  while read -r path; do
    name=$(basename "$path")
    name=${name%%.ko*}
    module_bytes "$path" >"$root/modules/$name.ko"
    echo "$name" >>"$root/modules/order"
  done < <([[ -z "$kdir" ]] || module_order "$kdir/lib/modules/$kver" "$@")
  cp "$repo/tests/qemu/initramfs-init.sh" "$root/init"
  chmod +x "$root/init"
}

initramfs_pack() { (cd "$1" && find . | cpio -o -H newc --quiet | gzip -1) >"$2"; }

# Waits (10 s at most) for the vhost-user socket of the virtiofsd started as virtiofsd_pid.
wait_virtiofsd() {
  local sock=$1
  for _ in $(seq 100); do
    [[ -S "$sock" ]] && return 0
    kill -0 "$virtiofsd_pid" 2>/dev/null || break
    sleep 0.1
  done
  log "virtiofsd did not start: $(cat "$work/virtiofsd.log")"
  return 1
}

stop_guest() {
  [[ -n "$qemu_pid" ]] && kill -9 "$qemu_pid" 2>/dev/null || true
  [[ -n "$qemu_pid" ]] && wait "$qemu_pid" 2>/dev/null || true
  [[ -n "$virtiofsd_pid" ]] && kill "$virtiofsd_pid" 2>/dev/null || true
  [[ -n "$virtiofsd_pid" ]] && wait "$virtiofsd_pid" 2>/dev/null || true
  qemu_pid="" virtiofsd_pid=""
}

# Starts QEMU in the background (qemu_pid): `mode` kvm or tcg, the console to a file, the
# kernel command line `append`; further arguments go to QEMU as they are (a NIC, say). The share:
# with qemu_share=virtiofs the virtiofsd socket `sock` as the virtiofs tag `tag`; with 9p the
# directory `sock` as the 9p tag `tag` (read-only), QEMU itself serving it, so QEMU then runs in
# the private mount namespace that share_tree (below) builds from the file $work/share.binds.
# qemu_arch=arm64: qemu-system-aarch64's `virt` machine, TCG only (no arm64 KVM on an x86 host),
# a Cortex-A57 (`-cpu max` spends most of its time emulating pointer authentication:
# ../shared/docs/kernel-matrix.md measured 39 s against 11 s to boot). The monitor is
# $work/monitor.sock.
start_qemu() {
  local mode=$1 kernel=$2 initrd=$3 console=$4 sock=$5 tag=$6 append=$7 mem=2048 machine_args
  local share_args launcher=()
  shift 7
  if [[ $qemu_arch == arm64 ]]; then
    machine_args=(-machine virt -accel "tcg,thread=$qemu_tcg_thread" -cpu cortex-a57)
  elif [[ $mode == kvm ]]; then
    machine_args=(-machine q35 -accel kvm -cpu host)
  else
    machine_args=(-machine q35 -accel "tcg,thread=$qemu_tcg_thread" -cpu max)
  fi
  if [[ $qemu_share == 9p ]]; then
    share_args=(-virtfs "local,path=$sock,mount_tag=$tag,security_model=none,readonly=on,multidevs=remap")
    launcher=(unshare -m --propagation private bash -c "$share_tree_script" kpath-share "$sock"
      "$work/share.binds")
  else
    share_args=(-object "memory-backend-memfd,id=mem,size=${mem}M,share=on" -numa "node,memdev=mem"
      -chardev "socket,id=vfs,path=$sock" -device "vhost-user-fs-pci,chardev=vfs,tag=$tag")
  fi
  : >"$console"
  "${launcher[@]}" "$qemu" -nodefaults -no-reboot -display none -serial "file:$console" \
    -monitor "unix:$work/monitor.sock,server,nowait" \
    "${machine_args[@]}" -smp "$qemu_smp" -m "$mem" "${share_args[@]}" \
    -kernel "$kernel" -initrd "$initrd" -append "$append" "$@" \
    >"$work/qemu.log" 2>&1 &
  qemu_pid=$!
}

# A directory tree made of read-only bind mounts, for a guest that cannot use this host's root
# (an arm64 guest): run as `bash -c "$share_tree_script" NAME SHARE BINDS COMMAND...` in a private
# mount namespace (unshare -m), it binds each "SOURCE DEST" line of the file BINDS at SHARE/DEST
# (the first line's DEST is "/"; later ones nest in it, their mount points made in the sources
# above them when missing), makes them all read-only, then execs COMMAND (virtiofsd, or QEMU
# serving 9p). The binds die with the namespace, so nothing is left mounted on the host.
# shellcheck disable=SC2016  # expanded by the bash that runs it
share_tree_script='
  set -e
  share=$1 binds=$2
  shift 2
  while read -r src dest; do
    [ -n "$src" ] || continue
    mkdir -p "$share$dest"
    mount --bind "$src" "$share$dest"
  done <"$binds"
  tac "$binds" | while read -r src dest; do
    [ -n "$src" ] || continue
    mount -o remount,bind,ro "$share$dest"
  done
  exec "$@"
'

# virtiofsd serving the tree of $work/share.binds (share_tree_script) at the socket `sock`.
start_virtiofsd_tree() {
  local sock=$1 share="$work/share"
  mkdir -p "$share"
  rm -f "$sock"
  unshare -m --propagation private bash -c "$share_tree_script" kpath-share "$share" \
    "$work/share.binds" "$virtiofsd" --socket-path="$sock" -o source="$share" -o cache=always \
    -o sandbox=chroot -o log_level=err >"$work/virtiofsd.log" 2>&1 &
  virtiofsd_pid=$!
  wait_virtiofsd "$sock"
}

# What each vCPU of a guest that stopped making progress is executing: registers from the QEMU
# monitor, instruction pointers named from the kernel's System.map (the guest boots nokaslr).
dump_stalled_guest() {
  local system_map=$1 out=$2
  python3 - "$work/monitor.sock" "$system_map" >"$out" 2>&1 <<'PYEOF' || true
import bisect, re, socket, sys, time
sock = socket.socket(socket.AF_UNIX)
sock.connect(sys.argv[1])
sock.settimeout(5)
def command(text):
    sock.sendall(text.encode() + b"\n")
    time.sleep(1.5)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            if len(chunk) < 65536:
                break
    except socket.timeout:
        pass
    return data.decode(errors="replace")
command("")
regs = command("info registers -a")
symbols = []
for line in open(sys.argv[2]):
    address, kind, name = line.split()[:3]
    if kind in "tTwW":
        symbols.append((int(address, 16), name))
symbols.sort()
starts = [a for a, _ in symbols]
if len(symbols) < 1000:
    # Debian ships a stub System.map (the real one is in the -dbg package). The guest boots
    # nokaslr, so its /proc/kallsyms names these addresses on any boot of the same kernel
    # (KPATH_QEMU_COMMAND).
    print("(System.map has no symbols: name the RIPs from the guest's /proc/kallsyms)")
def name(address):
    i = bisect.bisect_right(starts, address) - 1
    return f"{symbols[i][1]}+{address - symbols[i][0]:#x}" if i >= 0 else hex(address)
for match in re.finditer(r"CPU#(\d+).*?RIP=([0-9a-f]+).*?RFL=([0-9a-f]+)", regs, re.S):
    cpu, rip, rfl = match.group(1), int(match.group(2), 16), int(match.group(3), 16)
    print(f"vCPU {cpu}: RIP {name(rip)}, interrupts {'on' if rfl & 0x200 else 'OFF'}")
print(regs)
PYEOF
}

# Waits until the console shows `pattern`, QEMU exits, or `seconds` pass. 0 if seen.
wait_console() {
  local console=$1 pattern=$2 seconds=$3 deadline=$((SECONDS + $3))
  while ((SECONDS < deadline)); do
    grep -q -- "$pattern" "$console" 2>/dev/null && return 0
    kill -0 "$qemu_pid" 2>/dev/null || { grep -q -- "$pattern" "$console"; return; }
    sleep 0.5
  done
  return 1
}

