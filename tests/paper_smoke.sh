#!/bin/sh
# Smoke test of bench/paper_cpu (issue 6's driver): a budget of 3 trials on two suite rows, one
# seed, every model of the quick part; the report and its plots come out, hold the rows'
# figures, and a second run resumes from the logs without measuring anything again.
# usage: paper_smoke.sh PAPER_CPU WORKDIR
set -eu
PAPER=$1
W=$2
SRC=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$W"
mkdir -p "$W"
REC="$SRC/data/measured-0.2.jsonl"
if [ ! -s "$REC" ]; then
  xz -dc "$SRC/data/measured-0.2.jsonl.xz" > "$W/records.jsonl"
  REC="$W/records.jsonl"
fi
run() {
  "$PAPER" --budget 3 --seeds 1 --ids softmax_attn,layernorm --no-torch --no-static --dir "$W/runs" \
    --repeats 3 --min-repeat-ms 10 \
    --report "$W/REPORT.md" --plots "$W/plots" --records "$REC" 2> "$W/stderr.$1"
}
run 1 || { cat "$W/stderr.1"; exit 1; }
fail() { echo "paper_smoke: $*"; cat "$W/stderr.1"; exit 1; }
[ -s "$W/REPORT.md" ] || fail "no report"
grep -q "median of 3 timed repeats of at least 10 ms" "$W/REPORT.md" || fail "the report does not give the protocol"
grep -q '"repeats": 3, "min_repeat_ms": 10' "$W/runs/b64/world_layernorm_s1.json" || fail "run not measured with --repeats 3"
for m in world ansor ansor-pre random no-contrastive; do
  for id in softmax_attn layernorm; do
    n=$(wc -l < "$W/runs/b64/${m}_${id}_s1.jsonl")
    [ "$n" -ge 3 ] || fail "$m $id: $n records, want 3"
    grep -q '"build_seconds"' "$W/runs/b64/${m}_${id}_s1.json" || fail "$m $id: summary without build_seconds"
  done
done
# the budget table: a numeric world figure and three ratios on each row
for id in softmax_attn layernorm; do
  grep -E "^\| $id \| [0-9.]+ \| - \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|" \
    "$W/REPORT.md" > /dev/null || fail "row $id incomplete in the report"
  [ -s "$W/plots/b64_$id.svg" ] || fail "no plot for $id"
  grep -q "<polyline" "$W/plots/b64_$id.svg" || fail "empty plot for $id"
done
[ -s "$W/plots/b64_geomean.svg" ] || fail "no geometric-mean plot"
[ -s "$W/runs/ansor-pretrained.bin" ] || fail "no pre-trained ansor model"
# resumed: nothing measured again
before=$(cat "$W"/runs/b64/*.jsonl | wc -l)
run 2 || { cat "$W/stderr.2"; exit 1; }
after=$(cat "$W"/runs/b64/*.jsonl | wc -l)
[ "$before" = "$after" ] || fail "the second run measured again ($before -> $after records)"
echo "paper_smoke: ok ($after records, report and plots written, resumed without measuring)"
