-- decide.lua decides requests, one after the other with decision.lua's
-- decide: one request, or a batch of them (batch.go). Each is decided
-- exactly as it would be alone, so each stays atomic and exact, and a
-- batch saves the per-call cost of a script (parsing, lookup, reply) for
-- all but the first.
--
-- KEYS     every request's keys (its rules', then its budgeted rules'
--          slices', decision.lua's shape), one request after the other; or none, when
--          they follow the other arguments (a batch of several slots of a
--          Cluster node, see batch.go).
-- ARGV     the numbers, packed little-endian (struct's "<i4" and "<i8"), so
--          that nothing is parsed from decimal: first the number of
--          requests n and of shapes s (i4 each); then the s shapes
--          (decision.lua's shape), the rules a request is decided over, one
--          argument each: requests of one policy, cost and mode share one;
--          then, when s > 1, one byte per request: its shape's number, from
--          1; then the keys, when KEYS holds none.
--
-- Reply: one flat array: per request in turn, three integers per rule
-- (decision.lua's decide; five in group mode), or, when deciding it raised
-- an error, -1 and the error's message, which leaves the other requests'
-- decisions as they are. A call of one request raises its error instead,
-- so that its reply is integers alone. (Nested arrays would cost the server
-- a table and a conversion per request.)

-- A call starts with no cached state (as a function, the helpers and their
-- tables outlive a call).
cache, cacheNow = nil, nil
reuseStates()
for i = #dirty, 1, -1 do
  dirty[i] = nil
end

local n, s = unpackInts('<i4i4', ARGV[1])

-- Redis's TIME is read once for the whole call: the requests run back to
-- back, atomically, so they are decided at one instant, as requests
-- arriving within one microsecond would be.
local now
local function timed(sh)
  if not sh.own then
    now = now or clock()
    sh.now = now
  end
  return sh
end

local keys, k = KEYS, 0
if #keys == 0 then
  keys, k = ARGV, 1 + s
  if s > 1 then k = k + 1 end
end

-- The reply is built in replies (decision.lua), which a function's calls
-- share: it ends at the first nil, which each call sets after its last
-- integer, so that what an earlier call left after it is never read.
local out, sh = replies, timed(shapeOf(ARGV[2]))
if n == 1 then
  out[decide(keys, k, sh, out, 0) + 1] = nil
  flushAll()
  return out
end

local list
if s > 1 then
  list = {sh}
  for i = 2, s do
    list[i] = timed(shapeOf(ARGV[1 + i]))
  end
end
-- run decides the requests after the j-th in turn, the j-th's shape sh
-- and its first key after k, its reply from out[o + 1]. One protected call
-- runs them all, not one per request: a request that raises an error
-- stops it at j, with o still where that request's reply starts, so its
-- error replaces what it set, and another call runs the rest.
local which, o, j = ARGV[2 + s], 0, 0
local function run()
  while j < n do
    j = j + 1
    if list then
      sh = list[byte(which, j)]
    end
    o = decide(keys, k, sh, out, o)
    k = k + sh.nk
  end
end
while j < n do
  local ok, err = pcall(run)
  if not ok then
    if type(err) == 'table' and err.err then
      err = err.err
    end
    out[o + 1], out[o + 2] = -1, tostring(err)
    o, k = o + 2, k + sh.nk
  end
end
out[o + 1] = nil
flushAll()
return out
