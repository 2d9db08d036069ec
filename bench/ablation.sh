#!/bin/sh
# ablation.sh: the world model against its ablations and other cost models under one protocol:
# the same rows, seeds, budget, threads and search policy for every arm, every run's best schedule
# re-timed side by side, and each arm compared with world pair by pair (same row, same seed).
#
# usage: bench/ablation.sh [--cwm PATH] [--arms LIST] [--policy off|on|both] [--seeds LIST]
#                          [--trials N] [--threads T] [--repeats R] [--rows FILE,...] [--ids LIST]
#                          [--models DIR] [--pretrained FILE] [--out DIR] [--report FILE] [--marker NAME]
# Arms (--arms, default world,no-transition,static,no-contrastive): world, no-transition, static and
# no-contrastive are the world model files default.cwm and ablation-*.cwm of --models (default
# models/), paper its paper.cwm; ansor is Ansor's cost model from scratch, ansor-pre the same
# pre-trained (--pretrained FILE: `cwm train ansor --records LOG --out FILE`), random random
# scores; NAME=FILE is any other world model file. world is always run: every ratio is against it.
# --policy: off (default) tunes every arm with the world models' search policy switched off (no
# hand-off to Ansor's model trained on the workload's records: CWM_WORLD_HANDOFF=0; no family
# quota: --family-quota 0), so that arms differ by their model alone; on keeps each model's
# defaults; both runs the world-model arms both ways (ansor and random have no such policy: one
# run serves both). Rows: every row of the --rows files (default bench/suite.tsv and
# data/heldout_workloads.tsv, the held-out part of the training workloads), or those named by
# --ids. Each run is `cwm tune --trials N --seed S --confirm 0` with its own log under
# DIR/logs (a rerun resumes; a complete run is not repeated). Then, R times (default 3), row after
# row, the best schedules of all the row's runs are timed again in one `cwm measure` call, their
# order rotated each time, so that the machine's drift falls on every arm alike; a run's figure
# is the median of its re-timings. Each arm's ratio to world is its figure over world's on the
# same row and seed (above 1: slower than world); the tables give the geometric mean of the
# ratios, a 95% confidence interval for it (bootstrap over rows, a row's seeds kept together,
# 2,000 resamples), the median ratio and the share of pairs where world is faster. Written:
# DIR/runs.tsv, DIR/pairs.tsv, DIR/ablation.md; --report FILE puts the Markdown between the lines
# <!-- ablation:begin --> and <!-- ablation:end --> of FILE (--marker NAME: NAME instead).
# Keep the machine quiet while it runs: nothing else timed or built.
set -eu
LIB=$(cd "$(dirname "$0")/lib" && pwd)
CWM=build/cwm
ARMS=world,no-transition,static,no-contrastive
POLICY=off
SEEDS=1,2,3
TRIALS=64
THREADS=1
REPEATS=3
ROWS=bench/suite.tsv,data/heldout_workloads.tsv
IDS=""
MODELS=models
PRETRAINED=""
OUT=bench-out/ablation
REPORT=""
MARKER=ablation
die() { echo "ablation.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  opt=$1
  case $opt in
    --*=*) val=${opt#*=}; opt=${opt%%=*}; shift ;;
    --help|-h) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --*) [ $# -ge 2 ] || die "$opt needs a value; see bench/ablation.sh --help"
         val=$2; shift 2 ;;
    *) die "unexpected '$opt'; see bench/ablation.sh --help" ;;
  esac
  case $opt in
    --cwm) CWM=$val ;; --arms) ARMS=$val ;; --policy) POLICY=$val ;; --seeds) SEEDS=$val ;;
    --trials) TRIALS=$val ;; --threads) THREADS=$val ;; --repeats) REPEATS=$val ;; --rows) ROWS=$val ;;
    --ids) IDS=$val ;; --models) MODELS=$val ;; --pretrained) PRETRAINED=$val ;; --out) OUT=$val ;;
    --report) REPORT=$val ;; --marker) MARKER=$val ;;
    *) die "unknown option $opt; see bench/ablation.sh --help" ;;
  esac
done
for n in "$TRIALS" "$THREADS" "$REPEATS"; do
  case $n in ''|*[!0-9]*|0) die "--trials, --threads and --repeats take positive integers" ;; esac
done
case $SEEDS in ''|*[!0-9,]*) die "--seeds takes a comma-separated list of integers, not '$SEEDS'" ;; esac
case $POLICY in off|on) POLICIES=$POLICY ;; both) POLICIES="off on" ;; *) die "--policy is off, on or both" ;; esac
case $MARKER in *[!A-Za-z0-9_-]*|'') die "--marker takes letters, digits, - and _" ;; esac
[ -x "$CWM" ] || die "no cwm at $CWM (--cwm)"
[ -z "$REPORT" ] || grep -q "^<!-- $MARKER:begin -->\$" "$REPORT" ||
  die "$REPORT has no line <!-- $MARKER:begin --> (--report, --marker)"
TAB=$(printf '\t')
# arm -> "model|file" (file: a world model file, or ansor's pre-trained file)
arm_def() {
  case $1 in
    world) echo "world|$MODELS/default.cwm" ;;
    no-transition|static|no-contrastive) echo "world|$MODELS/ablation-$1.cwm" ;;
    paper) echo "world|$MODELS/paper.cwm" ;;
    ansor) echo "ansor|" ;;
    ansor-pre) [ -n "$PRETRAINED" ] || die "arm ansor-pre needs --pretrained FILE"; echo "ansor|$PRETRAINED" ;;
    random) echo "random|" ;;
    *=*) echo "world|${1#*=}" ;;
    *) die "unknown arm '$1'; see bench/ablation.sh --help" ;;
  esac
}
arm_name() { echo "${1%%=*}"; }
case ",$ARMS," in *,world,*) ;; *) ARMS="world,$ARMS" ;; esac
for a in $(echo "$ARMS" | tr , ' '); do
  d=$(arm_def "$a")
  f=${d#*|}
  [ -z "$f" ] || [ -r "$f" ] || die "arm $(arm_name "$a"): cannot read $f"
  case $(arm_name "$a") in *[!A-Za-z0-9_-]*|'') die "arm names take letters, digits, - and _: '$a'" ;; esac
done
rows() {
  for f in $(echo "$ROWS" | tr , ' '); do
    [ -r "$f" ] || die "cannot read $f (--rows)"
    grep -v '^#' "$f" | awk -F'\t' -v ids=",$IDS," 'NF >= 3 && (ids == ",," || index(ids, "," $1 ",")) {print $1 "\t" $2 " " $3}'
  done
}
[ -n "$(rows)" ] || die "no row of $ROWS matches --ids $IDS"
mkdir -p "$OUT/logs" "$OUT/time"
# the runs: "row<TAB>spec<TAB>arm<TAB>policy<TAB>seed" a line; arms without a search policy of their own
# (ansor, random) run once with policy "-"
runs() {
  rows | while IFS="$TAB" read -r id spec; do
    for a in $(echo "$ARMS" | tr , ' '); do
      m=$(arm_def "$a"); m=${m%%|*}
      for p in $POLICIES; do
        [ "$m" = world ] || p=-
        for s in $(echo "$SEEDS" | tr , ' '); do printf '%s\t%s\t%s\t%s\t%s\n' "$id" "$spec" "$a" "$p" "$s"; done
        [ "$m" = world ] || break
      done
    done
  done
}
run_base() { echo "$OUT/logs/$1/$(arm_name "$2").$3.s$4"; } # id arm policy seed
n=$(runs | wc -l)
printf "ablation: %d rows, arms %s, policy %s, seeds %s, %s trials, %s thread(s): %d runs, %s re-timings\n" \
  "$(rows | wc -l)" "$ARMS" "$POLICY" "$SEEDS" "$TRIALS" "$THREADS" "$n" "$REPEATS"
i=0
runs | while IFS="$TAB" read -r id spec a p s; do
  i=$((i + 1))
  b=$(run_base "$id" "$a" "$p" "$s")
  mkdir -p "$(dirname "$b")"
  d=$(arm_def "$a")
  m=${d%%|*}
  f=${d#*|}
  set -- --model "$m"
  if [ "$m" = world ]; then set -- "$@" --model-file "$f"; elif [ -n "$f" ]; then set -- "$@" --pretrained "$f"; fi
  [ "$p" != off ] || set -- "$@" --family-quota 0
  printf "ablation: tuning %s with %s, policy %s, seed %s (%d/%d)\n" "$id" "$(arm_name "$a")" "$p" "$s" "$i" "$n"
  if [ "$p" = off ]; then hand=0; else hand=1; fi
  CWM_WORLD_HANDOFF=$hand "$CWM" tune --workload "$spec" --trials "$TRIALS" --seed "$s" --threads "$THREADS" \
    --confirm 0 --log "$b.jsonl" --export "$b" --name k --summary "$b.json" --quiet "$@" > "$b.out" 2> "$b.err" ||
    { tail -3 "$b.err" >&2; die "tuning $id with $a (policy $p, seed $s) failed; see $b.err"; }
  sed -n 's/^ \* Schedule (Ansor-style steps): //p' "$b/k.h" > "$b.steps"
done
# re-timing: per row, every run's best schedule in one cwm measure call, the order rotated by round
r=0
while [ "$r" -lt "$REPEATS" ]; do
  r=$((r + 1))
  printf "ablation: re-timing, round %d/%d\n" "$r" "$REPEATS"
  rows | while IFS="$TAB" read -r id spec; do
    runs | awk -F'\t' -v id="$id" '$1 == id' > "$OUT/time/$id.runs"
    k=$(wc -l < "$OUT/time/$id.runs")
    awk -v r="$r" -v k="$k" '{l[NR] = $0} END {for (j = 0; j < k; j++) print l[(j + r) % k + 1]}' \
      "$OUT/time/$id.runs" > "$OUT/time/$id.order"
    : > "$OUT/time/$id.steps"
    while IFS="$TAB" read -r _ _ a p s; do cat "$(run_base "$id" "$a" "$p" "$s").steps" >> "$OUT/time/$id.steps"; done \
      < "$OUT/time/$id.order"
    "$CWM" measure --workload "$spec" --steps "$OUT/time/$id.steps" --threads "$THREADS" 2> "$OUT/time/$id.err" |
      awk -F'\t' '{print $1 "\t" $2 + 0}' > "$OUT/time/$id.got" || true
    # line j of the steps file is run j of the order; append each figure to its run's list
    awk -F'\t' -v f="$OUT/time/$id.got" 'BEGIN {while ((getline l < f) > 0) {split(l, x, "\t"); us[x[1]] = x[2]}}
      {if (NR in us && us[NR] > 0) print $3 "\t" $4 "\t" $5 "\t" us[NR]}' "$OUT/time/$id.order" >> "$OUT/time/$id.tsv"
  done
done
# runs.tsv: row arm policy seed tuned_us retimed_us (median of the re-timings; - when none)
{
  printf "row\tarm\tpolicy\tseed\ttuned_us\tretimed_us\n"
  runs | while IFS="$TAB" read -r id spec a p s; do
    b=$(run_base "$id" "$a" "$p" "$s")
    tu=$(sed -n 's/.*"best_us":\([0-9.e+-]*\).*/\1/p' "$b.json")
    med=$(awk -F'\t' -v a="$a" -v p="$p" -v s="$s" '$1 == a && $2 == p && $3 == s {print $4}' "$OUT/time/$id.tsv" 2>/dev/null |
      sort -g | awk '{v[NR] = $1} END {if (NR) printf "%.2f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; else print "-"}')
    printf '%s\t%s\t%s\t%s\t%.2f\t%s\n' "$id" "$(arm_name "$a")" "$p" "$s" "${tu:-0}" "$med"
  done
} > "$OUT/runs.tsv"
awk -F'\t' -v out="$OUT" -f "$LIB/paired.awk" "$OUT/runs.tsv" > "$OUT/ablation.md"
cat "$OUT/ablation.md"
if [ -n "$REPORT" ]; then
  awk -v md="$OUT/ablation.md" -v m="$MARKER" -f "$LIB/splice.awk" "$REPORT" > "$REPORT.tmp.$$" && mv "$REPORT.tmp.$$" "$REPORT"
  echo "ablation: rewrote the tables in $REPORT"
fi
echo "ablation: wrote $OUT/runs.tsv, $OUT/pairs.tsv and $OUT/ablation.md"
