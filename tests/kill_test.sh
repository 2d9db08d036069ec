#!/bin/sh
# kill_test.sh CWM: `cwm tune` killed (SIGKILL) at random points loses nothing already written and
# leaves no half-written result. Each round starts a short tune that resumes the same log and
# writes an export and a summary, and kills it after a random delay spread over a whole run; then:
#   - every line of the log but a torn last one is a whole JSON record, and a torn last line is
#     skipped on resume (the next round resumes at least as many records as were whole);
#   - the summary, when present, is whole JSON; each exported file, when present, is whole (the
#     kernel and its example compile);
# and a last run to the end writes a summary and an export whose example passes its check.
set -eu
CWM=$1
ROUNDS=${CWM_KILL_ROUNDS:-12}
T=$(mktemp -d /tmp/cwm-kill-XXXXXX)
trap 'rm -rf "$T"' EXIT
export CWM_CACHE_DIR="$T/cache"
fail() { echo "kill_test: $*"; [ -s "$T/tune.err" ] && tail -5 "$T/tune.err"; exit 1; }
W="dense M=16 N=24 K=32 bias=1 act=relu"
tune_exec() { # $1: trials; cwm replaces the (sub)shell that calls this, so that its pid is cwm's
  exec "$CWM" tune --workload "$W" --model random --trials "$1" --per-round 2 --population 16 --generations 1 \
    --repeats 1 --min-repeat-ms 1 --confirm 0 --log "$T/L.jsonl" --export "$T/D" --name k \
    --summary "$T/S.json" --quiet > "$T/tune.out" 2> "$T/tune.err"
}
tune() { (tune_exec "$1"); }
whole_records() { # lines of the log that are whole JSON objects; fails on a broken line that is not the last
  python3 - "$T/L.jsonl" <<'EOP'
import json, sys
lines = open(sys.argv[1], "rb").read().split(b"\n")
last = len(lines) - 1  # after the final newline: b"" when the last line is whole
whole = 0
for i, l in enumerate(lines):
    if not l:
        continue
    try:
        json.loads(l)
        whole += 1
    except ValueError:
        if i != last:
            sys.exit("line %d of %d is broken and is not the last" % (i + 1, last))
print(whole)
EOP
}
# the length of a whole run, to spread the kills over it
start=$(date +%s%N)
tune 4 || fail "the first run failed"
ms=$(( ($(date +%s%N) - start) / 1000000 + 200 ))
rm -rf "$T/D" "$T/S.json"
k=0
while [ $k -lt "$ROUNDS" ]; do
  k=$((k + 1))
  before=$(whole_records) || fail "round $k: the log before the kill: $before"
  tune_exec $((4 + 2 * k)) & # --trials counts the resumed records: 2 new ones a round
  pid=$!                      # cwm itself (a killed shell around it would leave it running)
  delay=$(awk -v r="$(od -An -N2 -tu2 /dev/urandom)" -v ms="$ms" 'BEGIN { printf "%.3f", (r % ms) / 1000 }')
  sleep "$delay"
  kill -9 $pid 2> /dev/null || true
  wait $pid 2> /dev/null || true
  after=$(whole_records) || fail "round $k (killed after $delay s): $after"
  [ "$after" -ge "$before" ] || fail "round $k: the log lost records ($before whole before, $after after)"
  if [ -e "$T/S.json" ]; then
    python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$T/S.json" 2> /dev/null ||
      fail "round $k (killed after $delay s): the summary is not whole JSON"
  fi
  for f in "$T"/D/*.c; do
    [ -e "$f" ] || continue
    cc -std=c11 -fsyntax-only -fopenmp -I"$T/D" "$f" 2> "$T/cc.err" ||
      { cat "$T/cc.err"; fail "round $k (killed after $delay s): $f does not compile"; }
  done
  ls "$T"/D/*.tmp.* "$T"/*.tmp.* > /dev/null 2>&1 && echo "kill_test: round $k left temporary files (killed mid-write)"
done
tune $((6 + 2 * ROUNDS)) || fail "the run after $ROUNDS kills failed"
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$T/S.json" || fail "the last summary is not JSON"
cc -O2 -fopenmp -I"$T/D" "$T/D/k.c" "$T/D/k_example.c" -lm -o "$T/ex" 2> "$T/cc.err" || { cat "$T/cc.err"; fail "the last export does not build"; }
"$T/ex" > "$T/ex.out" 2>&1 || { cat "$T/ex.out"; fail "the last export fails its check"; }
n=$(whole_records)
[ "$n" -ge $((6 + 2 * ROUNDS)) ] || fail "the last run ended with $n records, not $((6 + 2 * ROUNDS))"
echo "kill_test: $ROUNDS kills within ${ms} ms of the start; log, summary and export always whole; $n records"
