#!/usr/bin/env bash
# Time enters caudal through caudal::Clock alone (include/caudal/common/clock.h), so that tests drive it
# with a manual clock. Fails, naming the lines, when code
#   - reads a clock directly (steady_clock, clock_gettime, ...), outside src/common/clock.cc;
#   - waits for time to pass other than through Clock::WaitUntil (wait_for and wait_until of a
#     condition variable or a future, sleep_for, sleep_until, usleep, nanosleep), outside
#     src/common/clock.cc;
#   - names SystemClock::Instance(), the real clock, outside src/common/clock.cc and src/cli/
#     (where main() makes the process's clock): everything else takes a Clock&.
# Tests that run real servers may wait on real time; unit tests beside the code (*_test.cc) and
# the tests/ and bench/ trees are not checked.
set -euo pipefail
root="${1:?usage: clock.sh SOURCE_DIR}"
cd "$root"

# The lines of src/ and include/ matching the extended regex $1, without tests and comments.
scan() {
  { grep -rnE "$1" src include --include='*.cc' --include='*.h' || true; } \
    | grep -v '_test\.cc:' \
    | grep -vE '^[^:]+:[0-9]+:\s*//' || true
}

failed=0
report() {
  if [ -n "$2" ]; then
    echo "$1"
    echo "$2"
    failed=1
  fi
}

reads=$(scan '(steady|system|high_resolution)_clock|gettimeofday|clock_gettime|[^_a-z]time\((nullptr|NULL|0)\)|gpr_now' \
  | grep -v '^src/common/clock\.cc:' || true)
report "direct clock reads (take a caudal::Clock& instead):" "$reads"

waits=$(scan '(^|[^A-Za-z0-9_])(wait_for|wait_until|sleep_for|sleep_until|usleep|nanosleep)[[:space:]]*\(' \
  | grep -v '^src/common/clock\.cc:' || true)
report "waits outside Clock (wait with Clock::WaitUntil, so a manual clock ends them):" "$waits"

instance=$(scan 'SystemClock::Instance[[:space:]]*\(' \
  | grep -vE '^(src/common/clock\.cc|src/cli/[^:]+):' || true)
report "the real clock outside main() (take a caudal::Clock& instead):" "$instance"

if [ "$failed" -ne 0 ]; then exit 1; fi
echo "no direct clock read, wait or SystemClock outside their places"
