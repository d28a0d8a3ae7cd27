-- caudal: the fast script, for a call whose requests are all plain consumes: declared keys, and
-- per entry a compact algorithm (one registered in COMPACT), no flag but GROUP_FLAG and
-- CALENDAR_FLAG, and a cost >= 0. The
-- store sends such calls here (lua_protocol.h, IsPlainConsume) and every other to decide.lua.
-- Its parts are the constants, the prelude, the compact algorithms, compact_state.lua and this
-- file (embed_lua.cmake): leaving out what a plain consume never runs (the sliding window log,
-- concurrency, undos, reservations, leases) is what makes it cheaper, since Redis runs the
-- whole script's top level, every function definition in it, at each call. Loaded as a function
-- library (script.h), the parts and this file's first section run once, at the first call,
-- and the section after the "-- Each call." line is the function's body.
-- It decides exactly as decide.lua decides the same requests, reading and writing the same
-- state, so both scripts serve the same keys; the wire format and the reply are decide.lua's,
-- but for a request on one key, sent with its costs in an argument of their own (COSTS_APART:
-- kCostsApart, lua_protocol.h), and an allowed request of one group's members, answered briefly
-- (BRIEF: kAllowedBrief).

-- Once. The one-entry requests already decoded, by their bytes: a policy's requests mostly
-- repeat (one limit, cost 1), and a table lookup by a string Redis has interned costs less than
-- unpacking it. Bounded: it starts afresh once it holds ONE_REQUESTS_MAX.
local ONE_REQUESTS, one_requests, ONE_REQUESTS_MAX = {}, 0, 1024
-- The state a one-entry request reads, filled in place (compact_read_into): done with before
-- the next read.
local SCRATCH = {}
-- A multi-entry request's numbers and decisions, per entry (their tables made once, overwritten
-- by each request: a table made per call costs Redis more than deciding an entry).
local keys, states, at = {}, {}, {}
local verdicts, remainings, resets, retries, consumeds, x1, x2, x3 = {}, {}, {}, {}, {}, {}, {}, {}
-- Per entry, the table its member's state is read into, made at its first use.
local MEMBER_STATES = setmetatable({}, {__index = function(t, i)
  local st = {}
  t[i] = st
  return st
end})
-- The multi-entry requests already decoded, by their bytes, as ONE_REQUESTS: r[1] is the entry
-- count, then six slots per entry from 2 on, its decide function, capacity, rate count, rate
-- period (a calendar's four boundaries in a table), cost and member id (false: a key of its own).
-- Unpacking an entry costs Redis about as much as deciding it. Bounded by the bytes of the
-- requests held: it starts afresh past MULTI_BYTES_MAX.
local MULTI_REQUESTS, multi_bytes, MULTI_BYTES_MAX = {}, 0, 262144
-- Requests whose costs vary (tokens, money) seldom repeat, and remembering one that never comes
-- back costs more than decoding it: over each MULTI_WINDOW multi-entry requests not found, the
-- cache is kept only if it was found for at least half as many; otherwise the requests go into
-- one reused table (MULTI_SCRATCH), and every MULTI_PROBE windows one window tries it again.
local multi_found, multi_missed, multi_caching, multi_idle = 0, 0, true, 0
local MULTI_WINDOW, MULTI_PROBE, MULTI_SCRATCH = 256, 8, {}
local COUNT, ENTRY, BOUNDS = '<i8', '<i8i8i8i8i8', '<i8i8i8i8'
-- The format of a request of `count` members of groups with no calendar, six numbers each.
local MEMBERS_FMT = {}
-- A multi-entry request's numbers, as MULTI_REQUESTS holds them, into `r` (or, for a request on
-- one key with no calendar, a new table: one C call fills it), or nil and why it is refused.
-- `one`: a request on one key (ONE_KEY), its entries the members of one group. `apart`: its
-- costs follow in an argument of their own (COSTS_APART; its own are 0), read by apply_costs;
-- `costs`: the argument they were last read from (false: none).
local function decode_multi(req, r)
  local count, p = sunpack(COUNT, req)
  local apart = count > COSTS_APART
  if apart then count = count - COSTS_APART end
  local one = count > ONE_KEY
  if one then count = count - ONE_KEY end
  if count < 1 then return nil, 'caudal consume: a request that is not a decision' end
  if one and count <= GROUP_MAX and #req == 8 + 48 * count then
    -- Members with no calendar (a calendar's four more numbers would make it longer), six
    -- numbers each: unpacked in one call.
    local f = MEMBERS_FMT[count]
    if not f then
      f = '<i8' .. string.rep('i8i8i8i8i8i8', count)
      MEMBERS_FMT[count] = f
    end
    local m = {sunpack(f, req)}
    m[1], m[6 * count + 2] = count, nil  -- (the flag; the position sunpack ends with)
    for b = 2, 6 * count - 4, 6 do
      local alg = m[b] - GROUP_FLAG
      if alg < 0 or alg >= CALENDAR_FLAG or m[b + 4] < 0 or not COMPACT[alg] then
        return nil, 'caudal consume: an entry that is not a plain consume'
      end
      m[b] = COMPACT[alg]
    end
    m.one, m.apart, m.costs = true, apart, false
    return m
  end
  r[1], r.one, r.apart, r.costs = count, one, apart, false
  for i = 1, count do
    local alg, cap, rn, rp, cost
    alg, cap, rn, rp, cost, p = sunpack(ENTRY, req, p)
    local id = false
    if alg >= GROUP_FLAG then  -- a group's member: its id follows
      alg = alg - GROUP_FLAG
      id, p = sunpack(COUNT, req, p)
    end
    if alg >= CALENDAR_FLAG then  -- a calendar's four boundaries stand for the window
      alg = alg - CALENDAR_FLAG
      local b1, b2, b3, b4
      b1, b2, b3, b4, p = sunpack(BOUNDS, req, p)
      rp = {b1, b2, b3, b4}
    end
    if cost < 0 or not COMPACT[alg] then
      return nil, 'caudal consume: an entry that is not a plain consume'
    end
    local b = 6 * i - 4
    r[b], r[b + 1], r[b + 2], r[b + 3], r[b + 4], r[b + 5] = COMPACT[alg], cap, rn, rp, cost, id
  end
  return r
end

-- The costs of `r`, a request sent with its costs apart, from `c`, its next argument: each
-- entry's cost, where decode_multi left 0. Returns why it is refused, or nil.
local COSTS4 = '<i8i8i8i8'
local function apply_costs(r, c)
  local count = r[1]
  if not c or #c ~= 8 * count then
    return 'caudal consume: a request whose costs are missing'
  end
  -- (Forgotten first: a refused argument leaves costs of its own in r.)
  r.costs = false
  local p, b, last = 1, 6, 6 * count
  while b + 18 <= last do  -- four at a time: a C call costs Redis more than its numbers
    local c1, c2, c3, c4
    c1, c2, c3, c4, p = sunpack(COSTS4, c, p)
    if c1 < 0 or c2 < 0 or c3 < 0 or c4 < 0 then
      return 'caudal consume: an entry that is not a plain consume'
    end
    r[b], r[b + 6], r[b + 12], r[b + 18] = c1, c2, c3, c4
    b = b + 24
  end
  while b <= last do
    local cost
    cost, p = sunpack(COUNT, c, p)
    if cost < 0 then return 'caudal consume: an entry that is not a plain consume' end
    r[b] = cost
    b = b + 6
  end
  r.costs = c
  return nil
end

-- A request whose entries are the members of one group, in the order its value holds them (or
-- a group not yet written, every entry consumed): read, decided and written on its own, with
-- no bookkeeping across the call. Returns the reply's new end, or nil when the request is not
-- such (nothing read into the reply, nothing written).
local FAST_S, FAST_CONSUMED, FAST_VERDICT, FAST_RETRY = {}, {}, {}, {}
local function whole_group(r, key, now, slack, out, o)
  local count = r[1]
  local S = group_parse(redis.call('GET', key), FAST_S)
  local n = S[3]
  if n ~= 0 then
    if n ~= count then return nil end
    for i = 1, count do
      if S[5 * i - 1] ~= r[6 * i + 1] then return nil end
    end
  end
  local all, need, changed = true, false, false
  for i = 1, count do
    local b, j = 6 * i - 4, 5 * i - 1
    local st = nil
    if n ~= 0 then
      st = MEMBER_STATES[i]
      st[1], st[2], st[3] = S[j + 2], S[j + 3], S[j + 4]
    end
    local decide, cap, rn, rp, cost, id = r[b], r[b + 1], r[b + 2], r[b + 3], r[b + 4], r[b + 5]
    local verdict, remaining, reset, retry, consumed, w0, w1, w2 =
      decide(st, cap, rn, rp, now, cost)
    all = all and verdict == ALLOWED
    if consumed then
      changed = true
      S[j], S[j + 1], S[j + 2], S[j + 3], S[j + 4] = id, now + reset, w0, w1, w2
      if not need or reset > need then need = reset end
    elseif n == 0 then
      return nil
    end
    -- The brief reply's place; what else a refusal's reply needs, aside.
    out[o + 2 * i], out[o + 2 * i + 1] = remaining, reset
    FAST_CONSUMED[i], FAST_VERDICT[i], FAST_RETRY[i] = consumed, verdict, retry
  end
  if all then
    if changed then
      S[3] = count
      group_write(key, S, now, need, slack)
    end
    out[o + 1] = BRIEF
    return o + 1 + 2 * count
  end
  -- Refused whole: each entry's four integers (moved from the last, as they spread out), those
  -- that consumed decided again without their consumption.
  out[o + 1] = 0
  for i = count, 1, -1 do
    local b, q = 6 * i - 4, o + 4 * i - 2
    if FAST_CONSUMED[i] then
      out[q], out[q + 1], out[q + 2], out[q + 3] =
        r[b](n ~= 0 and MEMBER_STATES[i] or nil, r[b + 1], r[b + 2], r[b + 3], now, 0)
    else
      out[q], out[q + 1], out[q + 2], out[q + 3] =
        FAST_VERDICT[i], out[o + 2 * i], out[o + 2 * i + 1], FAST_RETRY[i]
    end
  end
  return o + 1 + 4 * count
end
-- The groups a call read (compact_state.lua), by key, in the order read, and the longest time
-- until fresh of its members written; each is written once, when the call ends.
-- GROUP_POOL: the tables they are read into, one per group of a call, reused from call to call.
local GROUPS, GROUP_ORDER, GROUP_NEED, GROUP_POOL = {}, {}, {}, {}

-- Each call.
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local slack = tonumber(ARGV[2])

if #KEYS == 0 then return redis.error_reply('caudal consume: keys must be declared') end

local ONE = '<i8i8i8i8i8i8'
local out, o, k = {}, 0, 1
local ngroups = 0
if GROUP_ORDER[1] then  -- a call that ended in an error left its groups: they are stale
  for g = 1, #GROUP_ORDER do
    local key = GROUP_ORDER[g]
    GROUPS[key], GROUP_NEED[key], GROUP_ORDER[g] = nil, nil, nil
  end
  for id in pairs(GROUP_WRITTEN) do GROUP_WRITTEN[id] = nil end
end
local a, nargs = 3, #ARGV
while a <= nargs do
  local req = ARGV[a]
  a = a + 1
  if #req == 48 then
    -- One entry, the usual request: decided on locals, without the tables below. Only an
    -- admitted consumption (`consumed`) changes the state, so nothing else is written.
    local r = ONE_REQUESTS[req]  -- {decide, capacity, rate count, rate period, cost}
    if not r then
      local count, alg, cap, rn, rp, cost = sunpack(ONE, req)
      if count ~= 1 then return redis.error_reply('caudal consume: a malformed request') end
      if cost < 0 or not COMPACT[alg] then
        return redis.error_reply('caudal consume: an entry that is not a plain consume')
      end
      r = {COMPACT[alg], cap, rn, rp, cost}
      if one_requests >= ONE_REQUESTS_MAX then ONE_REQUESTS, one_requests = {}, 0 end
      ONE_REQUESTS[req], one_requests = r, one_requests + 1
    end
    local key = KEYS[k]
    k = k + 1
    local st = compact_read_into(key, SCRATCH)
    local verdict, remaining, reset, retry, consumed, w0, w1, w2 =
      r[1](st, r[2], r[3], r[4], now, r[5])
    if consumed then compact_write(key, st, w0, w1, w2, now, reset, slack) end
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] =
      verdict == ALLOWED and 1 or 0, verdict, remaining, reset, retry
    o = o + 5
  else
    local r = MULTI_REQUESTS[req]
    if r then
      multi_found = multi_found + 1
    else
      local err
      r, err = decode_multi(req, multi_caching and {} or MULTI_SCRATCH)
      if not r then return redis.error_reply(err) end
      if multi_caching then
        if multi_bytes + #req > MULTI_BYTES_MAX then MULTI_REQUESTS, multi_bytes = {}, 0 end
        MULTI_REQUESTS[req], multi_bytes = r, multi_bytes + #req
      end
      multi_missed = multi_missed + 1
      if multi_missed >= MULTI_WINDOW then
        if multi_caching then
          multi_caching = 2 * multi_found >= multi_missed
        else
          multi_idle = multi_idle + 1
          multi_caching = multi_idle >= MULTI_PROBE
          if multi_caching then multi_idle = 0 end
        end
        multi_found, multi_missed = 0, 0
      end
    end
    if r.apart then  -- its costs: the next argument, read again only when it is another
      local c = ARGV[a]
      a = a + 1
      if c ~= r.costs then
        local err = apply_costs(r, c)
        if err then return redis.error_reply(err) end
      end
    end
    local count = r[1]
    -- A request on one key, a group no earlier request of the call holds unwritten (GROUPS):
    -- whole_group decides it if its members lie as it names them.
    local one = r.one
    local p = one and count <= GROUP_MAX and not GROUPS[KEYS[k]] and
      whole_group(r, KEYS[k], now, slack, out, o)
    if p then
      o, k = p, k + 1
    else
      local all = true
      for i = 1, count do
        local b = 6 * i - 4
        local key, id, st = KEYS[k], r[b + 5], nil
        if not one or i == count then k = k + 1 end
        if id then  -- its group read once per call
          local S = GROUPS[key]
          if not S then
            S = GROUP_POOL[ngroups + 1]
            if not S then
              S = {}
              GROUP_POOL[ngroups + 1] = S
            end
            group_parse(redis.call('GET', key), S)
            GROUPS[key], GROUP_NEED[key] = S, false
            ngroups = ngroups + 1
            GROUP_ORDER[ngroups] = key
          end
          local j = group_find(S, id)
          at[i] = j or false  -- where its member is in S
          if j then
            st = MEMBER_STATES[i]
            st[1], st[2], st[3] = S[j + 2], S[j + 3], S[j + 4]
          end
        else
          st = compact_read(key)
        end
        keys[i], states[i] = key, st
        local verdict
        verdict, remainings[i], resets[i], retries[i], consumeds[i], x1[i], x2[i], x3[i] =
          r[b](st, r[b + 1], r[b + 2], r[b + 3], now, r[b + 4])
        verdicts[i] = verdict
        if verdict ~= ALLOWED then all = false end
      end
      o = o + 1
      out[o] = all and 1 or 0
      for i = 1, count do
        if consumeds[i] then
          local b = 6 * i - 4
          local id = r[b + 5]
          if not all then  -- refused whole: the state without the consumption
            verdicts[i], remainings[i], resets[i], retries[i] =
              r[b](states[i], r[b + 1], r[b + 2], r[b + 3], now, 0)
          elseif id then
            local key = keys[i]
            -- (an entry of an earlier request of the call may have added a member since)
            local S = GROUPS[key]
            local reset = resets[i]
            group_put(S, at[i] or group_find(S, id), id, x1[i], x2[i], x3[i], now, reset)
            local need = GROUP_NEED[key]
            if not need or reset > need then GROUP_NEED[key] = reset end
          else
            compact_write(keys[i], states[i], x1[i], x2[i], x3[i], now, resets[i], slack)
          end
        end
        out[o + 1], out[o + 2], out[o + 3], out[o + 4] =
          verdicts[i], remainings[i], resets[i], retries[i]
        o = o + 4
      end
    end
  end
end
for g = 1, ngroups do  -- each group read: written once, when a member changed
  local key = GROUP_ORDER[g]
  local need = GROUP_NEED[key]
  if need then group_write(key, GROUPS[key], now, need, slack) end
  GROUPS[key], GROUP_NEED[key], GROUP_ORDER[g] = nil, nil, nil
end
if ngroups > 0 then
  for id in pairs(GROUP_WRITTEN) do GROUP_WRITTEN[id] = nil end
end
out[o + 1] = now
return out
