-- GCRA (src/algorithms/gcra.cc): the token bucket held as one arrival time.

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

-- The TAT tw + tf/n moved back by gw + gf/n, never before now.
local function gcra_pull_back(tw, tf, gw, gf, now, n)
  tw, tf = tw - gw, tf - gf
  if tf < 0 then
    tf, tw = tf + n, tw - 1
  end
  if tw < now or (tw == now and tf == 0) then
    tw, tf = now, 0
  end
  return tw, tf
end

local function gcra_refund(st, cap, n, p, now, units)
  local tw, tf, changed = now, 0, false
  if st and (st[1] > now or (st[1] == now and st[2] > 0)) then
    tw, tf = st[1], st[2]
    if units > 0 then
      local most = cap + max_debt(GCRA, n, p)  -- a refund reaches back through debt
      local uw, uf = muldiv(units < most and units or most, p, n)
      tw, tf = gcra_pull_back(tw, tf, uw, uf, now, n)
      changed = true
    end
  end
  local tau_w = muldiv(cap, p, n)
  local remaining, reset = gcra_report(tw, tf, now, cap, n, p, tau_w)
  return ALLOWED, remaining, reset, 0, changed, tw, tf, 0
end

-- Moves TAT on by units·e whatever the tolerance, up to now + tau + max_debt·e.
local function gcra_overdraw(st, cap, n, p, now, units)
  local tau_w, tau_f = muldiv(cap, p, n)
  local tw, tf = now, 0
  if st and (st[1] > now or (st[1] == now and st[2] > 0)) then
    tw, tf = st[1], st[2]
  end
  local debt = max_debt(GCRA, n, p)
  local mq, mr = muldiv(debt, p, n)
  local mw, mf = now + tau_w + mq, tau_f + mr
  if mf >= n then
    mf, mw = mf - n, mw + 1
  end
  local u = units
  if u > cap + debt then u = cap + debt end
  local uw, uf = muldiv(u, p, n)
  local nw, nf = tw + uw, tf + uf
  if nf >= n then
    nf, nw = nf - n, nw + 1
  end
  if nw > mw or (nw == mw and nf > mf) then
    nw, nf = mw, mf
  end
  local changed = nw > tw or (nw == tw and nf > tf)
  if not changed then
    nw, nf = tw, tf
  end
  local remaining, reset = gcra_report(nw, nf, now, cap, n, p, tau_w)
  return ALLOWED, remaining, reset, 0, changed, nw, nf, 0
end

-- The wait until a hit of `cost` fits the TAT tw + tf/n (max(TAT, now)): 0 when it does now.
local function gcra_wait(tw, tf, now, cost, n, p, tau_w, tau_f)
  if tw < now or (tw == now and tf == 0) then
    tw, tf = now, 0
  end
  local cw, cf = muldiv(cost, p, n)
  local nw, nf = tw + cw, tf + cf
  if nf >= n then
    nf, nw = nf - n, nw + 1
  end
  local dw = nw - now
  if dw < tau_w or (dw == tau_w and nf <= tau_f) then return 0 end
  return (dw - tau_w) + ceildiv(nf - tau_f, n)
end

-- A charge: whether `cost` fitted the TAT before (a peek is refused in debt), then counted
-- whatever the tolerance, as an overdraw; a refusal waits until `cost` fits the TAT it left.
local function gcra_charge(st, cap, n, p, now, cost)
  local _, remaining, reset, _, changed, w0, w1, w2 = gcra_overdraw(st, cap, n, p, now, cost)
  local verdict, retry = ALLOWED, 0
  if cost > cap then
    verdict = NEVER_FITS
  else
    local tau_w, tau_f = muldiv(cap, p, n)
    local bw, bf = now, 0
    if st then bw, bf = st[1], st[2] end
    if gcra_wait(bw, bf, now, cost, n, p, tau_w, tau_f) > 0 then
      verdict = DENIED
      retry = gcra_wait(w0, w1, now, cost, n, p, tau_w, tau_f)
    end
  end
  return verdict, remaining, reset, retry, changed, w0, w1, w2
end

COMPACT_OVERDRAW[GCRA], COMPACT_CHARGE[GCRA] = gcra_overdraw, gcra_charge
COMPACT[GCRA], COMPACT_REFUND[GCRA] = gcra, gcra_refund
