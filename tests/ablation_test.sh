#!/bin/sh
# ablation_test.sh: bench/ablation.sh's bookkeeping and statistics with a stand-in for cwm (no
# tuning, no timing): each arm's runs get the right flags, every re-timing lands on its own run
# whatever the order, the ratios to world, their interval and the per-row table are right, and
# the Markdown goes between the report's markers.
set -eu
SRC=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir "$T/models"
for m in default ablation-no-transition ablation-static ablation-no-contrastive; do echo x > "$T/models/$m.cwm"; done
echo x > "$T/pre.bin"
# "tune" writes a schedule naming its model, file, seed and policy; "measure" times a schedule by
# those: world 10 us (11 with the policy on), no-transition 12, ansor 15 (seed 2: 30), ansor-pre 9
cat > "$T/cwm" <<'EOS'
#!/bin/sh
cmd=$1; shift
m=world; f=none; s=1; q=on; steps=""
while [ $# -gt 0 ]; do case $1 in
  --export) ex=$2; shift 2 ;; --summary) su=$2; shift 2 ;; --model) m=$2; shift 2 ;;
  --model-file|--pretrained) f=$(basename "$2"); shift 2 ;; --seed) s=$2; shift 2 ;;
  --family-quota) q=off$2; shift 2 ;; --steps) steps=$2; shift 2 ;; *) shift ;; esac; done
case $cmd in
  tune)
    [ "$m" != world ] || [ "$q" = on ] || [ "${CWM_WORLD_HANDOFF:-1}" = 0 ] || { echo "policy off without CWM_WORLD_HANDOFF=0" >&2; exit 1; }
    mkdir -p "$ex"; echo " * Schedule (Ansor-style steps): [\"$m\",\"$f\",$s,\"$q\"]" > "$ex/k.h"; echo '{"best_us":9.5}' > "$su" ;;
  measure)
    awk '{t = 0
      if ($0 ~ /"default.cwm"/) t = ($0 ~ /"on"/) ? 11 : 10
      else if ($0 ~ /no-transition/) t = 12
      else if ($0 ~ /"pre.bin"/) t = 9
      else if ($0 ~ /"ansor"/) t = ($0 ~ /,2,/) ? 30 : 15
      printf "%d\t%.3f us\t1 GFLOP/s\n", NR, t}' "$steps" ;;
esac
EOS
chmod +x "$T/cwm"
printf 'intro\n<!-- ablation:begin -->\nstale\n<!-- ablation:end -->\nrest\n' > "$T/REPORT.md"
cd "$SRC"
fail() { echo "ablation_test: $*"; cat "$T/log"; exit 1; }
sh bench/ablation.sh --cwm "$T/cwm" --models "$T/models" --arms no-transition,ansor,ansor-pre --pretrained "$T/pre.bin" \
  --policy both --seeds 1,2 --repeats 3 --ids dense_qkv,bmm_qk --out "$T/out" --report "$T/REPORT.md" > "$T/log" 2>&1 ||
  fail "run failed"
row() { grep -q "^| $1 |" "$T/REPORT.md" || fail "no row: $1"; }
# no-transition / world = 12 / 10 on every pair (policy off), 12 / 11 with the policy on
row "no-transition, policy off | 4 | 2 | 1.200 | 1.200 - 1.200 | 1.200 | 4 of 4"
row "no-transition, policy on | 4 | 2 | 1.091 | 1.091 - 1.091 | 1.091 | 4 of 4"
# ansor: one run a seed serves both policies; 15 / 10 and 30 / 10: geomean sqrt(1.5 * 3)
row "ansor, policy off | 4 | 2 | 2.121 | 2.121 - 2.121 | 2.250 | 4 of 4"
row "ansor, policy on | 4 | 2 | 1.928 | 1.928 - 1.928 | 2.045 | 4 of 4"
row "ansor-pre, policy off | 4 | 2 | 0.900 | 0.900 - 0.900 | 0.900 | 0 of 4"
row "world, policy on | 4 | 2 | 1.100 | 1.100 - 1.100 | 1.100 | 4 of 4"
row "dense_qkv | 10.0 | 11.0 | 12.0 | 12.0 | 21.2 | 9.0"
[ "$(grep -c . "$T/out/pairs.tsv")" = 29 ] || fail "pairs.tsv: $(grep -c . "$T/out/pairs.tsv") lines, not 1 + 28"
# every run has its three re-timings
[ "$(awk -F'\t' 'NR > 1 && $6 != "-"' "$T/out/runs.tsv" | wc -l)" = 24 ] || fail "runs.tsv: $(cat "$T/out/runs.tsv")"
[ "$(head -1 "$T/REPORT.md")" = intro ] && [ "$(tail -1 "$T/REPORT.md")" = rest ] || fail "the report around the markers changed"
grep -q stale "$T/REPORT.md" && fail "the old table is still there"
# an interval that is not a point: ratios 1.2 and 1.5 on two rows
awk -F'\t' 'BEGIN {OFS = "\t"; print "row", "arm", "policy", "seed", "tuned_us", "retimed_us"
  print "a", "world", "off", 1, 1, 10; print "a", "x", "off", 1, 1, 12; print "b", "world", "off", 1, 1, 10
  print "b", "x", "off", 1, 1, 15}' > "$T/runs2.tsv"
awk -F'\t' -v out="$T" -f bench/lib/paired.awk "$T/runs2.tsv" > "$T/two.md"
grep -q '^| x, policy off | 2 | 2 | 1.342 | 1.200 - 1.500 | 1.350 | 2 of 2 |$' "$T/two.md" || fail "two rows: $(cat "$T/two.md")"
# refused before anything runs
if sh bench/ablation.sh --cwm "$T/cwm" --models "$T/models" --arms ansor-pre --ids dense_qkv --out "$T/o3" > "$T/log" 2>&1; then
  fail "ansor-pre without --pretrained accepted"; fi
grep -q 'needs --pretrained' "$T/log" || fail "unclear error"
if sh bench/ablation.sh --cwm "$T/cwm" --models "$T/models" --arms bogus --ids dense_qkv --out "$T/o3" > "$T/log" 2>&1; then
  fail "unknown arm accepted"; fi
grep -q "unknown arm 'bogus'" "$T/log" || fail "unclear error"
[ ! -e "$T/o3/logs" ] || ! ls "$T/o3/logs"/* > /dev/null 2>&1 || fail "a refused run tuned something"
echo "ablation_test: ok"
