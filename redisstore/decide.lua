-- decide.lua decides one request against every rule of a policy, atomically:
-- it checks every rule, then records the request in every rule's window or
-- in none, according to the mode.
--
-- KEYS[i]  the window of rule i: a sorted set of entries. An entry's score is
--          its time in µs; its member is "<end>:<cost>", where end is the
--          key's running total of cost up to and including the entry,
--          written so that byte order is numeric order (see enc). Ends are
--          unique and grow with time, so entries never collide, ties in score
--          sort in recording order, and an entry of cost N is one member.
-- ARGV[1]  mode: "allow" (record only if every rule fits), "peek" (never
--          record) or "record" (always record).
-- ARGV[2]  cost, >= 1.
-- ARGV[3]  the time in µs, or "" to use Redis's TIME.
-- ARGV[4..] three per rule, in KEYS order: window µs, limit, min gap µs.
--
-- Reply: {now, then four per rule: fits (1 or 0), used after recording,
-- retry-after µs (0 when it fits), reset-after µs (0 when the window is
-- empty)}.
--
-- The window at time T is (T-W, T]. The entries it counts are the newest
-- ones, so used = end(newest) - (end(oldest counted) - cost(oldest counted)):
-- two reads, however many entries there are. Recording trims the entries
-- that left the window, except that the newest entry is kept until the key
-- expires, window + gap after its last write, to enforce the min gap. A
-- key's ends restart at 0 whenever its window is empty.

local mode = ARGV[1]
local cost = tonumber(ARGV[2])
local now
if ARGV[3] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[3])
end

-- Numbers are passed to Redis formatted as integers: Lua's own conversion
-- would write large ones in exponent form.
local function int(n)
  return string.format('%d', n)
end

-- enc writes an end as a letter giving its digit count followed by its
-- digits (5 -> "a5", 42 -> "b42"), so ends sort as numbers.
local function enc(n)
  local s = int(n)
  return string.char(96 + #s) .. s
end

-- member returns the member of an entry; parse returns its end and cost.
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
  local j = 3 * i + 1
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
    -- Walk the counted entries, oldest first, until enough cost has been
    -- freed; each entry frees at least 1, so at most need are read.
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

local record = mode == 'record' or (mode == 'allow' and allfit)
local reply = {now}
for i = 1, n do
  local key, r = KEYS[i], rules[i]
  local reset = 0
  if record then
    -- Never let a key's time go backwards.
    local ts = now
    if r.topts and r.topts > ts then
      ts = r.topts
    end
    if not r.live then
      -- Nothing counts any more: restart the key's ends at 0.
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
  elseif r.live then
    reset = r.topts + r.window - now
  end
  local fits = 0
  if r.fits then
    fits = 1
  end
  reply[#reply + 1] = fits
  reply[#reply + 1] = r.used
  reply[#reply + 1] = r.retry
  reply[#reply + 1] = reset
end
return reply
