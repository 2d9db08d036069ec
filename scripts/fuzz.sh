#!/bin/bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each for SECONDS (default 30).
# usage: scripts/fuzz.sh [SECONDS] [target ...]
#   targets: workload opspec steps record dataset ansormodel network onnx cliargs modelcfg (default: all
#   of them, and modelfile when fuzz/fuzz_modelfile.c exists)
# Prints the executions run per target; a crash stops with the reproducer in build-fuzz/.
# CWM_FUZZ_OUT=DIR builds and runs in DIR instead of build-fuzz/, so that a second run beside a long
# one (a ten-minute campaign) does not replace the binaries and corpora the first one is using.
set -e
cd "$(dirname "$0")/.."
T=${1:-30}
shift || true
DEFAULT="workload opspec steps record dataset ansormodel network onnx cliargs modelcfg"
[ -f fuzz/fuzz_modelfile.c ] && DEFAULT="$DEFAULT modelfile"
TARGETS=${*:-$DEFAULT}
ROOT=$PWD
OUT=${CWM_FUZZ_OUT:-build-fuzz}
mkdir -p "$OUT"
SRC="src/util/*.c src/te/*.c src/state/*.c src/codegen/*.c src/record/*.c src/measure/*.c"
for t in $TARGETS; do
  src="$SRC" libs="" maxlen=4096 extra=""
  case "$t" in
    # the model-file container and the vocabulary loader inside it: util and these two only
    modelfile)
      src="$SRC src/world/tokenizer.c src/world/modelfile.c"
      maxlen=16384
      ;;
    # the world model's config in front of valid weights: cwm_world_load over the world layer
    modelcfg)
      src="$SRC src/costmodel/*.c src/world/*.c"
      maxlen=1024
      # libFuzzer's defaults, named: whatever a config makes the loader allocate must stay under them
      extra="-rss_limit_mb=2048 -malloc_limit_mb=2048"
      ;;
    # the command line's syntax: the argument parser of src/cli alone
    cliargs)
      src="src/util/util.c src/cli/args.c -Isrc/cli"
      maxlen=1024
      extra="-close_fd_mask=3"
      ;;
    # dataset files: the record reader and the statistics over it (train layer)
    dataset)
      src="$SRC src/train/stats.c"
      ;;
    # network files: the parser over the op library
    network)
      src="$SRC src/search/network.c"
      maxlen=8192
      ;;
    # ONNX files: the importer and graph inference over protobuf-c code generated from onnx.proto
    onnx)
      mkdir -p "$OUT/gen"
      proto=$(ls /usr/include/onnx/onnx.proto /usr/include/onnx/onnx-ml.proto 2>/dev/null | head -1)
      mkdir -p "$OUT/proto/onnx" && cp "$proto" "$OUT/proto/onnx/onnx.proto"
      protoc-c --c_out="$OUT/gen" -I"$OUT/proto" "$OUT/proto/onnx/onnx.proto"
      src="$SRC src/graph/*.c $OUT/gen/onnx/onnx.pb-c.c -I$OUT/gen"
      libs="$(pkg-config --cflags --libs libprotobuf-c)"
      maxlen=65536
      ;;
    # the cost model and its loader; XGBoost is linked when the library is there to link
    ansormodel)
      src="$SRC src/costmodel/*.c"
      maxlen=131072
      if echo 'int main(void){return 0;}' | clang -x c - -lxgboost -o "$OUT/.probe" 2>/dev/null; then libs="-lxgboost"; fi
      ;;
  esac
  clang -g -O1 -Werror=implicit-function-declaration -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Iinclude \
    -DCWM_SOURCE_DIR="\"$PWD\"" $src "fuzz/fuzz_$t.c" $(pkg-config --cflags --libs libcjson) $libs -lm -ldl -lpthread \
    -o "$OUT/fuzz_$t"
  mkdir -p "$OUT/corpus_$t"
  cp fuzz/corpus/"$t"/* "$OUT/corpus_$t/" 2>/dev/null || true
  (cd "$OUT" && CWM_SUITE="$ROOT/bench/suite.tsv" ./"fuzz_$t" -max_total_time="$T" -max_len="$maxlen" \
     -print_final_stats=1 $extra "corpus_$t" 2>"fuzz_$t.log") || { tail -30 "$OUT/fuzz_$t.log"; exit 1; }
  echo "fuzz_$t: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$OUT/fuzz_$t.log" | grep -o '[0-9]*$') executions in ${T} s, no crash"
done
