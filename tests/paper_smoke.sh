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
REC="$SRC/data/measured-0.3.jsonl"
if [ ! -s "$REC" ]; then
  xz -dc "$SRC/data/measured-0.3.jsonl.xz" > "$W/records.jsonl"
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
grep -q "mean of 3 timed repeats of at least 10 ms" "$W/REPORT.md" || fail "the report does not give the protocol"
grep -q '"repeats":3,"min_repeat_ms":10' "$W/runs/b64/world_layernorm_s1.json" || fail "run not measured with --repeats 3"
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
# the budget-64 re-measure: per row, each complete run's best schedule (4 models and 2 ablations,
# seed 1) timed three times in one stretch; the report's table reads those figures (no * on the row);
# the second run left it alone; a changed set of runs moves the old measurements aside
for id in softmax_attn layernorm; do
  B="$W/runs/b64final/$id"
  [ "$(wc -l < "$B.steps")" = 6 ] || fail "b64 re-measure of $id: $(wc -l < "$B.steps") step lists, want 6"
  [ "$(wc -l < "$B.tags")" = 6 ] || fail "b64 re-measure of $id: tags and step lists differ in length"
  grep -qx "world 1" "$B.tags" || fail "b64 re-measure of $id: world's run missing"
  [ "$(wc -l < "$B.jsonl")" = 18 ] || fail "b64 re-measure of $id: $(wc -l < "$B.jsonl") records, want 18"
  grep -q "^| $id |" "$W/REPORT.md" || fail "row $id shows logged figures though it was re-measured"
done
grep -q "Measured, re-measured:" "$W/REPORT.md" || fail "the target line does not read the re-measured figures"
sed -i '$d' "$W/runs/b64final/layernorm.tags"
run 3 || { cat "$W/stderr.3"; exit 1; }
[ -s "$W/runs/b64final/layernorm.jsonl.stale" ] || fail "a changed re-measure list did not keep the old records"
[ "$(wc -l < "$W/runs/b64final/layernorm.jsonl")" = 18 ] || fail "a changed re-measure list was not measured again"
# section 7: every piece of the quick part timed (the tuning runs from their .out files, the
# anchors and re-measures from times.tsv), so the report can say whether it fits in 3 hours
for step in anchors b64final/softmax_attn b64final/layernorm; do
  grep -Eq "^$step	[0-9.]+$" "$W/runs/times.tsv" || fail "times.tsv: no time for $step"
done
grep -Eq '^\| \*\*quick part\*\* \| 16 of 16 \| [0-9]+ \|' "$W/REPORT.md" ||
  fail "the time section does not count every quick step: $(grep 'quick part\*\*' "$W/REPORT.md")"
grep -q "Target: the quick part within 3 hours. Measured: 0.[0-9][0-9] h: met" "$W/REPORT.md" ||
  fail "the time section lacks its verdict"
grep -Eq '^\| budget 3, world \| 2 of 2 \| [0-9]+ \|' "$W/REPORT.md" || fail "the time section lacks world's runs"
# the ablations continued (5 trials here for 200), each from its budget-64 log, then their
# winners re-measured per row like the budget-64 ones; the report's second ablation table reads them
"$PAPER" --part ablate200 --budget 3 --budget200 5 --seeds 1 --ids softmax_attn,layernorm --no-torch --no-static \
  --dir "$W/runs" --repeats 3 --min-repeat-ms 10 --report "$W/REPORT.md" --plots "$W/plots" --records "$REC" \
  2> "$W/stderr.a" || { cat "$W/stderr.a"; exit 1; }
for id in softmax_attn layernorm; do
  for m in world no-transition no-contrastive; do
    # (at least 5: a 3-record log is a cut-short round to cwm tune, searched again with the new budget)
    [ "$(wc -l < "$W/runs/b200/${m}_${id}_s1.jsonl")" -ge 5 ] || fail "ablate200: $m $id under 5 records"
    head -n 3 "$W/runs/b200/${m}_${id}_s1.jsonl" | cmp -s - "$W/runs/b64/${m}_${id}_s1.jsonl" ||
      fail "ablate200: $m $id does not continue its budget-64 log"
  done
  [ ! -e "$W/runs/b200/static_${id}_s1.jsonl" ] || fail "ablate200: --no-static ran the static ablation"
  B="$W/runs/b200final/$id"
  [ "$(wc -l < "$B.tags")" = 3 ] || fail "ablate200: $id re-measure holds $(wc -l < "$B.tags") runs, want 3"
  [ "$(wc -l < "$B.jsonl")" = 9 ] || fail "ablate200: $id re-measured $(wc -l < "$B.jsonl") times, want 9"
done
grep -A 6 "after 5 measurements" "$W/REPORT.md" | grep -E '^\| layernorm \| [0-9.]+ \| [0-9.]+ \| - \| [0-9.]+ \|$' \
  > /dev/null || fail "ablate200: the report's table lacks re-measured figures for layernorm"
# the sample-efficiency part at a tiny scale (world 3 trials, ansor 5, one row), then its final
# re-measure: the contenders' best schedules measured together, three times, in line with the step
# lists; a round cut short resumes in line, and the report's row gets its re-measured figures
srun() {
  "$PAPER" --part sample --long-ids softmax_attn --world-trials 3 --ansor-trials 5 --seeds 1 \
    --ids softmax_attn,layernorm --no-torch --dir "$W/runs" --repeats 3 --min-repeat-ms 10 \
    --report "$W/REPORT.md" --plots "$W/plots" --records "$REC" 2> "$W/stderr.s$1"
}
srun 1 || { cat "$W/stderr.s1"; exit 1; }
F="$W/runs/sample/final_softmax_attn"
[ -s "$F.steps" ] || fail "sample: no final re-measure step lists"
L=$(wc -l < "$F.steps")
[ "$L" -ge 3 ] && [ "$L" -le 13 ] || fail "sample: $L step lists re-measured, want 3 to 13"
[ "$(wc -l < "$F.tags")" = "$L" ] || fail "sample: tags and step lists differ in length"
[ "$(wc -l < "$F.jsonl")" = $((3 * L)) ] || fail "sample: $(wc -l < "$F.jsonl") re-measured records, want $((3 * L))"
head -n $((L + 2)) "$F.jsonl" > "$F.cut"
mv "$F.cut" "$F.jsonl"
srun 2 || { cat "$W/stderr.s2"; exit 1; }
[ "$(wc -l < "$F.jsonl")" = $((3 * L)) ] || fail "sample: resumed round left $(wc -l < "$F.jsonl") records"
i=0
while IFS= read -r rec; do
  want=$(sed -n "$((i % L + 1))p" "$F.steps")
  got=$(printf '%s\n' "$rec" | sed 's/^.*,\[\[\],\(\[.*\]\)\]\],"r".*$/\1/')
  [ "$got" = "$want" ] || fail "sample: record $i is not step list $((i % L + 1)): $got"
  i=$((i + 1))
done < "$F.jsonl"
grep -E '^\| softmax_attn( \| [0-9.]+){9} \|$' "$W/REPORT.md" > /dev/null ||
  fail "sample: the report's row lacks figures: $(grep '^| softmax_attn' "$W/REPORT.md" | tail -1)"
n3=$(wc -l < "$F.jsonl")
srun 3 || { cat "$W/stderr.s3"; exit 1; }
[ "$(wc -l < "$F.jsonl")" = "$n3" ] || fail "sample: a complete re-measure was measured again"
for step in b200final/layernorm samplefinal/softmax_attn; do
  grep -Eq "^$step	[0-9.]+$" "$W/runs/times.tsv" || fail "times.tsv: no time for $step"
done
echo "paper_smoke: ok ($after records, report and plots written, resumed without measuring; sample part re-measured $L lists three times)"
