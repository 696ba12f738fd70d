-- prelude.lua starts every script of this package (see scripts.go): the
-- names the scripts share and the clock they read.

local call, format, tonumber, byte, find, sub = redis.call, string.format, tonumber, string.byte, string.find, string.sub
local floor, ceil, max, min = math.floor, math.ceil, math.max, math.min

-- int formats n as an integer. Numbers are passed to Redis formatted so:
-- Lua's own conversion would write large ones in exponent form, and Redis's
-- conversion of a Lua number is slower than string.format's of an integer.
local function int(n)
  return format('%d', n)
end

-- clock returns the time in µs: arg when it is a number (a store given a
-- clock, in tests), else Redis's TIME, so that every process sharing the
-- server shares one clock.
local function clock(arg)
  local now = tonumber(arg)
  if now then
    return now
  end
  local t = call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- reader returns a function that returns the next value of list at each
-- call: scripts read ARGV and KEYS in order with it.
local function reader(list)
  local i = 0
  return function()
    i = i + 1
    return list[i]
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
