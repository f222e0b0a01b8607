#!/usr/bin/env bash
# tests/lint/doc_links.sh ROOT — every relative link in README.md and docs/
# (Markdown) points to a file that exists, and every #anchor to a heading of
# the file it names (GitHub's anchors: lower case, punctuation dropped, spaces
# as hyphens, a repeated heading numbered -1, -2, ...). Links inside fenced
# code blocks are not links.
set -euo pipefail
ROOT=$1
cd "$ROOT"
mapfile -t files < <(printf '%s\n' README.md; find docs -name '*.md' | sort)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# anchors: "FILE<TAB>ANCHOR" for every heading outside a fence.
for f in "${files[@]}"; do
  awk -v f="$f" '
    /^```/ { fence = !fence; next }
    fence || !/^#+ / { next }
    { h = $0; sub(/^#+ +/, "", h); h = tolower(h)
      gsub(/[^a-z0-9_ -]/, "", h); gsub(/ /, "-", h)
      n = seen[h]++; print f "\t" (n ? h "-" n : h) }' "$f"
done >"$work/anchors"

# links: "FILE<TAB>LINE<TAB>TARGET" for every ](target) outside a fence.
for f in "${files[@]}"; do
  awk -v f="$f" '
    /^```/ { fence = !fence; next }
    fence { next }
    { s = $0
      while (match(s, /\]\([^) ]+\)/)) {
        print f "\t" NR "\t" substr(s, RSTART + 2, RLENGTH - 3)
        s = substr(s, RSTART + RLENGTH) } }' "$f"
done >"$work/links"

bad=0 checked=0
while IFS=$'\t' read -r f line target; do
  case $target in [a-z]*:*) continue ;; esac   # http:, https:, mailto:
  checked=$((checked + 1))
  path=${target%%#*} frag=
  [[ $target == *#* ]] && frag=${target#*#}
  if [[ -z $path ]]; then
    dest=$f
  else
    dest=$(realpath -m --relative-to=. "$(dirname "$f")/$path")
    if [[ ! -e $dest ]]; then
      echo "$f:$line: link to $target: $dest does not exist" >&2; bad=$((bad + 1)); continue
    fi
  fi
  if [[ -n $frag ]]; then
    if [[ $dest != *.md ]]; then
      echo "$f:$line: link to $target: an anchor in a file that is not Markdown" >&2; bad=$((bad + 1))
    elif ! grep -qxF "$dest"$'\t'"$frag" "$work/anchors"; then
      echo "$f:$line: link to $target: $dest has no heading #$frag" >&2; bad=$((bad + 1))
    fi
  fi
done <"$work/links"

[[ $checked -gt 0 ]] || { echo "doc_links.sh: no link found: the check reads nothing" >&2; exit 2; }
if [[ $bad -gt 0 ]]; then
  echo "doc_links.sh: $bad broken link(s) of $checked" >&2
  exit 1
fi
echo "doc_links.sh: $checked relative links in ${#files[@]} files resolve"
