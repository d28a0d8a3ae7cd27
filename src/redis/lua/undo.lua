-- Undo (src/redis/pipeline.h): gives back what one slot group of a request consumed when another
-- group of the same request refused it. Unlike a refund, an undo returns only units that still
-- count: a unit counted in a window that has passed, or absorbed by a bucket that has refilled
-- since, is left alone, so an undo never admits more than if the request had never come.
--
-- Arguments per entry: the entry's own (algorithm, capacity, rate count, rate period), the units
-- to give back, and the reservation's `at` (its call's now) and reset_after.
-- Each returns a refund's verdict, remaining, reset_after, retry_after (the state afterwards).

-- Compact algorithms: the units that may be given back at `now`, as (state, limit) -> units.
local function fixed_window_undo_units(st, w, now, units, at)
  if not st or st[1] ~= idiv(at, w) * w then return 0 end  -- its window is gone
  return units
end

-- Buckets: the reservation moved the time the bucket is full (tat) by cost units; whatever
-- happened since, at `now` it still holds at least min(cost, tat - now) of them (in time), or
-- all of them at its own time. reset_after is rounded up to whole µs, hence the 1.
local function bucket_undo_units(rn, rp, now, units, at, reset)
  if now <= at then return units end
  local left = at + reset - 1 - now
  if left <= 0 then return 0 end
  local q = muldiv(left, rn, rp)
  return q < units and q or units
end

local function sliding_window_counter_undo(st, max, w, now, units, at)
  local start, cur, prev = counter_load(st, w, now)
  local win = idiv(at, w) * w
  local back = 0
  if win == start then
    back = units < cur and units or cur
    cur = cur - back
  elseif win == start - w then
    back = units < prev and units or prev
    prev = prev - back
  end
  local elapsed = (now > start and now or start) - start
  local left, reset = counter_report(max, start, cur, prev, weighted_prev(prev, elapsed, w), w, now)
  return ALLOWED, left, reset, 0, back > 0, start, cur, prev
end

-- The log: takes the units off the entry recorded at the reservation's effective time (its
-- reset_after is that time + W - at), if it is still there.
local function log_undo(key, max, w, now, units, at, reset, slack)
  local eff = at + reset - w
  local st = log_read(key)
  local ats, costs = st[1], st[2]
  local changed = false
  for i = #ats, 1, -1 do
    if ats[i] < eff then break end
    if ats[i] == eff then
      local back = units < costs[i] and units or costs[i]
      if back > 0 then
        changed = true
        local old = fmt('%d:%d', ats[i], costs[i])
        costs[i] = costs[i] - back
        if costs[i] == 0 then
          redis.call('LREM', key, 1, old)
          table.remove(ats, i)
          table.remove(costs, i)
        else
          redis.call('LSET', key, i - 1, fmt('%d:%d', ats[i], costs[i]))
        end
      end
      break
    end
  end
  local verdict, remaining, reset_after, retry = log_evaluate(st, max, 0, w, now, 0)
  if changed and #ats > 0 then redis.call('PEXPIRE', key, ttl_ms(reset_after, slack)) end
  return verdict, remaining, reset_after, retry
end
