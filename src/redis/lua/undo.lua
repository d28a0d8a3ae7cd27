-- Undo (src/redis/pipeline.h): gives back what one slot group of a request consumed when another
-- group of the same request refused it. Unlike a refund, an undo returns only units that still
-- count: a unit counted in a window that has passed, or absorbed by a bucket that has refilled
-- since, is left alone, so an undo never admits more than if the request had never come.
-- At its own time an undo restores the state exactly. One case it cannot: a reservation that
-- opened a new window replaced the previous window's count, and the undo leaves the new window
-- empty; if the clock later moves back into the previous window, that count is gone (as a
-- fresh key's would be). Only a clock stepping back between the two can show it.
--
-- Arguments per entry: the entry's own (algorithm, capacity, rate count, rate period), the units
-- to give back, and the reservation's `at` (its call's now) and reset_after (a reserve's undo:
-- then its reservation id, whose record decide.lua deletes).
-- Each returns a refund's verdict, remaining, reset_after, retry_after (the state afterwards).

-- The windows: the reservation counted its units in the window that starts at_reset - W (fixed)
-- or at_reset - 2W (counter), at_reset being its time plus its reset_after: not always the
-- window of its time, since a state written at a later time (clocks moved back) keeps its own.

local function fixed_window_undo_units(st, w, units, at, reset)
  if not st or not fw_counted(st, w, at + reset) then return 0 end  -- its window is gone
  return units
end

-- Buckets: the reservation moved the time the bucket is full (tat) on by its cost; whatever
-- happened since, at `now` it still holds at least min(cost, tat - now) of it (in time), and
-- all of it at its own time. That much is given back, in time (fractions of a unit too), so
-- that with nothing in between the bucket ends exactly as without the request. tat is the
-- reservation's time plus its reset_after, which is rounded up to whole µs: with requests in
-- between, the bucket may end at most 1 µs of refill fuller than without the request.

local function gcra_undo(st, cap, n, p, now, units, at, reset)
  local tw, tf, changed = now, 0, false
  if st and (st[1] > now or (st[1] == now and st[2] > 0)) then
    tw, tf = st[1], st[2]
    local most = cap + max_debt(GCRA, n, p)
    local gw, gf = muldiv(units < most and units or most, p, n)  -- the cost, in time
    if now > at then
      local left = at + reset - now
      if left <= 0 then
        gw, gf = 0, 0
      elseif left < gw or (left == gw and gf > 0) then
        gw, gf = left, 0
      end
    end
    if gw > 0 or gf > 0 then
      tw, tf = gcra_pull_back(tw, tf, gw, gf, now, n)
      changed = true
    end
  end
  local tau_w = muldiv(cap, p, n)
  local remaining, rst = gcra_report(tw, tf, now, cap, n, p, tau_w)
  return ALLOWED, remaining, rst, 0, changed, tw, tf, 0
end

local function token_bucket_undo(st, cap, n, p, now, units, at, reset)
  local tokens, frac, last = bucket_refill(st, cap, n, p, now)
  local gq, gr = units, 0  -- whole units, and a fraction in 1/p
  if now > at then
    local left = at + reset - now
    if left <= 0 then
      gq = 0
    else
      local q, r = muldiv(left, n, p)  -- what refills in that time
      if q < gq then gq, gr = q, r end
    end
  end
  local changed = false
  if tokens < cap and (gq > 0 or gr > 0) then
    changed = true
    tokens, frac = tokens + gq, frac + gr
    if frac >= p then
      frac, tokens = frac - p, tokens + 1
    end
    if tokens >= cap then tokens, frac = cap, 0 end
  end
  local rst = (last - now) + time_to_reach(cap, tokens, frac, n, p)
  return ALLOWED, tokens < 0 and 0 or tokens, rst, 0, changed, tokens, frac, last
end

local function sliding_window_counter_undo(st, max, w, now, units, at, reset)
  local start, cur, prev = counter_load(st, w, now)
  local win = at + reset - 2 * w
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
