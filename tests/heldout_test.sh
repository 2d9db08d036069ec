#!/bin/sh
# heldout_test.sh: bench/heldout.sh's bookkeeping with stand-ins for cwm and oneDNN (no tuning,
# no timing): a run with --before writes the per-layer and per-kind tables with both figures,
# oneDNN's time over cwm's, and puts them between the README markers, leaving the rest alone.
set -eu
SRC=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# a cwm that "tunes" instantly and "measures" 10 us (new) or 30 us (old) per layer
for v in new:10 old:30; do
  cat > "$T/cwm_${v%%:*}" <<EOS
#!/bin/sh
cmd=\$1; shift
while [ \$# -gt 0 ]; do case \$1 in --export) ex=\$2; shift 2 ;; --summary) su=\$2; shift 2 ;; *) shift ;; esac; done
case \$cmd in
  tune) mkdir -p "\$ex"; echo ' * Schedule (Ansor-style steps): [["AN",1,0,3]]' > "\$ex/k.h"; echo '{"best_us":9.5}' > "\$su" ;;
  measure) printf '1\t${v#*:}.0 us\t1 GFLOP/s\n' ;;
esac
EOS
done
printf '#!/bin/sh\nwhile [ $# -gt 0 ]; do case $1 in --id) id=$2; shift 2 ;; *) shift ;; esac; done\necho "$id x 20"\n' > "$T/anchors"
chmod +x "$T/cwm_new" "$T/cwm_old" "$T/anchors"
printf 'intro\n<!-- heldout:begin -->\nstale table\n<!-- heldout:end -->\nrest\n' > "$T/README.md"
cd "$SRC"
sh bench/heldout.sh --cwm "$T/cwm_new" --before "$T/cwm_old" --anchors "$T/anchors" --repeats 2 \
  --ids mbv2_dw_s2_56,clip_qkv,odd_mm_ragged --out "$T/out" --readme "$T/README.md" > "$T/log"
fail() { echo "heldout_test: $*"; cat "$T/log"; exit 1; }
# oneDNN 20 us: new 20/10 = 2, old 20/30 = 0.667
grep -q '^| mbv2_dw_s2_56 | strided depthwise | 10.00 | 20.00 | 2.000 | 0.667 |$' "$T/README.md" || fail "no per-layer row"
grep -q '^| odd-sized matmul | 2 | 0.667 | 2.000 | 2.000 (clip_qkv) |$' "$T/README.md" || fail "no per-kind row"
grep -q '^| all layers | 3 | 0.667 | 2.000 |' "$T/README.md" || fail "no row for all layers"
[ "$(head -1 "$T/README.md")" = intro ] && [ "$(tail -1 "$T/README.md")" = rest ] || fail "the README around the markers changed"
grep -q 'stale table' "$T/README.md" && fail "the old table is still there"
[ "$(grep -c 'heldout:begin' "$T/README.md")" = 1 ] || fail "markers doubled"
# a README without the markers is refused before anything runs
printf 'no markers\n' > "$T/R2.md"
if sh bench/heldout.sh --cwm "$T/cwm_new" --anchors "$T/anchors" --readme "$T/R2.md" > "$T/log2" 2>&1; then fail "no markers accepted"; fi
grep -q 'has no line <!-- heldout:begin -->' "$T/log2" || fail "unclear error: $(cat "$T/log2")"
# --marker: the table goes between its own markers, another table's stay as they were
printf 'a\n<!-- heldout:begin -->\nfirst\n<!-- heldout:end -->\n<!-- all-50:begin -->\nsecond\n<!-- all-50:end -->\n' > "$T/R3.md"
sh bench/heldout.sh --cwm "$T/cwm_new" --anchors "$T/anchors" --repeats 1 --ids clip_qkv --out "$T/out3" \
  --readme "$T/R3.md" --marker all-50 > "$T/log3" || fail "--marker run failed: $(cat "$T/log3")"
grep -q '^first$' "$T/R3.md" || fail "--marker replaced the other table"
grep -q '^second$' "$T/R3.md" && fail "--marker left its own table"
grep -q '^| clip_qkv | odd-sized matmul | 10.00 | 20.00 | 2.000 |' "$T/R3.md" || fail "--marker wrote no row"
# --target: cwm is asked for that instruction set, oneDNN held to it; an unknown one is refused
cat > "$T/cwm_t" <<'EOS'
#!/bin/sh
echo "$*" >> "${0%/*}/cwm_t.args"
exec "${0%/*}/cwm_new" "$@"
EOS
printf '#!/bin/sh\necho "${ONEDNN_MAX_CPU_ISA:-none}" >> "${0%%/*}/isa"\nexec "${0%%/*}/anchors" "$@"\n' > "$T/anchors_t"
chmod +x "$T/cwm_t" "$T/anchors_t"
# a row tuned to the end before (its summary counts the trials asked for) is not tuned again;
# one whose summary counts fewer (a stopped run) is
echo '{"workload":"clip_qkv","trials":64,"best_us":9.5,"measured":40,"resumed":24,"errors":0}' > "$T/out3/clip_qkv.json"
sh bench/heldout.sh --cwm "$T/cwm_t" --anchors "$T/anchors" --repeats 1 --ids clip_qkv --out "$T/out3" > "$T/log6" ||
  fail "rerun failed: $(cat "$T/log6")"
[ ! -f "$T/cwm_t.args" ] || [ "$(grep -c '^tune ' "$T/cwm_t.args")" = 0 ] || fail "a finished row was tuned again"
grep -q '^clip_qkv' "$T/out3/heldout.tsv" || fail "the finished row was not re-timed"
echo '{"workload":"clip_qkv","trials":64,"best_us":9.5,"measured":30,"resumed":0,"errors":0}' > "$T/out3/clip_qkv.json"
sh bench/heldout.sh --cwm "$T/cwm_t" --anchors "$T/anchors" --repeats 1 --ids clip_qkv --out "$T/out3" > "$T/log7" ||
  fail "rerun failed: $(cat "$T/log7")"
grep -q '^tune ' "$T/cwm_t.args" || fail "a row stopped short was not tuned again"
rm -f "$T/cwm_t.args"
sh bench/heldout.sh --cwm "$T/cwm_t" --anchors "$T/anchors_t" --repeats 1 --ids clip_qkv --out "$T/out4" \
  --target avx2 > "$T/log4" || fail "--target run failed: $(cat "$T/log4")"
[ "$(grep -c -- '--target avx2' "$T/cwm_t.args")" = 2 ] || fail "cwm was not asked for avx2: $(cat "$T/cwm_t.args")"
[ "$(cat "$T/isa")" = AVX2 ] || fail "oneDNN was not held to AVX2: $(cat "$T/isa")"
grep -q -- '--target avx2' "$T/out4/heldout.md" || fail "the table does not name the target"
if sh bench/heldout.sh --cwm "$T/cwm_t" --anchors "$T/anchors_t" --target neon > "$T/log5" 2>&1; then fail "--target neon accepted"; fi
grep -q -- '--target takes' "$T/log5" || fail "unclear error: $(cat "$T/log5")"
echo "heldout_test: ok"
