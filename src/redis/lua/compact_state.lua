-- The compact state as Redis keeps it (read and written by decide.lua and reservation.lua).

-- Compact state: 33 bytes, STATE_TAG then four little-endian doubles (exact: each is an integer
-- below 2^53): the algorithm's three words and `keep`, the time (µs, on the script's clock) until
-- which the key's TTL is known to keep it. One C call reads or writes it, where the decimal text
-- "w0 w1 w2" that earlier versions wrote took a pattern match and three number parsings (about
-- 1.2 µs against 0.2 µs per read in Redis 7.0). That text, which can never start with
-- STATE_TAG, is still read (with no `keep`), so that state written before an upgrade keeps
-- counting. nil when the key is absent (fresh).
local spack, sunpack = struct.pack, struct.unpack
local STATE_TAG = 1
local function compact_parse(v)  -- a GET's value (false: absent)
  if not v then return nil end
  if #v == 33 then
    local tag, a, b, c, keep = sunpack('<Bdddd', v)
    if tag == STATE_TAG then return {a, b, c, keep} end
  end
  local a, b, c = match(v, '^(-?%d+) (-?%d+) (-?%d+)$')
  if not a then return nil end
  return {tonumber(a), tonumber(b), tonumber(c)}
end
-- Grouped state (GROUP_FLAG, lua_protocol.h): the members of one group, each a compact state, in
-- one value under the group's key, so that a request on several of them reads and writes it once.
-- GROUP_TAG, then `keep` (as above, for the whole value) and the member count n, then per member
-- its id, `until` (µs on the script's clock: when its state is fresh, now + reset_after at its
-- write) and its three words; all doubles, exact integers. A member stays until its value
-- expires, when every member is fresh; past GROUP_MAX members, a write drops those nearest fresh
-- first (those whose `until` has passed are fresh: dropping them changes nothing), never one it
-- writes. The value's TTL covers every member's `until`: a write only ever lengthens it.
local GROUP_TAG, GROUP_HEAD = 2, 17
local GROUP_FMT = {}
local function group_fmt(n)
  local f = GROUP_FMT[n]
  if not f then
    f = '<Bdd' .. string.rep('ddddd', n)
    GROUP_FMT[n] = f
  end
  return f
end
-- The value read as a flat table: tag, keep, n, then five words per member (the member at j holds
-- id S[j], until S[j + 1], words S[j + 2 .. j + 4]; j = 4, 9, ...). A fresh one when absent.
-- Read into S when given, overwritten (the fast script keeps its tables from call to call: a
-- table made per read costs Redis more than reading it); S's entries past its members are left
-- as they were.
local function group_parse(v, S)
  S = S or {}
  if v and #v >= GROUP_HEAD and #v % 40 == GROUP_HEAD then
    local tag, keep, n, p = sunpack('<Bdd', v)
    if tag == GROUP_TAG then
      S[1], S[2], S[3] = tag, keep, n
      for j = 4, 3 + 5 * n, 5 do
        S[j], S[j + 1], S[j + 2], S[j + 3], S[j + 4], p = sunpack('<ddddd', v, p)
      end
      return S
    end
  end
  S[1], S[2], S[3] = GROUP_TAG, false, 0
  return S
end
-- Where member `id` is in S, or nil.
local function group_find(S, id)
  for j = 4, 3 + 5 * S[3], 5 do
    if S[j] == id then return j end
  end
  return nil
end
-- The members written in the call, by id (a script's table lives for its call; the fast
-- script's library empties it at each call's end): group_write never drops one.
local GROUP_WRITTEN = {}
-- Member `id`'s words into S at j (group_find's, or nil: added), fresh `reset` µs after `now`.
local function group_put(S, j, id, w0, w1, w2, now, reset)
  if not j then
    S[3] = S[3] + 1
    j = 4 + 5 * (S[3] - 1)
  end
  S[j], S[j + 1], S[j + 2], S[j + 3], S[j + 4] = id, now + reset, w0, w1, w2
  GROUP_WRITTEN[id] = true
end
-- The PX argument's text by value: a number passed to redis.call is formatted as a double
-- (snprintf "%.17g", as costly as the SET itself), and the writes of one call mostly share a
-- TTL. A script's table lives for its call; the function library's (script.h) for as long as
-- the library, so it starts afresh once it holds PX_TEXT_MAX texts.
-- (compact_write spells px_text out: it runs on every decision.)
local PX_TEXT, px_texts, PX_TEXT_MAX = {}, 0, 256
local function px_text(ms)
  local px = PX_TEXT[ms]
  if not px then
    if px_texts >= PX_TEXT_MAX then PX_TEXT, px_texts = {}, 0 end
    px = fmt('%d', ms)
    PX_TEXT[ms], px_texts = px, px_texts + 1
  end
  return px
end
-- Writes S under `key`, its members written in this call fresh at most `reset` µs after `now`:
-- past GROUP_MAX members, those nearest fresh go first, never one written in the call
-- (group_put); the TTL as compact_write sets a state's, from the value's `keep`.
local function group_write(key, S, now, reset, slack)
  local m = S[3]
  while m > GROUP_MAX do
    local near = false
    for j = 4, 3 + 5 * m, 5 do
      if not GROUP_WRITTEN[S[j]] and (not near or S[j + 1] < S[near + 1]) then near = j end
    end
    if not near then break end  -- (more members written in one call than a group holds)
    local last = 4 + 5 * (m - 1)
    S[near], S[near + 1], S[near + 2], S[near + 3], S[near + 4] =
      S[last], S[last + 1], S[last + 2], S[last + 3], S[last + 4]
    m = m - 1
  end
  S[3] = m
  -- (Spelled apart from compact_write's, which the mutants of tests/redis/lua_mutants.sh name.)
  local ttl = ceildiv(reset, 1000)
  if ttl < 1 then ttl = 1 end
  local keep = S[2]
  if keep and now + ttl * 1000 <= keep then
    redis.call('SET', key, spack(group_fmt(m), unpack(S, 1, 3 + 5 * m)), 'KEEPTTL')
    return
  end
  ttl = floor(ttl * 9 / 8)
  -- Never shorter than the time recorded before, which the other members' `until` may reach.
  if keep and now + (ttl - 1) * 1000 < keep then ttl = ceildiv(keep - now, 1000) + 1 end
  S[2] = now + (ttl - 1) * 1000
  redis.call('SET', key, spack(group_fmt(m), unpack(S, 1, 3 + 5 * m)), 'PX', px_text(ttl + slack))
end
-- A request's grouped entries in decide.lua: each is named by `<group key>#<id>` (its
-- reservations live under that name), which this table maps to {group key, id} for the call.
local MEMBERS = {}
-- decide.lua's groups, as the fast script's (consume.lua): each read once in a call, at its
-- first use as CALL_GROUPS[key] (its members read and written there; `need`, the longest time
-- until fresh of those written, false while none was), CALL_GROUPS[1 ..] their keys in the order
-- read, and each written once at the call's end, when a member changed (decide.lua). A value read
-- and written per member cost a request of four members four reads and four writes, where the
-- fast script pays one of each. (No function of its own: the decide script is at Lua's bound of
-- 200 locals.)
local CALL_GROUPS = setmetatable({}, {__index = function(t, key)
  local S = group_parse(redis.call('GET', key))
  S.need = false
  t[key] = S
  t[#t + 1] = key
  return S
end})
local function member_state(S, id)
  local j = group_find(S, id)
  if not j then return nil end
  return {S[j + 2], S[j + 3], S[j + 4]}
end

local function compact_read(key)
  local g = MEMBERS[key]
  if g then return member_state(CALL_GROUPS[g[1]], g[2]) end
  return compact_parse(redis.call('GET', key))
end
-- compact_read into `t`, its words overwritten, for a caller done with the state before it
-- reads another (consume.lua): no table is made per read. A state in text makes one.
local function compact_read_into(key, t)
  local v = redis.call('GET', key)
  if not v then return nil end
  if #v == 33 then
    local tag
    tag, t[1], t[2], t[3], t[4] = sunpack('<Bdddd', v)
    if tag == STATE_TAG then return t end
  end
  return compact_parse(v)
end

-- Writes a compact state, read as `st` in this call (or nil), that must live until fresh,
-- `reset` µs after `now`. Setting a TTL costs Redis about as much as the rest of the write, so
-- it is set only when the key's present one, recorded in `st`, would end sooner: then to the
-- time needed plus an eighth, so that a need that grows with each write (a bucket draining)
-- sets it once per eighth rather than every time. A key therefore outlives its fresh time by
-- at most an eighth of the TTL last set, and never expires before it. The recorded time is
-- never later than the real expiry: Redis's TIME, read at the call's start, is `now`, and Redis
-- counts a TTL from its own clock in whole ms, read at the call's start too, so the time is
-- recorded 1 ms short. (A given clock's `slack`, lua_protocol.h, is added and not recorded.)
-- Returns the time recorded, the state's fourth word from now on.
local function compact_write(key, st, w0, w1, w2, now, reset, slack)
  local g = MEMBERS[key]
  if g then  -- a member: into its group, written at the call's end (decide.lua)
    local S = CALL_GROUPS[g[1]]
    group_put(S, group_find(S, g[2]), g[2], w0, w1, w2, now, reset)
    if not S.need or reset > S.need then S.need = reset end
    return nil
  end
  -- ttl_ms(reset, 0), written out: the double quotient's floor is exact or one above the
  -- true one, and then it is the ceiling.
  local ttl = floor(reset / 1000)
  if ttl * 1000 < reset then ttl = ttl + 1 end
  if ttl < 1 then ttl = 1 end
  local keep = st and st[4]
  if keep and keep >= now + ttl * 1000 then
    redis.call('SET', key, spack('<Bdddd', STATE_TAG, w0, w1, w2, keep), 'KEEPTTL')
    return keep
  end
  ttl = ttl + floor(ttl / 8)
  local px = PX_TEXT[ttl + slack]
  if not px then
    if px_texts >= PX_TEXT_MAX then PX_TEXT, px_texts = {}, 0 end
    px = fmt('%d', ttl + slack)
    PX_TEXT[ttl + slack], px_texts = px, px_texts + 1
  end
  keep = now + (ttl - 1) * 1000
  redis.call('SET', key, spack('<Bdddd', STATE_TAG, w0, w1, w2, keep), 'PX', px)
  return keep
end
