#!/usr/bin/env bash
# Compares two normsweep-scheduler binaries under the scheduler load
# generator, alternating runs (A B A B ...) so that both see the same minutes
# of a shared machine, with one load generator for both. Prints each run and,
# per binary, the median rates and its CPU per lifecycle relative to the load
# generator's (the simulated workers do the same work against either binary,
# so the ratio cancels most of the box's minute-to-minute speed changes),
# then the ratios B / A.
#
#   tests/bench/scheduler_ab.sh [--runs N] [--load PATH] A_BINARY B_BINARY [load generator flags...]
#
# e.g., from the build directory, against an older build in /tmp/old:
#   ../tests/bench/scheduler_ab.sh --runs 5 /tmp/old/scheduler/normsweep-scheduler \
#       scheduler/normsweep-scheduler --trials=5000
set -euo pipefail

runs=3
load=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --load) load="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
if [[ $# -lt 2 ]]; then
  echo "usage: $0 [--runs N] [--load PATH] A_BINARY B_BINARY [load generator flags...]" >&2
  exit 2
fi
a="$1"; b="$2"; shift 2
if [[ -z "$load" ]]; then
  for candidate in tests/normsweep-scheduler-load build/tests/normsweep-scheduler-load; do
    [[ -x "$candidate" ]] && load="$candidate" && break
  done
fi
[[ -x "$load" ]] || { echo "$0: no load generator (build tests/normsweep-scheduler-load or pass --load)" >&2; exit 2; }
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "$0: --runs: a positive integer, not '$runs'" >&2; exit 2; }
for bin in "$a" "$b"; do
  [[ -x "$bin" ]] || { echo "$0: $bin: not an executable" >&2; exit 2; }
done

results=$(mktemp)
trap 'rm -f "$results"' EXIT
printf '%-2s %4s %12s %8s %10s %9s %28s\n' "" run lifecycles/s steady points/s "p99 1s+" "CPU us: sched / pg / workers"
for ((i = 1; i <= runs; ++i)); do
  for side in A B; do
    bin="$a"; [[ "$side" == B ]] && bin="$b"
    out=$("$load" --scheduler-binary="$bin" "$@" 2>&1) || { echo "$out" >&2; echo "$0: run $i of $side failed" >&2; exit 1; }
    rate=$(awk '/trial lifecycles\/s/ {print $3}' <<<"$out")
    steady=$(awk '/steady lifecycles\/s/ {print $3}' <<<"$out")
    points=$(awk '/metric points\/s/ {print $3}' <<<"$out")
    p99=$(sed -n 's/.*after the first 1 s.*p99 \([0-9.]*\) ms.*/\1/p' <<<"$out")
    read -r sched pg workers < <(sed -n 's/.*CPU per lifecycle *\([0-9]*\) us normsweep-scheduler, \([0-9]*\) us PostgreSQL, \([0-9]*\) us simulated workers.*/\1 \2 \3/p' <<<"$out")
    if [[ -z "$rate" || -z "${workers:-}" ]]; then
      echo "$out" >&2
      echo "$0: run $i of $side printed no figures (a scheduler binary, so --scheduler-binary, is needed)" >&2
      exit 1
    fi
    printf '%-2s %4d %12s %8s %10s %9s %12s / %s / %s\n' "$side" "$i" "$rate" "${steady:--}" "$points" "${p99:--}" "$sched" "$pg" "$workers"
    echo "$side $rate ${steady:-0} $sched $pg $workers" >>"$results"
  done
done

python3 - "$results" "$a" "$b" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
def side(s):
    r = [list(map(float, x[1:])) for x in rows if x[0] == s]
    rate = statistics.median(x[0] for x in r)
    steady = statistics.median(x[1] for x in r)
    sched = statistics.median(x[2] / x[4] for x in r)
    pg = statistics.median(x[3] / x[4] for x in r)
    total = statistics.median((x[2] + x[3] + x[4]) / x[4] for x in r)
    return rate, steady, sched, pg, total
a, b = side("A"), side("B")
print()
print(f"A = {sys.argv[2]}")
print(f"B = {sys.argv[3]}")
print("medians   lifecycles/s   steady   CPU per lifecycle / the load generator's: scheduler  PostgreSQL  all three")
for name, s in (("A", a), ("B", b)):
    st = f"{s[1]:8.0f}" if s[1] else "       -"
    print(f"  {name}     {s[0]:12.0f} {st} {s[2]:53.2f} {s[3]:11.2f} {s[4]:10.2f}")
steady = f"{b[1] / a[1]:8.3f}" if a[1] else "       -"
print(f"  B / A {b[0] / a[0]:12.3f} {steady} {b[2] / a[2]:53.3f} {b[3] / a[3]:11.3f} {b[4] / a[4]:10.3f}")
EOF
