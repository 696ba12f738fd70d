-- decision.lua: the decision of one request over the windows of its rules
-- (window.lua): every rule is checked, then the request is recorded in all
-- of them or in none, and the reply says what the decision leaves.

-- rules reads n rules with next (see reader): four each, the window µs,
-- the limit, the minimum gap µs and the cost; flags holds one character per
-- rule, "s" for a shadow rule ("" when there is none).
local function rules(next, n, flags)
  local out = {}
  for i = 1, n do
    local w, limit, gap, cost = tonumber(next()), tonumber(next()), tonumber(next()), tonumber(next())
    out[i] = {w = w, limit = limit, gap = gap, cost = cost, shadow = byte(flags, i) == 115, -- 's'
      ttl = int(ceil((w + gap) / 1000))}
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
-- mode, and appends four numbers per rule to out: status, used, retry-after
-- µs and reset-after µs, as the decision leaves them; a group mode two more:
-- the reset-after µs before any write, and the time (µs) it recorded at, 0
-- for none. The request is recorded when every rule but the shadow ones
-- fits (or always, in record modes).
local function decide(keys, rules, mode, now, out)
  local always, dry, group = modes(mode)
  local fits = true
  for i, key in ipairs(keys) do
    local r = rules[i]
    local s = load(key, r.w, now)
    s.fits, s.cause = check(s, r, now)
    fits = fits and (s.fits or r.shadow)
    states[i] = s
  end
  local record = fits or always
  for i = 1, #keys do
    local s, r = states[i], rules[i]
    local retry, reset, at = 0, 0, 0
    if not fits or always or not s.fits then -- a group that records whatever it holds may be denied by another
      retry = max(waits(s, r, record and r.cost or 0, now))
    end
    if s.live then reset = s.at + s.w - now end
    local used, after = s.used, reset
    if record and dry then
      used, after = used + r.cost, max(now, s.at or now) + s.w - now
    elseif record then
      at = write(s, r, now)
      used, after = s.used, at + s.w - now
    end
    out[#out + 1] = (s.cause == 'limit' and 0) or (s.cause == 'gap' and -1) or 1
    out[#out + 1] = used
    out[#out + 1] = retry
    out[#out + 1] = after
    if group then
      out[#out + 1] = reset
      out[#out + 1] = at
    end
  end
end
