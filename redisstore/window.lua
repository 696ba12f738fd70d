-- window.lua: a rule's window, the exact log, and how one is read, checked
-- and written. decide.lua, batch.lua, rollback.lua and inspect.lua are
-- prelude.lua, this file, decision.lua, then their own part (scripts.go).
--
-- A window is a sorted set holding
--   * one entry per instant the key recorded something at: score, the
--     instant in µs after the key's epoch; member, the key's running total of
--     cost up to and including that instant (its end), then ":<cost>" when
--     the instant's cost is not 1 ("7": cost 1, end 7; "12:5": cost 5, end
--     12). Requests recorded at one instant share its entry;
--   * the epoch entry, "@<epoch µs>" scored +inf: always last, so ZRANGE -2
--     -1 reads the newest entry and the epoch at once.
-- Ends and epoch restart when nothing counts any more, and a key that never
-- empties is rebased before its scores pass 2^30 µs: both stay small.
--
-- At time T the window is (T-W, T]; it counts the newest entries: used =
-- end(newest) - end(oldest counted) + cost(oldest counted), or end(newest)
-- while the epoch is in the window (nothing has left it). The newest entry
-- stays until the key expires, W + gap after it, for the minimum gap.

local TRIM = 8             -- units of cost recorded between two trims of what left the window
local REBASE = 1073741824  -- 2^30 µs (about 18 min): the score past which a key gets a new epoch

-- A rule, one window of a request, is a record of w (the window, µs),
-- limit, gap (the minimum gap, µs), cost (what the request counts there),
-- shadow (its denial does not deny) and ttl (a key's lifetime after a
-- write, ms, as a string).

-- member returns the member of an entry of end e and cost c; parse reads one.
local function member(e, c)
  if c == 1 then return int(e) end
  return int(e) .. ':' .. int(c)
end

local function parse(m)
  local e = tonumber(m)
  if e then return e, 1 end
  local i = find(m, ':', 1, true)
  return tonumber(sub(m, 1, i - 1)), tonumber(sub(m, i + 1))
end

-- newest returns a key's epoch, its newest entry's member and time (absolute
-- µs), and whether the key exists. A key that is not a window is an error.
local function newest(key)
  local r = call('ZRANGE', key, '-2', '-1', 'WITHSCORES')
  local last = r[3] or r[1]
  if not last then return nil, nil, nil, false end
  local epoch = byte(last, 1) == 64 and tonumber(sub(last, 2)) -- '@'
  if not epoch then
    error('key ' .. key .. ' is not a sluice window (its last member is "' .. last .. '"): ' ..
      'remove it or use another prefix', 0)
  end
  if not r[3] then return epoch, nil, nil, true end
  return epoch, r[1], epoch + tonumber(r[2]), true
end

-- A window's state, as a decision reads and writes it:
--   key, w, now   the key, the window µs, the time the state holds for
--   exists, epoch whether the key exists; its epoch (nil: nothing recorded)
--   m, at, e, c   the newest entry: member (as Redis holds it), time, end, cost
--   live, used    whether the newest entry is in the window; the cost counted
--   om, oe, oc    the oldest counted entry's member, end and cost; oe = oc = 0
--                 (om unknown) while the epoch is in the window
--   dirty         the newest entry grew here and not yet in Redis
--   fits, cause   the check of the request being decided (decision.lua)
-- A key a script call wrote keeps its state in cache: a later request of the
-- call (batch.lua decides many) at the same time reads nothing, and one at
-- the same instant grows the state's newest entry alone, which flush writes
-- when the call ends or before Redis is read for that key again.
local cache, dirty = {}, {}

local function flush(s)
  if s.dirty then
    call('ZREM', s.key, s.m)
    s.m, s.dirty = member(s.e, s.c), false
    call('ZADD', s.key, int(s.at - s.epoch), s.m)
    if s.oe == s.e then s.om = s.m end
  end
end

local function flushAll()
  for _, s in ipairs(dirty) do
    flush(s)
  end
end

-- logLoad returns key's state for rule r's window at now: the cached one
-- when this call wrote the key at now, else read from Redis.
local function logLoad(key, r, now)
  local w = r.w
  local s = cache[key]
  if s and s.now == now and s.w == w then return s end
  if s then
    flush(s)
    cache[key] = nil
  end
  local epoch, m, at, exists = newest(key)
  s = {key = key, w = w, now = now, exists = exists, epoch = epoch, m = m, at = at,
    e = 0, c = 0, live = false, used = 0, oe = 0, oc = 0, dirty = false, fits = false, cause = false}
  if at then
    s.e, s.c = parse(m)
    s.live = at > now - w
  end
  if s.live and epoch <= now - w then
    s.om = call('ZRANGEBYSCORE', key, format('(%d', now - w - epoch), '(+inf', 'LIMIT', '0', '1')[1]
    s.oe, s.oc = parse(s.om)
  end
  if s.live then s.used = s.e - s.oe + s.oc end
  return s
end

-- freed returns when enough of s's oldest counted entries leave the window
-- to free need units of cost (need <= s.used).
local function freed(s, need, now)
  if s.oc >= need then
    if s.oe == s.e then
      return s.at + s.w -- the oldest counted entry is the newest
    end
    return s.epoch + tonumber(call('ZSCORE', s.key, s.om)) + s.w
  end
  flush(s) -- then walk the counted entries, oldest first; each frees at least 1
  local entries = call('ZRANGEBYSCORE', s.key, format('(%d', now - s.w - s.epoch), '(+inf',
    'WITHSCORES', 'LIMIT', '0', int(need))
  for k = 1, #entries, 2 do
    local m, score = unpack(entries, k, k + 1)
    if parse(m) - s.oe + s.oc >= need then return s.epoch + tonumber(score) + s.w end
  end
  error('window ' .. s.key .. ' counts ' .. s.used .. ' but its entries free less than ' .. need, 0)
end

-- logWait returns how long from now until rule r fits s, once pending units
-- are recorded at now: the longer of the wait until it has room for its cost
-- and the wait until its gap has passed, then those two.
local function logWait(s, r, pending, now)
  local room, gap = 0, 0
  local at = max(now, s.at or now)
  local need = s.used + pending + r.cost - r.limit
  if need > s.used then
    room = at + s.w - now -- only the pending entry's leaving makes room
  elseif need > 0 then
    room = freed(s, need, now) - now
  end
  local last = (pending > 0 and at) or s.at
  if r.gap > 0 and last then gap = max(0, last + r.gap - now) end
  return max(room, gap), room, gap
end

-- logCheck returns whether rule r fits on s at now, and why not: 'limit' (no
-- room for its cost) or 'gap' (too soon), when both the longer wait.
local function logCheck(s, r, now)
  local full = s.used + r.cost > r.limit
  local early = r.gap > 0 and s.at ~= nil and now - s.at < r.gap
  if full and early then
    local _, room, gap = logWait(s, r, 0, now)
    return false, gap > room and 'gap' or 'limit'
  end
  return not (full or early), (full and 'limit') or (early and 'gap') or nil
end

-- grow adds cost to s's newest entry, and to the oldest counted when it is
-- the newest.
local function grow(s, cost)
  if s.oe == s.e then s.oe, s.oc = s.e + cost, s.c + cost end
  s.e, s.c = s.e + cost, s.c + cost
end

-- rebase writes s's key anew, without expiry, from a new epoch (the oldest
-- counted entry's time), ends counted from the cost before that entry.
local function rebase(s, now)
  local shift, before = tonumber(call('ZSCORE', s.key, s.om)), s.oe - s.oc
  call('ZREMRANGEBYSCORE', s.key, '-inf', int(now - s.w - s.epoch))
  local all = call('ZRANGE', s.key, '0', '-2', 'WITHSCORES')
  call('DEL', s.key)
  local add = {'ZADD', s.key}
  for k = 1, #all, 2 do
    local m, score = unpack(all, k, k + 1)
    local e, c = parse(m)
    add[#add + 1] = int(tonumber(score) - shift)
    add[#add + 1] = member(e - before, c)
    if #add >= 2002 or k + 1 == #all then
      call(unpack(add))
      add = {'ZADD', s.key}
    end
  end
  s.epoch = s.epoch + shift
  call('ZADD', s.key, '+inf', '@' .. int(s.epoch))
  s.e, s.oe = s.e - before, s.oe - before
  s.m, s.om = member(s.e, s.c), member(s.oe, s.oc)
end

-- logWrite records rule r's cost in s's key at now (never before its newest
-- entry), caches s, and returns the time it recorded at. A write sets the
-- key to expire W + gap after it, except one into the newest entry's
-- instant, whose write did.
local function logWrite(s, r, now)
  local cost = r.cost
  local at = max(now, s.at or now)
  if cache[s.key] == s then
    grow(s, cost) -- this call's state at this instant: grown in the state alone
    if not s.dirty then
      s.dirty = true
      dirty[#dirty + 1] = s
    end
  elseif not s.live then
    if s.exists then
      call('DEL', s.key) -- nothing counts any more: ends and epoch restart
    end
    s.e, s.c, s.oe, s.oc, s.epoch = cost, cost, cost, cost, at
    s.m = member(cost, cost)
    s.om = s.m
    call('ZADD', s.key, '0', s.m, '+inf', '@' .. int(at))
    call('PEXPIRE', s.key, r.ttl)
  else
    local expire = at ~= s.at
    if s.om and at - s.epoch >= REBASE and at - s.epoch >= 2 * (s.w + r.gap) then
      rebase(s, now)
      expire = true
    end
    if at == s.at then
      call('ZREM', s.key, s.m)
      grow(s, cost)
    else
      if s.epoch <= now - s.w and floor(s.e / TRIM) ~= floor((s.e + cost) / TRIM) then
        call('ZREMRANGEBYSCORE', s.key, '-inf', int(now - s.w - s.epoch))
      end
      s.e, s.c = s.e + cost, cost
    end
    s.m = member(s.e, s.c)
    if s.oe == s.e then s.om = s.m end
    call('ZADD', s.key, int(at - s.epoch), s.m)
    if expire then call('PEXPIRE', s.key, r.ttl) end
  end
  s.at, s.live, s.exists, s.used = at, true, true, s.used + cost
  cache[s.key] = s
  return at
end

-- logFigures returns used, remaining and reset-after µs (until the window is
-- empty) for s at now, with pending more units recorded at now.
local function logFigures(s, r, now, pending)
  local used, reset = s.used + pending, 0
  if pending > 0 then
    reset = max(now, s.at or now) + s.w - now
  elseif s.live then
    reset = s.at + s.w - now
  end
  local remaining = r.limit - used
  if remaining < 0 then remaining = 0 end
  return used, remaining, reset
end
