#!/bin/sh
# target_export.sh [CWM] [TRIALS] [WORKLOAD...]: does a kernel tuned for --target avx2 keep its
# speed when a user builds the exported file with plain `gcc -O3 -mavx2 -mfma` (no -march=native)?
# For each workload (default: dense_qkv conv_s3_3x3 bmm_qk) it tunes TRIALS (default 64) trials for
# avx2 with 1 thread and exports the best kernel, then times, interleaved REPEATS (default 3) times:
#   tuner     the exported schedule re-timed by `cwm --target avx2 measure` (the tuner's protocol)
#   exported  NAME.c + NAME_example.c built with gcc -O3 -mavx2 -mfma -fopenmp -fno-math-errno
#             -fno-trapping-math, `NAME_example --time` (the same protocol: median of 5 repeats of
#             at least 50 ms) with OMP_NUM_THREADS=1
# and prints each median, the tuning run's own best (best_us of its summary) and exported/tuner.
# Keep the machine quiet while it runs: nothing else timed or built.
#   OUT  where logs and exports go (default bench-out/target; a rerun resumes the logs)
set -e
CWM=${1:-build/cwm}
TRIALS=${2:-64}
[ $# -ge 2 ] && shift 2 || shift $#
WLS=${*:-"dense_qkv conv_s3_3x3 bmm_qk"}
REPEATS=${REPEATS:-3}
OUT=${OUT:-bench-out/target}
CWM=$(cd "$(dirname "$CWM")" && pwd)/$(basename "$CWM")
grep -qw avx2 /proc/cpuinfo || { echo "target_export: this CPU has no AVX2"; exit 1; }
mkdir -p "$OUT"
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
printf "target_export: %s, %d trials per workload, %d interleaved repeats, 1 thread\n" \
  "$(awk -f "$(dirname "$0")/lib/cpu.awk" /proc/cpuinfo)" "$TRIALS" "$REPEATS"
printf "%-14s %12s %12s %12s %9s\n" workload tune_best_us tuner_us exported_us ratio
for w in $WLS; do
  d="$OUT/$w"
  "$CWM" --target avx2 tune --workload "$w" --trials "$TRIALS" --threads 1 --log "$OUT/$w.jsonl" --export "$d" \
    --name k --summary "$OUT/$w.json" --quiet
  sed -n 's/^ \* Schedule (Ansor-style steps): //p' "$d/k.h" > "$d/steps.txt"
  gcc -O3 -mavx2 -mfma -fopenmp -fno-math-errno -fno-trapping-math "$d/k.c" "$d/k_example.c" -lm -o "$d/k_example"
  : > "$d/tuner.txt"
  : > "$d/exported.txt"
  for r in $(seq "$REPEATS"); do
    "$CWM" --target avx2 measure --workload "$w" --steps "$d/steps.txt" --threads 1 2> /dev/null |
      awk -F'\t' 'NR == 1 {print $2 + 0}' >> "$d/tuner.txt"
    OMP_NUM_THREADS=1 "$d/k_example" --time | sed -n 's/.*: \([0-9.]*\) us per call.*/\1/p' >> "$d/exported.txt"
  done
  best=$(sed -n 's/.*"best_us":\([0-9.e+-]*\).*/\1/p' "$OUT/$w.json")
  tu=$(median < "$d/tuner.txt")
  ex=$(median < "$d/exported.txt")
  printf "%-14s %12.2f %12.2f %12.2f %9.3f\n" "$w" "$best" "$tu" "$ex" "$(echo "$ex $tu" | awk '{print $1 / $2}')"
done
