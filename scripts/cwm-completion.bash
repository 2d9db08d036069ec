# bash completion for cwm. Installed as share/bash-completion/completions/cwm; by hand:
#   source scripts/cwm-completion.bash
# Everything is read from the cwm being completed at the moment of completion, so new commands
# and options need no change here: the commands from `cwm --help` (its "  name  what" lines),
# a command's subcommands from `cwm CMD --help` where `cwm CMD --list-options` refuses, the
# options from `cwm CMD [SUB] --list-options` ("=" after those that take a value) and the global
# ones ("  --name" lines of `cwm --help`), and an option's values from "--name a|b|c" or
# "--name {a,b,c}" in the help; other values are file names (directories for DIR).

# the commands or subcommands a help text lists: "  name  what" lines and "cwm CMD a|b|c" usages
_cwm_words() {
  local help=$1 cmd=$2
  printf '%s\n' "$help" | sed -n 's/^  \([a-z][a-z-]*\)  .*/\1/p'
  if [[ -n $cmd ]]; then
    printf '%s\n' "$help" | grep -o "cwm $cmd [a-z][a-z|-]*" | sed "s/^cwm $cmd //" | tr '|' '\n'
  fi
}

# the global options of `cwm --help`: "  --name VALUE  what" lines; "=" after those with a VALUE
_cwm_globals() {
  printf '%s\n' "$1" | sed -n 's/^  \(--[a-z][a-z-]*\) [A-Z][A-Z]* .*/\1=/p; s/^  \(--[a-z][a-z-]*\)\(, -[a-z]\)\{0,1\}  .*/\1/p'
}

_cwm() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev= bin=${COMP_WORDS[0]}
  bin=${bin/#\~/$HOME}
  COMPREPLY=()
  # "--opt=value": bash splits at "=" (COMP_WORDBREAKS), so the option is two words back
  local opt=
  if [[ $cur == = ]]; then
    opt=${COMP_WORDS[COMP_CWORD - 1]} cur=
  elif ((COMP_CWORD >= 2)) && [[ ${COMP_WORDS[COMP_CWORD - 1]} == = ]]; then
    opt=${COMP_WORDS[COMP_CWORD - 2]}
  elif [[ $cur == --*=* ]]; then
    opt=${cur%%=*} cur=${cur#*=}
  elif ((COMP_CWORD >= 1)); then
    prev=${COMP_WORDS[COMP_CWORD - 1]}
  fi

  local top globals
  top=$("$bin" --help 2>/dev/null) || return 0
  globals=$(_cwm_globals "$top")

  # the command words so far: the first words that are not options (nor an option's value)
  local -a path=()
  local i w takes=0 ended=0
  for ((i = 1; i < COMP_CWORD; i++)); do
    w=${COMP_WORDS[i]}
    if ((takes)); then takes=0; continue; fi
    [[ $w == = ]] && continue
    if [[ $w == -- ]]; then ended=1; break; fi
    if [[ $w == -* ]]; then
      [[ $w != *=* ]] && printf '%s\n' "$globals" | grep -qx -- "$w=" && takes=1
      continue
    fi
    ((${#path[@]} < 2)) && path+=("$w")
  done

  # the options of the command (of its subcommand where it has subcommands), and the
  # subcommands while the second word is still missing
  local opts= help= subs=
  if ((${#path[@]})); then
    help=$("$bin" "${path[0]}" --help 2>/dev/null)
    if ! opts=$("$bin" "${path[0]}" --list-options 2>/dev/null); then
      opts=
      if ((${#path[@]} < 2)); then
        subs=$(_cwm_words "$help" "${path[0]}")
      else
        help=$("$bin" "${path[0]}" "${path[1]}" --help 2>/dev/null)
        opts=$("$bin" "${path[0]}" "${path[1]}" --list-options 2>/dev/null)
      fi
    fi
  fi
  local all
  all=$(printf '%s\n%s\n' "$opts" "$globals")

  # an option's value
  [[ -z $opt && $prev == -* ]] && printf '%s\n' "$all" | grep -qx -- "$prev=" && opt=$prev
  if [[ -n $opt ]]; then
    local text=$help$'\n'$top choices meta
    choices=$(printf '%s\n' "$text" | grep -o -- "$opt [a-z0-9][a-z0-9_-]*|[a-z0-9|_-]*" | head -1)
    [[ -z $choices ]] && choices=$(printf '%s\n' "$text" | grep -o -- "$opt {[a-z0-9,_-]*}" | head -1)
    if [[ -n $choices ]]; then
      choices=${choices#"$opt "}
      choices=${choices//[\{\}]/}
      COMPREPLY=($(compgen -W "${choices//[|,]/ }" -- "$cur"))
      return 0
    fi
    meta=$(printf '%s\n' "$text" | grep -o -- "$opt [A-Z][A-Z.]*" | head -1)
    compopt -o filenames 2>/dev/null
    if [[ ${meta#"$opt "} == DIR ]]; then
      COMPREPLY=($(compgen -d -- "$cur"))
    else
      COMPREPLY=($(compgen -f -- "$cur"))
    fi
    return 0
  fi
  if [[ $cur != -* ]] && ((!${#path[@]})); then
    COMPREPLY=($(compgen -W "$(_cwm_words "$top" "")" -- "$cur"))
    return 0
  fi
  if [[ $cur != -* && -n $subs ]]; then
    COMPREPLY=($(compgen -W "$subs" -- "$cur"))
    return 0
  fi
  if [[ $cur == -* ]] && ((!ended)); then
    COMPREPLY=($(compgen -W "$(printf '%s\n' "$all" | tr -d '=')" -- "$cur"))
    return 0
  fi
  # an operand (cwm import MODEL.onnx): a file
  compopt -o filenames 2>/dev/null
  COMPREPLY=($(compgen -f -- "$cur"))
}

complete -F _cwm cwm
