#!/usr/bin/env bash
# clock.sh passes a tree that keeps its rules and fails, naming the line, on each kind of
# violation it exists for.
set -euo pipefail
lint="$(cd "$(dirname "$0")" && pwd)/clock.sh"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/src/common" "$scratch/src/cli" "$scratch/src/engine" "$scratch/src/server" \
  "$scratch/include/caudal"

# Allowed: the clock's own file, main() naming the real clock, a wait through Clock, tests.
cat > "$scratch/src/common/clock.cc" <<'CC'
Nanos SystemClock::Monotonic() const { return std::chrono::steady_clock::now().time_since_epoch(); }
  return cv.wait_until(lock, until, done);
SystemClock& SystemClock::Instance() {
CC
echo '  .clock = caudal::SystemClock::Instance(),' > "$scratch/src/cli/main.cc"
echo '  if (clock_.WaitUntil(wake_, lock, retry_at, [this] { return stopping_; })) return;' \
  > "$scratch/src/engine/ok.cc"
echo '  std::this_thread::sleep_for(milliseconds(1));' > "$scratch/src/engine/ok_test.cc"
"$lint" "$scratch" > /dev/null || { echo "clock.sh refused a tree that keeps its rules"; exit 1; }

refused() {  # FILE LINE: clock.sh must fail on LINE as the first line of FILE, naming it
  local file="$1" saved=""
  if [ -e "$scratch/$file" ]; then saved=$(cat "$scratch/$file"); fi
  printf '%s\n' "$2" > "$scratch/$file"
  local out
  if out=$("$lint" "$scratch"); then
    echo "clock.sh let through $file: $2"
    exit 1
  fi
  grep -qF "$file:1:" <<< "$out" || { echo "clock.sh failed without naming $file:1: $out"; exit 1; }
  if [ -n "$saved" ]; then printf '%s\n' "$saved" > "$scratch/$file"; else rm "$scratch/$file"; fi
}
refused src/engine/read.cc '  const auto t = std::chrono::steady_clock::now();'
refused src/engine/cv.cc '  cv_.wait_for(lock, options_.interval, [this] { return stopping_; });'
refused src/engine/until.cc '  cv_.wait_until(lock, deadline);'
refused src/engine/future.cc '  if (answer.wait_for(timeout) != std::future_status::ready) {'
refused src/engine/sleep.cc '  std::this_thread::sleep_for(std::chrono::milliseconds(20));'
refused src/engine/usleep.cc '  usleep(1000);'
refused include/caudal/default.h '  const Clock& clock = SystemClock::Instance();'
refused src/engine/instance.cc '  Logger log({}, SystemClock::Instance());'
refused src/server/http_server.cc '    std::this_thread::sleep_for(std::chrono::milliseconds(20));'
echo "clock.sh catches every kind of violation"
