#!/bin/sh
# install_smoke.sh BUILD_DIR: installs the build into a fresh prefix and uses it from there, as a
# user of the installed tool and library would: the installed cwm tunes a suite workload with the
# default model (the world model it finds beside itself; the tune names the model file), and
# examples/print_kernel.c builds with pkg-config against the installed library and runs. Where
# mount namespaces are available (root, or unprivileged user namespaces), all of this runs with
# the source tree and the build directory hidden under empty mounts: the installed files are all
# it has, as on a machine where the source tree was deleted.
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
cp "$SRC/examples/print_kernel.c" "$T/print_kernel.c"
cat > "$T/use.sh" <<'EOS'
set -e
PC=$(find "$P" -name cwm.pc | head -1)
cd "$T"
env -u CWM_SUITE -u CWM_MODEL -u CWM_SOURCE_DIR "$P/bin/cwm" tune --workload dense_qkv \
  --trials 2 --per-round 2 --population 16 --generations 1 --repeats 1 --min-repeat-ms 1 \
  --cache-dir "$T/cache" --log "$T/log.jsonl" > "$T/tune.out" 2> "$T/tune.err" || {
  cat "$T/tune.err"; echo "install_smoke: the installed cwm failed to tune"; exit 1; }
grep -q "model world ($P/share/cwm/default.cwm)" "$T/tune.err" || {
  head -3 "$T/tune.err"; echo "install_smoke: the installed cwm did not use the installed model"; exit 1; }
[ "$(wc -l < "$T/log.jsonl")" -eq 2 ] || { echo "install_smoke: expected 2 records"; exit 1; }
export PKG_CONFIG_PATH="$(dirname "$PC")"
LIBDIR=$(pkg-config --variable=libdir cwm)
cc "$T/print_kernel.c" $(pkg-config --cflags --libs cwm) -Wl,-rpath,"$LIBDIR" -o "$T/print_kernel"
"$T/print_kernel" "dense M=8 N=16 K=4 bias=1 act=relu" > "$T/kernel.c"
grep -q "float \*restrict" "$T/kernel.c" || { echo "install_smoke: no kernel printed"; exit 1; }
# the same example through CMake's find_package(cwm CONFIG), against the shared and the static library
mkdir "$T/cm"
cat > "$T/cm/CMakeLists.txt" <<EOC
cmake_minimum_required(VERSION 3.18)
project(use_cwm C)
find_package(cwm 0.2 REQUIRED CONFIG)
add_executable(print_kernel "$T/print_kernel.c")
target_link_libraries(print_kernel cwm::cwm)
add_executable(print_kernel_static "$T/print_kernel.c")
target_link_libraries(print_kernel_static cwm::static)
EOC
cmake -S "$T/cm" -B "$T/cm/b" -DCMAKE_PREFIX_PATH="$P" > "$T/cm.log" 2>&1 &&
  cmake --build "$T/cm/b" >> "$T/cm.log" 2>&1 || { cat "$T/cm.log"; echo "install_smoke: find_package(cwm) failed"; exit 1; }
for exe in print_kernel print_kernel_static; do
  "$T/cm/b/$exe" "dense M=8 N=16 K=4 bias=1 act=relu" | grep -q "float \*restrict" ||
    { echo "install_smoke: $exe (CMake) printed no kernel"; exit 1; }
done
echo "install_smoke: installed into $P$HIDDEN; tuned with $P/share/cwm/default.cwm; example built with pkg-config and find_package"
EOS
export T P
if unshare -m true 2> /dev/null; then
  NS="unshare -m"
elif unshare -rm true 2> /dev/null; then
  NS="unshare -rm"
else
  NS=""
fi
if [ -n "$NS" ]; then
  export HIDDEN=" (source tree $SRC and build $B hidden)"
  $NS sh -c 'mount -t tmpfs -o size=1m,mode=0555 none "$1" && { [ "${2#"$1"/}" != "$2" ] || mount -t tmpfs -o size=1m,mode=0555 none "$2"; } && [ ! -e "$1/CMakeLists.txt" ] && exec sh "$T/use.sh"' \
    hide "$SRC" "$B"
else
  export HIDDEN=" (source tree not hidden: no mount namespace here)"
  sh "$T/use.sh"
fi
