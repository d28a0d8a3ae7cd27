-- Shares (src/store/share_book.cc; the allocation is src/algorithms/share.cc's, line by line):
-- a key's consumers live in a hash at the key's name + ':sh' (the entry's second key), one field
-- per consumer, its value SHARE_RECORD's six doubles (seq, demand, weight, expiry, last, frac)
-- then its group's bytes; the field '' holds the next seq. Every value is an integer below 2^53:
-- capacities and demands below 2^41, so the products below stay under 2^45, and the two that may
-- not (a share of what is left, the accrual) go through muldiv.
local SHARE_RECORD = '<dddddd'
local SHARE_ENTRY = '<i8i8i8i8i8i8i8i8i8i8i8i8'

-- ShareOut: `left` units by weight among order[from..], floor each, then the rest one each to
-- those rounded down, lowest index first.
local function share_out(left, wsum, order, from, weight, out)
  local rest, down = left, {}
  for j = from, #order do
    local i = order[j]
    local q, r = muldiv(weight[i], left, wsum)
    out[i] = q
    rest = rest - q
    down[i] = r > 0
  end
  for i = 1, #out do
    if rest <= 0 then break end
    if down[i] then
      out[i] = out[i] + 1
      rest = rest - 1
    end
  end
end

-- Fill: weighted water-filling of `capacity` over claims (demand, weight): min(D, L·w) each.
local function share_fill(capacity, demand, weight)
  local out, order, wsum = {}, {}, 0
  for i = 1, #demand do
    out[i] = 0
    if demand[i] ~= 0 then
      order[#order + 1] = i
      wsum = wsum + weight[i]
    end
  end
  table.sort(order, function(x, y)
    local lx, ly = demand[x] * weight[y], demand[y] * weight[x]
    if lx ~= ly then return lx < ly end
    return x < y
  end)
  local left, pos = capacity, 1
  while pos <= #order do
    local i = order[pos]
    if demand[i] * wsum > left * weight[i] then break end
    out[i] = demand[i]
    left = left - demand[i]
    wsum = wsum - weight[i]
    pos = pos + 1
  end
  if pos <= #order then share_out(left, wsum, order, pos, weight, out) end
  return out
end

-- MaxMinFill: groups (in order of first appearance) by weight, then members equally.
local function share_maxmin(units, groups, weights, demand)
  local index, gdemand, gweight, members, ng = {}, {}, {}, {}, 0
  for i = 1, #demand do
    local g = index[groups[i]]
    if not g then
      ng = ng + 1
      g = ng
      index[groups[i]], gdemand[g], members[g] = g, 0, {}
    end
    local d = gdemand[g] + demand[i]
    gdemand[g] = d < units and d or units
    gweight[g] = weights[i]
    members[g][#members[g] + 1] = i
  end
  local per = share_fill(units, gdemand, gweight)
  local out = {}
  for g = 1, ng do
    local d, w = {}, {}
    for j, i in ipairs(members[g]) do d[j], w[j] = demand[i], 1 end
    local got = share_fill(per[g], d, w)
    for j, i in ipairs(members[g]) do out[i] = got[j] end
  end
  return out
end

-- ProportionalFill: demands in units of t; weight w·e; the heaviest w satisfied first.
local function share_proportional(units, t, weights, demand)
  local out, weight, order, wsum = {}, {}, {}, 0
  for i = 1, #demand do
    out[i], weight[i] = 0, 0
    if demand[i] ~= 0 then
      weight[i] = weights[i] * demand[i]
      wsum = wsum + weight[i]
      order[#order + 1] = i
    end
  end
  table.sort(order, function(x, y)
    if weights[x] ~= weights[y] then return weights[x] > weights[y] end
    return x < y
  end)
  local left, pos = units, 1
  while pos <= #order do
    local i = order[pos]
    if wsum > idiv(left * weights[i], t) then break end
    out[i] = demand[i] * t
    left = left - out[i]
    wsum = wsum - weight[i]
    pos = pos + 1
  end
  if pos <= #order then share_out(left, wsum, order, pos, weight, out) end
  return out
end

-- AllocateShares: FairShares, then SpreadSpare.
local function share_allocate(capacity, maxmin, demands, weights, groups)
  local unit = ceildiv(capacity, SHARE_UNITS)
  if unit < 1 then unit = 1 end
  local units = idiv(capacity, unit)
  local demand, most = {}, 0
  for i = 1, #demands do
    local d = demands[i]
    if maxmin and d > capacity then d = capacity end
    demand[i] = d
    if d > most then most = d end
  end
  local t = ceildiv(most, unit * SHARE_UNITS)
  if t < 1 then t = 1 end
  local scaled = {}
  for i = 1, #demand do scaled[i] = ceildiv(demand[i], unit * t) end
  local out
  if maxmin then
    out = share_maxmin(units, groups, weights, scaled)
  else
    out = share_proportional(units, t, weights, scaled)
  end
  local shares, sum, k = {}, 0, #out
  for i = 1, k do
    local a = out[i] * unit
    if a > demand[i] then a = demand[i] end
    shares[i], sum = a, sum + a
  end
  if k > 0 then
    local spare = capacity - sum
    local each = idiv(spare, k)
    local extra = spare - each * k
    for i = 1, k do shares[i] = shares[i] + each + (i <= extra and 1 or 0) end
  end
  return shares
end

-- AccrueShare: floor((a·min(now − last, ttl) + rem) / p), and the new remainder.
local function share_accrue(a, p, ttl, last, now, rem)
  local dt = now - last
  if dt < 0 then dt = 0 elseif dt > ttl then dt = ttl end
  local q, r = muldiv(a, dt, p)
  r = r + rem
  if r >= p then r, q = r - p, q + 1 end
  return q, r
end

-- A request of `n` shares, its numbers in `req` from `p`, its keys K[kb + k] on (two per entry:
-- the state's, the consumers' hash). Every entry is decided before anything is written, so that
-- a new consumer past SHARE_MAX refuses the request whole: SHARE_FULL alone. Otherwise 1, then
-- per entry verdict, remaining, reset_after, retry_after, units granted, allocation, consumers,
-- demand total. Returns o and k after the request.
local function shares_take(req, p, n, K, kb, k, now, slack, out, o)
  local xs = {}
  for i = 1, n do
    local x, clen, glen = {}
    x.alg, x.cap, x.rn, x.rp, x.n, x.period, x.demand, x.weight, x.ttl, x.fair, clen, glen, p =
      sunpack(SHARE_ENTRY, req, p)
    x.consumer = string.sub(req, p, p + clen - 1)
    x.group = string.sub(req, p + clen, p + clen + glen - 1)
    p = p + clen + glen
    x.key, x.hash = K[kb + k + 2 * i - 2], K[kb + k + 2 * i - 1]
    local flat = redis.call('HGETALL', x.hash)
    local recs, seq, gone, me = {}, 0, {}, false
    for j = 1, #flat, 2 do
      local f, v = flat[j], flat[j + 1]
      if f == '' then
        seq = sunpack('<d', v)
      else
        local r = {name = f}
        r.seq, r.demand, r.weight, r.expiry, r.last, r.frac = sunpack(SHARE_RECORD, v)
        r.group = string.sub(v, 49)
        if r.expiry < now then
          gone[#gone + 1] = f
        else
          recs[#recs + 1] = r
          if f == x.consumer then me = r end
        end
      end
    end
    table.sort(recs, function(a, b) return a.seq < b.seq end)
    if not me then
      if #recs >= SHARE_MAX then
        out[o + 1] = SHARE_FULL
        return o + 1, k + 2 * n
      end
      me = {name = x.consumer, seq = seq, last = now - floor(x.ttl / 2), frac = 0}
      recs[#recs + 1] = me
      x.seq = seq + 1
    end
    me.group, me.demand, me.weight = x.group, x.demand, x.weight
    me.expiry = now + 2 * x.ttl
    me.dirty = true
    local demands, weights, groups, total, last = {}, {}, {}, 0, 0
    for j, r in ipairs(recs) do
      if x.group ~= '' and r.group == x.group and r.weight ~= x.weight then
        r.weight, r.dirty = x.weight, true
      end
      demands[j], weights[j] = r.demand, r.weight
      if r ~= me and 4 * (now - r.last) > 3 * x.ttl then demands[j] = 0 end
      groups[j] = r.group ~= '' and r.group or j
      total = total + demands[j]
      if r.expiry > last then last = r.expiry end
      if r == me then x.at = j end
    end
    local shares = share_allocate(x.n, x.fair == 0, demands, weights, groups)
    x.allocation, x.consumers, x.total, x.expiry = shares[x.at], #recs, total, last
    -- A new consumer's first grant takes no more than it asked for (share_book.cc says why).
    local accruing = x.allocation
    if x.seq and x.demand < accruing then accruing = x.demand end
    x.units, me.frac = share_accrue(accruing, x.period, x.ttl, me.last, now, me.frac)
    me.last = now
    x.recs, x.gone = recs, gone
    xs[i] = x
  end
  o = o + 1
  out[o] = 1
  for i = 1, n do
    local x = xs[i]
    if #x.gone > 0 then redis.call('HDEL', x.hash, unpack(x.gone)) end
    local set = {}
    for _, r in ipairs(x.recs) do
      if r.dirty then
        set[#set + 1] = r.name
        set[#set + 1] =
          spack(SHARE_RECORD, r.seq, r.demand, r.weight, r.expiry, r.last, r.frac) .. r.group
      end
    end
    if x.seq then
      set[#set + 1] = ''
      set[#set + 1] = spack('<d', x.seq)
    end
    redis.call('HSET', x.hash, unpack(set))
    redis.call('PEXPIRE', x.hash, ttl_ms(x.expiry - now, slack))
    -- The grant: a renewal, a peek of cost 0 that leases what fits of the accrual.
    local st = compact_read(x.key)
    local verdict, remaining, reset, retry, _, w0, w1, w2 =
      COMPACT[x.alg](st, x.cap, x.rn, x.rp, now, 0)
    local leased = 0
    if verdict == ALLOWED and x.units > 0 and remaining > 0 then
      leased = x.units < remaining and x.units or remaining
      local v, rem, rst, _, _, y0, y1, y2 =
        COMPACT[x.alg]({w0, w1, w2}, x.cap, x.rn, x.rp, now, leased)
      if v == ALLOWED then
        remaining, reset = rem, rst
        compact_write(x.key, st, y0, y1, y2, now, reset, slack)
      else
        leased = 0
      end
    end
    out[o + 1], out[o + 2], out[o + 3], out[o + 4] = verdict, remaining, reset, retry
    out[o + 5], out[o + 6], out[o + 7], out[o + 8] = leased, x.allocation, x.consumers, x.total
    o = o + 8
  end
  return o, k + 2 * n
end
