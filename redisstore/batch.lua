-- batch.lua decides several requests in one script call, one after the
-- other with window.lua's decide: each is decided exactly as decide.lua
-- alone would decide it, so each stays atomic and exact, and the call saves
-- the per-call cost of a script (parsing, lookup, reply) for all but the
-- first.
--
-- KEYS     every request's keys, one request after the other.
-- ARGV[1]  the number of requests n.
-- ARGV[2]  the number of shapes s: distinct argument lists (decide.lua's
--          ARGV), which requests of one policy share.
-- ARGV[3..] per shape: its number of keys, its number of arguments, then
--          the arguments; then, when s > 1, per request the number of its
--          shape (from 1). Each argument costs the server a string, so a
--          request sends at most one besides its keys.
--
-- Reply: one flat array, per request in turn: the length k of decide.lua's
-- reply for it, then that reply's k integers; or, when deciding it raised
-- an error, -1 and the error's message. An error leaves the other requests'
-- decisions as they are. (Nested arrays cost the server a table and a
-- conversion per request.)

-- One TIME for the whole call: the requests run back to back, atomically,
-- so they are decided at one instant, as requests arriving within one
-- microsecond would be.
local now
local n, s = tonumber(ARGV[1]), tonumber(ARGV[2])
local a = 3
local shapes = {}
for i = 1, s do
  local nk, na = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  local t = tonumber(ARGV[a + 4])
  if not t then
    if not now then
      local r = call('TIME')
      now = tonumber(r[1]) * 1000000 + tonumber(r[2])
    end
    t = now
  end
  shapes[i] = {nk, ARGV[a + 2], tonumber(ARGV[a + 3]), t, ruleArgs(ARGV, a + 5, a + 1 + na)}
  a = a + 2 + na
end

-- One keys table serves every request in turn: entries past a request's
-- own are cleared, so # counts its keys alone. decide only reads keys and
-- a shape's rules, and overwrites st.
local out, st = {}, {}
local function message(err)
  if type(err) == 'table' and err.err then
    return err.err
  end
  return tostring(err)
end
local keys, k, lastk = {}, 1, 0
for d = 1, n do
  local shape = shapes[1]
  if s > 1 then
    shape = shapes[tonumber(ARGV[a + d - 1])]
  end
  local nk = shape[1]
  for i = 1, nk do
    keys[i] = KEYS[k + i - 1]
  end
  for i = nk + 1, lastk do
    keys[i] = nil
  end
  k, lastk = k + nk, nk
  local at = #out + 1
  out[at], out[at + 1] = 0, shape[4]
  local ok, err = pcall(decide, keys, shape[2], shape[3], shape[4], shape[5], out, st)
  if ok then
    out[at] = #out - at
  else
    for j = #out, at + 2, -1 do
      out[j] = nil
    end
    out[at], out[at + 1] = -1, message(err)
  end
end
flushAll()
return out
