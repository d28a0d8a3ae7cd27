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
local function compact_read(key) return compact_parse(redis.call('GET', key)) end
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
-- The PX argument's text by value: a number passed to redis.call is formatted as a double
-- (snprintf "%.17g", as costly as the SET itself), and the writes of one call mostly share a
-- TTL. A script's table lives for its call; the function library's (script.h) for as long as
-- the library, so it starts afresh once it holds PX_TEXT_MAX texts.
local PX_TEXT, px_texts, PX_TEXT_MAX = {}, 0, 256
local function compact_write(key, st, w0, w1, w2, now, reset, slack)
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
