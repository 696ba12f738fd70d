-- batch.lua runs decide.lua for several requests in one script call: each
-- request is decided exactly as decide.lua alone would decide it, one after
-- the other, so each stays atomic and exact, and the call saves the per-call
-- cost of a script (parsing, lookup, reply) for all but the first.
--
-- The store builds this script by putting decide.lua's source in place of
-- the DECIDE line below, as the body of a function of KEYS and ARGV, with
-- decide.lua's own seen table replaced by the one below.
--
-- KEYS     every request's keys, one request after the other.
-- ARGV[1]  the number of requests n.
-- ARGV[2]  the number of shapes s: distinct argument lists (decide.lua's
--          ARGV), which requests of one policy share.
-- ARGV[3..] per shape: its number of keys, its number of arguments, then
--          the arguments; then per request, the number of its shape
--          (from 1). Each argument costs the server a string, so a request
--          sends one besides its keys.
--
-- Reply: n elements, each decide.lua's reply for that request or, when
-- deciding it raised an error, that error. An error leaves the other
-- requests' decisions as they are.

-- The state of the keys written so far, shared by the requests: decide.lua's
-- seen (see there).
local seen = {}

local function decide(KEYS, ARGV)
--DECIDE--
end

-- One TIME for the whole call: the requests run back to back, atomically,
-- so they are decided at one instant, as requests arriving within one
-- microsecond would be.
local now
local n, s = tonumber(ARGV[1]), tonumber(ARGV[2])
local a = 3
local shapes = {}
for i = 1, s do
  local nk, na = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  a = a + 2
  local args = {}
  for j = 1, na do
    args[j] = ARGV[a + j - 1]
  end
  a = a + na
  if args[3] == '' then
    if not now then
      local t = redis.call('TIME')
      now = string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2]))
    end
    args[3] = now
  end
  shapes[i] = {nk, args}
end

-- One keys table serves every request in turn: entries past a request's
-- own are cleared, so # counts its keys alone. Requests of one shape share
-- its args table, which decide.lua only reads.
local out = {}
local keys, k, lastk = {}, 1, 0
for d = 1, n do
  local shape = shapes[tonumber(ARGV[a + d - 1])]
  local nk = shape[1]
  for i = 1, nk do
    keys[i] = KEYS[k + i - 1]
  end
  for i = nk + 1, lastk do
    keys[i] = nil
  end
  k, lastk = k + nk, nk
  local ok, reply = pcall(decide, keys, shape[2])
  if ok then
    out[d] = reply
  elseif type(reply) == 'table' and reply.err then
    out[d] = reply
  else
    out[d] = {err = tostring(reply)}
  end
end
return out
