#!/bin/sh
# Installs the Debian 12 packages cwm needs. Run as root (or with the packages already there).
#   ./scripts/install-deps.sh          build and test: compilers, cmake, cJSON, XGBoost, OpenBLAS,
#                                      protobuf-c and onnx.proto (the ONNX importer), Open MPI
#                                      (the worker farm: mpirun -np N cwm tune ...), python3-cffi and
#                                      python3-pytest (the Python bindings and their tests)
#   ./scripts/install-deps.sh --bench  also the speed anchors and the model export: oneDNN,
#                                      PyTorch and torchvision, python3-onnx, hyperfine
set -e
PKGS="build-essential cmake pkg-config clang libomp-dev libclang-rt-14-dev libcjson-dev libxgboost-dev libopenblas-dev libprotobuf-c-dev protobuf-c-compiler libonnx-dev openmpi-bin libopenmpi-dev libc6-dev-arm64-cross libseccomp-dev python3-cffi python3-pytest"
[ "$1" = "--bench" ] && PKGS="$PKGS libdnnl-dev python3-torch python3-torchvision python3-onnx hyperfine"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "install-deps: these packages are missing and installing them needs root:$missing" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends $missing
