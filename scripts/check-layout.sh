#!/bin/sh
# check-layout.sh: files under src/ longer than 800 lines and C functions longer than 120 lines,
# so that no file or function grows past what a reader can hold. Exit 1 when one is found that
# the exceptions below do not name. Usage: scripts/check-layout.sh [dir] (default: src).
#
# A function is what this codebase writes as one: a line at column 0 with a type and a name
# followed by '(' (not a preprocessor line, not a prototype ending in ';'), then a body that
# closes with a '}' at column 0 (or on the same line, for one-liners). Lengths count from the
# header line to the closing brace.
set -eu
cd "$(dirname "$0")/.."
dir=${1:-src}
max_file=800
max_fn=120

# One exception a line: "path" for a file, "path:function" for a function, then the reason.
exceptions='
'

is_exception() {
  printf '%s\n' "$exceptions" | awk -v k="$1" '$1 == k { found = 1 } END { exit !found }'
}

report=$(mktemp)
trap 'rm -f "$report"' EXIT

find "$dir" -type f \( -name '*.c' -o -name '*.h' \) | LC_ALL=C sort | while read -r f; do
  n=$(wc -l < "$f")
  if [ "$n" -gt "$max_file" ]; then
    echo "file $f $n" >> "$report"
  fi
done

find "$dir" -type f -name '*.c' | LC_ALL=C sort | while read -r f; do
  awk -v file="$f" -v max="$max_fn" '
    function braces(s,   t, o, c) {
      t = s
      gsub(/"([^"\\]|\\.)*"/, "", t)   # string literals
      gsub(/\047([^\047\\]|\\.)*\047/, "", t) # character literals
      o = gsub(/\{/, "", t); c = gsub(/\}/, "", t)
      return o - c
    }
    state == 0 && /^[A-Za-z_][A-Za-z0-9_ \t\*]*[ \t\*][A-Za-z_][A-Za-z0-9_]*\(/ && !/^(typedef|struct|enum|union)[ \t]/ {
      line = $0
      sub(/\(.*/, "", line)
      n = split(line, w, /[ \t\*]+/)
      name = w[n]; start = NR; state = 1
    }
    state == 1 {
      if ($0 ~ /\{/) {
        state = 2
        if (braces($0) == 0) { state = 0; next } # a one-line function
      } else if ($0 ~ /;[ \t]*$/) { state = 0; next } # a prototype
      else next
      next
    }
    state == 2 && /^\}/ {
      len = NR - start + 1
      if (len > max) printf "function %s:%s %d\n", file, name, len
      state = 0
    }
  ' "$f" >> "$report"
done

status=0
while read -r kind key n; do
  limit=$max_fn
  [ "$kind" = file ] && limit=$max_file
  if is_exception "$key"; then
    echo "$kind $key: $n lines (over $limit; listed exception)"
  else
    echo "$kind $key: $n lines (over $limit)"
    status=1
  fi
done < "$report"
exit $status
