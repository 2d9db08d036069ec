#!/bin/sh
# heldout.sh: cwm's kernels against oneDNN on layers of real networks nobody tuned for
# (data/heldout_realnet.tsv: MobileNet-V2/V3, EfficientNet, ResNet-18/34, ViT, CLIP, GPT-2, OPT,
# TinyLlama; none in the world model's training workloads or in the suite).
#
# usage: bench/heldout.sh [--cwm PATH] [--anchors PATH] [--trials N] [--threads T] [--repeats R]
#                         [--model M] [--ids a,b,...] [--suite FILE] [--out DIR] [--before PATH] [--readme FILE]
#                         [--marker NAME] [--seed S] [--target NAME]
# For each row it tunes N trials (default 64) with the model (default world), T threads (default
# 1) and search seed S (default 1), logging to DIR/ID.jsonl (a rerun resumes: raise --trials to go
# on; a row whose summary DIR/ID.json shows all N trials is not tuned again), and exports the best
# schedule. Then, R times (default 3), row after row, it times oneDNN's
# kernel (anchors_main, median of 7 repeats of >= 50 ms) and re-times cwm's best schedule (`cwm
# measure`, 5 repeats of >= 50 ms), interleaved so that the machine's drift falls on both. It prints and writes
# (DIR/heldout.tsv, DIR/heldout.md) the medians, cwm's speed as a fraction of oneDNN's
# (oneDNN_us / cwm_us: above 1 is faster than oneDNN), the geometric mean and the lowest row, and
# the same per kind of layer. --before PATH: a second cwm (built from an older commit) tunes and is
# re-timed the same way, interleaved, its logs under DIR/before: the tables gain its figures, the
# code generator's before and after in one run. --readme FILE: the Markdown tables replace what
# FILE holds between the lines <!-- heldout:begin --> and <!-- heldout:end --> (--marker NAME:
# <!-- NAME:begin --> and <!-- NAME:end -->, so that a file can hold several such tables).
# --target NAME: cwm tunes and times for that instruction set (`cwm --target list`) and oneDNN
# is held to the same (ONEDNN_MAX_CPU_ISA): avx2 on an AVX-512 CPU stands in for an AVX2 one
# (same registers and instructions; not the same cores, caches or clock).
# Keep the machine quiet while it runs: nothing else timed or built.
set -eu
LIB=$(cd "$(dirname "$0")/lib" && pwd)
CWM=build/cwm
ANCHORS=build/anchors_main
TRIALS=64
SEED=1
THREADS=1
REPEATS=3
MODEL=world
IDS=""
SUITE=data/heldout_realnet.tsv
OUT=bench-out/heldout
BEFORE=""
README=""
MARKER=heldout
TARGET=native
usage() { sed -n '5,6p' "$0" | sed 's/^# //'; }
while [ $# -gt 0 ]; do
  opt=$1
  case $opt in
    --*=*) val=${opt#*=}; opt=${opt%%=*}; shift ;;
    --help|-h) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --*) [ $# -ge 2 ] || { echo "heldout.sh: $opt needs a value; see bench/heldout.sh --help" >&2; exit 2; }
         val=$2; shift 2 ;;
    *) echo "heldout.sh: unexpected '$opt'; see bench/heldout.sh --help" >&2; exit 2 ;;
  esac
  case $opt in
    --cwm) CWM=$val ;; --anchors) ANCHORS=$val ;; --trials) TRIALS=$val ;; --seed) SEED=$val ;; --threads) THREADS=$val ;;
    --repeats) REPEATS=$val ;; --model) MODEL=$val ;; --ids) IDS=$val ;; --suite) SUITE=$val ;;
    --out) OUT=$val ;; --before) BEFORE=$val ;; --readme) README=$val ;; --marker) MARKER=$val ;;
    --target) TARGET=$val ;;
    *) echo "heldout.sh: unknown option '$opt'; see bench/heldout.sh --help" >&2; exit 2 ;;
  esac
done
for n in "$TRIALS" "$THREADS" "$REPEATS" "$SEED"; do
  case $n in ''|*[!0-9]*) echo "heldout.sh: '$n' is not a count" >&2; exit 2 ;; esac
done
[ -x "$CWM" ] || { echo "heldout.sh: no cwm at $CWM (--cwm)" >&2; exit 2; }
[ -x "$ANCHORS" ] || { echo "heldout.sh: no anchors_main at $ANCHORS (--anchors; built with libdnnl-dev)" >&2; exit 2; }
[ -r "$SUITE" ] || { echo "heldout.sh: cannot read $SUITE" >&2; exit 2; }
[ -z "$BEFORE" ] || [ -x "$BEFORE" ] || { echo "heldout.sh: no cwm at $BEFORE (--before)" >&2; exit 2; }
case $MARKER in *[!A-Za-z0-9_-]*|'') echo "heldout.sh: --marker takes letters, digits, - and _" >&2; exit 2 ;; esac
# oneDNN's name for the same instruction set (its dispatcher takes no wider one)
case $TARGET in
  native) ;;
  avx512) export ONEDNN_MAX_CPU_ISA=AVX512_CORE DNNL_MAX_CPU_ISA=AVX512_CORE ;;
  avx2) export ONEDNN_MAX_CPU_ISA=AVX2 DNNL_MAX_CPU_ISA=AVX2 ;;
  sse4) export ONEDNN_MAX_CPU_ISA=SSE41 DNNL_MAX_CPU_ISA=SSE41 ;;
  *) echo "heldout.sh: --target takes native, avx512, avx2 or sse4 (the x86 targets oneDNN can be held to)" >&2; exit 2 ;;
esac
[ -z "$README" ] || grep -q "^<!-- $MARKER:begin -->\$" "$README" ||
  { echo "heldout.sh: $README has no line <!-- $MARKER:begin --> (--readme, --marker)" >&2; exit 2; }
mkdir -p "$OUT"
export CWM_SUITE="$SUITE"
TAB=$(printf '\t')
rows() { grep -v '^#' "$SUITE" | awk -F'\t' -v ids=",$IDS," 'NF >= 3 && (ids == ",," || index(ids, "," $1 ",")) {print $1 "\t" $2 "\t" $3}'; }
[ -n "$(rows)" ] || { echo "heldout.sh: no row of $SUITE matches --ids $IDS" >&2; exit 2; }
# the kind of layer the bench reports on, from the op and its shape
kind() { # op params
  echo "$1 $2" | awk '{
    for (i = 2; i <= NF; i++) { split($i, kv, "="); p[kv[1]] = kv[2] }
    if ($1 == "dwconv2d") k = p["stride"] > 1 ? "strided depthwise" : "depthwise";
    else if ($1 == "conv2d" && p["R"] == 1 && p["K"] <= 64) k = "pointwise, few outputs";
    else if ($1 == "conv2d" && p["R"] == 1) k = "pointwise";
    else if ($1 == "conv2d" && p["stride"] > 1 && p["R"] == 3) k = "strided 3x3";
    else if ($1 == "conv2d") k = "other conv";
    else if ($1 == "batch_matmul" && (p["K"] <= 64 || p["N"] <= 64)) k = "small batched matmul";
    else if ($1 == "batch_matmul") k = "batched matmul";
    else if (($1 == "dense" || $1 == "matmul") && p["M"] == 1) k = "GEMV (decode)";
    else if (($1 == "dense" || $1 == "matmul") && (p["M"] % 8 || p["N"] % 8 || p["K"] % 8)) k = "odd-sized matmul";
    else if ($1 == "dense" || $1 == "matmul") k = "matmul";
    else k = $1;
    print k }'
}
# aligned columns where column(1) is installed (bsdextrautils), tab-separated otherwise
table() { if command -v column > /dev/null 2>&1; then column -t -s "$TAB"; else cat; fi; }
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
n=$(rows | wc -l)
CPU=$(awk -f "$LIB/cpu.awk" /proc/cpuinfo)
[ "$TARGET" = native ] || CPU="$CPU, code for --target $TARGET"
printf "heldout: %d layers, %s, %s trials each, %s thread(s), model %s, %s interleaved repeats\n" "$n" \
  "$CPU" "$TRIALS" "$THREADS" "$MODEL" "$REPEATS"
# whether dir/id was tuned to the end before: its summary counts --trials records and its kernel was
# exported (a stopped run writes no summary, or one that counts fewer); such a row is not run
# again, so that a resumed run of many rows does not re-confirm every finished one
tuned() { # dir id
  [ -s "$1/$2.json" ] && [ -s "$1/$2/steps.txt" ] &&
    awk -v want="$TRIALS" '{ t = $0; sub(/.*"trials":/, "", t); m = $0; sub(/.*"measured":/, "", m)
      r = $0; sub(/.*"resumed":/, "", r); ok = /"trials":/ && /"measured":/ && /"resumed":/ && t + 0 == want && m + r >= want }
      END { exit !ok }' "$1/$2.json"
}
tune() { # cwm dir id
  if tuned "$2" "$3"; then
    : > "$2/$3/cwm.txt"
    return 0
  fi
  "$1" tune --target "$TARGET" --workload "$3" --model "$MODEL" --trials "$TRIALS" --seed "$SEED" --threads "$THREADS" --log "$2/$3.jsonl" \
    --export "$2/$3" --name k --summary "$2/$3.json" --quiet > "$2/$3.out" 2> "$2/$3.err" ||
    { tail -3 "$2/$3.err"; echo "heldout: tuning $3 with $1 failed" >&2; exit 1; }
  sed -n 's/^ \* Schedule (Ansor-style steps): //p' "$2/$3/k.h" > "$2/$3/steps.txt"
  : > "$2/$3/cwm.txt"
}
measure() { # cwm dir id: one re-timing of the exported schedule, appended to dir/id/cwm.txt
  "$1" measure --target "$TARGET" --workload "$3" --steps "$2/$3/steps.txt" --threads "$THREADS" 2> /dev/null |
    awk -F'\t' 'NR == 1 {print $2 + 0}' >> "$2/$3/cwm.txt"
}
[ -z "$BEFORE" ] || mkdir -p "$OUT/before"
i=0
rows | while IFS="$TAB" read -r id op params; do
  i=$((i + 1))
  printf "heldout: tuning %s (%d/%d)\n" "$id" "$i" "$n"
  tune "$CWM" "$OUT" "$id"
  [ -z "$BEFORE" ] || tune "$BEFORE" "$OUT/before" "$id"
  : > "$OUT/$id/onednn.txt"
done
r=0
while [ $r -lt "$REPEATS" ]; do
  r=$((r + 1))
  printf "heldout: timing, repeat %d/%d\n" "$r" "$REPEATS"
  rows | while IFS="$TAB" read -r id op params; do
    "$ANCHORS" --suite "$SUITE" --id "$id" --threads "$THREADS" --no-torch |
      awk -v id="$id" '$1 == id {print $3}' >> "$OUT/$id/onednn.txt"
    measure "$CWM" "$OUT" "$id"
    [ -z "$BEFORE" ] || measure "$BEFORE" "$OUT/before" "$id"
  done
done
{
  printf "id\top\tkind\ttune_best_us\tcwm_us\toneDNN_us\tvs_oneDNN\tbefore_us\tbefore_vs_oneDNN\n"
  rows | while IFS="$TAB" read -r id op params; do
    best=$(sed -n 's/.*"best_us":\([0-9.e+-]*\).*/\1/p' "$OUT/$id.json")
    cu=$(median < "$OUT/$id/cwm.txt")
    du=$(median < "$OUT/$id/onednn.txt")
    [ -n "$cu" ] && [ -n "$du" ] || { echo "heldout: no timing for $id" >&2; exit 1; }
    bu=-
    bv=-
    if [ -n "$BEFORE" ]; then
      bu=$(median < "$OUT/before/$id/cwm.txt")
      [ -n "$bu" ] || { echo "heldout: no timing for $id with $BEFORE" >&2; exit 1; }
      bv=$(echo "$du $bu" | awk '{printf "%.3f", $1 / $2}')
    fi
    printf "%s\t%s\t%s\t%.2f\t%.2f\t%.2f\t%.3f\t%s\t%s\n" "$id" "$op" "$(kind "$op" "$params")" "$best" "$cu" "$du" \
      "$(echo "$du $cu" | awk '{print $1 / $2}')" "$bu" "$bv"
  done
} > "$OUT/heldout.tsv"
# the summary: all rows, then each kind by name (geometric mean, lowest row; the same before, or -)
awk -F'\t' 'function add(k) { l[k] += log($7); c[k]++; if (!(k in mn) || $7 < mn[k]) { mn[k] = $7; mid[k] = $1 }
                              if ($9 != "-") { bl[k] += log($9); bc[k]++ } }
  NR > 1 { add("all layers"); add($3) }
  END {
    for (k in c) printf "%d\t%s\t%d\t%s\t%.3f\t%.3f (%s)\n", k != "all layers", k, c[k],
                        bc[k] ? sprintf("%.3f", exp(bl[k] / bc[k])) : "-", exp(l[k] / c[k]), mn[k], mid[k]
  }' "$OUT/heldout.tsv" | sort | cut -f 2- > "$OUT/summary.tsv"
{
  printf "Measured by \`bench/heldout.sh --trials %s --threads %s --model %s --repeats %s%s%s\` on %s: medians of %s\n" \
    "$TRIALS" "$THREADS" "$MODEL" "$REPEATS" "$([ "$SEED" = 1 ] || echo " --seed $SEED")$([ "$TARGET" = native ] || echo " --target $TARGET")" \
    "${BEFORE:+ --before OLD_CWM}" "$CPU" "$REPEATS"
  printf "interleaved re-timings; vs oneDNN = oneDNN's time / cwm's (above 1: cwm is faster)%s.\n\n" \
    "${BEFORE:+; before: the same for the older build (its search and code generator), tuned and timed in the same run}"
  printf "| kind of layer | layers | before | vs oneDNN (geomean) | lowest (layer) |\n|---|---:|---:|---:|---|\n"
  awk -F'\t' '{printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5}' "$OUT/summary.tsv"
  printf "\n| layer | kind | cwm us | oneDNN us | vs oneDNN | before |\n|---|---|---:|---:|---:|---:|\n"
  awk -F'\t' 'NR > 1 {printf "| %s | %s | %s | %s | %s | %s |\n", $1, $3, $5, $6, $7, $9}' "$OUT/heldout.tsv"
} > "$OUT/heldout.md"
table < "$OUT/heldout.tsv"
echo
table < "$OUT/summary.tsv"
if [ -n "$README" ]; then
  awk -v md="$OUT/heldout.md" -v m="$MARKER" -f "$LIB/splice.awk" "$README" > "$README.tmp.$$" && mv "$README.tmp.$$" "$README"
  echo "heldout: rewrote the table in $README"
fi
echo "heldout: wrote $OUT/heldout.tsv and $OUT/heldout.md"
