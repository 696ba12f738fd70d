-- decide.lua decides requests, one after the other with decision.lua's
-- decide: one request, or a batch of them (batch.go). Each is decided
-- exactly as it would be alone, so each stays atomic and exact, and a
-- batch saves the per-call cost of a script (parsing, lookup, reply) for
-- all but the first.
--
-- KEYS     every request's keys, one request after the other.
-- ARGV[1]  the numbers, packed little-endian (struct's "<i4" and "<i8"), so
--          that nothing is parsed from decimal: the number of requests n
--          and of shapes s (i4 each), then each shape, the rules a request
--          is decided over: its number of rules (i4), its mode (i4: 1
--          record whether the rules fit or not, 2 dry (a peek: nothing
--          written, figures as a write would leave them), 4 group (one slot
--          group of several, see crossslot.go: the reply says what
--          rollback.lua needs), 8 the time is the store's own clock) and its
--          time in µs (i8, used with the store's own clock; otherwise
--          Redis's TIME is read once per call), then its rules (decision.lua's
--          rules). Requests of one policy, cost and mode share a shape.
-- ARGV[2]  when s > 1, one byte per request: its shape's number, from 1.
--
-- Reply: one flat array: per request in turn, three integers per rule
-- (decision.lua's decide; five in group mode), or, when deciding it raised
-- an error, -1 and the error's message, which leaves the other requests'
-- decisions as they are. A call of one request raises its error instead,
-- so that its reply is integers alone. (Nested arrays would cost the server
-- a table and a conversion per request.)

local blob, which = ARGV[1], ARGV[2]
local n, s, pos = unpackInts('<i4i4', blob)

local now -- Redis's TIME, read once for the whole call: the requests run
-- back to back, atomically, so they are decided at one instant, as
-- requests arriving within one microsecond would be.
local shapes = {}
for i = 1, s do
  local nk, mode, t
  nk, mode, t, pos = unpackInts('<i4i4i8', blob, pos)
  local own = mode % 16 >= 8
  if not own then
    now = now or clock()
    t = now
  end
  local list
  list, pos = rules(blob, pos, nk, own)
  shapes[i] = {n = nk, rules = list, now = t, always = mode % 2 == 1, dry = mode % 4 >= 2, group = mode % 8 >= 4}
end

local out = {}
if n == 1 then
  decide(KEYS, 0, shapes[1], out, 0)
  flushAll()
  return out
end

local o, k, sh = 0, 0, shapes[1]
for j = 1, n do
  if which then
    sh = shapes[byte(which, j)]
  end
  local ok, last = pcall(decide, KEYS, k, sh, out, o)
  if ok then
    o = last
  else
    for x = #out, o + 1, -1 do
      out[x] = nil
    end
    if type(last) == 'table' and last.err then
      last = last.err
    end
    out[o + 1], out[o + 2] = -1, tostring(last)
    o = o + 2
  end
  k = k + sh.n
end
flushAll()
return out
