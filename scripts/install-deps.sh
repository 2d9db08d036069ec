#!/bin/sh
# Installs the Debian 12 packages cwm needs to build, test and benchmark. Run as root.
set -e
PKGS="build-essential cmake pkg-config clang libomp-dev libclang-rt-14-dev \
libcjson-dev libxgboost-dev libopenblas-dev libdnnl-dev python3-torch hyperfine"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" != 0 ]; then echo "install-deps: need root to install:$missing" >&2; exit 1; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q || true
  apt-get install -y -q $missing
fi
