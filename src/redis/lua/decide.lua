-- caudal: decides a batch of rate-limit requests in one atomic call.
--
-- Each algorithm mirrors its C++ twin in src/algorithms/ line by line; the C++/Lua equivalence
-- test replays random traces through both and requires identical decisions. Lua numbers are
-- doubles: every integer here stays below 2^53 (Limit::Create's bounds guarantee it), and the
-- one product that could exceed it, a*b/m, goes through the exact muldiv below.
--
-- Wire format (built by src/redis/lua_protocol.cc):
--   KEYS: one per entry, every request's entries in order.
--   ARGV[1]: now in µs, or "" to read Redis's TIME (production).
--   ARGV[2]: extra TTL in ms added to every write (0 in production; see lua_protocol.h).
--   then per request: entry count E, then per entry: algorithm, capacity, rate count,
--   rate period (µs), cost. Buckets pass the reduced refill rate, windows limit and window.
--   A negative cost -u is a refund of u units.
-- Reply: per request, 1 (allowed) or 0, then per entry: verdict, remaining, reset_after µs,
--   retry_after µs. A refused request consumes nothing and writes nothing; entries that would
--   have passed report their state without the consumption (decided again with cost 0).
--   Refunds apply whatever the request's other entries decide, and report the state after.

local floor, tonumber, fmt, match = math.floor, tonumber, string.format, string.match

local FIXED_WINDOW, SLIDING_WINDOW_LOG, SLIDING_WINDOW_COUNTER, TOKEN_BUCKET, GCRA = 0, 1, 2, 3, 4
local ALLOWED, DENIED, NEVER_FITS = 0, 1, 2
local TWO_52 = 4503599627370496

-- floor(x / y) for any sign of x, y > 0, |x| < 2^53. The double quotient is within one of
-- the true one; the exact remainder settles it.
local function idiv(x, y)
  local q = floor(x / y)
  local r = x - q * y
  if r < 0 then
    q = q - 1
  elseif r >= y then
    q = q + 1
  end
  return q
end

local function imod(x, y) return x - idiv(x, y) * y end
local function ceildiv(x, y) return -idiv(-x, y) end

local P64 = {}
do
  local v = 1
  for i = 0, 8 do
    P64[i] = v
    v = v * 64
  end
end

-- a*b = q*m + r with 0 <= r < m, exactly. Preconditions: 0 <= a < 2^53; 0 <= b, 0 < m, both
-- < 2^45; q < 2^53. Horner's scheme over the 6-bit digits of a keeps x < m, so
-- x*64 + digit*b < 2^52 and every step is exact.
local function muldiv(a, b, m)
  local p = a * b
  if p < TWO_52 then  -- the double product is exact
    local q = idiv(p, m)
    return q, p - q * m
  end
  local q, x = 0, 0
  for i = 8, 0, -1 do
    x = x * 64 + (floor(a / P64[i]) % 64) * b
    local qi = floor(x / m)
    local r = x - qi * m
    if r < 0 then
      qi, r = qi - 1, r + m
    elseif r >= m then
      qi, r = qi + 1, r - m
    end
    q, x = q * 64 + qi, r
  end
  return q, x
end

-- Compact algorithms: (state or nil, capacity, rate count, rate period, now, cost) ->
-- verdict, remaining, reset_after, retry_after, consumed, next state words w0, w1, w2.

local function fixed_window(st, max, _, w, now, cost)
  local start = idiv(now, w) * w
  local count = 0
  if st and st[1] >= start and st[2] > 0 then  -- an empty window (all refunded) is fresh
    start, count = st[1], st[2]
  end
  local verdict, retry, consumed = ALLOWED, 0, false
  if cost > max then
    verdict = NEVER_FITS
  elseif count + cost <= max then
    count = count + cost
    consumed = cost > 0
  else
    verdict = DENIED
    retry = start + w - now
  end
  local reset = 0
  if count > 0 then reset = start + w - now end
  return verdict, max - count, reset, retry, consumed, start, count, 0
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

local function time_to_reach(target, tokens, frac, n, p)
  if target <= tokens then return 0 end
  local q, r = muldiv(target - tokens, p, n)
  return q + ceildiv(r - frac, n)
end

local function bucket_refill(st, cap, n, p, now)
  local tokens, frac, last = cap, 0, now
  if st then
    tokens, frac, last = st[1], st[2], st[3]
    if now > last then
      local dt = now - last
      if dt >= time_to_reach(cap, tokens, frac, n, p) then
        tokens, frac = cap, 0
      else
        local q, r = muldiv(dt, n, p)
        tokens, frac = tokens + q, frac + r
        if frac >= p then
          frac, tokens = frac - p, tokens + 1
        end
      end
      last = now
    end
  end
  return tokens, frac, last
end

local function token_bucket(st, cap, n, p, now, cost)
  local tokens, frac, last = bucket_refill(st, cap, n, p, now)
  local verdict, retry, consumed = ALLOWED, 0, false
  if cost > cap then
    verdict = NEVER_FITS
  elseif tokens >= cost then
    tokens = tokens - cost
    consumed = cost > 0
  else
    verdict = DENIED
    retry = (last - now) + time_to_reach(cost, tokens, frac, n, p)
  end
  local reset = (last - now) + time_to_reach(cap, tokens, frac, n, p)
  return verdict, tokens, reset, retry, consumed, tokens, frac, last
end

local function token_bucket_refund(st, cap, n, p, now, units)
  local tokens, frac, last = bucket_refill(st, cap, n, p, now)
  local changed = false
  if tokens < cap and units > 0 then
    changed = true
    if units >= cap - tokens then
      tokens, frac = cap, 0
    else
      tokens = tokens + units
    end
  end
  local reset = (last - now) + time_to_reach(cap, tokens, frac, n, p)
  return ALLOWED, tokens, reset, 0, changed, tokens, frac, last
end

-- remaining, reset_after for a TAT of tw + tf/n.
local function gcra_report(tw, tf, now, cap, n, p, tau_w)
  local remaining = 0
  local dw = tw - now
  if dw <= tau_w then
    local q, r = muldiv(dw, n, p)
    local whole = q + idiv(r + tf, p)
    remaining = cap - whole
    if imod(r + tf, p) > 0 then remaining = remaining - 1 end
    if remaining < 0 then remaining = 0 end
  end
  local reset = dw
  if tf > 0 then reset = reset + 1 end
  return remaining, reset
end

local function gcra(st, cap, n, p, now, cost)
  local bw, bf = now, 0
  if st and (st[1] > now or (st[1] == now and st[2] > 0)) then
    bw, bf = st[1], st[2]
  end
  local tau_w, tau_f = muldiv(cap, p, n)
  local verdict, retry, consumed = ALLOWED, 0, false
  local tw, tf = bw, bf
  if cost > cap then
    verdict = NEVER_FITS
  else
    local cw, cf = muldiv(cost, p, n)
    local nw, nf = bw + cw, bf + cf
    if nf >= n then
      nf, nw = nf - n, nw + 1
    end
    local dw = nw - now
    -- a peek always passes (after time went backwards TAT - now can exceed tau)
    if cost == 0 or dw < tau_w or (dw == tau_w and nf <= tau_f) then
      tw, tf = nw, nf
      consumed = cost > 0
    else
      verdict = DENIED
      retry = (dw - tau_w) + ceildiv(nf - tau_f, n)
    end
  end
  local remaining, reset = gcra_report(tw, tf, now, cap, n, p, tau_w)
  return verdict, remaining, reset, retry, consumed, tw, tf, 0
end

local function gcra_refund(st, cap, n, p, now, units)
  local tw, tf, changed = now, 0, false
  if st and (st[1] > now or (st[1] == now and st[2] > 0)) then
    tw, tf = st[1], st[2]
    if units > 0 then
      local uw, uf = muldiv(units < cap and units or cap, p, n)
      tw, tf = tw - uw, tf - uf
      if tf < 0 then
        tf, tw = tf + n, tw - 1
      end
      if tw < now or (tw == now and tf == 0) then
        tw, tf = now, 0
      end
      changed = true
    end
  end
  local tau_w = muldiv(cap, p, n)
  local remaining, reset = gcra_report(tw, tf, now, cap, n, p, tau_w)
  return ALLOWED, remaining, reset, 0, changed, tw, tf, 0
end

local COMPACT = {
  [FIXED_WINDOW] = fixed_window,
  [SLIDING_WINDOW_COUNTER] = sliding_window_counter,
  [TOKEN_BUCKET] = token_bucket,
  [GCRA] = gcra,
}

local COMPACT_REFUND = {
  [FIXED_WINDOW] = fixed_window_refund,
  [SLIDING_WINDOW_COUNTER] = sliding_window_counter_refund,
  [TOKEN_BUCKET] = token_bucket_refund,
  [GCRA] = gcra_refund,
}

-- Compact state: one string "w0 w1 w2"; nil when the key is absent (fresh).
local function compact_read(key)
  local v = redis.call('GET', key)
  if not v then return nil end
  local a, b, c = match(v, '^(-?%d+) (-?%d+) (-?%d+)$')
  if not a then return nil end
  return {tonumber(a), tonumber(b), tonumber(c)}
end

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

-- Returns verdict, remaining, reset_after, retry_after, consumed, eff. Changes nothing.
local function log_evaluate(st, max, _, w, now, cost)
  local ats, costs = st[1], st[2]
  local n = #ats
  local eff = now
  if n > 0 and ats[n] > now then eff = ats[n] end
  local first = n + 1
  for i = 1, n do
    if ats[i] > eff - w then
      first = i
      break
    end
  end
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

local function ttl_ms(reset, slack)
  local ms = ceildiv(reset, 1000)
  if ms < 1 then ms = 1 end
  return ms + slack
end

-- Records an admitted request at eff and drops the entries at or before eff - W, which no
-- later decision can count (every later one judges at eff or after).
local function log_commit(key, st, eff, cost, w, ttl)
  local ats, costs = st[1], st[2]
  local n = #ats
  local keep = n + 1
  for i = 1, n do
    if ats[i] > eff - w then
      keep = i
      break
    end
  end
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

local function decide(alg, st, cap, rn, rp, now, cost)
  if alg == SLIDING_WINDOW_LOG then return log_evaluate(st, cap, rn, rp, now, cost) end
  return COMPACT[alg](st, cap, rn, rp, now, cost)
end

-- Applies a refund of `units` and returns verdict, remaining, reset_after, retry_after.
local function refund(alg, key, cap, rn, rp, now, units, slack)
  if alg == SLIDING_WINDOW_LOG then return log_refund(key, cap, rp, now, units, slack) end
  local verdict, remaining, reset, retry, changed, w0, w1, w2 =
    COMPACT_REFUND[alg](compact_read(key), cap, rn, rp, now, units)
  if changed then
    redis.call('SET', key, fmt('%d %d %d', w0, w1, w2), 'PX', ttl_ms(reset, slack))
  end
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

local out, o = {}, 0
local a, k = 3, 1
local nargs = #ARGV
local keys, algs, caps, rns, rps, costs, states = {}, {}, {}, {}, {}, {}, {}
local verdicts, remainings, resets, retries, consumeds, x1, x2, x3 = {}, {}, {}, {}, {}, {}, {}, {}
while a <= nargs do
  local count = tonumber(ARGV[a])
  a = a + 1
  local all = true
  for i = 1, count do
    local alg = tonumber(ARGV[a])
    keys[i], algs[i], caps[i], rns[i], rps[i], costs[i] =
      KEYS[k], alg, tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]),
      tonumber(ARGV[a + 4])
    a, k = a + 5, k + 1
    if costs[i] >= 0 then  -- a refund (negative) is applied below, whatever the others decide
      if alg == SLIDING_WINDOW_LOG then
        states[i] = log_read(keys[i])
      else
        states[i] = compact_read(keys[i])
      end
      verdicts[i], remainings[i], resets[i], retries[i], consumeds[i], x1[i], x2[i], x3[i] =
        decide(alg, states[i], caps[i], rns[i], rps[i], now, costs[i])
      if verdicts[i] ~= ALLOWED then all = false end
    end
  end
  o = o + 1
  out[o] = all and 1 or 0
  for i = 1, count do
    if costs[i] < 0 then
      verdicts[i], remainings[i], resets[i], retries[i] =
        refund(algs[i], keys[i], caps[i], rns[i], rps[i], now, -costs[i], slack)
    elseif all and consumeds[i] then
      local ttl = ttl_ms(resets[i], slack)
      if algs[i] == SLIDING_WINDOW_LOG then
        log_commit(keys[i], states[i], x1[i], costs[i], rps[i], ttl)
      else
        redis.call('SET', keys[i], fmt('%d %d %d', x1[i], x2[i], x3[i]), 'PX', ttl)
      end
    elseif not all and consumeds[i] then
      verdicts[i], remainings[i], resets[i], retries[i] =
        decide(algs[i], states[i], caps[i], rns[i], rps[i], now, 0)
    end
    out[o + 1], out[o + 2], out[o + 3], out[o + 4] =
      verdicts[i], remainings[i], resets[i], retries[i]
    o = o + 4
  end
end
return out
