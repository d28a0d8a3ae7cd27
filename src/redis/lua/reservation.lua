-- Reservations (src/store/reservation_book.cc): a key's reservations live beside its state, under
-- its hash tag: "<key>:ro" the open ones, "<key>:rz" the open ones of estimate 0 (they take no
-- slot) and "<key>:rs" the settled ones, sorted sets of ids ("<hi>:<lo>") scored by expiry (µs,
-- written as decimal integers), and "<key>:rd" a hash of id to
-- the record, packed doubles (exact integers below 2^53): expiry, estimate, the reserve's time
-- and reset_after (its grant), 1 when it gives back at expiry, and once settled the cost and the
-- settle's remaining (negative: a fixed window's overdraft), reset_after and overrun.
local RECORD = '<ddddddddd'

local function reservation_member(hi, lo) return fmt('%d:%d', hi, lo) end

-- Gives back `units` a decision at `at` with `reset` consumed, only what still counts (as an
-- undo, which is a lease's give-back too).
local function give_back(alg, st, cap, rn, rp, now, units, at, reset)
  if alg == FIXED_WINDOW then
    return fixed_window_refund(st, cap, rn, rp, now, fixed_window_undo_units(st, rp, units, at, reset))
  end
  if alg == GCRA then return gcra_undo(st, cap, rn, rp, now, units, at, reset) end
  return token_bucket_undo(st, cap, rn, rp, now, units, at, reset)
end

-- Keeps `k` at least `ms` more.
local function reservation_keep(k, ms)
  local t = redis.call('PTTL', k)
  if t < ms then redis.call('PEXPIRE', k, ms) end
end

-- Drops the key's reservations expired at `now`, giving back the estimate of each open one that
-- says so, written at once (whatever the request then decides). Returns the state after.
local function reservations_expire(key, alg, st, cap, rn, rp, now, slack)
  local ro, rs, rd = key .. ':ro', key .. ':rs', key .. ':rd'
  local cut = fmt('%d', now)
  local due = redis.call('ZRANGEBYSCORE', ro, '-inf', cut)
  for _, id in ipairs(due) do
    local v = redis.call('HGET', rd, id)
    if v then
      local _, estimate, at, reset, give = sunpack(RECORD, v)
      if give == 1 then
        local _, _, rst, _, changed, w0, w1, w2 = give_back(alg, st, cap, rn, rp, now, estimate, at, reset)
        if changed then
          compact_write(key, st, w0, w1, w2, now, rst, slack)
          st = {w0, w1, w2, st and st[4]}
        end
      end
      redis.call('HDEL', rd, id)
    end
  end
  if #due > 0 then redis.call('ZREMRANGEBYSCORE', ro, '-inf', cut) end
  -- An estimate of 0 gives nothing back: its record goes.
  local zeros = redis.call('ZRANGEBYSCORE', key .. ':rz', '-inf', cut)
  for _, id in ipairs(zeros) do redis.call('HDEL', rd, id) end
  if #zeros > 0 then redis.call('ZREMRANGEBYSCORE', key .. ':rz', '-inf', cut) end
  local gone = redis.call('ZRANGEBYSCORE', rs, '-inf', cut)
  for _, id in ipairs(gone) do redis.call('HDEL', rd, id) end
  if #gone > 0 then redis.call('ZREMRANGEBYSCORE', rs, '-inf', cut) end
  return st
end

-- Forgets every reservation of `key` (a reset).
local function reservations_forget(key)
  redis.call('DEL', key .. ':ro', key .. ':rz', key .. ':rs', key .. ':rd')
end

-- Deletes reservation (hi, lo) of `key` (a reserve's undo: its request was refused elsewhere).
local function reservation_drop(key, hi, lo)
  local id = reservation_member(hi, lo)
  redis.call('ZREM', key .. ':ro', id)
  redis.call('ZREM', key .. ':rz', id)
  redis.call('HDEL', key .. ':rd', id)
end

-- A reserve's decision: a consume's, refused (RES_FULL) when `max_open` are open; one of 0
-- takes no slot, but is refused in debt (or on an overdrawn window), as a charge's peek. Returns
-- a compact decision's eight values and the reservation code.
local function reserve_decide(key, alg, st, cap, rn, rp, now, cost, max_open)
  local v, rem, rst, retry, consumed, w0, w1, w2 = COMPACT[alg](st, cap, rn, rp, now, cost)
  if cost == 0 then
    local cv, crem, crst, cretry = COMPACT_CHARGE[alg](st, cap, rn, rp, now, 0)
    if cv ~= ALLOWED then return cv, crem, crst, cretry, false, w0, w1, w2, RES_NONE end
    return v, rem, rst, retry, consumed, w0, w1, w2, RES_NONE
  end
  local ro = key .. ':ro'
  if redis.call('ZCARD', ro) < max_open then
    return v, rem, rst, retry, consumed, w0, w1, w2, RES_NONE
  end
  local first = redis.call('ZRANGE', ro, 0, 0, 'WITHSCORES')
  local wait = tonumber(first[2]) - now
  if retry > wait then wait = retry end
  local _, prem, prst, _, _, p0, p1, p2 = COMPACT[alg](st, cap, rn, rp, now, 0)
  return DENIED, prem, prst, wait, false, p0, p1, p2, RES_FULL
end

-- Records an admitted reserve of `cost` whose decision reported `reset`; one of 0 in "<key>:rz",
-- which keeps `max_open`, forgetting the one that expires first.
local function reservation_open(key, now, cost, reset, hi, lo, ttl, give, max_open, slack)
  local ro, rd = key .. (cost == 0 and ':rz' or ':ro'), key .. ':rd'
  local id = reservation_member(hi, lo)
  if cost == 0 and redis.call('ZCARD', ro) >= max_open then
    local first = redis.call('ZRANGE', ro, 0, 0)[1]
    redis.call('ZREM', ro, first)
    redis.call('HDEL', rd, first)
  end
  redis.call('ZADD', ro, fmt('%d', now + ttl), id)
  redis.call('HSET', rd, id, spack(RECORD, now + ttl, cost, now, reset, give, 0, 0, 0, 0))
  -- One that gives back at expiry lives until its units no longer count (its grant's reset),
  -- so that the first operation after its expiry still finds it.
  local life = ttl
  if give == 1 and reset > life then life = reset end
  local ms = ttl_ms(life, slack)
  reservation_keep(ro, ms)
  reservation_keep(rd, ms)
end

-- Settles reservation (hi, lo) at `cost`. Returns verdict, remaining, reset_after, retry_after,
-- the reservation code and the overrun (the cost above the estimate, of which at most `cap` is
-- charged).
local function reservation_settle(key, alg, st, cap, rn, rp, now, cost, hi, lo, max_open, slack)
  local ro, rs, rd = key .. ':ro', key .. ':rs', key .. ':rd'
  local id = reservation_member(hi, lo)
  local v = redis.call('HGET', rd, id)
  if v and sunpack(RECORD, v) <= now then  -- expired (its sorted set's TTL may have dropped it)
    redis.call('HDEL', rd, id)
    v = nil
  end
  local open = v and (redis.call('ZSCORE', ro, id) or redis.call('ZSCORE', key .. ':rz', id))
  if v and not open then
    local _, _, _, _, _, actual, r_rem, r_rst, r_over = sunpack(RECORD, v)
    if actual == cost then return ALLOWED, r_rem, r_rst, 0, RES_REPEATED, r_over end
  end
  if not open then
    local _, rem, rst = COMPACT[alg](st, cap, rn, rp, now, 0)
    return ALLOWED, rem, rst, 0, v and RES_CONFLICT or RES_UNKNOWN, 0
  end
  local expiry, estimate, at, reset, give = sunpack(RECORD, v)
  local _, rem, rst, changed, w0, w1, w2
  if cost < estimate then
    _, rem, rst, _, changed, w0, w1, w2 = give_back(alg, st, cap, rn, rp, now, estimate - cost, at, reset)
  elseif cost > estimate then  -- at most the capacity above the estimate is charged
    local units = cost - estimate
    if units > cap then units = cap end
    _, rem, rst, _, changed, w0, w1, w2 = COMPACT_OVERDRAW[alg](st, cap, rn, rp, now, units)
  else
    _, rem, rst, _, changed, w0, w1, w2 = COMPACT[alg](st, cap, rn, rp, now, 0)
  end
  if changed then compact_write(key, st, w0, w1, w2, now, rst, slack) end
  local over = cost > estimate and cost - estimate or 0
  redis.call('ZREM', ro, id)
  redis.call('ZREM', key .. ':rz', id)
  redis.call('ZADD', rs, fmt('%d', expiry), id)
  redis.call('HSET', rd, id, spack(RECORD, expiry, estimate, at, reset, give, cost, rem, rst, over))
  reservation_keep(rs, ttl_ms(expiry - now, slack))
  if redis.call('ZCARD', rs) > max_open then  -- the settled one that expires first goes
    local first = redis.call('ZRANGE', rs, 0, 0)[1]
    redis.call('ZREM', rs, first)
    redis.call('HDEL', rd, first)
  end
  return ALLOWED, rem, rst, 0, RES_SETTLED, over
end
