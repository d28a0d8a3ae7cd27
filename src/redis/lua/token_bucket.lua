-- Token bucket (src/algorithms/token_bucket.cc): exact rational tokens.

-- The µs until `tokens` + `frac`/p reach `target`: ceil(((target - tokens)·p - frac) / n).
-- Written out where the product is exact in a double (muldiv's first branch, then ceildiv),
-- since a Lua call costs Redis more than the arithmetic and this runs on every decision.
local function time_to_reach(target, tokens, frac, n, p)
  if target <= tokens then return 0 end
  local x = (target - tokens) * p
  if x >= TWO_52 then
    local q, r = muldiv(target - tokens, p, n)
    return q + ceildiv(r - frac, n)
  end
  x = x - frac  -- > 0, since frac < p
  local q = floor(x / n)
  local r = x - q * n
  if r < 0 then
    q, r = q - 1, r + n
  elseif r >= n then
    q, r = q + 1, r - n
  end
  if r > 0 then q = q + 1 end
  return q
end

local function bucket_refill(st, cap, n, p, now)
  local tokens, frac, last = cap, 0, now
  if st then
    tokens, frac, last = st[1], st[2], st[3]
    if now > last then
      local dt = now - last
      -- dt >= time_to_reach(cap, ...) is dt·n + frac >= (cap - tokens)·p: compared directly
      -- when both products are exact in a double (the usual case, and a bucket long idle).
      local a, b = dt * n, (cap - tokens) * p
      local full
      if a < TWO_52 and b < TWO_52 then
        full = a + frac >= b
      else
        full = dt >= time_to_reach(cap, tokens, frac, n, p)
      end
      if full then
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
  elseif tokens >= cost or cost == 0 then  -- a peek passes even in debt
    tokens = tokens - cost
    consumed = cost > 0
  else
    verdict = DENIED
    retry = (last - now) + time_to_reach(cost, tokens, frac, n, p)
  end
  local reset = (last - now) + time_to_reach(cap, tokens, frac, n, p)
  return verdict, tokens < 0 and 0 or tokens, reset, retry, consumed, tokens, frac, last
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
  return ALLOWED, tokens < 0 and 0 or tokens, reset, 0, changed, tokens, frac, last
end

-- Takes `units` whatever is left, down to -max_debt (tokens below 0 are debt).
local function token_bucket_overdraw(st, cap, n, p, now, units)
  local tokens, frac, last = bucket_refill(st, cap, n, p, now)
  local low = -max_debt(TOKEN_BUCKET, n, p)
  local t = tokens - units
  if t < low then t = low end
  local changed = t ~= tokens
  tokens = t
  local reset = (last - now) + time_to_reach(cap, tokens, frac, n, p)
  return ALLOWED, tokens < 0 and 0 or tokens, reset, 0, changed, tokens, frac, last
end

-- A charge: whether `cost` fitted the bucket before (a peek is refused in debt), then taken
-- whatever is left, as an overdraw; a refusal waits until `cost` fits the bucket it left.
local function token_bucket_charge(st, cap, n, p, now, cost)
  local before = bucket_refill(st, cap, n, p, now)
  local _, remaining, reset, _, changed, tokens, frac, last =
    token_bucket_overdraw(st, cap, n, p, now, cost)
  local verdict, retry = ALLOWED, 0
  if cost > cap then
    verdict = NEVER_FITS
  elseif before < cost then
    verdict = DENIED
    retry = (last - now) + time_to_reach(cost, tokens, frac, n, p)
  end
  return verdict, remaining, reset, retry, changed, tokens, frac, last
end

COMPACT_OVERDRAW[TOKEN_BUCKET], COMPACT_CHARGE[TOKEN_BUCKET] =
  token_bucket_overdraw, token_bucket_charge
COMPACT[TOKEN_BUCKET], COMPACT_REFUND[TOKEN_BUCKET] = token_bucket, token_bucket_refund
