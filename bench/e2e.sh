#!/bin/sh
# End-to-end latency of whole networks: the library `cwm compile` writes against PyTorch eager and
# TorchScript on this machine, in one run.
#
# usage: bench/e2e.sh [--dir DIR] [--models "resnet50 bert_base"] [--threads "1 2"] [--repeats R]
#        (CWM=path/to/cwm to use another binary than ./build/cwm)
#
# For each model: out/models/MODEL.onnx (exported by scripts/export-models.py when missing) is
# compiled with the tuning log DIR/MODEL.jsonl (`cwm tune --onnx ... --log DIR/MODEL.jsonl`; a
# missing log compiles untuned kernels) into DIR/MODEL/, built, checked against PyTorch's outputs
# (scripts/compare-outputs.py), then timed by bench/torch_e2e.py: R interleaved rounds of the
# compiled runner, PyTorch eager and TorchScript, each round a batch of inferences of at least
# 200 ms, at each thread count; the median of the rounds. Prints the figures and the ratios and
# writes DIR/e2e.tsv (model, threads, cwm_ms, eager_ms, script_ms), which the report reads.
# Keep the machine quiet meanwhile: other jobs change the figures.
set -e
cd "$(dirname "$0")/.."
DIR=out/e2e
MODELS="resnet50 bert_base"
THREADS="1 2"
REPEATS=7
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "e2e.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
PY=/usr/bin/python3
CWM=${CWM:-./build/cwm}
[ -x "$CWM" ] || { echo "e2e.sh: build cwm first (cmake --build build)" >&2; exit 2; }
mkdir -p "$DIR" out/models
TSV="$DIR/e2e.tsv"
printf 'model\tthreads\tcwm_ms\teager_ms\tscript_ms\ttuned_tasks\ttasks\ttrials\n' > "$TSV.tmp"
for m in $MODELS; do
  [ -f "out/models/$m.onnx" ] || $PY scripts/export-models.py --out out/models "$m"
  log="$DIR/$m.jsonl"
  logopt=""
  trials=0
  if [ -f "$log" ]; then logopt="--log $log"; trials=$(grep -c . "$log" || true); fi
  $CWM compile "out/models/$m.onnx" $logopt --out "$DIR/$m" --build > "$DIR/$m.compile.out"
  tail -n 3 "$DIR/$m.compile.out"
  tasks=$(sed -n 's/.*: \([0-9]*\) tasks (\([0-9]*\) with a schedule.*/\1 \2/p' "$DIR/$m.compile.out")
  "$DIR/$m/model_runner" "$DIR/$m/model_weights.bin" -i "out/models/$m.in.bin" -o "$DIR/$m.out.bin"
  $PY scripts/compare-outputs.py "out/models/$m.out.bin" "$DIR/$m.out.bin" --json "out/models/$m.json"
  for t in $THREADS; do
    $PY bench/torch_e2e.py "$m" --threads "$t" --repeats "$REPEATS" --cwm-dir "$DIR/$m" \
      --cwm-input "out/models/$m.in.bin" > "$DIR/$m.t$t.out"
    cat "$DIR/$m.t$t.out"
    c=$(awk -F'\t' '$1=="torch_e2e" && $3=="cwm" {print $5}' "$DIR/$m.t$t.out")
    e=$(awk -F'\t' '$1=="torch_e2e" && $3=="eager" {print $5}' "$DIR/$m.t$t.out")
    s=$(awk -F'\t' '$1=="torch_e2e" && $3=="script" {print $5}' "$DIR/$m.t$t.out")
    set -- $tasks
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$m" "$t" "$c" "$e" "$s" "${2:-0}" "${1:-0}" "$trials" >> "$TSV.tmp"
  done
done
mv "$TSV.tmp" "$TSV"
echo
echo "model      threads   cwm ms  eager ms  script ms  eager/cwm  script/cwm"
awk -F'\t' 'NR > 1 { printf "%-10s %7s %8.2f %9.2f %10.2f %10.2fx %10.2fx\n", $1, $2, $3, $4, $5, $4 / $3, $5 / $3 }' "$TSV"
echo "written: $TSV"
