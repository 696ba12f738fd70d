-- batch.lua decides several requests in one script call, one after the
-- other with window.lua's decide: each is decided exactly as decide.lua
-- alone would decide it, so each stays atomic and exact, and the call saves
-- the per-call cost of a script (parsing, lookup, reply) for all but the
-- first.
--
-- KEYS     every request's keys, one request after the other.
-- ARGV     the number of requests n and of shapes s: distinct argument
--          lists (decide.lua's ARGV), which the requests of one policy
--          share; per shape its number of keys, its number of arguments,
--          then the arguments; then, when s > 1, per request the number of
--          its shape (from 1). Each argument costs the server a string, so
--          a request sends at most one besides its keys.
--
-- Reply: one flat array, per request in turn: the length k of decide.lua's
-- reply for it, then that reply's k integers; or, when deciding it raised an
-- error, -1 and the error's message. An error leaves the other requests'
-- decisions as they are. (Nested arrays cost the server a table and a
-- conversion per request.)

local arg, key = reader(ARGV), reader(KEYS)
local n, s = tonumber(arg()), tonumber(arg())

-- One TIME for the whole call: the requests run back to back, atomically,
-- so they are decided at one instant, as requests arriving within one
-- microsecond would be.
local now
local shapes = {}
for i = 1, s do
  local nk, na = tonumber(arg()), tonumber(arg())
  if na ~= 3 + 4 * nk then
    error('batch.lua: shape ' .. i .. ' has ' .. na .. ' arguments for ' .. nk .. ' keys', 0)
  end
  local shape = {keys = nk, mode = arg(), now = tonumber(arg())}
  if not shape.now then
    now = now or clock('')
    shape.now = now
  end
  shape.rules = rules(arg, nk, arg())
  shapes[i] = shape
end

local function message(err)
  if type(err) == 'table' and err.err then
    return err.err
  end
  return tostring(err)
end

-- One keys table serves every request in turn: entries past a request's
-- own are cleared, so # counts its keys alone.
local out, keys, last = {}, {}, 0
for _ = 1, n do
  local shape = shapes[1]
  if s > 1 then
    shape = shapes[tonumber(arg())]
  end
  for i = 1, shape.keys do
    keys[i] = key()
  end
  for i = shape.keys + 1, last do
    keys[i] = nil
  end
  last = shape.keys
  local head = #out + 1
  out[head] = 0 -- the length of the request's reply, set below
  out[#out + 1] = shape.now
  local ok, err = pcall(decide, keys, shape.rules, shape.mode, shape.now, out)
  if ok then
    out[head] = #out - head
  else
    for j = #out, head + 1, -1 do
      out[j] = nil
    end
    out[head] = -1
    out[#out + 1] = message(err)
  end
end
flushAll()
return out
