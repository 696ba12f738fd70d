-- decision.lua: the decision of one request over the windows of its rules:
-- every rule is checked by its algorithm (log.lua's steps over window.lua,
-- gcra.lua, counter.lua, concurrency.lua, periodic.lua, credits.lua), then
-- the request is recorded in all of them or in none, and the reply says
-- what the decision leaves.

-- An algorithm is a table of four steps: load(key, r, now), the key's
-- state and how r stands on it (0 it fits, 1 no room for its cost, 2 too
-- soon: its minimum gap has not passed, 3 its leases are all alive); wait(s, r, pending, now), how long
-- from now until r fits once pending units are recorded at now; write(s, r,
-- now), which records r's cost and returns the time it recorded at, then
-- used and reset-after µs as it leaves them; and figures(s, r, now,
-- pending), used and reset-after µs with pending more units. The log's
-- steps are log.lua's and window.lua's; the others' are made when a rule
-- first needs them. A rule's kind (see shape) names its algorithm.
local log = {load = logLoad, wait = logWait, write = logWrite, figures = logFigures}
local gcraSteps, counterSteps, concurrencySteps, sliceSteps, periodicSteps, creditsSteps

-- shape reads a request shape (decide.lua), the rules a request is decided
-- over: its number of rules n (i4), its mode (i4), its time in µs (i8), then
-- per rule a kind and four numbers: the window µs, the limit, the minimum
-- gap µs (a GCRA rule's burst instead) and the cost (i4, then i8 each). A
-- kind is 0 the log, 1 GCRA, 2 the sliding counter, 3 a concurrency rule
-- (concurrency.lua; its window is the lease time), 4 a budgeted log and 5 a
-- budgeted GCRA bucket (slices.lua: their slices count), 6 a calendar
-- quota (periodic.lua) and 7 a credits balance (credits.lua), plus 16 in
-- shadow mode. Kinds 6 and 7 carry more numbers after the four: the index
-- k of the period the caller's clock is in and the starts (µs) of periods
-- k-1 to k+2 (i8 each); then for kind 6 the periods of history kept (i4),
-- for kind 7 the refill's To and Add (i8 each), the rule whose overage it
-- pays for (i4: its place in the shape, from 1; 0 none: store.Check.Covers)
-- and whether it has a calendar (i4: 1, else its refills never come).
-- A budgeted rule's slices, and a calendar quota's history, have a key of
-- their own (slices.lua, periodic.lua), which the caller declares after the
-- rules' keys: the j-th such rule's is the (n + j)-th key of the request,
-- its offset r.si; the request has nk keys.
-- The mode's bits: 1 record whether the rules fit or not, 2 dry (a peek:
-- nothing written, figures as a write would leave them), 4 group (one slot
-- group of several, see crossslot.go: the reply says what rollback.lua
-- needs), 8 own (the time is the store's clock, else Redis's TIME).
local function shape(blob)
  local n, mode, t, pos = unpackInts('<i4i4i8', blob)
  local own = mode % 16 >= 8
  local list, nb, covered = {}, 0, false
  for i = 1, n do
    local kind, w, limit, third, cost
    kind, w, limit, third, cost, pos = unpackInts('<i4i8i8i8i8', blob, pos)
    local shadow = kind >= 16
    if shadow then kind = kind - 16 end
    local r = {alg = log, w = w, limit = limit, gap = 0, burst = 0, cost = cost, shadow = shadow, iv = 0,
      own = own, ttl = false, life = w + third, at = false, expiry = false, step = false, add = 0}
    if kind == 0 then
      r.gap = third
      if own then r.ttl = format('%d', ceil(r.life / 1000)) end
    elseif kind == 1 then
      gcraSteps = gcraSteps or gcra()
      r.alg, r.burst, r.iv = gcraSteps, third, w -- a limit of 0 admits nothing
      if limit > 0 then r.iv = idiv(w + limit - 1, limit) end
      r.add = min(cost * r.iv, MAXBUCKET) -- what a write adds to the TAT, saturated
      r.step = format('%d', r.add)
    elseif kind == 2 then
      counterSteps = counterSteps or counter()
      r.alg = counterSteps
    elseif kind == 3 then
      concurrencySteps = concurrencySteps or concurrency()
      r.alg = concurrencySteps
    elseif kind == 4 or kind == 5 then -- a budgeted log or GCRA bucket: its slices count (slices.lua)
      sliceSteps = sliceSteps or slices()
      nb = nb + 1
      r.si = n + nb
      if kind == 4 then
        r.alg, r.gap = sliceSteps.log, third
        if own then r.ttl = format('%d', ceil(r.life / 1000)) end
      else
        gcraSteps = gcraSteps or gcra()
        r.alg, r.burst, r.iv = sliceSteps.gcra, third, w
        if limit > 0 then r.iv = idiv(w + limit - 1, limit) end
        r.add = min(cost * r.iv, MAXBUCKET)
        r.step = format('%d', r.add)
      end
    elseif kind == 6 then
      periodicSteps = periodicSteps or periodic()
      r.alg = periodicSteps
      r.k, r.s0, r.s1, r.s2, r.s3, r.hist, pos = unpackInts('<i8i8i8i8i8i4', blob, pos)
      if r.hist > 0 then
        nb = nb + 1
        r.si = n + nb
      end
    elseif kind == 7 then
      creditsSteps = creditsSteps or credits()
      local cal
      r.alg, r.credits = creditsSteps, true
      r.k, r.s0, r.s1, r.s2, r.s3, r.to, r.add, r.covers, cal, pos = unpackInts('<i8i8i8i8i8i8i8i4i4', blob, pos)
      r.cal = cal == 1
      if r.covers > 0 then covered = true end
    else
      error('unknown rule kind ' .. kind, 0)
    end
    list[i] = r
  end
  return {n = n, nb = nb, nk = n + nb, rules = list, own = own, t = t, now = t, covered = covered,
    always = mode % 2 == 1, dry = mode % 4 >= 2, group = mode % 8 >= 4}
end

-- shapes keeps the shapes read, by their packed form: a function's calls
-- share it (see function.go), and most calls send the shapes of the calls
-- before. It holds at most 256.
local shapes, nshapes = {}, 0

-- shapeOf returns the shape packed in blob, from shapes when it is there.
local function shapeOf(blob)
  local sh = shapes[blob]
  if not sh then
    sh = shape(blob)
    if nshapes >= 256 then
      shapes, nshapes = {}, 0
    end
    shapes[blob], nshapes = sh, nshapes + 1
  end
  return sh
end

-- baseSteps returns the steps of r's algorithm as a window without slices
-- keeps it: the log's or GCRA's for a budgeted rule, whose request entries
-- and arrival time are theirs (lease.lua and finish.lua settle them so).
local function baseSteps(r)
  if sliceSteps then
    if r.alg == sliceSteps.log then return log end
    if r.alg == sliceSteps.gcra then return gcraSteps end
  end
  return r.alg
end

local states, codes = {}, {} -- decide's, per rule of the request
local idle, waived = {}, {} -- cover's, per rule of the request
local replies = {} -- decide.lua's reply (see there)

-- cover applies the credits rules of a request that pay for a calendar
-- quota's overage (store.Check.Covers) to codes, and reports whether the
-- request fits. While the quota fits, its credits rule fits and is not
-- drawn (idle); when the quota has no room, a balance that pays for the
-- cost waives the quota's denial (waived: the request records in both);
-- else both deny.
local function cover(list, n)
  for i = 1, n do
    idle[i], waived[i] = false, false
  end
  for i = 1, n do
    local p = list[i].covers
    if p and p > 0 then
      if codes[p] == 0 then
        idle[i], codes[i] = true, 0
      elseif codes[p] == 1 and codes[i] == 0 then
        waived[p] = true
      end
    end
  end
  for i = 1, n do
    if codes[i] ~= 0 and not list[i].shadow and not waived[i] then
      return false
    end
  end
  return true
end

-- decide decides a request of shape sh (its rules, n of them, its modes and
-- its time now) over keys[k + 1] to keys[k + n] (and its budgeted rules'
-- slices at keys[k + r.si], kept in r.sk for slices.lua), and sets three numbers per
-- rule from out[o + 1] on: used, retry-after µs times 4 plus the rule's
-- status (load's), and reset-after µs, as the decision leaves them; in
-- group mode two more: the reset-after µs before any write, and the time
-- (µs) it recorded at, 0 for none. It returns the last index it set. The
-- request is recorded when every rule but the shadow ones fits (or always,
-- in record mode).
local function decide(keys, k, sh, out, o)
  local list, n, now = sh.rules, sh.n, sh.now
  local fits = true
  if sh.nb > 0 then
    for i = 1, n do
      local r = list[i]
      if r.si then r.sk = keys[k + r.si] end
    end
  end
  for i = 1, n do
    local r = list[i]
    local s, code = r.alg.load(keys[k + i], r, now)
    states[i], codes[i] = s, code
    if code ~= 0 and not r.shadow then fits = false end
  end
  local covered = sh.covered
  if covered then fits = cover(list, n) end
  local always, group = sh.always, sh.group
  local record = fits or always
  for i = 1, n do
    local s, r, code = states[i], list[i], codes[i]
    local a, retry, at, used, reset, before = r.alg, 0, 0
    local still = covered and idle[i] -- a credits rule its quota's room spares
    if (not fits or always or code ~= 0) and not still then -- a group that records whatever it holds may be denied by another
      retry = a.wait(s, r, record and r.cost or 0, now)
    end
    if group then
      used, before = a.figures(s, r, now, 0)
      if r.credits then before = used end -- the balance before, for crossslot.go's unrecord
    end
    if not record or still then
      used, reset = a.figures(s, r, now, 0)
    elseif sh.dry then
      used, reset = a.figures(s, r, now, r.cost)
    else
      at, used, reset = a.write(s, r, now)
    end
    if retry > MAXRETRY then retry = MAXRETRY end
    out[o + 1], out[o + 2], out[o + 3] = used, retry * 4 + code, reset
    o = o + 3
    if group then
      out[o + 1], out[o + 2] = before, at
      o = o + 2
    end
  end
  return o
end
