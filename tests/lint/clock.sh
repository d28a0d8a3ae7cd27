#!/usr/bin/env bash
# Time enters caudal through caudal::Clock alone (include/caudal/clock.h), so that tests drive it
# with a manual clock. Fails, naming the lines, when code outside src/common/clock.cc reads a
# clock directly. Tests that run real servers may wait on real time; unit tests beside the code
# (*_test.cc) and the tests/ and bench/ trees are not checked.
set -euo pipefail
root="${1:?usage: clock.sh SOURCE_DIR}"
cd "$root"
pattern='(steady|system|high_resolution)_clock|gettimeofday|clock_gettime|[^_a-z]time\((nullptr|NULL|0)\)|gpr_now'
hits=$(grep -rnE "$pattern" src include --include='*.cc' --include='*.h' \
  | grep -v '_test\.cc:' \
  | grep -v '^src/common/clock\.cc:' \
  | grep -vE '^[^:]+:[0-9]+:\s*//' || true)
if [ -n "$hits" ]; then
  echo "direct clock reads (take a caudal::Clock& instead):"
  echo "$hits"
  exit 1
fi
echo "no direct clock reads outside src/common/clock.cc"
