#!/bin/sh
# The logs of bench/paper_cpu (one cwm tune log per run under bench-out/paper) outlive the
# machine they were measured on only if they are kept: `save` packs them into
# report/paper-logs.tar.xz (commit it with REPORT.md), `restore` unpacks that archive into
# bench-out/paper without overwriting a log that is already there, so `./build/paper_cpu`
# resumes where the archived runs stopped (the 10,000-trial part takes hours).
#   scripts/paper-logs.sh save|restore [DIR [ARCHIVE]]
#     DIR: default bench-out/paper; ARCHIVE: default report/paper-logs.tar.xz (the logs of
#     bench/tune_suite's runs are kept the same way: DIR bench-out/ts, ARCHIVE
#     report/tune-suite-logs.tar.xz)
set -e
cd "$(dirname "$0")/.."
DIR=${2:-bench-out/paper}
ARCHIVE=${3:-report/paper-logs.tar.xz}
case "$1" in
  save)
    [ -d "$DIR" ] || { echo "paper-logs: $DIR does not exist: nothing to save" >&2; exit 2; }
    tmp="$ARCHIVE.tmp.$$"
    tar -C "$DIR" -cf - . | xz -9 -T1 > "$tmp"
    mv "$tmp" "$ARCHIVE"
    echo "paper-logs: $DIR -> $ARCHIVE ($(wc -c < "$ARCHIVE") bytes, $(tar -tJf "$ARCHIVE" | grep -c 'jsonl$') logs)"
    ;;
  restore)
    [ -f "$ARCHIVE" ] || { echo "paper-logs: no $ARCHIVE" >&2; exit 2; }
    mkdir -p "$DIR"
    xz -dc "$ARCHIVE" | tar -C "$DIR" --skip-old-files -xf -
    echo "paper-logs: $ARCHIVE -> $DIR (logs already there kept)"
    ;;
  *)
    echo "usage: scripts/paper-logs.sh save|restore [DIR [ARCHIVE]]" >&2
    exit 2
    ;;
esac
