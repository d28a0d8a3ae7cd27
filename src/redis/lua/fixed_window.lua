-- Fixed window (src/algorithms/fixed_window.cc): at most `limit` per aligned window.
-- The window `w` is a length (µs: windows are its multiples since the epoch), or a calendar's
-- four consecutive boundaries {b1, b2, b3, b4} near the caller's time (CALENDAR_FLAG, decide.lua;
-- src/algorithms/calendar.h): the window is the first of [b1, b2), [b2, b3), [b3, b4) that ends
-- after now, the last when none does (PickWindow).

-- The start and end of the window holding `now`.
local function fw_window(w, now)
  if type(w) == 'number' then
    local start = idiv(now, w) * w
    return start, start + w
  end
  if now < w[2] then return w[1], w[2] end
  if now < w[3] then return w[2], w[3] end
  return w[3], w[4]
end

-- The window counted: now's, or the stored one when it starts later (time went backwards), whose
-- end a calendar's state holds. An empty window (all refunded) is fresh. Returns start, end, count.
local function fw_load(st, w, now)
  local start, stop = fw_window(w, now)
  if st and st[1] >= start and st[2] > 0 then
    if st[1] ~= start then
      if type(w) == 'number' then stop = st[1] + w else stop = st[3] end
      start = st[1]
    end
    return start, stop, st[2]
  end
  return start, stop, 0
end

-- The state's third word: a calendar window's end, 0 otherwise.
local function fw_third(w, stop)
  if type(w) == 'number' then return 0 end
  return stop
end

-- Whether the stored window is the one that ends at `stop`.
local function fw_counted(st, w, stop)
  if type(w) == 'number' then return st[1] == stop - w end
  return st[3] == stop
end

local function fixed_window(st, max, _, w, now, cost)
  local start, stop, count = fw_load(st, w, now)
  local verdict, retry, consumed = ALLOWED, 0, false
  if cost > max then
    verdict = NEVER_FITS
  elseif count + cost <= max or cost == 0 then  -- a peek passes, even an overdrawn window
    count = count + cost
    consumed = cost > 0
  else
    verdict = DENIED
    retry = stop - now
  end
  local reset = 0
  if count > 0 then reset = stop - now end
  -- Below 0 when a charge overdrew the window: the reply carries the overdraft that way.
  return verdict, max - count, reset, retry, consumed, start, count, fw_third(w, stop)
end

-- The reference's INCRBY: counts `cost` whatever the verdict, up to max + MAX_CAPACITY.
local function fixed_window_charge(st, max, _, w, now, cost)
  local start, stop, count = fw_load(st, w, now)
  local verdict, retry = ALLOWED, 0
  if cost > max then
    verdict = NEVER_FITS
  elseif count + cost > max then
    verdict = DENIED
    retry = stop - now
  end
  local counted = count + cost
  if counted > max + MAX_CAPACITY then counted = max + MAX_CAPACITY end
  local changed = counted ~= count
  count = counted
  local reset = 0
  if count > 0 then reset = stop - now end
  return verdict, max - count, reset, retry, changed, start, count, fw_third(w, stop)
end

local function fixed_window_refund(st, max, _, w, now, units)
  local start, stop, count = fw_load(st, w, now)
  local back = units < count and units or count
  count = count - back
  local reset = 0
  if count > 0 then reset = stop - now end
  return ALLOWED, max - count, reset, 0, back > 0, start, count, fw_third(w, stop)
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
