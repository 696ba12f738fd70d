-- decision.lua: the decision of one request over the windows of its rules:
-- every rule is checked by its algorithm (window.lua's log, gcra.lua,
-- counter.lua), then the request is recorded in all of them or in none,
-- and the reply says what the decision leaves.

-- An algorithm is a table of five steps: load(key, r, now), the key's
-- state; check(s, r, now), how r stands (0 it fits, 1 no room for its
-- cost, 2 too soon: its minimum gap has not passed); wait(s, r, pending,
-- now), how long from now until r fits once pending units are recorded at
-- now; write(s, r, now), which records r's cost and returns the time it
-- recorded at; and figures(s, r, now, pending), used and reset-after µs
-- with pending more units. The log's steps are window.lua's; GCRA's and the
-- sliding counter's are made when a rule first needs them. A rule's kind
-- (see rules) names its algorithm.
local log = {load = logLoad, check = logCheck, wait = logWait, write = logWrite, figures = logFigures}
local gcraSteps, counterSteps

-- rules reads n rules from blob at pos (see decide.lua), each a kind and
-- four numbers: the window µs, the limit, the minimum gap µs (a GCRA rule's
-- burst instead) and the cost. A kind is 0 the log, 1 GCRA, 2 the sliding
-- counter, plus 16 in shadow mode. It returns the rules and the position
-- after them.
local function rules(blob, pos, n, own)
  local list = {}
  for i = 1, n do
    local kind, w, limit, third, cost
    kind, w, limit, third, cost, pos = unpackInts('<i4i8i8i8i8', blob, pos)
    local shadow = kind >= 16
    if shadow then kind = kind - 16 end
    local r = {alg = log, w = w, limit = limit, gap = 0, burst = 0, cost = cost, shadow = shadow, iv = 0,
      own = own, ttl = false, life = w + third, at = false, expiry = false}
    if kind == 0 then
      r.gap = third
      if own then r.ttl = format('%d', ceil(r.life / 1000)) end
    elseif kind == 1 then
      gcraSteps = gcraSteps or gcra()
      r.alg, r.burst, r.iv = gcraSteps, third, w -- a limit of 0 admits nothing
      if limit > 0 then r.iv = idiv(w + limit - 1, limit) end
    elseif kind == 2 then
      counterSteps = counterSteps or counter()
      r.alg = counterSteps
    else
      error('unknown rule kind ' .. kind, 0)
    end
    list[i] = r
  end
  return list, pos
end

local states, codes = {}, {} -- decide's, per rule of the request

-- decide decides a request of shape sh (decide.lua: its rules, n of them,
-- its modes and its time) over keys[k + 1] to keys[k + n], and sets three
-- numbers per rule from out[o + 1] on: used, retry-after µs times 4 plus
-- the rule's status (check's), and reset-after µs, as the decision leaves
-- them; in group mode two more: the reset-after µs before any write, and
-- the time (µs) it recorded at, 0 for none. It returns the last index it
-- set. The request is recorded when every rule but the shadow ones fits
-- (or always, in record mode).
local function decide(keys, k, sh, out, o)
  local list, n, now = sh.rules, sh.n, sh.now
  local fits = true
  for i = 1, n do
    local r = list[i]
    local a = r.alg
    local s = a.load(keys[k + i], r, now)
    local code = a.check(s, r, now)
    states[i], codes[i] = s, code
    if code ~= 0 and not r.shadow then fits = false end
  end
  local always, group = sh.always, sh.group
  local record, write = fits or always, not sh.dry
  for i = 1, n do
    local s, r, code = states[i], list[i], codes[i]
    local a, retry, at, pending = r.alg, 0, 0, 0
    if not fits or always or code ~= 0 then -- a group that records whatever it holds may be denied by another
      retry = a.wait(s, r, record and r.cost or 0, now)
    end
    local before
    if group then
      local _
      _, before = a.figures(s, r, now, 0)
    end
    if record then
      if write then
        at = a.write(s, r, now)
      else
        pending = r.cost
      end
    end
    local used, after = a.figures(s, r, now, pending)
    out[o + 1], out[o + 2], out[o + 3] = used, retry * 4 + code, after
    o = o + 3
    if group then
      out[o + 1], out[o + 2] = before, at
      o = o + 2
    end
  end
  return o
end
