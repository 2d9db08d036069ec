#!/bin/sh
# install_smoke.sh BUILD_DIR: installs the build into a fresh prefix and uses it from there, as a
# user of the installed tool and library would: the installed cwm tunes a suite workload with the
# default world model it finds beside itself (its first line names the model file), and
# examples/print_kernel.c builds with pkg-config against the installed library and runs.
set -e
B=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d /tmp/cwm-install-XXXXXX)
trap 'rm -rf "$T"' EXIT
cmake --install "$B" --prefix "$T/p" > "$T/install.log"
P="$T/p"
for f in bin/cwm include/cwm/codegen.h share/cwm/default.cwm share/cwm/suite.tsv; do
  [ -e "$P/$f" ] || { echo "install_smoke: $P/$f was not installed"; exit 1; }
done
PC=$(find "$P" -name cwm.pc | head -1)
cd "$T"
env -u CWM_SUITE -u CWM_MODEL -u CWM_SOURCE_DIR "$P/bin/cwm" tune --workload dense_qkv --model world \
  --trials 2 --per-round 2 --population 16 --generations 1 --repeats 1 --min-repeat-ms 1 \
  --cache-dir "$T/cache" --log "$T/log.jsonl" > "$T/tune.out" 2> "$T/tune.err" || {
  cat "$T/tune.err"; echo "install_smoke: the installed cwm failed to tune"; exit 1; }
grep -q "model world ($P/share/cwm/default.cwm)" "$T/tune.err" || {
  head -3 "$T/tune.err"; echo "install_smoke: the installed cwm did not use the installed model"; exit 1; }
[ "$(wc -l < "$T/log.jsonl")" -eq 2 ] || { echo "install_smoke: expected 2 records"; exit 1; }
export PKG_CONFIG_PATH="$(dirname "$PC")"
LIBDIR=$(pkg-config --variable=libdir cwm)
cc "$SRC/examples/print_kernel.c" $(pkg-config --cflags --libs cwm) -Wl,-rpath,"$LIBDIR" -o "$T/print_kernel"
"$T/print_kernel" "dense M=8 N=16 K=4 bias=1 act=relu" > "$T/kernel.c"
grep -q "float \*restrict" "$T/kernel.c" || { echo "install_smoke: no kernel printed"; exit 1; }
echo "install_smoke: installed into $P; tuned with $P/share/cwm/default.cwm; example built with pkg-config"
