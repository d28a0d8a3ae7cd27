#!/usr/bin/env bash
# Deliberate bugs in the lease bookkeeping (src/decorators/lease_table.cc, above the store), one at
# a time, as tests/redis/lua_mutants.sh does for the script: each is applied, the lease tests
# are rebuilt and run, and the script says which suites catch it. A mutant no suite catches is a
# hole in the tests. The source is restored after each mutant (and on exit).
#
#   tests/redis/lease_mutants.sh [build-dir]      (default: build; configured by `make build`)
#
# Suites: table (LeaseStore's and the bound's tests on a manual clock, in decorators_test), redis
# (three processes on a real redis-server, tests/redis/lease_test.cc).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
src=src/decorators/lease_table.cc
backup=$(mktemp)
cp -a "$src" "$backup"
put_back() { cp "$backup" "$src"; touch "$src"; }
restore() { put_back; rm -f "$backup"; }
trap restore EXIT

# text ~> replacement (the first occurrence only)
mutants=(
  # A lease spent past its life: at its expiry instant; a fixed window's past its window; without
  # the margin for the clocks' rates.
  "if (all || k.lots[i].expires <= now) { ~> if (all || k.lots[i].expires < now) {"
  "if (IsWindowAlgorithm(limit.algorithm())) life = std::min<Nanos>(life, decision->reset_after); ~> "
  "life -= life / 1024; ~> "
  # Units given back twice: the ended lots kept after they were handed out.
  "std::move(shard.ended.begin(), shard.ended.end(), std::back_inserter(out));
    shard.ended.clear(); ~> std::copy(shard.ended.begin(), shard.ended.end(), std::back_inserter(out));"
  # A renewal that double-counts: a grant's units spendable twice.
  ".left = units, .granted = units, ~> .left = units + units, .granted = units,"
  # A request answered from a lease too small for it; a refund past what the lease was granted.
  "covered = covered && k.n > 0 && k.Left() >= e.cost; ~> covered = covered && k.n > 0;"
  "std::min(units, k.lots[j].granted - k.lots[j].left) ~> units"
  # Leases past the share all instances may hold.
  "return std::min(demand, max); ~> return demand + 0 * max;"
  # A store a round trip away: the first ask sized from the demand seen alone; a renewal only at
  # half spent; a dry key's request answered here without being spent.
  "* 3 * rtt.count() / seen.count(); ~> * 0 * rtt.count() / seen.count();"
  "* 2 * rtt.count(); ~> * 0 * rtt.count();"
  "  plan.allowed = false;
 ~> "
)
suites=("table:src/decorators/decorators_test:--gtest_filter=Lease*" "redis:tests/redis/redis_lease_test:")
targets=(decorators_test redis_lease_test)

printf '| mutant | table | redis |\n|---|---|---|\n'
survivors=0
for m in "${mutants[@]}"; do
  from=${m%% ~> *}
  to=${m#* ~> }
  cp "$backup" "$src"
  python3 - "$src" "$from" "$to" <<'PY'
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
if old not in text:
    sys.exit(f"{path}: mutant text not found: {old}")
open(path, "w").write(text.replace(old, new, 1))
PY
  cmake --build "$build" --target "${targets[@]}" >/dev/null
  row="| \`${from//$'\n'/ }\` → \`${to//$'\n'/ }\` |"
  caught=0
  for s in "${suites[@]}"; do
    IFS=':' read -r _ bin args <<<"$s"
    if timeout 600 "$build/$bin" --gtest_fail_fast $args >/dev/null 2>&1; then
      row+=" — |"
    else
      row+=" **caught** |"
      caught=1
    fi
  done
  echo "$row"
  [[ $caught == 1 ]] || survivors=$((survivors + 1))
done
put_back
cmake --build "$build" --target "${targets[@]}" >/dev/null
echo "survivors: $survivors of ${#mutants[@]}"
[[ $survivors == 0 ]]
