#!/bin/sh
# log_cli_test.sh CWM: `cwm export --log` and `cwm log`, end to end on a short tuning run.
#   - `cwm tune --log L --export D1` (6 trials of dense_qkv, --confirm 0: confirming re-times the
#     best few and is not logged), then `cwm export --log L --out D2` from the log alone: D1's and
#     D2's .c, .h and _example.c are byte-identical (also with --workload, and with a corrupt
#     line in the log, which is skipped and reported with its line number);
#   - the kernel follows the record's target (another instruction set in the record: the header
#     names it);
#   - a workload not in the log is an error naming it (exit 2); a bad --target-match is exit 2;
#   - `cwm log list` shows the workload; `merge` of L with itself keeps L's records once; `best`
#     keeps one; `filter --valid` keeps the valid ones;
#   - `to-ansor` lines are JSON objects with exactly the keys i, r, v in that order (what TVM's
#     auto_scheduler reader accepts), the layout's fields in place, a TVM-parsable target and the
#     op's Ansor key; `from-ansor` of them gives back the steps; lines for another workload are
#     refused with their line numbers (exit 4);
#   - every subcommand has --help; an output on a device (/dev/null) is written, not replaced.
set -eu
CWM=$1
T=$(mktemp -d /tmp/cwm-logcli-XXXXXX)
trap 'rm -rf "$T"' EXIT
export CWM_CACHE_DIR="$T/cache"
fail() { echo "log_cli_test: $*"; for f in "$T"/*.err; do [ -s "$f" ] && { echo "== $f"; tail -5 "$f"; }; done; exit 1; }
same_dir() { # the kernels of $1 and $2 byte for byte
  for f in "$1"/*; do cmp -s "$f" "$2/$(basename "$f")" || fail "$2/$(basename "$f") differs from $f"; done
  [ "$(ls "$1" | wc -l)" = 3 ] && [ "$(ls "$2" | wc -l)" = 3 ] || fail "expected 3 files in $1 and $2"
}
py() { python3 - "$@"; }

"$CWM" tune --workload dense_qkv --model random --trials 6 --per-round 6 --population 16 --generations 1 \
  --repeats 1 --min-repeat-ms 1 --confirm 0 --log "$T/L.jsonl" --export "$T/D1" --quiet > "$T/tune.out" 2> "$T/tune.err" \
  || fail "tune failed"
[ "$(wc -l < "$T/L.jsonl")" = 6 ] || fail "expected 6 records in the log"

# the kernel from the log alone is the one tuning exported
"$CWM" export --log "$T/L.jsonl" --out "$T/D2" > "$T/export.out" 2> "$T/export.err" || fail "export failed"
same_dir "$T/D1" "$T/D2"
grep -q "^dense_qkv: [0-9.]* us, $T/D2/dense_qkv.c (.*L.jsonl, line [0-9]*; tuned for c -keys=cpu" "$T/export.out" \
  || fail "no line naming the kernel, its latency, file and target: $(cat "$T/export.out")"
"$CWM" export --log "$T/L.jsonl" --out "$T/D3" --workload dense_qkv --target-match this > "$T/export3.out" 2> "$T/export3.err" \
  || fail "export --workload failed"
same_dir "$T/D1" "$T/D3"

# a corrupt line is skipped and reported with its line number
{ head -3 "$T/L.jsonl"; echo '{"i":[["not a record'; tail -n +4 "$T/L.jsonl"; } > "$T/C.jsonl"
"$CWM" export --log "$T/C.jsonl" --out "$T/D4" > "$T/export4.out" 2> "$T/export4.err" || fail "export of a log with a corrupt line failed"
grep -q "C.jsonl: skipped 1 line that is not a record (the last: line 4" "$T/export4.err" || fail "the corrupt line was not reported: $(cat "$T/export4.err")"
same_dir "$T/D1" "$T/D4"

# the code follows the target the record names
py "$T/L.jsonl" "$T/X.jsonl" <<'EOF'
import json, sys
out = open(sys.argv[2], "w")
for line in open(sys.argv[1]):
    j = json.loads(line)
    words = j["i"][0][1].split(" ")
    avx512 = "-isa=avx512" in words or "-vec=64" in words
    words = [w for w in words if not w.startswith(("-isa=", "-vec="))]
    at = [w.startswith("-threads=") for w in words].index(True)
    words[at:at + 1] = ["-isa=avx2" if avx512 else "-isa=avx512", words[at], "-vec=32" if avx512 else "-vec=64"]
    j["i"][0][1] = " ".join(words)
    out.write(json.dumps(j, separators=(",", ":")) + "\n")
EOF
"$CWM" export --log "$T/X.jsonl" --out "$T/D5" > "$T/export5.out" 2> "$T/export5.err" || fail "export of another target failed"
want=$(grep -o -- "-isa=[a-z0-9]*" "$T/X.jsonl" | head -1)
grep -q -- "$want" "$T/D5/dense_qkv.h" || fail "the header does not name the record's target ($want)"
grep -q "not this machine's" "$T/export5.out" || fail "another target's kernel not marked as such"

# errors: a workload the log does not hold, a bad option value
rc=0
"$CWM" export --log "$T/L.jsonl" --out "$T/D6" --workload matmul_1024 > /dev/null 2> "$T/missing.err" || rc=$?
[ "$rc" = 2 ] || fail "a workload not in the log: exit $rc, want 2"
grep -q "matmul_1024" "$T/missing.err" || fail "the missing workload is not named: $(cat "$T/missing.err")"
rc=0
"$CWM" export --log "$T/L.jsonl" --out "$T/D6" --target-match some > /dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "--target-match some: exit $rc, want 2"
rc=0
"$CWM" export --log "$T/none.jsonl" --out "$T/D6" > /dev/null 2>&1 || rc=$?
[ "$rc" = 5 ] || fail "a missing log: exit $rc, want 5"

# list, merge, best, filter
"$CWM" log list "$T/L.jsonl" > "$T/list.out" 2> "$T/list.err" || fail "log list failed"
key=$(py "$T/L.jsonl" <<'EOF'
import json, sys
print(json.loads(open(sys.argv[1]).readline())["i"][0][0])
EOF
)
grep -q "^$key  dense_qkv  *6  *[0-9]" "$T/list.out" || fail "log list does not show the workload: $(cat "$T/list.out")"
"$CWM" log merge "$T/L.jsonl" "$T/L.jsonl" -o "$T/M.jsonl" 2> "$T/merge.err" || fail "log merge failed"
[ "$(wc -l < "$T/M.jsonl")" = 6 ] || fail "merge of L with itself: $(wc -l < "$T/M.jsonl") records, want 6"
"$CWM" log merge "$T/L.jsonl" "$T/C.jsonl" -o "$T/L.jsonl" 2> "$T/merge2.err" || fail "log merge into an input failed"
[ "$(wc -l < "$T/L.jsonl")" = 6 ] || fail "merge into L: $(wc -l < "$T/L.jsonl") records, want 6"
"$CWM" log best "$T/L.jsonl" "$T/X.jsonl" -o "$T/B.jsonl" 2> "$T/best.err" || fail "log best failed"
[ "$(wc -l < "$T/B.jsonl")" = 2 ] || fail "log best of two targets: $(wc -l < "$T/B.jsonl") records, want 2"
"$CWM" log filter "$T/L.jsonl" "$T/X.jsonl" --valid --workload "$key" --target-substr "$want" > "$T/F.jsonl" 2> "$T/filter.err" \
  || fail "log filter failed"
nvalid=$(py "$T/X.jsonl" <<'EOF'
import json, sys
print(sum(json.loads(l)["r"][1] == 0 for l in open(sys.argv[1])))
EOF
)
[ "$(wc -l < "$T/F.jsonl")" = "$nvalid" ] || fail "log filter kept $(wc -l < "$T/F.jsonl") records, want $nvalid"
"$CWM" log best "$T/L.jsonl" -o /dev/null 2> /dev/null || fail "log best -o /dev/null failed"
[ -c /dev/null ] || fail "/dev/null is no longer a device"

# the plain Ansor layout, as TVM's reader expects it, and back
"$CWM" log to-ansor "$T/L.jsonl" -o "$T/A.jsonl" 2> "$T/toansor.err" || fail "log to-ansor failed"
[ "$(wc -l < "$T/A.jsonl")" = 6 ] || fail "to-ansor wrote $(wc -l < "$T/A.jsonl") lines, want 6"
py "$T/A.jsonl" <<'EOF' || fail "to-ansor lines are not what TVM's reader takes"
import json, sys
for n, line in enumerate(open(sys.argv[1]), 1):
    j = json.loads(line)
    assert list(j) == ["i", "r", "v"], (n, list(j))                  # any other key is fatal in TVM
    assert j["v"] == "v0.6"
    task, state = j["i"]
    key, target, hw, host, layout, inputs = task                     # SearchTask's fields in order
    assert json.loads(key) == ["cwm_dense", 128, 768, 768, 1, "none"], key
    assert target.split()[0] == "c" and "-keys=cpu" in target.split(), target
    assert all(not a.startswith(("-threads", "-vec", "-cc", "-cflags", "-isa")) for a in target.split()), target
    assert len(hw) == 8 and all(isinstance(x, int) for x in hw) and host == "" and isinstance(layout, int)
    assert inputs == [] and state[0] == [] and isinstance(state[1], list) and state[1]
    costs, err, all_cost, ts = j["r"]
    assert all(isinstance(c, (int, float)) for c in costs) and isinstance(err, int) and isinstance(ts, int)
EOF
"$CWM" log from-ansor "$T/A.jsonl" --workload dense_qkv -o "$T/R.jsonl" 2> "$T/fromansor.err" || fail "log from-ansor failed"
py "$T/L.jsonl" "$T/R.jsonl" <<'EOF' || fail "from-ansor did not give back the records' steps"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 6
for x, y in zip(a, b):
    assert x["i"][1][1] == y["i"][1][1] and x["i"][0][0] == y["i"][0][0] and x["r"][:2] == y["r"][:2]
    assert y["cwm"]["workload"] == x["cwm"]["workload"] and y["cwm"]["name"] == "dense_qkv"
EOF
"$CWM" export --log "$T/R.jsonl" --out "$T/D7" > /dev/null 2> "$T/export7.err" || fail "export of the converted log failed"
cmp -s "$T/D1/dense_qkv.c" "$T/D7/dense_qkv.c" || fail "the converted log's kernel differs from tuning's"
rc=0
"$CWM" log from-ansor "$T/A.jsonl" --workload dense_ffn1 -o "$T/W.jsonl" 2> "$T/wrong.err" || rc=$?
[ "$rc" = 4 ] || fail "from-ansor for another workload: exit $rc, want 4"
grep -q "A.jsonl: line 1 refused" "$T/wrong.err" || fail "the refused lines are not named: $(head -2 "$T/wrong.err")"

# --help everywhere
for sub in list best filter merge to-ansor from-ansor; do
  "$CWM" log $sub --help | grep -q "usage: cwm log $sub" || fail "cwm log $sub --help"
done
"$CWM" export --help | grep -q "usage: cwm export --log LOG" || fail "cwm export --help"
echo "log_cli_test: ok"
