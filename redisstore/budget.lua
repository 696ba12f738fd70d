-- budget.lua leases and returns slices of budgeted windows (budget.go,
-- store.Budgeter), in one atomic step at one time: it gives back the
-- returned slices, decides the request as decide.lua decides one (through
-- slices.lua's steps for its budgeted windows), then, when the request is
-- admitted, grants each ask from the room its window has left.
--
-- KEYS     the request's keys, one per rule of its shape, then one per
--          budgeted rule of its shape: the key of its slices
--          (decision.lua's shape); then two per returned slice: the key of
--          its window and that of the window's slices.
-- ARGV     1: the request's shape (decision.lua's shape; it may have no
--          rules, and in dry mode it only reads its windows to grant from
--          them: a request decided elsewhere); 2: the returns, packed
--          little-endian, per return its algorithm (i4: 0 the log, 1 GCRA,
--          2 the sliding counter), then its window µs, limit, Start, End,
--          Granted and Used (i8 each); 3: the asks, per ask the index of
--          its rule in the shape (i4, from 0), Want and the slice's life
--          µs (i8 each); then one ID per return, then one per ask.
--
-- Reply: three integers per rule (decide.lua's), then five per ask: the
-- units granted, the grant's time and the slice's end (absolute µs), and
-- the window's used and reset-after µs after the grant.

cache, cacheNow = nil, nil
reuseStates()
for i = #dirty, 1, -1 do
  dirty[i] = nil
end

local sh = shapeOf(ARGV[1])
if not sh.own then
  sh.now = clock()
end
local now, own = sh.now, sh.own
sliceSteps = sliceSteps or slices()
local sl = sliceSteps

local rets, asks = ARGV[2], ARGV[3]
local nr = #rets / 52
local pos = 1
for j = 1, nr do
  local kind, w, limit, start, e, granted, used
  kind, w, limit, start, e, granted, used, pos = unpackInts('<i4i8i8i8i8i8i8', rets, pos)
  local key, sk, id = KEYS[sh.nk + 2 * j - 1], KEYS[sh.nk + 2 * j], ARGV[3 + j]
  if kind == 0 then
    sl.logReturn(sk, w, id, e, granted, used, now, own)
  elseif kind == 1 then
    if limit > 0 then
      sl.gcraReturn(key, sk, idiv(w + limit - 1, limit), id, e, granted, used, now, own)
    end
  elseif kind == 2 then
    if granted > used then
      counterSteps = counterSteps or counter()
      counterSteps.add(key, w, start, used - granted, false)
    end
  else
    error('unknown slice kind ' .. kind, 0)
  end
end

local out = replies
local o = decide(KEYS, 0, sh, out, 0)
local admitted = true
if not sh.dry then
  for i = 1, sh.n do
    if not sh.rules[i].shadow and out[3 * i - 1] % 4 ~= 0 then
      admitted = false
    end
  end
end

pos = 1
for a = 1, #asks / 20 do
  local i, want, life
  i, want, life, pos = unpackInts('<i4i8i8', asks, pos)
  local r, s, id = sh.rules[i + 1], states[i + 1], ARGV[3 + nr + a]
  local n = 0
  if admitted then
    if r.alg == sl.log then
      n = sl.logGrant(s, r, want, life, id, now)
    elseif r.alg == sl.gcra then
      n = sl.gcraGrant(s, r, want, life, id, now)
    elseif r.alg == counterSteps then
      local ends = (idiv(now, r.w) + 1) * r.w
      if now + life > ends then life = ends - now end
      n = sl.counterGrant(counterSteps, s, r, want, now)
    else
      error('rule ' .. (i + 1) .. ' of the request is not budgeted', 0)
    end
  end
  local used, reset = r.alg.figures(s, r, now, 0)
  out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = n, now, now + life, used, reset
  o = o + 5
end
out[o + 1] = nil
flushAll()
return out
