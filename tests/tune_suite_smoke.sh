#!/bin/sh
# Smoke test of bench/tune_suite: --help, a bad protocol is a usage error, and a 2-trial run on
# layernorm with --repeats 2 prints the row and the geometric means and logs records timed twice;
# a second run resumes from the log without measuring again.
# usage: tune_suite_smoke.sh TUNE_SUITE WORKDIR
set -eu
TS=$1
W=$2
rm -rf "$W"
mkdir -p "$W"
fail() { echo "tune_suite_smoke: $*"; [ -f "$W/out" ] && cat "$W/out" "$W/err"; exit 1; }
"$TS" --help > "$W/help" || fail "--help exits $?"
grep -q -- "--min-repeat-ms" "$W/help" || fail "--help does not document --min-repeat-ms"
rc=0
"$TS" --repeats 0 > /dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "--repeats 0: exit $rc, want 2 (usage)"
rc=0
"$TS" --bogus > /dev/null 2> "$W/bogus" || rc=$?
[ "$rc" = 2 ] && grep -q -- "--bogus" "$W/bogus" || fail "unknown option: exit $rc, or not named"
run() {
  "$TS" --ids layernorm --trials 2 --no-torch --repeats 2 --min-repeat-ms 5 --log-dir "$W/logs" > "$W/out" 2> "$W/err"
}
run || fail "the run failed"
grep -q "median of 2 repeats of at least 5 ms" "$W/out" || fail "the header does not give the protocol"
grep -qE "^ +ansor +best +[0-9.]+ us" "$W/out" || fail "no ansor figure for layernorm"
grep -q "geometric means" "$W/out" || fail "no geometric means"
LOG="$W/logs/ansor_layernorm_t1_s1.jsonl"
[ "$(wc -l < "$LOG")" = 2 ] || fail "$(wc -l < "$LOG") records, want 2"
# each record's costs: a list of two numbers ("r":[[c1,c2],...])
[ "$(grep -cE '"r":\[\[[0-9.e+-]+,[0-9.e+-]+\],' "$LOG")" = 2 ] || fail "records not timed twice: $(head -c 300 "$LOG")"
run || fail "the resumed run failed"
[ "$(wc -l < "$LOG")" = 2 ] || fail "the resumed run measured again"
echo "tune_suite_smoke: ok"
