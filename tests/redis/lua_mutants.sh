#!/usr/bin/env bash
# Deliberate bugs in the Redis script, one at a time: each is applied to src/redis/lua/, the Lua
# test binaries are rebuilt, and the script says which suites catch it. A mutant no suite catches
# is a hole in the tests. The sources are restored after each mutant (and on exit).
#
#   tests/redis/lua_mutants.sh [build-dir] [filter]   (default: build; configured by `make build`)
#
# `lease`, `concurrency`, `reservation`, `calendar`, `share`, `dimension` or `group` as the second argument runs those
# mutants alone; a file's name (`token_bucket.lua`), that file's mutants of the first list.
#
# Suites: equivalence (lua_equivalence_test, the Lua ≡ C++ random replay), conformance (the Store
# conformance suite on Redis), contract and properties (the algorithms' own suites, every
# decision made by the script: lua_replayer.h), store (RedisStore's own tests: TTLs, the state's
# encoding), undo (undo.lua against the reference model: a split request's undo, a give-back),
# concurrency (processes on one redis-server and on a Cluster taking and releasing slots), cluster
# (the Store suites on a Cluster: split requests and their undo), share (shares on Redis ≡ the
# memory store, and their bound: share_test).
#
#   tests/redis/lua_mutants.sh --check   (lint.lua_mutants: every mutant's text is in its file;
#                                         nothing is changed or built)
set -euo pipefail
cd "$(dirname "$0")/../.."
check=0
if [[ ${1:-} == --check ]]; then check=1; shift; fi
build=${1:-build}
only=${2:-}
lua=src/redis/lua
if [[ $check == 0 ]]; then
  backup=$(mktemp -d)
  cp -a "$lua"/. "$backup"/
  # cp -a keeps the sources' old times, older than what the last mutant's build generated: touch
  # them, or the build would keep the mutant.
  put_back() { cp -a "$backup"/. "$lua"/; touch "$lua"/*.lua; }
  restore() { put_back; rm -rf "$backup"; }
  trap restore EXIT
fi

# file | text | replacement (the first occurrence only)
#
# Not here, being equivalent: token_bucket.lua's `full = a + frac >= b` → `>`. At equality the
# refill reaches the capacity exactly, and the partial refill's carry gives the same (cap, 0).
# Nor gcra.lua's `if nf >= n` → `if nf > n`. It leaves the arrival time
# as (w, n) instead of (w + 1, 0), two spellings of the same instant, and every reader of the
# pair (the verdict, retry, remaining, the refund and the next call's carry) gives the same
# answer for both; no test can tell them apart.
mutants=(
  "token_bucket.lua|if frac >= p then|if frac > p then"
  "token_bucket.lua|return q + ceildiv(r - frac, n)|return q + idiv(r - frac, n)"
  "token_bucket.lua|if r > 0 then q = q + 1 end|if r > 1 then q = q + 1 end"
  "token_bucket.lua|full = a + frac >= b|full = a + frac >= b + p"
  "token_bucket.lua|full = dt >= time_to_reach(cap, tokens, frac, n, p)|full = dt > time_to_reach(cap, tokens, frac, n, p)"
  "token_bucket.lua|if units >= cap - tokens then|if units > cap - tokens then"
  "fixed_window.lua|elseif count + cost <= max or cost == 0 then|elseif count + cost < max or cost == 0 then"
  "fixed_window.lua|elseif count + cost <= max or cost == 0 then|elseif count + cost <= max then"
  "fixed_window.lua|retry = stop - now|retry = stop - now - 1"
  "fixed_window.lua|local back = units < count and units or count|local back = units"
  "gcra.lua|nf, nw = nf - n, nw + 1|nf, nw = nf - n, nw"
  "gcra.lua|if tf > 0 then reset = reset + 1 end|if tf > 1 then reset = reset + 1 end"
  "gcra.lua|(dw == tau_w and nf <= tau_f)|(dw == tau_w and nf < tau_f)"
  "sliding_window_counter.lua|if r > 0 then q = q + 1 end|if r > 1 then q = q + 1 end"
  "sliding_window_log.lua|if ats[i] > t then return i end|if ats[i] >= t then return i end"
  "sliding_window_log.lua|if left >= must_leave then|if left > must_leave then"
  "compact_state.lua|if #v == 33 then|if #v == 25 then"
  "compact_state.lua|if tag == STATE_TAG then return {a, b, c, keep} end|if tag == STATE_TAG then return {a, b, c} end"
  "compact_state.lua|if keep and keep >= now + ttl * 1000 then|if keep then"
  "compact_state.lua|ttl = ttl + floor(ttl / 8)|ttl = ttl"
  "compact_state.lua|if ttl * 1000 < reset then ttl = ttl + 1 end|local _ = 0"
  # The fast script for plain consumes (its calls, as a function and as a script, alternate
  # with the decide script's in the suites): a refused request that still counts, one admitted on a refused entry, a refused
  # request reported with its consumption.
  "consume.lua|        if not all then|        if false then"
  "consume.lua|if verdict ~= ALLOWED then all = false end|local _ = 0"
  "consume.lua|r[b](states[i], r[b + 1], r[b + 2], r[b + 3], now, 0)|r[b](states[i], r[b + 1], r[b + 2], r[b + 3], now, r[b + 4])"
  # Its path for a request of one entry: an admitted consumption not written, a refusal
  # reported as admitted.
  "consume.lua|if consumed then compact_write(key, st, w0, w1, w2, now, reset, slack) end|local _ = 0"
  "consume.lua|verdict == ALLOWED and 1 or 0, verdict|1, verdict"
  # Its caches, kept across calls as a function: a request remembered with another cost, a
  # state read in place that keeps the previous key's TTL record.
  "consume.lua|r = {COMPACT[alg], cap, rn, rp, cost}|r = {COMPACT[alg], cap, rn, rp, 1}"
  "compact_state.lua|tag, t[1], t[2], t[3], t[4] = sunpack('<Bdddd', v)|tag, t[1], t[2], t[3] = sunpack('<Bdddd', v)"
)
# Leases: a renewal (or a lease riding on a request) that counts its units twice, a lease
# taken by a refused request, a lease of the ask whether or not it fits, a give-back applied
# twice, give-backs of units that no longer count (a window that passed, a bucket refilled).
# The bookkeeping above the store has its own: tests/redis/lease_mutants.sh.
lease_mutants=(
  "decide.lua|caps[i], rns[i], rps[i], now, leased)|caps[i], rns[i], rps[i], now, leased + leased)"
  "decide.lua|if all and asks[i] and asks[i] > 0|if asks[i] and asks[i] > 0"
  "decide.lua|leased = asks[i] < remainings[i] and asks[i] or remainings[i]|leased = asks[i]"
  "decide.lua|undo(alg, key, cap, rn, rp, now, units, at, reset, slack)|undo(alg, key, cap, rn, rp, now, units, at, reset, slack) undo(alg, key, cap, rn, rp, now, units, at, reset, slack)"
  "undo.lua|if not st or not fw_counted(st, w, at + reset) then return 0 end|if not st then return 0 end"
  "undo.lua|if q < gq then gq, gr = q, r end|if q < gq then gq, gr = gq, r end"
)
# Concurrency: a slot past the limit, a hold live at its expiry (counted, or released), a slot
# not taken by an admitted request, a split request's undo that leaves its slot held.
# Not here, being equivalent on Redis 7: concurrency.lua's ZADD with the score as a Lua number
# rather than its decimal text (Redis converts a number to its shortest exact spelling).
concurrency_mutants=(
  "concurrency.lua|if cost > 0 and live >= cap then|if cost > 0 and live > cap then"
  "concurrency.lua|local after = '(' .. fmt('%d', now)|local after = fmt('%d', now)"
  "concurrency.lua|if tonumber(score) > now then released = 1 end|if tonumber(score) >= now then released = 1 end"
  "decide.lua|concurrency_take(keys[i], rps[i], now, his[i], los[i], resets[i], slack)|local _ = 0"
  "decide.lua|local verdict, remaining, rst, retry = concurrency_release(key, cap, rp, now, units, at)|local verdict, remaining, rst, retry = concurrency_evaluate(key, cap, rp, now, 0)"
)
# Reservations: a reserve past max_open, a reserve of 0 that takes a slot, more than max_open of
# 0 kept, one of 0 admitted in debt, a refused reserve that records, an expiry a µs late or with
# the wrong outcome, a settle of another cost taken for a repeat, a settle that gives back or
# overdraws the wrong units, an overrun not reported or charged past the capacity, a record
# dropped before its give-back, debt past its cap, a split reserve's undo that leaves its record
# open, a reset that leaves the key's reservations or their slots; and an always-charged bucket's
# verdict or retry taken on the wrong side of its charge.
# Not here, being equivalent: reservation_settle's `sunpack(RECORD, v) <= now` → `< now`. Every
# settle first drops the key's reservations expired at `now` (reservations_expire), records
# included, so no record that reaches the check expires at `now`; the check only guards a record
# whose sorted set's TTL dropped it, which the record's own TTL drops in the same millisecond.
# Nor gcra_overdraw's clamp of the units to cap + debt: the arrival time is clamped to its latest
# after the sum, and any units a request carries (at most 2^40) put the sum past that latest with
# or without it; the clamp only keeps the sum's doubles small.
reservation_mutants=(
  "reservation.lua|if redis.call('ZCARD', ro) < max_open then|if redis.call('ZCARD', ro) <= max_open then"
  "reservation.lua|  if cost == 0 then|  if false then"
  "reservation.lua|if cv ~= ALLOWED then return|if false then return"
  "reservation.lua|key .. (cost == 0 and ':rz' or ':ro')|key .. ':ro'"
  "reservation.lua|if cost == 0 and redis.call('ZCARD', ro) >= max_open then|if false then"
  "decide.lua|if modes[i] == 3 then reservations_forget(keys[i]) end|local _ = 0"
  "reservation.lua|redis.call('DEL', key .. ':ro', key .. ':rz', key .. ':rs', key .. ':rd')|redis.call('DEL', key .. ':rs', key .. ':rd')"
  "decide.lua|elseif modes[i] == 1 and all then|elseif modes[i] == 1 then"
  "reservation.lua|local cut = fmt('%d', now)|local cut = fmt('(%d', now)"
  "reservation.lua|      if give == 1 then|      if give ~= 1 then"
  "reservation.lua|if actual == cost then return|if actual == actual then return"
  "reservation.lua|give_back(alg, st, cap, rn, rp, now, estimate - cost, at, reset)|give_back(alg, st, cap, rn, rp, now, estimate, at, reset)"
  "reservation.lua|COMPACT_OVERDRAW[alg](st, cap, rn, rp, now, units)|COMPACT[alg](st, cap, rn, rp, now, units)"
  "reservation.lua|if units > cap then units = cap end|local _ = cap"
  "reservation.lua|local over = cost > estimate and cost - estimate or 0|local over = 0"
  "reservation.lua|if give == 1 and reset > life then life = reset end|local _ = life"
  "token_bucket.lua|if t < low then t = low end|local _ = low"
  "reservation.lua|redis.call('ZREM', key .. ':ro', id)|local _ = id"
  # An always-charged hit (a charge of a bucket): a verdict on the state after, a retry
  # counted to the state before, a refused hit not counted.
  "token_bucket.lua|  elseif before < cost then|  elseif before <= cost then"
  "token_bucket.lua|    token_bucket_overdraw(st, cap, n, p, now, cost)|    token_bucket_overdraw(st, cap, n, p, now, 0)"
  "gcra.lua|if gcra_wait(bw, bf, now, cost, n, p, tau_w, tau_f) > 0 then|if gcra_wait(w0, w1, now, cost, n, p, tau_w, tau_f) > 0 then"
  "gcra.lua|retry = gcra_wait(w0, w1, now, cost, n, p, tau_w, tau_f)|retry = gcra_wait(bw, bf, now, cost, n, p, tau_w, tau_f)"
)
# Calendar windows (the boundaries handed to the script): the window picked a µs late at a
# boundary, one that ends at the wrong boundary, a stored later window (time went back) judged
# against now's end, a calendar window's end not stored, a give-back matched to the wrong window,
# the boundaries read out of order.
calendar_mutants=(
  "fixed_window.lua|if now < w[2] then return w[1], w[2] end|if now <= w[2] then return w[1], w[2] end"
  "fixed_window.lua|if now < w[3] then return w[2], w[3] end|if now < w[3] then return w[2], w[4] end"
  "fixed_window.lua|if type(w) == 'number' then stop = st[1] + w else stop = st[3] end|if type(w) == 'number' then stop = st[1] + w end"
  "fixed_window.lua|  if type(w) == 'number' then return 0 end|  if true then return 0 end"
  "fixed_window.lua|  return st[3] == stop|  return st[1] + 86400000000 == stop"
  "decide.lua|return {b1, b2, b3, b4}, p|return {b1, b3, b3, b4}, p"
)
# Shares: a share granted twice (its last call not moved), a grant beyond the accrual, allocations
# adding up to more than the refill, a consumer live past its expiry, a key taking one consumer
# past its most, an accrual not capped at the ttl, a group's weight not set for its members, a
# silent consumer still counted (or counted silent a microsecond early, or in the demand total), a
# new consumer's first grant beyond its demand.
share_mutants=(
  "share.lua|    me.last = now|    local _ = now"
  "share.lua|leased = x.units < remaining and x.units or remaining|leased = remaining"
  "share.lua|local spare = capacity - sum|local spare = capacity"
  "share.lua|if r.expiry < now then|if r.expiry <= now then"
  "share.lua|if #recs >= SHARE_MAX then|if #recs > SHARE_MAX then"
  "share.lua|if dt < 0 then dt = 0 elseif dt > ttl then dt = ttl end|if dt < 0 then dt = 0 end"
  "share.lua|r.weight, r.dirty = x.weight, true|r.dirty = true"
  "share.lua|if down[i] then|if down[#out + 1 - i] then"
  "share.lua|if r ~= me and 4 * (now - r.last) > 3 * x.ttl then|if false then"
  "share.lua|if r ~= me and 4 * (now - r.last) > 3 * x.ttl then|if r ~= me and 4 * (now - r.last) >= 3 * x.ttl then"
  "share.lua|      total = total + demands[j]|      total = total + r.demand"
  "share.lua|    if x.seq and x.demand < accruing then accruing = x.demand end|    local _ = accruing"
)
# Dimensions: each key of a request at its own cost (a request's dimensions put another cost on
# each limit): a consume (in either path of the fast script), a reserve, its record or a settle
# taking the first key's instead. Costs sent apart (COSTS_APART): the last call's kept when the
# argument changed, or after one refused part-way; the fourth of four read at once taken as the
# third, or let through negative; a negative one past them let through; a short argument read.
dimension_mutants=(
  "consume.lua|r[b](st, r[b + 1], r[b + 2], r[b + 3], now, r[b + 4])|r[b](st, r[b + 1], r[b + 2], r[b + 3], now, r[6])"
  "consume.lua|decide(st, cap, rn, rp, now, cost)|decide(st, cap, rn, rp, now, r[6])"
  "decide.lua|now, costs[i], rmaxs[i])|now, costs[1], rmaxs[i])"
  "decide.lua|reservation_open(keys[i], now, costs[i]|reservation_open(keys[i], now, costs[1]"
  "decide.lua|reservation_settle(keys[i], alg, states[i], caps[i], rns[i], rps[i], now, costs[i],|reservation_settle(keys[i], alg, states[i], caps[i], rns[i], rps[i], now, costs[1],"
  "consume.lua|      if c ~= r.costs then|      if not r.costs then"
  "consume.lua|  r.costs = false|  r.costs = r.costs"
  "consume.lua|r[b], r[b + 6], r[b + 12], r[b + 18] = c1, c2, c3, c4|r[b], r[b + 6], r[b + 12], r[b + 18] = c1, c2, c3, c3"
  "consume.lua|if c1 < 0 or c2 < 0 or c3 < 0 or c4 < 0 then|if c1 < 0 or c2 < 0 or c3 < 0 then"
  "consume.lua|    if cost < 0 then return|    if cost < -1 then return"
  "consume.lua|if not c or #c ~= 8 * count then|if not c then"
)
# Grouped state (compact_state.lua): a member found at another's place, all members one id, the
# group's TTL from its first member written, kept at a ms, the member written dropped when full,
# a group read without its last member; the fast script reading two groups of a call into one
# table, remembering a request of several entries with another cost, or remembering the table
# each request not remembered is decoded into. Its whole-group path (whole_group): members taken
# in the request's order though the value holds them in another, or a value holding more members;
# a brief reply with a wrong reset; a refused request reporting its consumption; a new group
# written with a member that did not consume; the TTL from the first member; a new group written
# empty. A request on one key (ONE_KEY) reading a key per entry, in either script. The decide
# script's groups of a call (CALL_GROUPS): a member read from the value in Redis rather than the
# call's, the TTL from the first member written, a group never written, or written when nothing
# changed, or not at all.
group_mutants=(
  "compact_state.lua|  if g then return member_state(CALL_GROUPS[g[1]], g[2]) end|  if g then return member_state(group_parse(redis.call('GET', g[1])), g[2]) end"
  "compact_state.lua|    if not S.need or reset > S.need then S.need = reset end|    if not S.need then S.need = reset end"
  "compact_state.lua|  t[#t + 1] = key|  local _ = key"
  "compact_state.lua|  S.need = false|  S.need = 0"
  "decide.lua|  if S.need then group_write(CALL_GROUPS[g], S, now, S.need, slack) end|  if false then group_write(CALL_GROUPS[g], S, now, S.need, slack) end"
  "compact_state.lua|if S[j] == id then return j end|if S[j] == id or j > 4 then return j end"
  "decide.lua|MEMBERS[name] = {key, id}|MEMBERS[name] = {key, 1}"
  "consume.lua|if not need or reset > need then GROUP_NEED[key] = reset end|if not need then GROUP_NEED[key] = reset end"
  "compact_state.lua|unpack(S, 1, 3 + 5 * m)), 'KEEPTTL')|unpack(S, 1, 3 + 5 * m)), 'PX', '1')"
  "compact_state.lua|if not GROUP_WRITTEN[S[j]] and (not near or S[j + 1] < S[near + 1]) then near = j end|if not near or S[j + 1] < S[near + 1] then near = j end"
  "compact_state.lua|for j = 4, 3 + 5 * n, 5 do|for j = 4, 5 * n - 2, 5 do"
  "consume.lua|S = GROUP_POOL[ngroups + 1]|S = GROUP_POOL[1]"
  "consume.lua|r[b + 5] = COMPACT[alg], cap, rn, rp, cost, id|r[b + 5] = COMPACT[alg], cap, rn, rp, 1, id"
  "consume.lua|decode_multi(req, multi_caching and {} or MULTI_SCRATCH)|decode_multi(req, MULTI_SCRATCH)"
  "consume.lua|      if S[5 * i - 1] ~= r[6 * i + 1] then return nil end|      if false then return nil end"
  "consume.lua|    if n ~= count then return nil end|    if n < count then return nil end"
  "consume.lua|out[o + 2 * i], out[o + 2 * i + 1] = remaining, reset|out[o + 2 * i], out[o + 2 * i + 1] = remaining, remaining"
  "consume.lua|    if FAST_CONSUMED[i] then|    if false then"
  "consume.lua|    elseif n == 0 then|    elseif false then"
  "consume.lua|      if not need or reset > need then need = reset end|      if not need then need = reset end"
  "consume.lua|      S[3] = count|      S[3] = n"
  "consume.lua|if not one or i == count then k = k + 1 end|k = k + 1"
  "decide.lua|if not one_key or i == count then k = k + 1 end|k = k + 1"
)
suites=(equivalence:redis_lua_equivalence_test conformance:redis_store_conformance_test
        contract:redis_lua_contract_test properties:redis_lua_properties_test
        store:redis_store_test undo:redis_undo_test concurrency:redis_concurrency_test)
case $only in
  *.lua) keep=()  # one file's mutants
         for m in "${mutants[@]}"; do [[ $m == "$only|"* ]] && keep+=("$m"); done
         mutants=("${keep[@]}") ;;
  lease) mutants=("${lease_mutants[@]}") ;;
  concurrency) mutants=("${concurrency_mutants[@]}") ;;
  calendar) mutants=("${calendar_mutants[@]}")
            suites=(equivalence:redis_lua_equivalence_test undo:redis_undo_test) ;;
  # A split reserve's undo runs on a Cluster: its suites (cluster_suites_test) join.
  reservation) mutants=("${reservation_mutants[@]}")
               suites=(equivalence:redis_lua_equivalence_test
                       conformance:redis_store_conformance_test store:redis_store_test
                       undo:redis_undo_test cluster:redis_cluster_suites_test) ;;
  group) mutants=("${group_mutants[@]}")
         suites=(equivalence:redis_lua_equivalence_test
                 conformance:redis_store_conformance_test store:redis_store_test) ;;
  dimension) mutants=("${dimension_mutants[@]}")
             suites=(equivalence:redis_lua_equivalence_test
                     conformance:redis_store_conformance_test store:redis_store_test) ;;
  # Shares: their Lua ≡ memory store replay and bound (share_test) join.
  share) mutants=("${share_mutants[@]}")
         suites=(share:redis_share_test conformance:redis_store_conformance_test) ;;
  *) mutants+=("${lease_mutants[@]}" "${concurrency_mutants[@]}" "${reservation_mutants[@]}"
               "${calendar_mutants[@]}" "${share_mutants[@]}" "${dimension_mutants[@]}"
               "${group_mutants[@]}")
     suites+=(cluster:redis_cluster_suites_test share:redis_share_test) ;;
esac
if [[ $check == 1 ]]; then
  missing=0
  for m in "${mutants[@]}"; do
    IFS='|' read -r file from _ <<<"$m"
    python3 - "$lua/$file" "$from" <<'PY' || missing=$((missing + 1))
import sys
path, text = sys.argv[1:]
try:
    n = open(path).read().count(text)
except OSError as e:
    sys.exit(f"{path}: {e}")
if n == 0:
    sys.exit(f"{path}: mutant text not found: {text}")
PY
  done
  echo "${#mutants[@]} mutants, $missing whose text is not in its file"
  [[ $missing == 0 ]]
  exit
fi
targets=()
for s in "${suites[@]}"; do targets+=("${s#*:}"); done

printf '| mutant | %s |\n' "$(for s in "${suites[@]}"; do printf '%s | ' "${s%%:*}"; done | sed 's/ | $//')"
printf '|---|%s\n' "$(for _ in "${suites[@]}"; do printf -- '---|'; done)"
survivors=0
for m in "${mutants[@]}"; do
  IFS='|' read -r file from to <<<"$m"
  cp -a "$backup"/. "$lua"/
  python3 - "$lua/$file" "$from" "$to" <<'PY'
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
if old not in text:
    sys.exit(f"{path}: mutant text not found: {old}")
open(path, "w").write(text.replace(old, new, 1))
PY
  cmake --build "$build" --target "${targets[@]}" >/dev/null
  row="| \`$file\`: \`$from\` → \`$to\` |"
  caught=0
  for s in "${suites[@]}"; do
    bin=$(find "$build/tests/redis" -maxdepth 1 -name "${s#*:}" -type f | head -1)
    if timeout 600 "$bin" --gtest_fail_fast >/dev/null 2>&1; then
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
