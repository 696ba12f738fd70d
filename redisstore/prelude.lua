-- prelude.lua starts every script of this package (see scripts.go): the
-- names the scripts share and the clock they read.
--
-- Every Lua step costs Redis's one thread time that no other client gets:
-- a call into C, a new table or a new string costs as much as tens of
-- arithmetic steps, and every closure a script makes is made anew on every
-- call. The scripts therefore make few closures, parse each argument once
-- per call, format numbers only to hand them to Redis (string.format's %d:
-- Lua's own conversion writes large numbers in exponent form, and Redis's
-- conversion of a Lua number is slower), and keep a request's work to its
-- commands and a few steps.

local call, format, tonumber, byte, find, sub = redis.call, string.format, tonumber, string.byte, string.find, string.sub
local floor, ceil, max, min = math.floor, math.ceil, math.max, math.min
local unpackInts = struct.unpack

-- MAXCOST is the most a window counts, store.MaxCost (2^53): past it a
-- double no longer holds every integer. A write saturates at it. MAXBUCKET
-- is the longest a GCRA bucket is held past now, store.MaxBucket (2^50 µs);
-- MAXRETRY the longest wait a reply carries, store.MaxRetry (2^51-1 µs), so
-- that retry * 4 + status stays exact.
local MAXCOST, MAXBUCKET, MAXRETRY = 9007199254740992, 1125899906842624, 2251799813685247

-- States: the records a call's decisions read and write (window.lua's,
-- gcra.lua's, counter.lua's, periodic.lua's and credits.lua's), one per
-- key read. Made anew for every
-- request they would cost Redis a table, its fields and their garbage, so
-- each algorithm keeps those it made in a pool, and a call of decide.lua or
-- lease.lua (functions, whose helpers outlive a call) takes them again from
-- the first (reuseStates): a call never takes one twice. A pool keeps at most 256.
local logStates, gcraStates, counterStates, periodicStates, creditsStates = {}, {}, {}, {}, {}
local logTaken, gcraTaken, counterTaken, periodicTaken, creditsTaken = 0, 0, 0, 0, 0
local POOLED = 256

local function reuseStates()
  logTaken, gcraTaken, counterTaken, periodicTaken, creditsTaken = 0, 0, 0, 0, 0
end

-- clock returns the time in µs: t when it is one (a store given a clock, in
-- tests), else Redis's TIME, so that every process sharing the server
-- shares one clock.
local function clock(t)
  if t then
    return t
  end
  local r = call('TIME')
  return r[1] * 1000000 + r[2]
end

-- expireAt makes key expire at at (absolute µs): on Redis's clock at that
-- time (PEXPIREAT, which needs no conversion on the server), on a store's
-- own clock (own) after at - now, at least 1 ms. The steps of a decision
-- (gcra.lua's and concurrency.lua's write) apply the same rule inline.
local function expireAt(key, at, now, own)
  if own then
    call('PEXPIRE', key, format('%d', max(1, ceil((at - now) / 1000))))
  else
    call('PEXPIREAT', key, format('%d', ceil(at / 1000)))
  end
end

-- reader returns a function that returns the next value of list at each
-- call, nil past its end: scripts read ARGV, KEYS and a reply of pairs
-- (ZRANGE's WITHSCORES) in order with it, never at a computed index.
local function reader(list)
  local i = 0
  return function()
    i = i + 1
    return list[i]
  end
end

-- pairReader returns the reader of a string value of two integers,
-- "<a>:<b>" (periodic.lua's count, credits.lua's balance), written with
-- format's '%d:%d': read(v, key) returns the numbers of pattern's two
-- captures in v, or raises an error that names key and says it does not
-- hold what (such as "a credits balance"). A codec makes its reader once,
-- with its steps, so that a read is one Lua call, as a function of the
-- codec's own would be.
local function pairReader(pattern, what)
  local match = string.match
  return function(v, key)
    local a, b = match(v, pattern)
    if not a then
      error('key ' .. key .. ' is not ' .. what .. ' (it holds "' .. v .. '"): remove it or use another prefix', 0)
    end
    return a + 0, b + 0
  end
end

-- idiv returns floor(a / b) for integers a >= 0 and b > 0, exactly: the
-- division of two doubles can round up to the next integer.
local function idiv(a, b)
  local q = floor(a / b)
  if q * b > a then
    return q - 1
  elseif (q + 1) * b <= a then
    return q + 1
  end
  return q
end
