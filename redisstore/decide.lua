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
local call = redis.call
local now
if ARGV[3] == '' then
  local t = call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[3])
end

local format, byte, sub, char = string.format, string.byte, string.sub, string.char

-- Numbers are passed to Redis formatted as integers: Lua's own conversion
-- would write large ones in exponent form, and Redis's conversion of a Lua
-- number is slower than string.format's of an integer.
local function int(n)
  return format('%d', n)
end

-- enc writes an end as a letter giving its digit count followed by its
-- digits (5 -> "a5", 42 -> "b42"), so ends sort as numbers.
local function enc(n)
  local s = int(n)
  return char(96 + #s) .. s
end

-- parse returns the end and cost of a member.
local function parse(m)
  local len = byte(m, 1) - 96
  return tonumber(sub(m, 2, 1 + len)), tonumber(sub(m, 3 + len))
end

local floor = math.floor

-- TRIM is how many units of cost a key records between two trims.
local TRIM = 8

-- Per rule, in KEYS order: the newest entry's end and time (topts nil when
-- the key holds no entry), whether it is in the window, the cost counted,
-- whether the request fits and the retry-after.
local n = #KEYS
local window, gap, top, topts, live, used, fits, retry = {}, {}, {}, {}, {}, {}, {}, {}
local allfit = true
for i = 1, n do
  local key = KEYS[i]
  local j = 3 * i + 1
  local w, limit, g = tonumber(ARGV[j]), tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2])
  local cutoff = now - w
  local t, ts, lv, u = 0, nil, false, 0
  local firstts, firstcost

  local newest = call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
  if newest[1] then
    t = parse(newest[1])
    ts = tonumber(newest[2])
    lv = ts > cutoff
  end
  if lv then
    -- The oldest counted entry, with its time: enough for the retry-after
    -- of a request that its cost alone makes room for.
    local first = call('ZRANGEBYSCORE', key, '(' .. int(cutoff), '+inf', 'WITHSCORES', 'LIMIT', '0', '1')
    local e, c = parse(first[1])
    u = t - (e - c)
    firstts, firstcost = tonumber(first[2]), c
  end

  local ok, rt = true, 0
  if u + cost > limit then
    ok = false
    local need = u + cost - limit
    local at = ts or now
    if firstcost and firstcost >= need then
      at = firstts
    else
      -- Walk the counted entries, oldest first, until enough cost has
      -- been freed; each entry frees at least 1, so at most need are read.
      local entries = call('ZRANGEBYSCORE', key, '(' .. int(cutoff), '+inf', 'WITHSCORES', 'LIMIT', '0', int(need))
      local freed = 0
      for k = 1, #entries, 2 do
        local _, c = parse(entries[k])
        freed = freed + c
        if freed >= need then
          at = tonumber(entries[k + 1])
          break
        end
      end
    end
    rt = at + w - now
  end
  if g > 0 and ts and now - ts < g then
    ok = false
    rt = math.max(rt, ts + g - now)
  end
  allfit = allfit and ok
  window[i], gap[i], top[i], topts[i], live[i], used[i], fits[i], retry[i] = w, g, t, ts, lv, u, ok, rt
end

local record = mode == 'record' or (mode == 'allow' and allfit)
local reply = {now}
for i = 1, n do
  local key, w, ts = KEYS[i], window[i], topts[i]
  local reset = 0
  if record then
    -- Never let a key's time go backwards.
    local at = now
    if ts and ts > at then
      at = ts
    end
    local t = top[i]
    if not live[i] then
      -- Nothing counts any more: restart the key's ends at 0.
      if ts then
        call('DEL', key)
      end
      t = 0
    elseif floor(t / TRIM) ~= floor((t + cost) / TRIM) then
      -- Trim the entries that left the window once per TRIM units of cost
      -- recorded: they no longer count, and a few more kept for a while
      -- save a command on most writes.
      call('ZREMRANGEBYSCORE', key, '-inf', int(now - w))
    end
    t = t + cost
    used[i] = used[i] + cost
    call('ZADD', key, int(at), enc(t) .. ':' .. int(cost))
    call('PEXPIRE', key, int(math.ceil((w + gap[i]) / 1000)))
    reset = at + w - now
  elseif live[i] then
    reset = ts + w - now
  end
  local f = 0
  if fits[i] then
    f = 1
  end
  reply[4 * i - 2] = f
  reply[4 * i - 1] = used[i]
  reply[4 * i] = retry[i]
  reply[4 * i + 1] = reset
end
return reply
