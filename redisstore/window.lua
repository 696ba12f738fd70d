-- window.lua: the exact log's codec, the one place a window is read
-- (logRead, logFreed, logEntries), written (logWrite) and adjusted
-- (logResize, logRemove). A window is a sorted set holding
--   * one entry per instant the key recorded something at: score, the
--     instant in µs after the key's epoch; member, the key's running total of
--     cost up to and including that instant (its end), then ":<cost>" when
--     the instant's cost is not 1 ("7": cost 1, end 7; "12:5": cost 5, end
--     12). Requests recorded at one instant share its entry. An entry a
--     lease settled to 0 (finish.lua) stays, its end its predecessor's, and
--     is "<end>:0:<its time, absolute µs>" ("12:0:1767225600000000"): ends
--     are then not unique, members still are, so an entry is told by its
--     member, never by its end;
--   * the epoch entry, "@<epoch µs>" scored +inf: always last, so ZRANGE -2
--     -1 reads the newest entry and the epoch at once.
-- Ends and epoch restart when nothing counts any more, and a key that never
-- empties is rebased before its scores pass 2^30 µs: both stay small. At
-- time T the window is (T-W, T]; it counts the newest entries: used =
-- end(newest) - end(oldest counted) + cost(oldest counted), or end(newest)
-- while the epoch is in the window (nothing has left it). The newest entry
-- stays until the key expires, W + gap after it, for the minimum gap.

local TRIM = 8             -- units of cost recorded between two trims of what left the window
local REBASE = 1073741824  -- 2^30 µs (about 18 min): the score past which a key gets a new epoch

-- member returns the member of an entry of end e and cost c; parse reads
-- one. Members of cost 1 with small ends, most of them, are kept in ends and
-- numbers: a function (function.go) formats and parses each once.
local ends, numbers = {}, {}

local function member(e, c)
  if c == 1 then
    local m = ends[e]
    if not m then
      m = format('%d', e)
      if e <= 4096 then ends[e], numbers[m] = m, e end
    end
    return m
  end
  return format('%d:%d', e, c)
end

local function parse(m)
  local e = numbers[m] or tonumber(m)
  if e then return e, 1 end
  local i = find(m, ':', 1, true)
  return tonumber(sub(m, 1, i - 1)), tonumber(sub(m, i + 1)) or 0 -- "e:0:t" is no number
end

-- reend returns member m with its end replaced by e, its cost (and a zero
-- entry's time) kept.
local function reend(m, e)
  local i = find(m, ':', 1, true)
  if not i then return member(e, 1) end
  return format('%d', e) .. sub(m, i)
end

-- newest returns a key's epoch, its newest entry's member and time (absolute
-- µs); nil when there is no key. A key that is not a window is an error.
local function newest(key)
  local r = call('ZRANGE', key, '-2', '-1', 'WITHSCORES')
  local last = r[3] or r[1]
  if not last then return nil end
  local epoch = byte(last, 1) == 64 and tonumber(sub(last, 2)) -- '@'
  if not epoch then
    error('key ' .. key .. ' is not a sluice window (its last member is "' .. last .. '"): ' ..
      'remove it or use another prefix', 0)
  end
  if not r[3] then return epoch end
  return epoch, r[1], epoch + r[2]
end

-- rewrite moves list's entries (ZRANGE's member, score pairs) ds µs earlier,
-- their ends by de: it removes them and gone, then (a new end may equal an
-- old one) adds them and add's pairs, in commands of 2,000 arguments at most.
local function rewrite(key, list, ds, de, gone, add)
  for k = 1, #list, 2 do
    local m, score = unpack(list, k, k + 1)
    gone[#gone + 1] = m
    add[#add + 1], add[#add + 2] = format('%d', score - ds), reend(m, parse(m) + de)
  end
  for k = 1, #gone, 2000 do call('ZREM', key, unpack(gone, k, min(k + 1999, #gone))) end
  for k = 1, #add, 2000 do call('ZADD', key, unpack(add, k, min(k + 1999, #add))) end
end

-- A window's state: key, w (window µs), epoch (nil: no key); the newest
-- entry's m (member), at (time), e (end), c (cost) (m, at nil: none); used,
-- the cost counted at the state's time; the oldest counted entry's om, oe,
-- oc (false, 0, 0 while the epoch is in the window); dirty, the newest
-- entry grew and Redis does not hold it yet. A key a call wrote keeps its
-- state in cache: a later request of the call at the same time reads
-- nothing, one at the same instant grows the newest entry in the state
-- alone (flush writes it at the call's end or before the key is read
-- again). Cached states hold for cacheNow: a request of another time flushes them all.
local cache, dirty, cacheNow = nil, {}, nil

local function flush(s)
  if s.dirty then
    local old = s.m
    call('ZREM', s.key, old)
    s.m, s.dirty = member(s.e, s.c), false
    call('ZADD', s.key, format('%d', s.at - s.epoch), s.m)
    if s.om == old then s.om = s.m end
  end
end

local function flushAll()
  for i = 1, #dirty do
    flush(dirty[i])
    dirty[i] = nil
  end
end

-- logRead returns key's state for a window of w µs at now, read from Redis.
local function logRead(key, w, now)
  local epoch, m, at = newest(key)
  local e, c, used, om, oe, oc = 0, 0, 0, false, 0, 0
  if at then
    e, c = parse(m)
    if at > now - w then -- the newest entry is in the window
      used = e
      if epoch <= now - w then -- something left the window: the oldest counted entry
        om = call('ZRANGEBYSCORE', key, format('(%d', now - w - epoch), '(+inf', 'LIMIT', '0', '1')[1]
        oe, oc = parse(om)
        used = e - oe + oc
      end
    end
  end
  logTaken = logTaken + 1
  local s = logStates[logTaken]
  if s then
    s.key, s.w, s.epoch, s.m, s.at, s.e, s.c, s.used, s.om, s.oe, s.oc, s.dirty = key, w, epoch, m, at, e, c, used, om, oe, oc, false
  else
    s = {key = key, w = w, epoch = epoch, m = m, at = at, e = e, c = c, used = used, om = om, oe = oe, oc = oc, dirty = false}
    if logTaken <= POOLED then logStates[logTaken] = s end
  end
  return s
end

-- logFreed returns when enough of s's oldest counted entries leave to free
-- need units (need <= s.used), walking them need at a time: one settled to
-- 0 frees nothing.
local function logFreed(s, need, now)
  if s.oc >= need then
    if s.om == s.m then return s.at + s.w end -- the oldest counted entry is the newest
    return s.epoch + call('ZSCORE', s.key, s.om) + s.w
  end
  flush(s)
  local from = format('(%d', now - s.w - s.epoch)
  while true do
    local list = call('ZRANGEBYSCORE', s.key, from, '(+inf', 'WITHSCORES', 'LIMIT', '0', format('%d', need))
    for k = 1, #list, 2 do
      local m, score = unpack(list, k, k + 1)
      if parse(m) - s.oe + s.oc >= need then return s.epoch + score + s.w end
    end
    if #list < 2 * need then break end
    from = '(' .. list[#list]
  end
  error('window ' .. s.key .. ' counts ' .. s.used .. ' but its entries free less than ' .. need, 0)
end

-- logWrite records rule r's cost in s's key at now (never before its newest
-- entry), caches s, and returns that time, used and reset-after µs. The key
-- expires W + gap after a write (but one into the newest entry's instant):
-- on Redis's clock at r.expiry, kept for r.at; on its own r.ttl ms on.
local function logWrite(s, r, now)
  local cost, key, sat, w, e, oe = r.cost, s.key, s.at, s.w, s.e, s.oe
  local at = sat or now
  if at < now then at = now end
  local used = s.used + cost
  s.at, s.used = at, used
  if cache[key] == s then -- this call's state at this instant: grown in the state alone
    if s.om == s.m then s.oe, s.oc = e + cost, s.c + cost end
    s.e, s.c = e + cost, s.c + cost
    if not s.dirty then s.dirty, dirty[#dirty + 1] = true, s end
    return at, used, at + w - now
  end
  cache[key] = s
  local epoch, renew = s.epoch, at ~= sat -- a write into the newest entry's instant: its write set the expiry
  if not (sat and sat > now - w) then -- nothing counts: ends and epoch restart
    if epoch then call('DEL', key) end
    local m = member(cost, cost)
    s.e, s.c, s.oe, s.oc, s.epoch, s.m, s.om = cost, cost, cost, cost, at, m, m
    call('ZADD', key, '0', m, '+inf', '@' .. format('%d', at))
  else
    if s.om and at - epoch >= REBASE and at - epoch >= 2 * (w + r.gap) then
      -- Rebase: the key anew (every member goes, its expiry too), from a new
      -- epoch (the oldest counted entry's time), ends counted from the cost
      -- before that entry.
      local shift, before = tonumber(call('ZSCORE', key, s.om)), oe - s.oc
      call('ZREMRANGEBYSCORE', key, '-inf', format('%d', now - w - epoch))
      local gone, add = {'@' .. format('%d', epoch)}, {'+inf', '@' .. format('%d', epoch + shift)}
      rewrite(key, call('ZRANGE', key, '0', '-2', 'WITHSCORES'), shift, -before, gone, add)
      epoch, e, oe = epoch + shift, e - before, oe - before
      s.epoch, s.e, s.oe, s.m, s.om = epoch, e, oe, reend(s.m, e), reend(s.om, oe)
      renew = true
    end
    local c, oldest = cost, at == sat and s.om == s.m -- oldest: the entry written to is the oldest counted
    if at == sat then
      call('ZREM', key, s.m)
      c = s.c + cost
    elseif epoch <= now - w and e % TRIM + cost >= TRIM then -- a multiple of TRIM passed
      call('ZREMRANGEBYSCORE', key, '-inf', format('%d', now - w - epoch))
    end
    e = e + cost
    local m = member(e, c)
    s.e, s.c, s.m = e, c, m
    if oldest then s.om, s.oe, s.oc = m, e, c end
    call('ZADD', key, format('%d', at - epoch), m)
  end
  if renew and r.ttl then
    call('PEXPIRE', key, r.ttl)
  elseif renew then
    if r.at ~= at then r.at, r.expiry = at, format('%d', ceil((at + r.life) / 1000)) end
    call('PEXPIREAT', key, r.expiry)
  end
  return at, used, at + w - now
end

-- entryAt returns the score and member of key's entry of time at (abs. µs).
local function entryAt(key, at)
  local epoch = newest(key)
  if not epoch or at < epoch then return nil end
  local score = format('%d', at - epoch)
  return score, call('ZRANGEBYSCORE', key, score, score)[1]
end

-- logResize adds delta to the cost of key's entry recorded at at (absolute
-- µs), never below 0, while it counts in the window of w µs at now; the
-- ends from it on move by delta. An entry of cost 0 stays ("<end>:0:<time>"),
-- as memstore's does: a minimum gap still counts from it.
local function logResize(key, w, at, delta, now)
  if at <= now - w then return end
  local score, m = entryAt(key, at)
  if not m then return end
  local e, c = parse(m)
  if c + delta < 0 then delta = -c end
  if delta == 0 then return end
  local gone, add = {m}, {score, format('%d:0:%d', e + delta, at)} -- settled to 0: its time keeps it apart
  if c + delta > 0 then add[2] = member(e + delta, c + delta) end
  rewrite(key, call('ZRANGEBYSCORE', key, '(' .. score, '(+inf', 'WITHSCORES'), 0, delta, gone, add)
end

-- logRemove takes cost out of key's entry of time at (absolute µs), and
-- reports whether it did (not when it holds less); an entry left empty goes.
-- Later ends still count the cost until they leave the window: it errs high.
local function logRemove(key, at, cost)
  local score, m = entryAt(key, at)
  if not m then return false end
  local e, c = parse(m)
  if c < cost then return false end
  call('ZREM', key, m)
  if c > cost then
    call('ZADD', key, score, member(e - cost, c - cost))
  elseif call('ZCARD', key) == 1 then
    call('DEL', key) -- the epoch alone is left
  end
  return true
end

-- logEntries returns the times (absolute µs) and costs of key's entries.
local function logEntries(key)
  local epoch, times, costs = newest(key), {}, {}
  local list = epoch and call('ZRANGE', key, '0', '-2', 'WITHSCORES') or {}
  for k = 1, #list, 2 do
    local m, score = unpack(list, k, k + 1)
    local _, c = parse(m)
    times[#times + 1], costs[#costs + 1] = epoch + tonumber(score), c
  end
  return times, costs
end
