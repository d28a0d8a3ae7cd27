#!/usr/bin/env bash
# Fails, naming the files, when a C++ or proto source differs from what clang-format makes of it
# (.clang-format at the top). `make format` rewrites them.
set -euo pipefail
root="${1:?usage: format.sh SOURCE_DIR}"
cd "$root"
command -v clang-format >/dev/null || { echo "clang-format is not installed"; exit 1; }
mapfile -t files < <(find include src tests bench fuzz proto \
  \( -name '*.h' -o -name '*.cc' -o -name '*.proto' \) -type f | sort)
[ "${#files[@]}" -gt 100 ] || { echo "found only ${#files[@]} sources under $root"; exit 1; }
# One clang-format for all files; it names each file it would change in a warning.
out=$(clang-format --dry-run --Werror "${files[@]}" 2>&1) && status=0 || status=$?
if [ "$status" -ne 0 ]; then
  echo "not formatted (run make format):"
  grep -oE '^[^: ]+\.(h|cc|proto):' <<<"$out" | tr -d ':' | sort -u | sed 's/^/  /'
  grep -qE '^[^: ]+\.(h|cc|proto):' <<<"$out" || echo "$out"
  exit 1
fi
echo "${#files[@]} files formatted"
