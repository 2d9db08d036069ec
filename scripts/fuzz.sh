#!/bin/bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each for SECONDS (default 30).
# usage: scripts/fuzz.sh [SECONDS] [target ...]   targets: workload opspec steps record
# Prints the executions run per target; a crash stops with the reproducer in build-fuzz/.
set -e
cd "$(dirname "$0")/.."
T=${1:-30}
shift || true
TARGETS=${*:-workload opspec steps record}
OUT=build-fuzz
mkdir -p "$OUT"
SRC="src/util/*.c src/te/*.c src/state/*.c src/codegen/*.c src/record/*.c src/measure/*.c"
for t in $TARGETS; do
  clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Iinclude \
    -DCWM_SOURCE_DIR="\"$PWD\"" $SRC "fuzz/fuzz_$t.c" $(pkg-config --cflags --libs libcjson) -lm -ldl -lpthread \
    -o "$OUT/fuzz_$t"
  mkdir -p "$OUT/corpus_$t"
  cp fuzz/corpus/"$t"/* "$OUT/corpus_$t/" 2>/dev/null || true
  (cd "$OUT" && CWM_SUITE="$PWD/../bench/suite.tsv" ./"fuzz_$t" -max_total_time="$T" -max_len=4096 \
     -print_final_stats=1 "corpus_$t" 2>"fuzz_$t.log") || { tail -30 "$OUT/fuzz_$t.log"; exit 1; }
  echo "fuzz_$t: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$OUT/fuzz_$t.log" | grep -o '[0-9]*$') executions in ${T} s, no crash"
done
