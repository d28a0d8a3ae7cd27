-- Sliding window counter (src/algorithms/sliding_window_counter.cc): two weighted windows.

-- The previous window's share of the true window (now - W, now] at elapsed e, rounded up.
local function weighted_prev(prev, elapsed, w)
  if prev == 0 then return 0 end
  local q, r = muldiv(prev, w - 1 - elapsed, w)
  if r > 0 then q = q + 1 end
  return q
end

-- The smallest elapsed e in [0, W - 1] with weighted_prev(prev, e, w) <= allowed.
local function first_elapsed_within(prev, allowed, w)
  if allowed >= prev then return 0 end
  return w - 1 - muldiv(allowed, w, prev)
end

local function counter_load(st, w, now)
  local start = idiv(now, w) * w
  local cur, prev = 0, 0
  if st and (st[2] > 0 or st[3] > 0) then  -- both counts at 0 (all refunded) is fresh
    local s = st[1]
    if s >= start then
      start, cur, prev = s, st[2], st[3]
    elseif s == start - w then
      prev = st[2]
    end
  end
  local elapsed = (now > start and now or start) - start
  return start, cur, prev, weighted_prev(prev, elapsed, w)
end

-- remaining, reset_after
local function counter_report(max, start, cur, prev, weighted, w, now)
  local left = max - weighted - cur
  if left < 0 then left = 0 end
  local reset = 0
  if cur > 0 then
    reset = start + 2 * w - now
  elseif prev > 0 then
    reset = start + w - now
  end
  return left, reset
end

local function sliding_window_counter(st, max, _, w, now, cost)
  local start, cur, prev, weighted = counter_load(st, w, now)

  local verdict, retry, consumed = ALLOWED, 0, false
  if cost > max then
    verdict = NEVER_FITS
  elseif cost == 0 or weighted + cur + cost <= max then  -- a peek always passes
    cur = cur + cost
    consumed = cost > 0
  else
    verdict = DENIED
    local at
    if max - cur - cost >= 0 then
      at = start + first_elapsed_within(prev, max - cur - cost, w)
    else
      at = start + w + first_elapsed_within(cur, max - cost, w)
    end
    retry = at - now
  end
  local left, reset = counter_report(max, start, cur, prev, weighted, w, now)
  return verdict, left, reset, retry, consumed, start, cur, prev
end

local function sliding_window_counter_refund(st, max, _, w, now, units)
  local start, cur, prev = counter_load(st, w, now)
  local from_cur = units < cur and units or cur
  local from_prev = units - from_cur
  if from_prev > prev then from_prev = prev end
  cur, prev = cur - from_cur, prev - from_prev
  local elapsed = (now > start and now or start) - start
  local left, reset = counter_report(max, start, cur, prev, weighted_prev(prev, elapsed, w), w, now)
  return ALLOWED, left, reset, 0, from_cur + from_prev > 0, start, cur, prev
end

COMPACT[SLIDING_WINDOW_COUNTER], COMPACT_REFUND[SLIDING_WINDOW_COUNTER] = sliding_window_counter, sliding_window_counter_refund
