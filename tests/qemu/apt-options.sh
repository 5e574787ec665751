# Sourced by tests/qemu/run.sh and build-irqoff-module.sh: apt options that read another Debian
# release's package lists, kept in the QEMU cache and never in the host's own apt state.
#   apt_options CACHE SUITE   one option per line; nothing for SUITE "" (the host's release)
# A security suite (bookworm-security: Debian 12's 6.12 kernels) is read from the security archive.
apt_options() {
  local cache=$1 suite=$2 dir
  [[ -n "$suite" ]] || return 0
  dir="$cache/apt-$suite"
  mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
  local archive=http://deb.debian.org/debian
  [[ $suite == *-security ]] && archive=http://deb.debian.org/debian-security
  [[ -s "$dir/sources.list" ]] || echo "deb $archive $suite main" >"$dir/sources.list"
  printf '%s\n' -o "Dir::Etc::SourceList=$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null \
    -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache" -o Dir::State::status=/dev/null
}
