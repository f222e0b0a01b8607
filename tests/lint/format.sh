#!/usr/bin/env bash
# tests/lint/format.sh — every C file of src/, include/, handlers/ and tests/
# as clang-format (Debian's, 14) writes it with the tree's .clang-format.
#
#   tests/lint/format.sh [ROOT]          list each file that differs, exit 1 if any
#   tests/lint/format.sh --count [ROOT]  also count the lines that would change
#
# Reformat one file: clang-format -i FILE; the whole tree
# (what unit_format holds it to):
#   git ls-files 'src/*.[ch]' 'include/*.h' 'handlers/*.[ch]' 'tests/*.[ch]' | xargs clang-format -i
set -euo pipefail
count=0
if [[ ${1:-} == --count ]]; then count=1; shift; fi
ROOT=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
cd "$ROOT"
CF=${CLANG_FORMAT:-clang-format}
command -v "$CF" >/dev/null || { echo "format.sh: $CF is missing (apt-get install clang-format)" >&2; exit 2; }
[[ -f .clang-format ]] || { echo "format.sh: no .clang-format in $ROOT" >&2; exit 2; }

files=0 lines=0
differ=()
while IFS= read -r f; do
        if ! out=$("$CF" --style=file "$f" | diff -- "$f" -); then
                differ+=("$f")
                ((count)) && lines=$((lines + $(grep -c '^[<>]' <<<"$out")))
        fi
        files=$((files + 1))
done < <(git ls-files 'src/*.[ch]' 'include/*.h' 'handlers/*.[ch]' 'tests/*.[ch]')

if ((${#differ[@]} == 0)); then
        echo "format.sh: all $files files as clang-format writes them"
        exit 0
fi
printf '%s\n' "${differ[@]}"
echo "format.sh: ${#differ[@]} of $files files differ from clang-format's output$( ((count)) && echo " ($lines lines of diff)")" >&2
exit 1
