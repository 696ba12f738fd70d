-- decision.lua: the decision of one request over the windows of its rules:
-- every rule is checked by its algorithm (window.lua's log, gcra.lua,
-- counter.lua), then the request is recorded in all of them or in none,
-- and the reply says what the decision leaves.

-- An algorithm is a table of five steps: load(key, r, now), the key's
-- state; check(s, r, now), whether r fits and why not ('limit' or 'gap');
-- wait(s, r, pending, now), how long from now until r fits once pending
-- units are recorded at now; write(s, r, now), which records r's cost and
-- returns the time it recorded at; and figures(s, r, now, pending), used,
-- remaining and reset-after µs with pending more units. The log's steps
-- are window.lua's; GCRA's and the sliding counter's are made when a rule
-- first needs them.
local log = {load = logLoad, check = logCheck, wait = logWait, write = logWrite, figures = logFigures}
local gcraSteps, counterSteps

-- rules reads n rules with next (see reader): four each, the window µs, the
-- limit, the minimum gap µs (a GCRA rule's burst instead) and the cost;
-- flags holds a character per rule: "." the log, "g" GCRA, "c" the sliding
-- counter, upper case (for the log "s") in shadow mode; "" is all ".".
local function rules(next, n, flags)
  local out = {}
  for i = 1, n do
    local w, limit, third, cost = tonumber(next()), tonumber(next()), tonumber(next()), tonumber(next())
    local f = byte(flags, i) or 46
    local alg, shadow = log, f == 115 -- 's'
    if f == 103 or f == 71 then -- 'g', 'G'
      gcraSteps = gcraSteps or gcra()
      alg, shadow = gcraSteps, f == 71
    elseif f == 99 or f == 67 then -- 'c', 'C'
      counterSteps = counterSteps or counter()
      alg, shadow = counterSteps, f == 67
    end
    local gap, burst = third, 0
    if alg ~= log then
      gap, burst = 0, third
    end
    out[i] = {w = w, limit = limit, gap = gap, burst = burst, cost = cost, alg = alg, shadow = shadow,
      ttl = int(ceil((w + third) / 1000))}
  end
  return out
end

-- modes returns what mode asks: whether a request is recorded even when a
-- rule does not fit (always: "record"), whether nothing is written but the
-- figures are those a write would leave (dry: a "peek"), and whether the
-- reply tells what rollback.lua needs (group: one slot group of several,
-- see crossslot.go). The modes: allow, record, group, peek, peek-record,
-- peek-group.
local function modes(mode)
  local always = mode == 'record' or mode == 'peek-record'
  local dry = mode == 'peek' or mode == 'peek-record' or mode == 'peek-group'
  local group = mode == 'group' or mode == 'peek-group'
  if not (always or dry or group or mode == 'allow') then
    error('unknown mode "' .. tostring(mode) .. '"', 0)
  end
  return always, dry, group
end

local states = {} -- decide's states, one per key

-- decide decides a request at now over keys, the windows of rules, in
-- mode, and appends five numbers per rule to out: status (1 fits, 0 no
-- room, -1 too soon), used, remaining, retry-after µs and reset-after µs,
-- as the decision leaves them; a group mode two more: the reset-after µs
-- before any write, and the time (µs) it recorded at, 0 for none. The
-- request is recorded when every rule but the shadow ones fits (or always,
-- in record modes).
local function decide(keys, rules, mode, now, out)
  local always, dry, group = modes(mode)
  local fits = true
  for i, key in ipairs(keys) do
    local r = rules[i]
    local s = r.alg.load(key, r, now)
    s.fits, s.cause = r.alg.check(s, r, now)
    fits = fits and (s.fits or r.shadow)
    states[i] = s
  end
  local record = fits or always
  for i = 1, #keys do
    local s, r = states[i], rules[i]
    local a, retry, at = r.alg, 0, 0
    if not fits or always or not s.fits then -- a group that records whatever it holds may be denied by another
      retry = a.wait(s, r, record and r.cost or 0, now)
    end
    local pending, before = 0, 0
    if group then
      local _
      _, _, before = a.figures(s, r, now, 0)
    end
    if record and dry then
      pending = r.cost
    elseif record then
      at = a.write(s, r, now)
    end
    local used, remaining, after = a.figures(s, r, now, pending)
    out[#out + 1] = (s.cause == 'limit' and 0) or (s.cause == 'gap' and -1) or 1
    out[#out + 1] = used
    out[#out + 1] = remaining
    out[#out + 1] = retry
    out[#out + 1] = after
    if group then
      out[#out + 1] = before
      out[#out + 1] = at
    end
  end
end
