-- Fixed window (src/algorithms/fixed_window.cc): at most `limit` per aligned window.

local function fixed_window(st, max, _, w, now, cost)
  local start = idiv(now, w) * w
  local count = 0
  if st and st[1] >= start and st[2] > 0 then  -- an empty window (all refunded) is fresh
    start, count = st[1], st[2]
  end
  local verdict, retry, consumed = ALLOWED, 0, false
  if cost > max then
    verdict = NEVER_FITS
  elseif count + cost <= max or cost == 0 then  -- a peek passes, even an overdrawn window
    count = count + cost
    consumed = cost > 0
  else
    verdict = DENIED
    retry = start + w - now
  end
  local reset = 0
  if count > 0 then reset = start + w - now end
  -- Below 0 when a charge overdrew the window: the reply carries the overdraft that way.
  return verdict, max - count, reset, retry, consumed, start, count, 0
end

-- The reference's INCRBY: counts `cost` whatever the verdict, up to max + MAX_CAPACITY.
local function fixed_window_charge(st, max, _, w, now, cost)
  local start = idiv(now, w) * w
  local count = 0
  if st and st[1] >= start and st[2] > 0 then
    start, count = st[1], st[2]
  end
  local verdict, retry = ALLOWED, 0
  if cost > max then
    verdict = NEVER_FITS
  elseif count + cost > max then
    verdict = DENIED
    retry = start + w - now
  end
  local counted = count + cost
  if counted > max + MAX_CAPACITY then counted = max + MAX_CAPACITY end
  local changed = counted ~= count
  count = counted
  local reset = 0
  if count > 0 then reset = start + w - now end
  return verdict, max - count, reset, retry, changed, start, count, 0
end

local function fixed_window_refund(st, max, _, w, now, units)
  local start = idiv(now, w) * w
  local count = 0
  if st and st[1] >= start and st[2] > 0 then
    start, count = st[1], st[2]
  end
  local back = units < count and units or count
  count = count - back
  local reset = 0
  if count > 0 then reset = start + w - now end
  return ALLOWED, max - count, reset, 0, back > 0, start, count, 0
end

COMPACT[FIXED_WINDOW], COMPACT_REFUND[FIXED_WINDOW] = fixed_window, fixed_window_refund
COMPACT_CHARGE[FIXED_WINDOW] = fixed_window_charge

-- A settle's excess: counted as a charge is, in the current window, always allowed.
local function fixed_window_overdraw(st, max, rn, w, now, units)
  local _, remaining, reset, _, changed, w0, w1, w2 =
    fixed_window_charge(st, max, rn, w, now, units)
  return ALLOWED, remaining, reset, 0, changed, w0, w1, w2
end
COMPACT_OVERDRAW[FIXED_WINDOW] = fixed_window_overdraw
