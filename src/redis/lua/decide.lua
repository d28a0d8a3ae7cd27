-- caudal: decides a batch of rate-limit requests in one atomic call. The last part of the
-- script: the algorithms and the arithmetic come before it (see prelude.lua), and each compact
-- algorithm has registered itself in COMPACT and COMPACT_REFUND.
--
-- Wire format (built by src/redis/lua_protocol.cc):
--   KEYS: one per entry, every request's entries in order.
--   ARGV[1]: now in µs, or "" to read Redis's TIME (production).
--   ARGV[2]: extra TTL in ms added to every write (0 in production; see lua_protocol.h).
--   A call whose keys span hash slots (Redis Cluster: several slots of one node) declares no
--   KEYS: ARGV[3] is then the key count N and ARGV[4..3+N] the keys, and the requests follow.
--   then one argument per request, its numbers packed as little-endian 64-bit integers
--   (ENTRY below): entry count E, then per entry: algorithm, capacity, rate count, rate period
--   (µs), cost. Buckets pass the reduced refill rate, windows limit and window.
--   A negative cost -u is a refund of u units. An algorithm plus CHARGE_FLAG is a charge: the
--   cost is counted whatever the verdict (the verdict still counts in the request's `allowed`).
--   An algorithm plus LEASE_FLAG asks for a lease: a sixth number follows, the units asked for,
--   which are taken after the cost, as many as fit, when the whole request is allowed.
--   A CONCURRENCY entry (limit, limit, hold) is followed by two more numbers, its hold id's two
--   words; a cost above 0 takes a slot under it, and a cost of -1 releases it (as a refund, it
--   applies whatever the others decide; its reply carries a fifth integer, 1 when the hold was
--   live).
--   An algorithm plus RESERVE_FLAG carries reservation terms: six more numbers follow (after a
--   lease's or a hold's): mode (0: only expire the key's reservations, 1: reserve, 2: settle,
--   3: a refund that forgets the key's reservations first, whatever the others decide), the
--   reservation id's two words, ttl (µs), 1 when it gives back at expiry, the most open; a
--   reserve's or a settle's reply carries two more integers, its reservation code and overrun
--   (reservation.lua).
--   A request of shares (share.lua) has the entry count SHARE_REQUEST + E and two keys per
--   entry (the state's, then its consumers' hash); per entry: algorithm, capacity, rate count,
--   rate period, the rate's count and period as written, demand, weight, ttl (µs), fairness (0:
--   max-min, 1: proportional), the consumer's and the group's lengths, then their bytes. Its
--   reply is SHARE_FULL alone when a new consumer finds its key full (nothing written), else 1
--   and per entry the four integers, the units granted, the allocation, the live consumers and
--   their demands' sum.
--   An algorithm (FIXED_WINDOW) plus CALENDAR_FLAG counts calendar windows: four more numbers
--   follow its first five (before a lease's), the calendar's consecutive boundaries (µs) near the
--   caller's time; they stand for the rate period in what decides it (fixed_window.lua). An undo
--   entry carries them after its seven, before a reservation id.
--   An algorithm plus GROUP_FLAG is a member of a group (a compact algorithm): one more number
--   follows its first five (an undo entry's seven), before everything else, the member's id; its
--   key is the group's, whose value holds every member's state (compact_state.lua). A request's
--   entries name each member once. A request of two or more entries, every one a member of one
--   group, has the entry count ONE_KEY + E and one key, the group's, for all its entries. (The
--   fast script alone gets such a request's costs apart, COSTS_APART: consume.lua.)
--   An undo request (undo.lua) has a negative entry count -E, then per entry: algorithm,
--   capacity, rate count, rate period, units, and the reservation's now and reset_after (for
--   CONCURRENCY, units and now are the hold id's words: its undo is a release); a reserve's
--   undo entry is its algorithm plus RESERVE_FLAG, followed by the reservation id's two words,
--   and deletes the reservation's record.
-- Reply: per request, 1 (allowed) or 0, then per entry: verdict, remaining (negative: the
--   units a charge overdrew a fixed window by; remaining is then 0), reset_after µs,
--   retry_after µs, and for an entry asking for a lease the units leased (0 when refused); after
--   the last request, the call's now (µs), the time of every lease granted in the call. A refused request consumes
--   nothing and writes nothing; entries that would have passed report their state without the
--   consumption (decided again with cost 0). Refunds apply whatever the request's other
--   entries decide, and report the state after; so do undos (always 1).
--   In a call with undeclared keys, a request with a key this node does not serve (its slot
--   moved, or is migrating and the key already left, or the cluster is down) is skipped whole
--   before anything of it is read or written: its first reply integer is NOT_SERVED, then four 0
--   per entry, and the store sends it again on its own, declaring its keys.

-- Applies an undo (undo.lua) and returns verdict, remaining, reset_after, retry_after.
local function undo(alg, key, cap, rn, rp, now, units, at, reset, slack)
  if alg == CONCURRENCY then
    local verdict, remaining, rst, retry = concurrency_release(key, cap, rp, now, units, at)
    return verdict, remaining, rst, retry
  end
  if alg == SLIDING_WINDOW_LOG then return log_undo(key, cap, rp, now, units, at, reset, slack) end
  local st = compact_read(key)
  local verdict, remaining, rst, retry, changed, w0, w1, w2
  if alg == SLIDING_WINDOW_COUNTER then
    verdict, remaining, rst, retry, changed, w0, w1, w2 =
      sliding_window_counter_undo(st, cap, rp, now, units, at, reset)
  elseif alg == FIXED_WINDOW then
    verdict, remaining, rst, retry, changed, w0, w1, w2 =
      fixed_window_refund(st, cap, rn, rp, now, fixed_window_undo_units(st, rp, units, at, reset))
  elseif alg == GCRA then
    verdict, remaining, rst, retry, changed, w0, w1, w2 =
      gcra_undo(st, cap, rn, rp, now, units, at, reset)
  else
    verdict, remaining, rst, retry, changed, w0, w1, w2 =
      token_bucket_undo(st, cap, rn, rp, now, units, at, reset)
  end
  if changed then compact_write(key, st, w0, w1, w2, now, rst, slack) end
  return verdict, remaining, rst, retry
end

local function decide(alg, st, cap, rn, rp, now, cost, charge, key)
  if alg == CONCURRENCY then return concurrency_evaluate(key, cap, rp, now, cost) end
  if alg == SLIDING_WINDOW_LOG then return log_evaluate(st, cap, rn, rp, now, cost) end
  if charge then return COMPACT_CHARGE[alg](st, cap, rn, rp, now, cost) end
  return COMPACT[alg](st, cap, rn, rp, now, cost)
end

-- Applies a refund of `units` and returns verdict, remaining, reset_after, retry_after.
local function refund(alg, key, cap, rn, rp, now, units, slack)
  if alg == SLIDING_WINDOW_LOG then return log_refund(key, cap, rp, now, units, slack) end
  local st = compact_read(key)
  local verdict, remaining, reset, retry, changed, w0, w1, w2 =
    COMPACT_REFUND[alg](st, cap, rn, rp, now, units)
  if changed then compact_write(key, st, w0, w1, w2, now, reset, slack) end
  return verdict, remaining, reset, retry
end

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local slack = tonumber(ARGV[2])

-- The keys: KEYS[kb + k] when declared, ARGV[kb + k] otherwise (`check` then says to verify
-- that this node serves them; Redis refuses an access to a key of a slot it does not serve).
local K, kb, check, a = KEYS, 0, false, 3
if #KEYS == 0 and #ARGV > 2 then
  local n = tonumber(ARGV[3])
  K, kb, check, a = ARGV, 3, true, 4 + n
end

-- The name of member `id` of the group under `key` (GROUP_FLAG): its state is read and written in
-- the group's value (compact_state.lua), its reservations live under the name.
local function member_key(key, id)
  local name = key .. fmt('#%d', id)
  MEMBERS[name] = {key, id}
  return name
end

-- True when this node serves keys first .. first + n - 1.
local function served(first, n)
  for j = first, first + n - 1 do
    if type(redis.pcall('EXISTS', K[kb + j])) == 'table' then return false end
  end
  return true
end

-- A request's numbers: one struct.unpack per entry reads them all.
local COUNT, ENTRY, UNDO_ENTRY, HOLD = '<i8', '<i8i8i8i8i8', '<i8i8i8i8i8i8i8', '<i8i8'
local RESERVATION = '<i8i8i8i8i8i8'
-- A calendar's four boundaries (CALENDAR_FLAG), as fixed_window.lua takes them.
local function calendar_bounds(req, p)
  local b1, b2, b3, b4
  b1, b2, b3, b4, p = sunpack('<i8i8i8i8', req, p)
  return {b1, b2, b3, b4}, p
end

local out, o = {}, 0
local k = 1
local nargs = #ARGV
local keys, algs, caps, rns, rps, costs, states, charges = {}, {}, {}, {}, {}, {}, {}, {}
local asks = {}  -- per entry: the lease asked for, or false
local his, los = {}, {}  -- per CONCURRENCY entry: its hold id
-- per entry with RESERVE_FLAG: its mode (0: expire only, 1: reserve, 2: settle, 3: forget), its
-- reservation's id, ttl, 1 when it gives back at expiry, and the most open; false otherwise
local modes, rhis, rlos, rttls, rgives, rmaxs, rcodes, overs = {}, {}, {}, {}, {}, {}, {}, {}
local verdicts, remainings, resets, retries, consumeds, x1, x2, x3 = {}, {}, {}, {}, {}, {}, {}, {}
while a <= nargs do
  local req = ARGV[a]
  a = a + 1
  local count, p = sunpack(COUNT, req)
  local one_key = count > ONE_KEY and count < SHARE_REQUEST
  if one_key then count = count - ONE_KEY end
  local n = count < 0 and -count or count
  local sharing = count > SHARE_REQUEST
  if sharing then n = count - SHARE_REQUEST end
  local nk = sharing and 2 * n or one_key and 1 or n  -- a share has two keys
  if check and not served(k, nk) then
    o = o + 1
    out[o] = NOT_SERVED
    for _ = 1, n do
      out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 0, 0, 0, 0
      o = o + 4
    end
    k = k + nk
  elseif sharing then
    o, k = shares_take(req, p, n, K, kb, k, now, slack, out, o)
  elseif count < 0 then  -- an undo request
    o = o + 1
    out[o] = 1
    for _ = 1, n do
      local alg, cap, rn, rp, units, at, reset
      alg, cap, rn, rp, units, at, reset, p = sunpack(UNDO_ENTRY, req, p)
      local key = K[kb + k]
      if alg >= GROUP_FLAG then
        local id
        alg = alg - GROUP_FLAG
        id, p = sunpack(COUNT, req, p)
        key = member_key(key, id)
      end
      if alg >= CALENDAR_FLAG then
        alg = alg - CALENDAR_FLAG
        rp, p = calendar_bounds(req, p)
      end
      local hi, lo
      if alg >= RESERVE_FLAG then  -- a reserve's undo: its record goes too
        alg = alg - RESERVE_FLAG
        hi, lo, p = sunpack(HOLD, req, p)
        reservation_drop(key, hi, lo)
      end
      out[o + 1], out[o + 2], out[o + 3], out[o + 4] =
        undo(alg, key, cap, rn, rp, now, units, at, reset, slack)
      k, o = k + 1, o + 4
    end
  else
    local all = true
    for i = 1, count do
      local alg
      alg, caps[i], rns[i], rps[i], costs[i], p = sunpack(ENTRY, req, p)
      asks[i], modes[i], rcodes[i], overs[i] = false, false, RES_NONE, 0
      local id = false
      if alg >= GROUP_FLAG then
        alg = alg - GROUP_FLAG
        id, p = sunpack(COUNT, req, p)
      end
      if alg >= CALENDAR_FLAG then
        alg = alg - CALENDAR_FLAG
        rps[i], p = calendar_bounds(req, p)
      end
      local reserving = alg >= RESERVE_FLAG
      if reserving then alg = alg - RESERVE_FLAG end
      if alg >= LEASE_FLAG then
        alg = alg - LEASE_FLAG
        asks[i], p = sunpack(COUNT, req, p)
      end
      charges[i] = alg >= CHARGE_FLAG
      if charges[i] then alg = alg - CHARGE_FLAG end
      if alg == CONCURRENCY then his[i], los[i], p = sunpack(HOLD, req, p) end
      if reserving then
        modes[i], rhis[i], rlos[i], rttls[i], rgives[i], rmaxs[i], p = sunpack(RESERVATION, req, p)
      end
      keys[i], algs[i] = id and member_key(K[kb + k], id) or K[kb + k], alg
      if not one_key or i == count then k = k + 1 end
      -- A reset (a refund, even of 0): the key's reservations go first, giving nothing back.
      if modes[i] == 3 then reservations_forget(keys[i]) end
      if costs[i] >= 0 then  -- a refund (negative) is applied below, whatever the others decide
        if alg == SLIDING_WINDOW_LOG then
          states[i] = log_read(keys[i])
        elseif alg ~= CONCURRENCY then
          states[i] = compact_read(keys[i])
        end
        if modes[i] then  -- the key's expired reservations first (reservation.lua)
          states[i] =
            reservations_expire(keys[i], alg, states[i], caps[i], rns[i], rps[i], now, slack)
        end
        if modes[i] == 1 then
          verdicts[i], remainings[i], resets[i], retries[i], consumeds[i], x1[i], x2[i], x3[i],
            rcodes[i] =
            reserve_decide(keys[i], alg, states[i], caps[i], rns[i], rps[i], now, costs[i], rmaxs[i])
        elseif modes[i] == 2 then  -- alone in its request: settled here
          verdicts[i], remainings[i], resets[i], retries[i], rcodes[i], overs[i] =
            reservation_settle(keys[i], alg, states[i], caps[i], rns[i], rps[i], now, costs[i],
                               rhis[i], rlos[i], rmaxs[i], slack)
          consumeds[i] = false
        else
          verdicts[i], remainings[i], resets[i], retries[i], consumeds[i], x1[i], x2[i], x3[i] =
            decide(alg, states[i], caps[i], rns[i], rps[i], now, costs[i], charges[i], keys[i])
        end
        if verdicts[i] ~= ALLOWED then all = false end
      elseif modes[i] then  -- a refund on a key that may hold reservations: they expire first
        reservations_expire(keys[i], alg, compact_read(keys[i]), caps[i], rns[i], rps[i], now, slack)
      end
    end
    o = o + 1
    out[o] = all and 1 or 0
    for i = 1, count do
      local leased = 0
      if all and asks[i] and asks[i] > 0 and remainings[i] > 0 then
        -- The lease: a second decision, on the state after the cost, of what still fits.
        leased = asks[i] < remainings[i] and asks[i] or remainings[i]
        local v, rem, rst, _, _, w0, w1, w2 =
          COMPACT[algs[i]]({x1[i], x2[i], x3[i]}, caps[i], rns[i], rps[i], now, leased)
        if v == ALLOWED then
          remainings[i], resets[i], consumeds[i] = rem, rst, true
          x1[i], x2[i], x3[i] = w0, w1, w2
        else
          leased = 0
        end
      end
      local released = false
      if costs[i] < 0 and algs[i] == CONCURRENCY then
        verdicts[i], remainings[i], resets[i], retries[i], released =
          concurrency_release(keys[i], caps[i], rps[i], now, his[i], los[i])
      elseif costs[i] < 0 then
        verdicts[i], remainings[i], resets[i], retries[i] =
          refund(algs[i], keys[i], caps[i], rns[i], rps[i], now, -costs[i], slack)
      elseif modes[i] == 1 and all then  -- an admitted reserve: its cost, and its record
        if consumeds[i] then
          compact_write(keys[i], states[i], x1[i], x2[i], x3[i], now, resets[i], slack)
        end
        reservation_open(keys[i], now, costs[i], resets[i], rhis[i], rlos[i], rttls[i], rgives[i],
                         rmaxs[i], slack)
        rcodes[i] = RES_OPENED
      elseif (all or charges[i]) and consumeds[i] then  -- a charge counts whatever was decided
        if algs[i] == CONCURRENCY then
          concurrency_take(keys[i], rps[i], now, his[i], los[i], resets[i], slack)
        elseif algs[i] == SLIDING_WINDOW_LOG then
          log_commit(keys[i], states[i], x1[i], costs[i], rps[i], ttl_ms(resets[i], slack))
        else
          compact_write(keys[i], states[i], x1[i], x2[i], x3[i], now, resets[i], slack)
        end
      elseif not all and consumeds[i] and not charges[i] then
        verdicts[i], remainings[i], resets[i], retries[i] =
          decide(algs[i], states[i], caps[i], rns[i], rps[i], now, 0, false, keys[i])
      end
      out[o + 1], out[o + 2], out[o + 3], out[o + 4] =
        verdicts[i], remainings[i], resets[i], retries[i]
      o = o + 4
      if released then
        o = o + 1
        out[o] = released
      end
      if asks[i] then
        o = o + 1
        out[o] = leased
      end
      if modes[i] == 1 or modes[i] == 2 then
        out[o + 1], out[o + 2] = rcodes[i], overs[i]
        o = o + 2
      end
    end
  end
end
for g = 1, #CALL_GROUPS do  -- each group read (compact_state.lua): written once, if changed
  local S = CALL_GROUPS[CALL_GROUPS[g]]
  if S.need then group_write(CALL_GROUPS[g], S, now, S.need, slack) end
end
out[o + 1] = now
return out
