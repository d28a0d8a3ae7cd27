-- Concurrency (src/algorithms/concurrency.cc): the live holds of a key, as a sorted set under
-- "<key>:holds" whose members are the holds' ids ("<hi>:<lo>") and whose scores are their
-- expiries (µs, exact below 2^53). A hold is live while its expiry is after now. Scores are
-- written as decimal integers, so that their spelling does not rest on how a Redis version
-- converts a Lua number.

local function concurrency_member(hi, lo) return fmt('%d:%d', hi, lo) end

-- Decides a request of `cost` (0: a peek) on the holds live at `now`; changes nothing.
-- Returns verdict, remaining, reset_after, retry_after, consumed.
local function concurrency_evaluate(key, cap, hold, now, cost)
  local after = '(' .. fmt('%d', now)
  local live = redis.call('ZCOUNT', key, after, '+inf')
  local latest = now
  if live > 0 then
    latest = tonumber(redis.call('ZREVRANGEBYSCORE', key, '+inf', after, 'WITHSCORES', 'LIMIT', 0,
                                 1)[2])
  end
  if cost > 0 and live >= cap then
    local first = redis.call('ZRANGEBYSCORE', key, after, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    return DENIED, 0, latest - now, tonumber(first[2]) - now, false
  end
  if cost > 0 then
    live = live + 1
    if now + hold > latest then latest = now + hold end
  end
  local remaining = cap - live
  if remaining < 0 then remaining = 0 end
  return ALLOWED, remaining, latest - now, 0, cost > 0
end

-- Records hold (hi, lo) expiring at now + hold, after dropping the expired ones; the key lives
-- until its last hold expires. Call only after concurrency_evaluate allowed it at this `now`.
local function concurrency_take(key, hold, now, hi, lo, reset, slack)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt('%d', now))
  redis.call('ZADD', key, fmt('%d', now + hold), concurrency_member(hi, lo))
  redis.call('PEXPIRE', key, ttl_ms(reset, slack))
end

-- Frees hold (hi, lo) and drops the expired ones. Returns a peek's verdict, remaining,
-- reset_after, retry_after, and 1 when the hold was live (0 when unknown, freed or expired).
local function concurrency_release(key, cap, hold, now, hi, lo)
  local member = concurrency_member(hi, lo)
  local score = redis.call('ZSCORE', key, member)
  local released = 0
  if score then
    if tonumber(score) > now then released = 1 end
    redis.call('ZREM', key, member)
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt('%d', now))
  local verdict, remaining, reset, retry = concurrency_evaluate(key, cap, hold, now, 0)
  return verdict, remaining, reset, retry, released
end
