#!/bin/sh
# target_test.sh CWM: --target as a user meets it.
#  - a tune for avx2 records the target (-isa=avx2, its flags, no -march=native) and exports a
#    kernel whose header names it; the kernel builds with `gcc -O3 -mavx2 -mfma` alone and passes
#    its example's check against the reference;
#  - a kernel built for an instruction set the CPU lacks stops at load with a message naming the
#    missing feature instead of SIGILL: for real (-mavx512f on a CPU without AVX-512) where the CPU
#    allows, and always with the feature masked in the check (-DCWM_PRETEND_MISSING);
#  - neon kernels are generated here and compile for AArch64 with clang's cross target (when the
#    AArch64 C headers are installed: Debian's libc6-dev-arm64-cross);
#  - an unknown target is a usage error listing the targets; a target the CPU cannot run is
#    refused by the commands that time kernels.
set -e
CWM=$1
T=$(mktemp -d /tmp/cwm-target-XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "target_test: $*"; exit 1; }
cd "$T"
W="dense M=32 N=64 K=64 bias=1 act=relu"
FAST="--trials 4 --per-round 4 --population 16 --generations 1 --repeats 1 --min-repeat-ms 1 --confirm 0"

"$CWM" --target list > list.out
grep -q "^  avx2 " list.out || fail "--target list does not list avx2"
if "$CWM" --target nosuch show --workload "$W" > /dev/null 2> bad.err; then fail "an unknown target was accepted"; fi
grep -q "unknown target 'nosuch'" bad.err && grep -q "avx512" bad.err || fail "the unknown-target error does not list the targets"

CPU_AVX2=0; CPU_AVX512=0
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && CPU_AVX2=1
grep -qw avx512f /proc/cpuinfo && CPU_AVX512=1

if [ $CPU_AVX2 = 1 ]; then
  "$CWM" tune --target avx2 --workload "$W" --name k2 --model random $FAST --cache-dir "$T/cache" \
    --log log.jsonl --export exp > tune.out 2> tune.err || { cat tune.err; fail "tune --target avx2 failed"; }
  [ "$(wc -l < log.jsonl)" -eq 4 ] || fail "expected 4 records"
  grep -q -- '-isa=avx2 -threads=1 -vec=32 ' log.jsonl || fail "the records do not name the avx2 target"
  grep -q -- '-cflags=-O3_-mavx2_-mfma_' log.jsonl || fail "the records do not carry avx2's flags"
  if grep -q 'march=native' log.jsonl; then fail "an avx2 record was built with -march=native"; fi
  grep -q '#define k2_ISA "avx2"' exp/k2.h || fail "the exported header does not name the target"
  grep -q 'cc -O3 -mavx2 -mfma ' exp/k2.h || fail "the exported header does not give the avx2 build line"
  gcc -O3 -mavx2 -mfma -fopenmp -fno-math-errno -fno-trapping-math exp/k2.c exp/k2_example.c -lm -o ex2 ||
    fail "the avx2 kernel does not build with -mavx2 -mfma"
  ./ex2 > ex2.out || { cat ex2.out; fail "the avx2 kernel fails its check"; }
  ./ex2 --time | grep -q "us per call" || fail "the example's --time prints no latency"
  # the same file built for AVX-512: on a CPU without it, the load-time check names avx512f
  if [ $CPU_AVX512 = 0 ]; then
    gcc -O3 -mavx512f -mavx2 -mfma -fopenmp exp/k2.c exp/k2_example.c -lm -o ex512
    if ./ex512 > /dev/null 2> ex512.err; then fail "an AVX-512 build ran on a CPU without AVX-512"; fi
    grep -q "lacks avx512f" ex512.err || { cat ex512.err; fail "no message naming avx512f"; }
    if grep -qi "illegal" ex512.err; then fail "the AVX-512 build died of SIGILL"; fi
  fi
  # masked: the check reports the feature as missing whatever the CPU
  gcc -O3 -mavx2 -mfma -fopenmp -DCWM_PRETEND_MISSING='"avx512f"' exp/k2.c exp/k2_example.c -lm -o exmask
  if ./exmask > /dev/null 2> mask.err; then fail "a masked feature did not stop the kernel"; fi
  grep -q "k2: this CPU lacks avx512f, which k2.c was compiled for" mask.err || { cat mask.err; fail "masked: no message"; }
  # and -DCWM_NO_CPU_CHECK leaves the check to the caller
  gcc -O3 -mavx2 -mfma -fopenmp -DCWM_NO_CPU_CHECK -DCWM_PRETEND_MISSING='"avx512f"' exp/k2.c exp/k2_example.c -lm -o exnc
  ./exnc > /dev/null || fail "CWM_NO_CPU_CHECK did not turn the load-time check off"
fi

# a target this CPU cannot run: generated, not timed
if [ $CPU_AVX512 = 0 ]; then NORUN=avx512; else NORUN=neon; fi
if "$CWM" --target $NORUN measure --workload "$W" --steps /dev/null > /dev/null 2> norun.err; then
  fail "measure --target $NORUN ran on a CPU without it"
fi
grep -q "target $NORUN needs" norun.err || { cat norun.err; fail "no message naming what $NORUN needs"; }

# neon: 8-lane tiles, compiled for AArch64
"$CWM" sample --workload "$W" --count 3 --seed 2 > steps.txt || fail "sample failed"
for line in 1 2 3; do
  "$CWM" --target neon codegen --workload "$W" --steps steps.txt --line $line > neon$line.c || fail "codegen --target neon failed"
  if grep -q "cwm_v16f" neon$line.c; then fail "a neon kernel uses 16-float tiles"; fi
done
if command -v clang > /dev/null && [ -d /usr/aarch64-linux-gnu/include ]; then
  for line in 1 2 3; do
    # Debian's cross headers live in /usr/aarch64-linux-gnu/include (no cross gcc needed)
    clang --target=aarch64-linux-gnu --sysroot=/usr/aarch64-linux-gnu -isystem /usr/aarch64-linux-gnu/include \
      -march=armv8-a -O3 -fopenmp -c neon$line.c -o neon$line.o || fail "a neon kernel does not compile for AArch64"
    if command -v file > /dev/null; then
      file neon$line.o | grep -qi "aarch64" || fail "neon$line.o is not an AArch64 object"
    fi
  done
else
  echo "target_test: no AArch64 C headers (libc6-dev-arm64-cross): the neon compile check is skipped"
fi
echo "target_test: ok"
