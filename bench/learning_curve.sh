#!/bin/sh
# learning_curve.sh: what each scale step of the training data buys the world model, on workloads
# held out from training: the transition pre-trained on more unmeasured trajectories, and the
# value head and ranker trained on the records of more measured workloads.
#
# usage: bench/learning_curve.sh --records FILE --trajectories FILE [--cwm PATH] [--model-file BASE]
#                                [--pretrain LIST] [--fractions LIST] [--value-traj N] [--seeds LIST]
#                                [--neighbours FILE] [--compare LIST] [--out DIR] [--report FILE]
#                                [--marker NAME]
# --records: measured records (`cwm tune` logs, e.g. data/measured-0.3.jsonl unpacked). They are
# split by workload as `cwm train` splits them (`cwm dataset split --valid-fraction 0.15`): the
# held-out workloads keep all their records in every run and are the ones scored; of the training
# workloads, --fractions (percent, default 25,50,100) keep that share, chosen by the workload key
# (its second-last hex digit: sixteenths, so the smaller sets are part of the larger ones).
# --trajectories: unmeasured trajectories (`cwm dataset sample`). --pretrain (default 0): for each
# N > 0, the transition of --model-file (default models/default.cwm) is first trained on N of
# them, taken evenly through the file, with 4 encoder targets a trajectory (`cwm train transition
# --target-states 4`; DIR/pre-N.cwm, kept and reused); 0 is --model-file as it is. Then, for every
# start, fraction and seed (--seeds, default 1,2,3): the value step of the shipped recipe (`cwm
# train transition --epochs 4 --records ... --value-gap 0.15 --weight-decay 0.1` over --value-traj
# trajectories, default 1700, taken evenly), the ranker (`cwm train ranker --rounds 200 --mode
# value`), and `cwm eval score` on the held-out records. For reference, Ansor's cost model
# pre-trained on each fraction's records (`cwm train ansor`) is scored the same way, and so is
# every world model file of --compare (comma-separated; e.g. the shipped models/default.cwm).
# --neighbours FILE: lines "LOG<TAB>A<TAB>B" (a tuning log of workload A, e.g. a 64-trial run,
# and B, A at a shape one apart); every model also scores LOG's schedules on A and on B (`cwm
# eval noise --candidates`), and the table gives the mean rank correlation over the pairs.
# Every model and score is kept under DIR (default bench-out/learning): a rerun resumes.
# Written: DIR/runs.tsv (a line a run: the means over held-out workloads of the model's top-1
# over the best, top-5, NDCG@10 and Kendall tau, the geometric means of the first pick's and the
# best of the top 8's latency over the best, and the neighbour taus) and DIR/learning.md (per
# start and fraction: the mean over seeds and the range); --report FILE puts
# the Markdown between <!-- learning:begin --> and <!-- learning:end --> of FILE (--marker NAME:
# NAME instead). Needs no timing: it can run beside other work, but takes a core for minutes a run
# (and about 15 ms a trajectory state for pre-training).
set -eu
LIB=$(cd "$(dirname "$0")/lib" && pwd)
CWM=build/cwm
BASE=models/default.cwm
RECORDS=""
TRAJ=""
PRETRAIN=0
FRACTIONS=25,50,100
VALUE_TRAJ=1700
SEEDS=1,2,3
OUT=bench-out/learning
NEIGHBOURS=""
COMPARE=""
REPORT=""
MARKER=learning
die() { echo "learning_curve.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  opt=$1
  case $opt in
    --*=*) val=${opt#*=}; opt=${opt%%=*}; shift ;;
    --help|-h) sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --*) [ $# -ge 2 ] || die "$opt needs a value; see bench/learning_curve.sh --help"
         val=$2; shift 2 ;;
    *) die "unexpected '$opt'; see bench/learning_curve.sh --help" ;;
  esac
  case $opt in
    --cwm) CWM=$val ;; --model-file) BASE=$val ;; --records) RECORDS=$val ;; --trajectories) TRAJ=$val ;;
    --pretrain) PRETRAIN=$val ;; --fractions) FRACTIONS=$val ;; --value-traj) VALUE_TRAJ=$val ;;
    --seeds) SEEDS=$val ;; --out) OUT=$val ;; --report) REPORT=$val ;; --marker) MARKER=$val ;;
    --neighbours) NEIGHBOURS=$val ;; --compare) COMPARE=$val ;;
    *) die "unknown option $opt; see bench/learning_curve.sh --help" ;;
  esac
done
[ -n "$RECORDS" ] && [ -n "$TRAJ" ] || die "--records and --trajectories are required; see bench/learning_curve.sh --help"
[ -r "$RECORDS" ] || die "cannot read --records $RECORDS"
[ -r "$TRAJ" ] || die "cannot read --trajectories $TRAJ"
[ -r "$BASE" ] || die "cannot read --model-file $BASE"
[ -x "$CWM" ] || die "no cwm at $CWM (--cwm)"
list() { # NAME VALUE: a comma-separated list of integers
  case $2 in ''|,*|*,|*,,*|*[!0-9,]*) die "$1 takes a comma-separated list of integers, not '$2'" ;; esac
  echo "$2" | tr , ' '
}
SEEDS=$(list --seeds "$SEEDS")
PRETRAIN=$(list --pretrain "$PRETRAIN")
FRACTIONS=$(list --fractions "$FRACTIONS")
for f in $FRACTIONS; do [ "$f" -ge 1 ] && [ "$f" -le 100 ] || die "--fractions are percentages from 1 to 100, not $f"; done
case $VALUE_TRAJ in ''|*[!0-9]*|0) die "--value-traj takes a positive integer" ;; esac
case $MARKER in *[!A-Za-z0-9_-]*|'') die "--marker takes letters, digits, - and _" ;; esac
TAB=$(printf '\t')
if [ -n "$NEIGHBOURS" ]; then
  [ -r "$NEIGHBOURS" ] || die "cannot read --neighbours $NEIGHBOURS"
  awk -F'\t' '!/^#/ && NF && (NF != 3 || $1 == "" || $2 == "" || $3 == "") {
    printf "learning_curve.sh: --neighbours %s:%d: want LOG<TAB>workload A<TAB>workload B\n", FILENAME, NR; bad = 1 }
    END {exit bad}' "$NEIGHBOURS" >&2 || exit 2
  while IFS=$TAB read -r log a b; do
    case $log in '#'*|'') continue ;; esac
    [ -r "$log" ] || die "--neighbours: cannot read $log"
  done < "$NEIGHBOURS"
fi
for m in $(echo "$COMPARE" | tr , ' '); do [ -r "$m" ] || die "--compare: cannot read $m"; done
[ -z "$REPORT" ] || grep -q "^<!-- $MARKER:begin -->\$" "$REPORT" ||
  die "$REPORT has no line <!-- $MARKER:begin --> (--report, --marker)"
mkdir -p "$OUT"
say() { echo "learning: $*" >&2; }

# every K-th line of FILE, K chosen so that about N lines come out (all of them when N >= lines)
evenly() { # FILE N OUT
  [ -s "$3" ] && return 0
  awk -v n="$2" -v total="$(grep -c . "$1")" 'BEGIN {k = int(total / n); if (k < 1) k = 1} NF && c++ % k == 0 && m++ < n' "$1" > "$3.tmp"
  mv "$3.tmp" "$3"
}
# the records of workloads whose key's second-last hex digit is below 16 * F / 100
keep_share() { # FILE F OUT
  awk -v f="$2" 'BEGIN {lim = int(16 * f / 100 + 0.5)}
    match($0, /"i":\[\["[0-9a-f]+"/) { k = substr($0, RSTART + 8, RLENGTH - 9)
      d = index("0123456789abcdef", substr(k, length(k) - 1, 1)) - 1; if (d < lim) print }' "$1"
}
workloads() { awk 'match($0, /"i":\[\["[0-9a-f]+"/) {print substr($0, RSTART + 8, RLENGTH - 9)}' "$1" | sort -u | grep -c . || true; }

# the held-out split, as `cwm train` makes it
[ -s "$OUT/valid.jsonl" ] || "$CWM" dataset split --in "$RECORDS" --valid-fraction 0.15 --train "$OUT/train.jsonl" \
  --valid "$OUT/valid.jsonl" > "$OUT/split.log" 2>&1 || die "cwm dataset split failed: $(tail -1 "$OUT/split.log")"
NV=$(workloads "$OUT/valid.jsonl")
[ "$NV" -gt 0 ] || die "$RECORDS: no held-out workloads"
for f in $FRACTIONS; do
  [ -s "$OUT/records-$f.jsonl" ] && continue
  { keep_share "$OUT/train.jsonl" "$f"; cat "$OUT/valid.jsonl"; } > "$OUT/records-$f.tmp"
  mv "$OUT/records-$f.tmp" "$OUT/records-$f.jsonl"
done
evenly "$TRAJ" "$VALUE_TRAJ" "$OUT/value-traj.jsonl"

# the starts: --model-file, and its transition pre-trained on N trajectories
for n in $PRETRAIN; do
  [ "$n" = 0 ] && continue
  [ -s "$OUT/pre-$n.cwm" ] && continue
  evenly "$TRAJ" "$n" "$OUT/traj-$n.jsonl"
  say "pre-training the transition on $(grep -c . "$OUT/traj-$n.jsonl") trajectories"
  "$CWM" train transition --seed 1 --model-file "$BASE" --data "$OUT/traj-$n.jsonl" --target-states 4 \
    --targets-cache "$OUT/targets-$n" --out "$OUT/pre-$n.cwm" > "$OUT/pre-$n.log" 2>&1 ||
    die "pre-training on $n trajectories failed: $(tail -1 "$OUT/pre-$n.log")"
done

# ID MODEL-ARGS...: the run's line of runs.tsv after its pretrain, fraction, workloads and seed:
# the held-out ranking and the neighbour taus (comma-separated; "-" without --neighbours)
score() {
  id=$1; shift
  if [ ! -s "$OUT/$id.score.md" ]; then
    "$CWM" eval score --records "$OUT/valid.jsonl" "$@" > "$OUT/$id.score.tmp" 2> "$OUT/$id.score.log" ||
      die "$id: eval score failed: $(tail -1 "$OUT/$id.score.log")"
    mv "$OUT/$id.score.tmp" "$OUT/$id.score.md"
  fi
  line=$(awk -F'|' -f "$LIB/score_summary.awk" "$OUT/$id.score.md")
  [ -n "$line" ] || die "$OUT/$id.score.md: no per-workload rows"
  taus=-
  if [ -n "$NEIGHBOURS" ]; then
    if [ ! -s "$OUT/$id.neighbours" ]; then
      while IFS=$TAB read -r log a b; do
        case $log in '#'*|'') continue ;; esac
        "$CWM" eval noise --workload "$a" --other "$b" --candidates "$log" "$@" > "$OUT/$id.noise.md" 2>&1 < /dev/null ||
          die "$id: eval noise on $log failed: $(tail -1 "$OUT/$id.noise.md")"
        awk -F'|' 'NF > 6 && $6 ~ /[0-9]/ {t = $6} END {gsub(/ /, "", t); print t}' "$OUT/$id.noise.md"
      done < "$NEIGHBOURS" > "$OUT/$id.neighbours.tmp"
      mv "$OUT/$id.neighbours.tmp" "$OUT/$id.neighbours"
    fi
    taus=$(paste -sd, "$OUT/$id.neighbours")
  fi
  printf '%s\t%s\n' "$line" "$taus"
}

printf 'pretrain\tfraction\tworkloads\tseed\ttop1\ttop5\tndcg10\ttau\tpick_best\ttop8_best\tneighbour_taus\n' > "$OUT/runs.tsv"
runs=0
for n in $PRETRAIN; do for f in $FRACTIONS; do for s in $SEEDS; do runs=$((runs + 1)); done; done; done
i=0
t0=$(date +%s)
for n in $PRETRAIN; do
  if [ "$n" = 0 ]; then start=$BASE; else start=$OUT/pre-$n.cwm; fi
  for f in $FRACTIONS; do
    nw=$(($(workloads "$OUT/records-$f.jsonl") - NV))
    for s in $SEEDS; do
      i=$((i + 1))
      id=p$n-f$f-s$s
      if [ ! -s "$OUT/$id.cwm" ]; then
        el=$(($(date +%s) - t0))
        eta=""; [ "$i" -gt 1 ] && eta=", about $((el * (runs - i + 1) / (i - 1) / 60)) min left"
        say "run $i/$runs: pre-trained on $n trajectories, $f% of the training workloads ($nw), seed $s$eta"
        [ -s "$OUT/$id.value.cwm" ] || "$CWM" train transition --seed "$s" --model-file "$start" --data "$OUT/value-traj.jsonl" \
          --target-states 4 --targets-cache "$OUT/targets-value-p$n-s$s" --epochs 4 --records "$OUT/records-$f.jsonl" \
          --value-gap 0.15 --weight-decay 0.1 --out "$OUT/$id.value.cwm" > "$OUT/$id.value.log" 2>&1 ||
          die "$id: value step failed: $(tail -1 "$OUT/$id.value.log")"
        [ -s "$OUT/$id.cwm" ] || "$CWM" train ranker --seed "$s" --model-file "$OUT/$id.value.cwm" --records "$OUT/records-$f.jsonl" \
          --rounds 200 --mode value --out "$OUT/$id.cwm" > "$OUT/$id.ranker.log" 2>&1 ||
          die "$id: ranker failed: $(tail -1 "$OUT/$id.ranker.log")"
      fi
      printf '%s\t%s\t%s\t%s\t%s\n' "$n" "$f" "$nw" "$s" "$(score "$id" --model-file "$OUT/$id.cwm")" >> "$OUT/runs.tsv"
    done
  done
done
# Ansor's cost model pre-trained on the same records, for reference (its trees draw no random numbers)
for f in $FRACTIONS; do
  nw=$(($(workloads "$OUT/records-$f.jsonl") - NV))
  if [ ! -s "$OUT/ansor-f$f.bin" ]; then
    say "Ansor's cost model on $f% of the training workloads ($nw)"
    "$CWM" train ansor --records "$OUT/records-$f.jsonl" --valid-fraction 0.15 --out "$OUT/ansor-f$f.bin" \
      > "$OUT/ansor-f$f.log" 2>&1 || die "train ansor on $f% failed: $(tail -1 "$OUT/ansor-f$f.log")"
  fi
  printf 'ansor\t%s\t%s\t-\t%s\n' "$f" "$nw" "$(score "ansor-f$f" --model ansor --pretrained "$OUT/ansor-f$f.bin")" >> "$OUT/runs.tsv"
done

# the models of --compare, as they are
c=0
for m in $(echo "$COMPARE" | tr , ' '); do
  c=$((c + 1))
  printf 'model:%s\t-\t-\t-\t%s\n' "$m" "$(score "compare-$c" --model-file "$m")" >> "$OUT/runs.tsv"
done

# per start and fraction: mean over seeds, and the range of the first pick and of tau
pairs=0
[ -z "$NEIGHBOURS" ] || pairs=$(awk '!/^#/ && NF {c++} END {print c + 0}' "$NEIGHBOURS")
awk -F'\t' -v nv="$NV" -v seeds="$(echo $SEEDS | wc -w)" -v src="$RECORDS" -v pairs="$pairs" '
  NR == 1 { next }
  { k = $1 SUBSEP $2; if (!(k in n)) { order[++no] = k; pre[k] = $1; fr[k] = $2; nw[k] = $3 }
    n[k]++; for (c = 5; c <= 10; c++) sum[k, c] += $c
    if ($11 != "-") { nt = split($11, t, ","); for (j = 1; j <= nt; j++) { nb[k] += t[j]; nnb[k]++ } }
    if (!(k in lo) || $9 < lo[k]) lo[k] = $9; if (!(k in hi) || $9 > hi[k]) hi[k] = $9
    if (!(k in tlo) || $8 < tlo[k]) tlo[k] = $8; if (!(k in thi) || $8 > thi[k]) thi[k] = $8 }
  END {
    printf "Measured by `bench/learning_curve.sh` on %s: %d held-out workloads (all their records in every run), ", src, nv
    printf "the mean over %d seed(s) of each figure (the range over seeds in brackets); top-1, top-5, NDCG@10 and tau are the means ", seeds
    printf "over held-out workloads of `cwm eval score`%ss columns, first pick and top 8 the geometric means of the model%ss first pick ", "\047", "\047"
    printf "and of the best of its top 8 over the best measured latency (1 is perfect)"
    printf "; Ansor%ss rows are one run each (its trees draw no random numbers)", "\047"
    if (pairs) printf "; neighbour tau: the mean over %d pairs of workloads one shape apart of the rank correlation of the model%ss scores of the same measured schedules on both (`cwm eval noise --candidates`)", pairs, "\047"
    printf ".\n\n"
    print "| model | training workloads measured | top-1 | top-5 | NDCG@10 | Kendall tau | first pick / best | top 8 / best | neighbour tau |"
    print "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    for (i = 1; i <= no; i++) { k = order[i]; c = n[k]
      name = pre[k] == "ansor" ? "Ansor\047s cost model, pre-trained" : pre[k] == 0 ? "world, transition as given" : "world, transition pre-trained on " pre[k] " trajectories"
      if (pre[k] ~ /^model:/) name = substr(pre[k], 7) " (as it is)"
      measured = fr[k] == "-" ? "-" : sprintf("%d (%d%%)", nw[k], fr[k])
      printf "| %s | %s | %.3f | %.3f | %.3f | %.3f (%.3f-%.3f) | %.3f (%.3f-%.3f) | %.3f | %s |\n",
        name, measured, sum[k, 5] / c, sum[k, 6] / c, sum[k, 7] / c, sum[k, 8] / c, tlo[k], thi[k],
        sum[k, 9] / c, lo[k], hi[k], sum[k, 10] / c, nnb[k] ? sprintf("%.3f", nb[k] / nnb[k]) : "-" }
  }' "$OUT/runs.tsv" > "$OUT/learning.md"
cat "$OUT/learning.md"
if [ -n "$REPORT" ]; then
  awk -v md="$OUT/learning.md" -v m="$MARKER" -f "$LIB/splice.awk" "$REPORT" > "$REPORT.tmp.$$" && mv "$REPORT.tmp.$$" "$REPORT"
  say "wrote the table into $REPORT"
fi
