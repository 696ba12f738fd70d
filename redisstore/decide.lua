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
--          record), "record" (always record), or "group": "allow" for one
--          slot group of a policy whose rules span several hash tags (see
--          crossslot.go), which also says how to undo the write.
-- ARGV[2]  cost, >= 1.
-- ARGV[3]  the time in µs, or "" to use Redis's TIME.
-- ARGV[4..] three per rule, in KEYS order: window µs, limit, min gap µs.
--
-- Reply: {now, then four per rule: fits (1 or 0), used after recording,
-- retry-after µs (0 when it fits), reset-after µs (0 when the window is
-- empty)}. In "group" mode it goes on with whether the request was recorded
-- (1 or 0), then three per rule: the reset-after µs from before the write,
-- and the end and score of the entry written (0 and 0 if none), which
-- rollback.lua takes to remove it.
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

-- The reply doubles as the per-rule state of the first pass (fits, used,
-- retry-after), and st holds the rest, five values per rule in KEYS order:
-- window, gap, the newest entry's end and time (nil when the key holds no
-- entry), and whether that entry is in the window. Two tables in all, since
-- a decision's cost is mostly in what it allocates and converts.
local n = #KEYS
local reply, st = {now}, {}

-- seen holds, per key this script call wrote, the key's state after the
-- write, valid at the same time for the same window: {now, window, end and
-- time of the newest entry, end, cost and time of the oldest counted entry,
-- PEXPIRE's milliseconds}. A later decision of the same call (batch.lua
-- shares one seen between its requests) takes its reads from there, and
-- does not set again the expiry that the earlier write set.
local seen = {} -- SEEN
local allfit = true
for i = 1, n do
  local key = KEYS[i]
  local j = 3 * i + 1
  local w, limit, g = tonumber(ARGV[j]), tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2])
  local cutoff = now - w
  local t, ts, lv, u = 0, nil, false, 0
  local firstts, firstcost

  local firstend
  local v = seen[key]
  if v and v[1] == now and v[2] == w then
    -- Written by this call at this time: live, and as the write left it.
    t, ts, lv, firstend, firstcost, firstts = v[3], v[4], true, v[5], v[6], v[7]
  else
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
      firstend, firstcost = parse(first[1])
      firstts = tonumber(first[2])
    end
  end
  if lv then
    u = t - (firstend - firstcost)
  end

  local ok, rt = 1, 0
  if u + cost > limit then
    ok = 0
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
    ok = 0
    rt = math.max(rt, ts + g - now)
  end
  allfit = allfit and ok == 1
  reply[4 * i - 2], reply[4 * i - 1], reply[4 * i], reply[4 * i + 1] = ok, u, rt, 0
  local b = 7 * i
  st[b - 6], st[b - 5], st[b - 4], st[b - 3], st[b - 2], st[b - 1], st[b] = w, g, t, ts, lv, firstend, firstcost
  st[-i] = firstts
end

local group = mode == 'group'
local record = mode == 'record' or ((mode == 'allow' or group) and allfit)
local undo = {} -- "group" mode's three values per rule
for i = 1, n do
  local b = 7 * i
  local key, w, ts = KEYS[i], st[b - 6], st[b - 3]
  if group then
    undo[3 * i - 2], undo[3 * i - 1], undo[3 * i] = 0, 0, 0
    if st[b - 2] then
      undo[3 * i - 2] = ts + w - now
    end
  end
  if record then
    -- Never let a key's time go backwards.
    local at = now
    if ts and ts > at then
      at = ts
    end
    local t, fe, fc, fts = st[b - 4], st[b - 1], st[b], st[-i]
    local v = seen[key]
    local again = v and v[1] == now and v[2] == w
    if not st[b - 2] then
      -- Nothing counts any more: restart the key's ends at 0.
      if ts then
        call('DEL', key)
      end
      t = 0
      fe, fc, fts = cost, cost, at
    elseif floor(t / TRIM) ~= floor((t + cost) / TRIM) then
      -- Trim the entries that left the window once per TRIM units of cost
      -- recorded: they no longer count, and a few more kept for a while
      -- save a command on most writes.
      call('ZREMRANGEBYSCORE', key, '-inf', int(now - w))
    end
    t = t + cost
    reply[4 * i - 1] = reply[4 * i - 1] + cost
    call('ZADD', key, int(at), enc(t) .. ':' .. int(cost))
    local ms = math.ceil((w + st[b - 5]) / 1000)
    if not (again and v[8] == ms) then
      call('PEXPIRE', key, int(ms))
    end
    if not v then
      v = {}
      seen[key] = v
    end
    v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8] = now, w, t, at, fe, fc, fts, ms
    reply[4 * i + 1] = at + w - now
    if group then
      undo[3 * i - 1], undo[3 * i] = t, at
    end
  elseif st[b - 2] then
    reply[4 * i + 1] = ts + w - now
  end
end
if group then
  reply[#reply + 1] = record and 1 or 0
  for k = 1, 3 * n do
    reply[#reply + 1] = undo[k]
  end
end
return reply
