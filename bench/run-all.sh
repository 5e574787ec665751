#!/usr/bin/env bash
# Every kpathd benchmark in one go; each prints ratios against a baseline measured in the same
# run (see bench/README.md). Root, from anywhere.
#
#   bench/run-all.sh [--build DIR] [--quick] [--only NAME[,NAME...]]
#
# --build    build directory (default: build); the bench targets are built there first (-j2)
# --quick    fewer rounds and sizes: about 12 minutes instead of about 40
# --only     a subset of: bpf_cost memory_floor madvise irqoff slowdown serving self_cost growth
# Installs what is missing first (scripts/install-deps.sh --bench: node_exporter, bpftrace).
# A bench that fails does not stop the others; the exit status is then 1.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
build=build
quick=0
only=""
while (($#)); do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --only) only="$2"; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--quick] [--only NAME[,NAME...]]" >&2; exit 2 ;;
  esac
done
[[ $EUID -eq 0 ]] || { echo "run-all: run as root" >&2; exit 2; }
cd "$root" || exit 1
case "$build" in /*) ;; *) build="$root/$build" ;; esac

scripts/install-deps.sh --bench || exit 1
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
fi
cmake --build "$build" -j2 --target kpathd kpath-bench-empty kpath-bench-madvise-loop \
  kpath-bench-cpu-loop kpath-bench-scrape kpath-bench-event-load kpath-bench-comm-storm \
  kpath-bench-bpf-crowd >/dev/null || { echo "run-all: build failed" >&2; exit 1; }

if ((quick)); then
  declare -A extra=([bpf_cost]="--churn 500 --rounds 2" [memory_floor]="--churn 500 --rounds 2" [madvise]="--rounds 3" [irqoff]="--rounds 3 --seconds 1"
                    [slowdown]="--quick" [serving]="--quick" [self_cost]="--quick" [growth]="--quick")
else
  declare -A extra=([bpf_cost]="--churn 2000 --rounds 5" [memory_floor]="--rounds 7" [madvise]="--rounds 9" [irqoff]="--rounds 9"
                    [slowdown]="" [serving]="" [self_cost]="" [growth]="")
fi
declare -A script=([bpf_cost]=bpf_cost.py [memory_floor]=memory_floor.py [madvise]=madvise_overhead.py
                   [irqoff]=irqoff_overhead.py [slowdown]=workload_slowdown.py [serving]=serving.py
                   [self_cost]=self_cost.py [growth]=growth.py)
order=(serving self_cost growth bpf_cost memory_floor madvise irqoff slowdown)

# Every temporary file of the benches (and of the tools they start) goes into one directory,
# removed at the end whatever a bench leaves there.
TMPDIR="$(mktemp -d -t kpath-bench-run-XXXXXX)" || exit 1
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT
log="$TMPDIR/run-all.log"
failed=()
start=$SECONDS
echo "kpathd benchmarks: $(uname -r), $(nproc) CPUs, $(git -C "$root" rev-parse --short HEAD 2>/dev/null)," \
  "$( ((quick)) && echo quick || echo full) run, build $build"
for name in "${order[@]}"; do
  if [[ -n "$only" && ",$only," != *",$name,"* ]]; then continue; fi
  echo
  echo "=== $name: bench/${script[$name]} ${extra[$name]}"
  t0=$SECONDS
  # shellcheck disable=SC2086  # extra holds several arguments
  if python3 "$here/${script[$name]}" --build "$build" ${extra[$name]} >"$log" 2>"$log.err"; then
    cat "$log"
  else
    cat "$log"
    tail -n 15 "$log.err"
    echo "run-all: $name FAILED"
    failed+=("$name")
  fi
  echo "($((SECONDS - t0)) s)"
done
echo
echo "run-all: $((SECONDS - start)) s;" \
  "$( ((${#failed[@]})) && echo "failed: ${failed[*]}" || echo "every bench ran")"
((${#failed[@]} == 0))
