#!/bin/sh
# farm_throughput.sh [CWM] [REPEATS]: candidates measured per second by `cwm dataset measure`, as
# one process and under `mpirun -np N` on this host (N-1 worker ranks that build and time), each
# from a cold compile cache so that building counts as it does on new workloads. The runs are
# interleaved REPEATS (default 3) times and each figure is the median; the ratio is against the
# one-process run of the same repeat set.
#   CWM         the cwm binary (default build/cwm)
#   FARM_NP     the rank counts to run (default "2 3 4"; 1 is the plain process, always run)
#   FARM_ARGS   the data-set options (default: 4 workloads of data/train_workloads.tsv, 8 programs
#               each, the data-set protocol: 5 repeats of at least 50 ms)
# On a 2-core machine the workers only win while compiles dominate: one worker's compiler runs
# while another worker's kernel is timed (timings still take turns on the host's lock).
set -e
CWM=${1:-build/cwm}
REPEATS=${2:-3}
NPS=${FARM_NP:-"2 3 4"}
SRC=$(cd "$(dirname "$0")/.." && pwd)
command -v mpirun > /dev/null || { echo "farm_throughput: mpirun not found (scripts/install-deps.sh)"; exit 1; }
T=$(mktemp -d /tmp/cwm-farmbench-XXXXXX)
trap 'rm -rf "$T"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
grep -v '^#' "$SRC/data/train_workloads.tsv" | awk -F'\t' '$2=="dense"||$2=="conv2d"||$2=="matmul"||$2=="batch_matmul"' \
  | head -4 > "$T/wl.tsv"
ARGS=${FARM_ARGS:-"--per-workload 8 --seed 5"}
echo "farm_throughput: $(nproc) cores, $(wc -l < "$T/wl.tsv") workloads, $ARGS, $REPEATS interleaved repeats"
run() { # np repeat -> candidates/s
  rm -rf "$T/cache" "$T/log.jsonl"
  t0=$(date +%s.%N)
  if [ "$1" = 1 ]; then
    "$CWM" dataset measure --workloads "$T/wl.tsv" $ARGS --log "$T/log.jsonl" --cache-dir "$T/cache" --quiet 2> "$T/err"
  else
    mpirun --oversubscribe --bind-to none -np "$1" "$CWM" dataset measure --workloads "$T/wl.tsv" $ARGS \
      --log "$T/log.jsonl" --cache-dir "$T/cache" --quiet > /dev/null 2> "$T/err"
  fi
  t1=$(date +%s.%N)
  n=$(wc -l < "$T/log.jsonl")
  echo "$1 $2 $n $(echo "$t0 $t1 $n" | awk '{printf "%.3f", $3 / ($2 - $1)}')" >> "$T/runs.txt"
}
for r in $(seq 1 "$REPEATS"); do
  for np in 1 $NPS; do run "$np" "$r"; done
done
awk '
  { v[$1] = v[$1] " " $4; n[$1] = $3 }
  END {
    printf "%-6s %-8s %-9s %-14s %s\n", "ranks", "workers", "records", "candidates/s", "x one process"
    split("1 '"$NPS"'", order, " ")
    for (i = 1; i in order; i++) {
      k = order[i]; m = split(substr(v[k], 2), a, " ")
      for (x = 1; x <= m; x++) for (y = x + 1; y <= m; y++) if (a[y] < a[x]) { t = a[x]; a[x] = a[y]; a[y] = t }
      med = m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
      if (k == 1) base = med
      printf "%-6s %-8s %-9s %-14.3f %.2f\n", k == 1 ? "1" : k, k == 1 ? "(none)" : k - 1, n[k], med, med / base
    }
  }' "$T/runs.txt"
