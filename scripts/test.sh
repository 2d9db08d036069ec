#!/bin/sh
# Builds cwm and runs its tests: a release build with every test, then an AddressSanitizer +
# UndefinedBehaviorSanitizer build running the tests again (the property test with fewer lists).
# The long property test over the real suite shapes is `ctest -L long` (not run here).
set -e
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}
# the layers: no upward include, no two files depending on each other (before building anything)
python3 scripts/check-layers.py
# file and function sizes (800 and 120 lines; exceptions named in the script)
./scripts/check-layout.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$JOBS"
(cd build && ctest --output-on-failure -LE long)
cmake -S . -B build-asan -DCWM_SANITIZE=ON -DCWM_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug
cmake --build build-asan -j"$JOBS"
(cd build-asan && CWM_PROPERTY_COUNT=8 ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -LE long)
# the parsers under libFuzzer, a short fixed time each (scripts/fuzz.sh 600 for a real run)
./scripts/fuzz.sh "${FUZZ_SECONDS:-15}"
echo "cwm: all tests passed"
