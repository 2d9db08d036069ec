#!/bin/sh
# farm_test.sh CWM MODE: the MPI worker farm on localhost, against the one-process run.
#   same: `mpirun -np 3` runs of `cwm tune` (world model, one round) and of `cwm dataset measure`
#         write logs with the same records, in the same order, as one process with the same seed
#         (same workloads and schedules; every timing valid; each record names the host).
#   kill: a worker rank is killed (SIGKILL) while the data-set run is under way; the run still
#         ends with status 0 and every record of the one-process run exactly once.
set -e
CWM=$1
MODE=$2
SRC=$(cd "$(dirname "$0")/.." && pwd)
command -v mpirun > /dev/null || { echo "farm_test: mpirun not found (install openmpi-bin)"; exit 1; }
T=$(mktemp -d /tmp/cwm-farm-XXXXXX)
trap 'rm -rf "$T"' EXIT
# mpirun refuses root unless told; CI runs as root
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# one compile cache for both runs: the builds are not what is compared
export CWM_CACHE_DIR="$T/cache"
MPI="mpirun --oversubscribe --bind-to none --enable-recovery -np 3"
grep -v '^#' "$SRC/data/train_workloads.tsv" | awk -F'\t' '$2=="dense"||$2=="matmul"||$2=="softmax"||$2=="layernorm"' \
  | head -4 > "$T/wl.tsv"
DS="dataset measure --workloads $T/wl.tsv --per-workload 6 --seed 11 --repeats 2 --min-repeat-ms 2 --quiet"

# the records' identities (workload key + steps) in log order, and whether each timing is valid
ids() {
  python3 - "$1" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    j = json.loads(line)
    costs, err = j["r"][0], j["r"][1]
    ok = err == 0 and all(0 < c < 1e9 for c in costs) and j["cwm"].get("host")
    print(j["i"][0][0], json.dumps(j["i"][1], separators=(",", ":")), "valid" if ok else "INVALID")
EOF
}

same() { # what, one-process log, farm log
  ids "$2" > "$T/a.txt"
  ids "$3" > "$T/b.txt"
  if ! cmp -s "$T/a.txt" "$T/b.txt"; then
    diff "$T/a.txt" "$T/b.txt" | head -20
    echo "farm_test: $1: the farm's log differs from the one-process log"
    exit 1
  fi
  if grep -q INVALID "$T/b.txt"; then
    echo "farm_test: $1: a record without a valid timing or host"
    exit 1
  fi
  echo "farm_test: $1: $(wc -l < "$T/b.txt") records, the same as one process"
}

if [ "$MODE" = same ]; then
  TUNE="tune --workload dense_qkv --model world --trials 8 --per-round 8 --population 64 --generations 2 --seed 7
        --repeats 2 --min-repeat-ms 2 --confirm 0 --quiet"
  "$CWM" $TUNE --log "$T/tune1.jsonl" > /dev/null
  $MPI "$CWM" $TUNE --log "$T/tune3.jsonl" > "$T/tune3.out" 2> "$T/tune3.err" || {
    cat "$T/tune3.err"; echo "farm_test: mpirun cwm tune failed"; exit 1; }
  same tune "$T/tune1.jsonl" "$T/tune3.jsonl"
  "$CWM" $DS --log "$T/ds1.jsonl" 2> /dev/null
  $MPI "$CWM" $DS --log "$T/ds3.jsonl" 2> "$T/ds3.err" || { cat "$T/ds3.err"; echo "farm_test: mpirun cwm dataset measure failed"; exit 1; }
  same "dataset measure" "$T/ds1.jsonl" "$T/ds3.jsonl"
elif [ "$MODE" = kill ]; then
  "$CWM" $DS --log "$T/ds1.jsonl" 2> /dev/null
  total=$(wc -l < "$T/ds1.jsonl")
  $MPI "$CWM" $DS --log "$T/ds3.jsonl" > "$T/ds3.out" 2> "$T/ds3.err" &
  mp=$!
  # rank 1 is a child of mpirun whose environment says so
  victim=""
  for i in $(seq 1 600); do
    n=0
    [ -f "$T/ds3.jsonl" ] && n=$(wc -l < "$T/ds3.jsonl")
    if [ -z "$victim" ] && [ "$n" -ge 2 ]; then
      for p in $(pgrep -P "$mp"); do
        if tr '\0' '\n' < /proc/$p/environ 2> /dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then victim=$p; fi
      done
      [ -n "$victim" ] && kill -9 "$victim" && echo "farm_test: killed worker rank 1 (pid $victim) after $n of $total records"
    fi
    [ -n "$victim" ] && break
    sleep 0.1
  done
  rc=0
  wait "$mp" || rc=$?
  [ -n "$victim" ] || { echo "farm_test: never found rank 1 to kill"; exit 1; }
  [ "$rc" -eq 0 ] || { cat "$T/ds3.err"; echo "farm_test: the run ended with status $rc after the kill"; exit 1; }
  grep -q "rank 1 on .* lost" "$T/ds3.err" || { cat "$T/ds3.err"; echo "farm_test: rank 0 did not report the lost worker"; exit 1; }
  same "dataset measure with rank 1 killed" "$T/ds1.jsonl" "$T/ds3.jsonl"
else
  echo "usage: farm_test.sh CWM same|kill"
  exit 2
fi
