-- Sliding window log (src/algorithms/sliding_window_log.cc): a Redis list of "at:cost".

-- Sliding window log: a list of "at:cost" strings, ascending at.
local function log_read(key)
  local raw = redis.call('LRANGE', key, 0, -1)
  local ats, costs = {}, {}
  for i = 1, #raw do
    local a, c = match(raw[i], '^(-?%d+):(%d+)$')
    ats[i], costs[i] = tonumber(a), tonumber(c)
  end
  return {ats, costs}
end

-- The index of the first entry after time t (ascending ats), or #ats + 1.
local function first_after(ats, t)
  for i = 1, #ats do
    if ats[i] > t then return i end
  end
  return #ats + 1
end

-- Returns verdict, remaining, reset_after, retry_after, consumed, eff. Changes nothing.
local function log_evaluate(st, max, _, w, now, cost)
  local ats, costs = st[1], st[2]
  local n = #ats
  local eff = now
  if n > 0 and ats[n] > now then eff = ats[n] end
  local first = first_after(ats, eff - w)
  local used = 0
  for i = first, n do used = used + costs[i] end
  local newest = -1
  if first <= n then newest = ats[n] end

  local verdict, retry, consumed = ALLOWED, 0, false
  if cost > max then
    verdict = NEVER_FITS
  elseif used + cost <= max then
    used = used + cost
    if cost > 0 then newest = eff end
    consumed = cost > 0
  else
    verdict = DENIED
    local must_leave, left = used + cost - max, 0
    for i = first, n do
      left = left + costs[i]
      if left >= must_leave then
        retry = ats[i] + w - now
        break
      end
    end
  end
  local reset = 0
  if newest >= 0 then reset = newest + w - now end
  return verdict, max - used, reset, retry, consumed, eff
end

-- Records an admitted request at eff and drops the entries at or before eff - W, which no
-- later decision can count (every later one judges at eff or after).
local function log_commit(key, st, eff, cost, w, ttl)
  local ats, costs = st[1], st[2]
  local n = #ats
  local keep = first_after(ats, eff - w)
  if n > 0 and ats[n] == eff then
    redis.call('LSET', key, -1, fmt('%d:%d', eff, costs[n] + cost))
  else
    redis.call('RPUSH', key, fmt('%d:%d', eff, cost))
  end
  if keep > 1 then redis.call('LTRIM', key, keep - 1, -1) end
  redis.call('PEXPIRE', key, ttl)
end

-- Gives back up to `units` of the units counted in the window, newest first; drops the log
-- when nothing in it counts any more. Returns a peek's verdict, remaining, reset, retry.
local function log_refund(key, max, w, now, units, slack)
  local st = log_read(key)
  local ats, costs = st[1], st[2]
  local n = #ats
  local eff = now
  if n > 0 and ats[n] > now then eff = ats[n] end
  local horizon = eff - w
  local changed = false
  while units > 0 and n > 0 and ats[n] > horizon do
    local back = units < costs[n] and units or costs[n]
    costs[n], units, changed = costs[n] - back, units - back, true
    if costs[n] == 0 then
      redis.call('RPOP', key)
      ats[n], costs[n], n = nil, nil, n - 1
    else
      redis.call('LSET', key, -1, fmt('%d:%d', ats[n], costs[n]))
    end
  end
  if n > 0 and ats[n] <= horizon then
    redis.call('DEL', key)
    st, n, changed = {{}, {}}, 0, false
  end
  local verdict, remaining, reset, retry = log_evaluate(st, max, 0, w, now, 0)
  if changed and n > 0 then redis.call('PEXPIRE', key, ttl_ms(reset, slack)) end
  return verdict, remaining, reset, retry
end
