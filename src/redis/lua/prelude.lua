-- caudal's Lua prelude: integer arithmetic on Lua doubles, exact below 2^53.
--
-- The scripts under this folder are concatenated at build time into the one script Redis runs
-- (src/redis/embed_lua.cmake): the constants generated from the algorithm table (each
-- algorithm's enum value as its upper-case name, FIXED_WINDOW = 0, ..., and the verdicts ALLOWED,
-- DENIED, NEVER_FITS), this prelude, one file per algorithm (<name>.lua, in the table's order),
-- then undo.lua and decide.lua. One atomic call per batch, so a request's limits of different algorithms are
-- decided all-or-nothing.
-- Each algorithm mirrors its C++ twin in src/algorithms/ line by line; the C++/Lua equivalence
-- test replays random traces through both and requires identical decisions. Every integer here
-- stays below 2^53 (Limit::Create's bounds guarantee it), and the one product that could
-- exceed it, a*b/m, goes through the exact muldiv below.

local floor, tonumber, fmt, match = math.floor, tonumber, string.format, string.match

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
-- -idiv(-x, y), written out (as is idiv in muldiv's first branch): a Lua call costs Redis more
-- than the arithmetic, and these run on every decision.
local function ceildiv(x, y)
  local q = floor(-x / y)
  local r = -x - q * y
  if r < 0 then
    q = q - 1
  elseif r >= y then
    q = q + 1
  end
  return -q
end

-- 64^i for i = 0..8, written out: Redis runs this file at every call, and filling the table
-- in a loop costs it more than the rest of the file (each new key regrows the table).
local P64 = {[0] = 1, 64, 4096, 262144, 16777216, 1073741824, 68719476736, 4398046511104,
             281474976710656}

-- a*b = q*m + r with 0 <= r < m, exactly. Preconditions: 0 <= a < 2^53; 0 <= b, 0 < m, both
-- < 2^45; q < 2^53. Horner's scheme over the 6-bit digits of a keeps x < m, so
-- x*64 + digit*b < 2^52 and every step is exact.
local function muldiv(a, b, m)
  local p = a * b
  if p < TWO_52 then  -- the double product is exact
    local q = floor(p / m)
    local r = p - q * m
    if r < 0 then
      q, r = q - 1, r + m
    elseif r >= m then
      q, r = q + 1, r - m
    end
    return q, r
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

local function ttl_ms(reset, slack)
  local ms = ceildiv(reset, 1000)
  if ms < 1 then ms = 1 end
  return ms + slack
end

-- Compact algorithms: (state or nil, capacity, rate count, rate period, now, cost) ->
-- verdict, remaining, reset_after, retry_after, consumed, next state words w0, w1, w2.
-- Each one's file ends by registering its decide and refund functions under its constant:
--   COMPACT[TOKEN_BUCKET], COMPACT_REFUND[TOKEN_BUCKET] = token_bucket, token_bucket_refund
-- Each table is made with a slot per algorithm (0..5, false until registered), for the same
-- reason.
local COMPACT = {[0] = false, false, false, false, false, false}
local COMPACT_REFUND = {[0] = false, false, false, false, false, false}
local COMPACT_CHARGE = {[0] = false, false, false, false, false, false}
-- Overdraw (a reservation settled above its estimate), where an algorithm settles reservations.
local COMPACT_OVERDRAW = {[0] = false, false, false, false, false, false}

-- MaxDebt (src/algorithms/algorithm.cc): 2^40 units, and for a bucket no more than it refills in
-- MAX_DEBT_TIME: floor(MAX_DEBT_TIME * n / p), exact through muldiv once the double estimate
-- says the quotient is small.
local function max_debt(alg, n, p)
  if alg == FIXED_WINDOW then return MAX_CAPACITY end
  if MAX_DEBT_TIME / p * n >= 2 * MAX_CAPACITY then return MAX_CAPACITY end
  local q = muldiv(MAX_DEBT_TIME, n, p)
  if q > MAX_CAPACITY then return MAX_CAPACITY end
  return q
end
