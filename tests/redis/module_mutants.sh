#!/usr/bin/env bash
# Deliberate bugs in the caudal Redis module (src/redis/module/consume_module.cc), one at a time:
# each is applied, the module rebuilt, and the script says which suites catch it. A mutant no
# suite catches is a hole in the tests. The source is restored after each mutant (and on exit).
#
#   tests/redis/module_mutants.sh [build-dir]   (default: build; configured by `make build`)
#   tests/redis/module_mutants.sh --check       (lint.module_mutants: every mutant's text is in
#                                                the file; nothing is changed or built)
#
# Suites: module (redis_module_test: the module against the fast script byte for byte, a
# replica, malformed calls, a store), equivalence (redis_lua_equivalence_test: the module's turns
# against the reference model).
set -euo pipefail
cd "$(dirname "$0")/../.."
check=0
if [[ ${1:-} == --check ]]; then check=1; shift; fi
build=${1:-build}
source=src/redis/module/consume_module.cc

# text | replacement (the first occurrence only)
mutants=(
  # The TTL: not an eighth beyond the need; the kept TTL trusted when it falls short; a group's
  # TTL from its first member written; the slack left out.
  "ttl += ttl / 8;|ttl += ttl / 16;"
  "if (read.present && read.has_keep && read.keep >= c.now + ttl * 1000) {|if (read.present && read.has_keep) {"
  "need = std::max(need, d.reset);|need = need < 0 ? d.reset : need;"
  "return key.Write(v, ttl + c.slack);|return key.Write(v, ttl);"
  # A refused request written, or reported with its consumption.
  "        if (all) {|        if (true) {"
  "ds[i] = DecideEntry(e, states[i].present ? &states[i].st : nullptr, c.now, 0);|ds[i] = DecideEntry(e, states[i].present ? &states[i].st : nullptr, c.now, costs[i]);"
  "if (d.consumed && !WriteState(key, s, d.next, c, d.reset)) return Error(ctx, kWriteFailed);|if (!WriteState(key, s, d.next, c, d.reset)) return Error(ctx, kWriteFailed);"
  # Costs apart read from the wrong place; a request's decoded costs kept for the next.
  "costs[i] = ReadInt(cs.data() + kWord * i);|costs[i] = ReadInt(cs.data());"
  # The whole-group path taken for members in another order; the general path's groups read
  # again per entry; a member id not kept from a drop.
  "whole = g.members[i].id == r.entries[i].id;|whole = true;"
  "View(c.keys[key]) == View(c.keys[k])) return &g;|View(c.keys[key]) != View(c.keys[key])) return &g;"
  "written.insert(e.id);|(void)0;"
  # The bucket's rate scaled back to bounds with the wrong factor.
  ": LimitSpec::Bucket(a, cap, Rate{.count = rn * k, .period = Micros(rp * k)}));|: LimitSpec::Bucket(a, cap, Rate{.count = rn, .period = Micros(rp * k)}));"
  # A state's keep read from the wrong word; a fixed window's overdraft reported as 0.
  "if (!ReadDouble(v.data() + 1 + 3 * kWord, s.keep)) return false;|if (!ReadDouble(v.data() + 1 + 2 * kWord, s.keep)) return false;"
  "d.overdrawn > 0 ? -d.overdrawn : d.remaining,|d.remaining,"
)


if [[ $check == 1 ]]; then
  missing=0
  for m in "${mutants[@]}"; do
    from=${m%%|*}
    if [[ -z $from ]] || ! grep -qF -- "$from" "$source"; then
      echo "not in $source: $from" >&2
      missing=$((missing + 1))
    fi
  done
  echo "${#mutants[@]} mutants, $missing whose text is not in $source"
  exit $((missing > 0))
fi

backup=$(mktemp)
cp -a "$source" "$backup"
restore() { cp -a "$backup" "$source"; touch "$source"; rm -f "$backup"; }
trap restore EXIT
suites=(module:redis_module_test equivalence:redis_lua_equivalence_test)
echo "| mutant | ${suites[*]%%:*} |"
survivors=0
for m in "${mutants[@]}"; do
  from=${m%%|*}
  to=${m#*|}
  cp -a "$backup" "$source"
  python3 - "$source" "$from" "$to" <<'PY'
import sys
path, a, b = sys.argv[1:]
text = open(path).read()
assert a in text, a
open(path, "w").write(text.replace(a, b, 1))
PY
  cmake --build "$build" --target caudal_redis_module >/dev/null 2>&1 || { echo "| \`$from\` | does not build |"; continue; }
  row="| \`$from\` → \`$to\` |"
  caught=0
  for s in "${suites[@]}"; do
    if timeout 300 "$build/tests/redis/${s#*:}" >/dev/null 2>&1; then
      row="$row — |"
    else
      row="$row **caught** |"
      caught=1
    fi
  done
  echo "$row"
  [[ $caught == 1 ]] || survivors=$((survivors + 1))
done
cp -a "$backup" "$source"
touch "$source"
cmake --build "$build" --target caudal_redis_module >/dev/null 2>&1
echo "survivors: $survivors of ${#mutants[@]}"
