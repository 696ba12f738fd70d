-- decision.lua: the decision of one request over the windows of its rules
-- (window.lua): every rule is checked, then the request is recorded in all
-- of them or in none, and the reply says what the decision leaves.

-- rules reads n rules with next (see reader): window µs, limit, gap µs each.
local function rules(next, n)
  local out = {}
  for i = 1, n do
    local w, limit, gap = tonumber(next()), tonumber(next()), tonumber(next())
    out[i] = {w = w, limit = limit, gap = gap, ttl = int(ceil((w + gap) / 1000))}
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

-- decide decides a request of cost at now over keys, the windows of rules,
-- in mode, and appends four numbers per rule to out: status, used,
-- retry-after µs and reset-after µs, as the decision leaves them; a group
-- mode two more: the reset-after µs before any write, and the time (µs) it
-- recorded at, 0 for none.
local function decide(keys, rules, mode, cost, now, out)
  local always, dry, group = modes(mode)
  local fits = true
  for i, key in ipairs(keys) do
    local s = load(key, rules[i].w, now)
    s.fits, s.cause = check(s, rules[i], cost, now)
    fits = fits and s.fits
    states[i] = s
  end
  local record = fits or always
  for i = 1, #keys do
    local s, r = states[i], rules[i]
    local retry, reset, at = 0, 0, 0
    if not fits or always then -- a group that records whatever it holds may be denied by another
      retry = max(waits(s, r, cost, record and cost or 0, now))
    end
    if s.live then reset = s.at + s.w - now end
    local used, after = s.used, reset
    if record and dry then
      used, after = used + cost, max(now, s.at or now) + s.w - now
    elseif record then
      at = write(s, r, cost, now)
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
