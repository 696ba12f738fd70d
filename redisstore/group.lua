-- group.lua decides one slot group of a policy whose rules span several hash
-- tags (see crossslot.go): it checks every rule of the group and, when all
-- fit, records the request in each of them, like decide.lua in "allow" mode,
-- and also returns what identifies each entry it wrote, so that the entry
-- can be removed by rollback.lua if a later group denies the request.
--
-- Entries are those of decide.lua, which writes the same keys in "peek" and
-- "record" mode: score = time in µs, member = enc(end) .. ':' .. cost, where
-- end is the key's running total of cost. The two scripts must agree on it.
--
-- KEYS[i]  the window of rule i of the group.
-- ARGV[1]  cost, >= 1.
-- ARGV[2]  the time in µs, or "" to use Redis's TIME.
-- ARGV[3..] three per rule, in KEYS order: window µs, limit, min gap µs.
--
-- Reply: {now, recorded (1 or 0), then six per rule: fits, used (after
-- recording when recorded), retry-after µs, reset-after µs, reset-after µs
-- as it was before recording, end of the entry written (0 if none), and the
-- entry's score; the score is the last value}.

local cost = tonumber(ARGV[1])
local now
if ARGV[2] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[2])
end

local function int(n)
  return string.format('%d', n)
end

local function enc(n)
  local s = int(n)
  return string.char(96 + #s) .. s
end

local function member(e, c)
  return enc(e) .. ':' .. int(c)
end

local function parse(m)
  local len = string.byte(m, 1) - 96
  return tonumber(string.sub(m, 2, 1 + len)), tonumber(string.sub(m, 3 + len))
end

local n = #KEYS
local rules = {}
local allfit = true
for i = 1, n do
  local key = KEYS[i]
  local j = 3 * i
  local r = {window = tonumber(ARGV[j]), limit = tonumber(ARGV[j + 1]), gap = tonumber(ARGV[j + 2])}
  r.cutoff = now - r.window
  r.top, r.used = 0, 0

  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if #top == 2 then
    r.top = parse(top[1])
    r.topts = tonumber(top[2])
    r.live = r.topts > r.cutoff
  end
  if r.live then
    local first = redis.call('ZRANGEBYSCORE', key, '(' .. int(r.cutoff), '+inf', 'LIMIT', 0, 1)
    local e, c = parse(first[1])
    r.used = r.top - (e - c)
  end

  r.fits, r.retry = true, 0
  if r.used + cost > r.limit then
    r.fits = false
    local need = r.used + cost - r.limit
    local entries = redis.call('ZRANGEBYSCORE', key, '(' .. int(r.cutoff), '+inf', 'WITHSCORES', 'LIMIT', 0, int(need))
    local freed, at = 0, r.topts or now
    for k = 1, #entries, 2 do
      local _, c = parse(entries[k])
      freed = freed + c
      if freed >= need then
        at = tonumber(entries[k + 1])
        break
      end
    end
    r.retry = at + r.window - now
  end
  if r.gap > 0 and r.topts and now - r.topts < r.gap then
    r.fits = false
    r.retry = math.max(r.retry, r.topts + r.gap - now)
  end
  allfit = allfit and r.fits
  rules[i] = r
end

local reply = {now, 0}
if allfit then
  reply[2] = 1
end
for i = 1, n do
  local key, r = KEYS[i], rules[i]
  local before = 0
  if r.live then
    before = r.topts + r.window - now
  end
  local reset, written, ts = before, 0, 0
  if allfit then
    ts = now
    if r.topts and r.topts > ts then
      ts = r.topts
    end
    if not r.live then
      if r.topts then
        redis.call('DEL', key)
      end
      r.top = 0
    else
      redis.call('ZREMRANGEBYSCORE', key, '-inf', int(r.cutoff))
    end
    r.top = r.top + cost
    r.used = r.used + cost
    redis.call('ZADD', key, int(ts), member(r.top, cost))
    redis.call('PEXPIRE', key, int(math.ceil((r.window + r.gap) / 1000)))
    reset = ts + r.window - now
    written = r.top
  end
  local fits = 0
  if r.fits then
    fits = 1
  end
  reply[#reply + 1] = fits
  reply[#reply + 1] = r.used
  reply[#reply + 1] = r.retry
  reply[#reply + 1] = reset
  reply[#reply + 1] = before
  reply[#reply + 1] = written
  reply[#reply + 1] = ts
end
return reply
