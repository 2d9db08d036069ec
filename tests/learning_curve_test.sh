#!/bin/sh
# learning_curve_test.sh: bench/learning_curve.sh's bookkeeping with a stand-in for cwm (no
# training): the held-out workloads are in every run's records, each fraction keeps its share of
# the training workloads, the pre-training and value steps get the trajectories asked for, every
# run starts from the right model with its seed, Ansor's reference rows, the neighbour taus, the
# table averages over seeds and pairs, a rerun trains nothing, and bad options are refused.
set -eu
SRC=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
# records: 16 training workloads (keys 1..., second-last hex digit 0-f), 2 records each; 2 held-out
# workloads (keys 0...), 2 records each
for d in 0 1 2 3 4 5 6 7 8 9 a b c d e f; do
  for r in 1 2; do printf '{"i":[["10000000000000%s0","t"],[]],"r":[[1e-05],0]}\n' "$d"; done
done > "$T/records.jsonl"
for k in 0000000000000001 0000000000000002; do
  for r in 1 2; do printf '{"i":[["%s","t"],[]],"r":[[1e-05],0]}\n' "$k"; done
done >> "$T/records.jsonl"
i=0; while [ $i -lt 100 ]; do echo "{\"traj\":$i}"; i=$((i + 1)); done > "$T/traj.jsonl"
echo base > "$T/base.cwm"
echo '{}' > "$T/cand.jsonl"
printf '# log\tA\tB\n%s\tpairA\tpairA1\n%s\tpairB\tpairB1\n' "$T/cand.jsonl" "$T/cand.jsonl" > "$T/neighbours.tsv"
# the stand-in: a model file is a line of words naming how it was made; eval score's figures come
# from them: top-1 = training records / 100, tau = seed / 10 (+ 0.05 if pre-trained), first pick
# 20 us (seed 1) or 40 us (otherwise) against a best of 10; eval noise's tau 0.5 (0.9 pre-trained,
# 0.7 ansor), 0.1 more on pair B
cat > "$T/cwm" <<'EOS'
#!/bin/sh
echo "$*" >> "$(dirname "$0")/calls"
a=$1 b=$2; shift 2
while [ $# -gt 0 ]; do case $1 in
  --in) in=$2; shift 2 ;; --train) tr=$2; shift 2 ;; --valid) va=$2; shift 2 ;; --data) data=$2; shift 2 ;;
  --records) rec=$2; shift 2 ;; --model-file|--pretrained) mf=$2; shift 2 ;; --out) out=$2; shift 2 ;; --seed) seed=$2; shift 2 ;;
  --workload) wa=$2; shift 2 ;; --candidates) [ -r "$2" ] || exit 1; shift 2 ;;
  *) shift ;; esac; done
case "$a $b" in
  "dataset split") grep '"i":\[\["0' "$in" > "$va"; grep -v '"i":\[\["0' "$in" > "$tr" ;;
  "train transition")
    if [ -z "${rec:-}" ]; then echo "pre data=$(grep -c . "$data") from=$(cat "$mf")" > "$out"
    else
      [ "$(grep -c '"i":\[\["0' "$rec")" = 4 ] || { echo "held-out records missing from $rec" >&2; exit 1; }
      echo "value seed=$seed data=$(grep -c . "$data") train=$(grep -vc '"i":\[\["0' "$rec") from=[$(cat "$mf")]" > "$out"
    fi ;;
  "train ranker") echo "ranker seed=$seed of [$(cat "$mf")]" > "$out" ;;
  "train ansor") echo "ansor train=$(grep -vc '"i":\[\["0' "$rec")" > "$out" ;;
  "eval noise")
    awk -v wa="$wa" '{ t = /pre data=/ ? 0.9 : /ansor/ ? 0.7 : 0.5; if (wa == "pairB") t += 0.1
      print "| model | A | B | candidates fitting both | Kendall tau-b | top-8 overlap |"; print "|---|---|---|---|---|---|"
      printf "| world | a | b | 5 of 5 | %.3f | 8/8 |\n", t }' "$mf" ;;
  "eval score")
    awk '{ for (i = 1; i <= NF; i++) { if ($i ~ /^train=/) x = substr($i, 7); if ($i ~ /^seed=/ && s == "") s = substr($i, 6) }
           pre = ($0 ~ /pre data=/) ? 0.05 : 0; pick = (s == 1) ? 20 : 40
           print "| workload | records | best (us) | top-1 (us) | top 8 (us) | top-1 | top-5 | NDCG@10 | Kendall tau |"
           print "|---|---|---|---|---|---|---|---|---|"
           for (w = 1; w <= 2; w++) printf "| w%d | 2 | 10.0 | %.1f | 10.0 | %.4f | 0.9000 | 0.5000 | %.4f |\n", w, pick, x / 100, s / 10 + pre }' "$mf" ;;
  *) echo "unexpected: $a $b" >&2; exit 1 ;;
esac
EOS
chmod +x "$T/cwm"
printf 'intro\n<!-- learning:begin -->\nstale\n<!-- learning:end -->\nrest\n' > "$T/REPORT.md"
cd "$SRC"
fail() { echo "learning_curve_test: $*"; cat "$T/log" 2>/dev/null; exit 1; }
run() {
  sh bench/learning_curve.sh --cwm "$T/cwm" --model-file "$T/base.cwm" --records "$T/records.jsonl" --trajectories "$T/traj.jsonl" \
    --pretrain 0,50 --fractions 25,100 --value-traj 10 --seeds 1,2 --neighbours "$T/neighbours.tsv" --compare "$T/base.cwm" --out "$T/out" \
    --report "$T/REPORT.md" > "$T/log" 2>&1
}
run || fail "run failed"
row() { grep -qF "| $1 |" "$T/REPORT.md" || fail "no row: $1"; }
# 25%: 4 of 16 training workloads (8 records); tau 0.1 and 0.2; first pick 2 and 4 times the best
# neighbour tau: the mean of pairs A and B (0.5 and 0.6; pre-trained 0.9 and 1.0; ansor 0.7 and 0.8)
row "world, transition as given | 4 (25%) | 0.080 | 0.900 | 0.500 | 0.150 (0.100-0.200) | 3.000 (2.000-4.000) | 1.000 | 0.550"
row "world, transition as given | 16 (100%) | 0.320 | 0.900 | 0.500 | 0.150 (0.100-0.200) | 3.000 (2.000-4.000) | 1.000 | 0.550"
row "world, transition pre-trained on 50 trajectories | 16 (100%) | 0.320 | 0.900 | 0.500 | 0.200 (0.150-0.250) | 3.000 (2.000-4.000) | 1.000 | 0.950"
row "Ansor's cost model, pre-trained | 4 (25%) | 0.080 | 0.900 | 0.500 | 0.000 (0.000-0.000) | 4.000 (4.000-4.000) | 1.000 | 0.750"
row "$T/base.cwm (as it is) | - | 0.000 | 0.900 | 0.500 | 0.000 (0.000-0.000) | 4.000 (4.000-4.000) | 1.000 | 0.550"
grep -q "2 held-out workloads" "$T/REPORT.md" || fail "the held-out count is not said"
grep -q "over 2 pairs" "$T/REPORT.md" || fail "the number of neighbour pairs is not said"
[ "$(head -1 "$T/REPORT.md")" = intro ] && [ "$(tail -1 "$T/REPORT.md")" = rest ] || fail "the report around the markers changed"
grep -q stale "$T/REPORT.md" && fail "the old table is still there"
[ "$(grep -c . "$T/out/runs.tsv")" = 12 ] || fail "runs.tsv: $(grep -c . "$T/out/runs.tsv") lines, not 1 + 8 + 2 + 1"
# the pre-training saw 50 trajectories, from the base model; each value step 10, from its start
grep -q "pre data=50 from=base" "$T/out/pre-50.cwm" || fail "pre-training: $(cat "$T/out/pre-50.cwm")"
grep -q "value seed=2 data=10 train=8 from=\[pre data=50 from=base\]" "$T/out/p50-f25-s2.value.cwm" ||
  fail "value step: $(cat "$T/out/p50-f25-s2.value.cwm")"
grep -q "value seed=1 data=10 train=32 from=\[base\]" "$T/out/p0-f100-s1.value.cwm" || fail "value step: $(cat "$T/out/p0-f100-s1.value.cwm")"
# a rerun resumes: nothing trained or scored again
n=$(grep -c . "$T/calls")
run || fail "rerun failed"
[ "$(grep -c . "$T/calls")" = "$n" ] || fail "the rerun called cwm again: $(tail -n +$((n + 1)) "$T/calls")"
# bad options: exit 2 and a message that names the option
bad() {
  if sh bench/learning_curve.sh --cwm "$T/cwm" --model-file "$T/base.cwm" --records "$T/records.jsonl" \
    --trajectories "$T/traj.jsonl" --out "$T/bad" "$@" > "$T/log" 2>&1; then fail "accepted $*"; fi
  grep -q -- "$1" "$T/log" || fail "the message for $* does not name $1: $(cat "$T/log")"
}
bad --fractions 0
bad --fractions 25,,50
bad --seeds x
bad --value-traj 0
bad --marker 'a b' --report "$T/REPORT.md"
printf 'only-a-log\tpairA\n' > "$T/bad.tsv"
bad --neighbours "$T/bad.tsv"
bad --compare "$T/none.cwm"
if sh bench/learning_curve.sh --cwm "$T/cwm" --trajectories "$T/traj.jsonl" > "$T/log" 2>&1; then fail "ran without --records"; fi
grep -q -- --records "$T/log" || fail "no word of --records: $(cat "$T/log")"
echo "learning_curve_test: ok"
