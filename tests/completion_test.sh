#!/bin/bash
# completion_test.sh CWM SCRIPT: the bash completion of SCRIPT against the cwm binary CWM completes
# commands, subcommands, options, option values and file names (the words a user would get on TAB).
set -u
CWM=$1
SCRIPT=$2
T=$(mktemp -d /tmp/cwm-completion-XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/bin" "$T/dir.d"
ln -s "$(cd "$(dirname "$CWM")" && pwd)/$(basename "$CWM")" "$T/bin/cwm"
touch "$T/model.onnx"
export PATH="$T/bin:$PATH"
fail=0
# complete WORDS... : the completions of the last word
complete_words() {
  bash -c 'source "$0"; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _cwm; echo "${COMPREPLY[*]}"' \
    "$SCRIPT" "$@"
}
expect() { # expect "WANTED WORDS" WORDS...: each wanted word is among the completions
  local want=$1 got w
  shift
  got=" $(complete_words "$@") "
  for w in $want; do
    if [[ $got != *" $w "* ]]; then
      echo "completion_test: '$*' gives '$got', without '$w'"
      fail=1
    fi
  done
}
expect "tune" cwm tu
expect "show sample replay codegen measure tune import compile demo dataset train eval" cwm ''
expect "measure remeasure" cwm dataset ''
expect "all ansor encoder" cwm train ''
expect "ranking score noise" cwm eval ''
expect "--workload --trials --model --model-file --quiet --json --cache-dir --help" cwm tune --
expect "random ansor world" cwm tune --model ''
expect "random ansor world" cwm tune --model = ''
expect "--per-workload --log" cwm dataset measure --
expect "$T/dir.d" cwm tune --export "$T/d"
expect "$T/model.onnx" cwm import "$T/m"
expect "$T/model.onnx" cwm tune --log "$T/m"
expect "tune" cwm --cache-dir "$T" tu
# every command the help lists completes its options
for c in $(complete_words cwm ''); do
  [[ -n $(complete_words cwm "$c" --) || -n $(complete_words cwm "$c" '') ]] || {
    echo "completion_test: nothing completes after 'cwm $c'"; fail=1; }
done
[ $fail = 0 ] && echo "completion_test: ok"
exit $fail
