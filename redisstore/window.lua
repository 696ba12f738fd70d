-- window.lua: a rule's window, the exact log, and how one is read, checked
-- and written. decide.lua, rollback.lua and inspect.lua are prelude.lua,
-- this file, then (for decide.lua) the other algorithms and decision.lua,
-- then their own part (scripts.go).
--
-- A window is a sorted set holding
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
-- empties is rebased before its scores pass 2^30 µs: both stay small.
--
-- At time T the window is (T-W, T]; it counts the newest entries: used =
-- end(newest) - end(oldest counted) + cost(oldest counted), or end(newest)
-- while the epoch is in the window (nothing has left it). The newest entry
-- stays until the key expires, W + gap after it, for the minimum gap.

local TRIM = 8             -- units of cost recorded between two trims of what left the window
local REBASE = 1073741824  -- 2^30 µs (about 18 min): the score past which a key gets a new epoch

-- A rule, one window of a request, is a record made once per script call
-- (decision.lua's rules): w (the window, µs), limit, gap (the minimum gap,
-- µs), cost (what the request counts there), shadow (its denial does not
-- deny), and the key's lifetime after a write: ttl (ms, as a string) on a
-- store's own clock, or life (µs) on Redis's, which expire reads as an
-- absolute time.

-- member returns the member of an entry of end e and cost c; parse reads
-- one. The members of cost 1 with small ends, most of them, are kept in
-- ends and their ends in numbers: as a function (function.go) a script
-- formats and parses each once, not once per call.
local ends, numbers = {}, {}

local function member(e, c)
  if c == 1 then
    local m = ends[e]
    if not m then
      m = format('%d', e)
      if e <= 4096 then
        ends[e], numbers[m] = m, e
      end
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

-- zero returns the member of an entry of end e settled to cost 0, recorded
-- at (absolute µs): the time keeps it apart from other such entries.
local function zero(e, at)
  return format('%d:0:%d', e, at)
end

-- reend returns member m with its end replaced by e, its cost (and a zero
-- entry's time) kept.
local function reend(m, e)
  local i = find(m, ':', 1, true)
  if not i then return member(e, 1) end
  return format('%d', e) .. sub(m, i)
end

-- newest returns a key's epoch, its newest entry's member and time (absolute
-- µs); all nil when the key does not exist. A key that is not a window is an
-- error.
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

-- A window's state, as a decision reads and writes it:
--   key, w        the key and the window µs
--   epoch         the key's epoch (nil: the key does not exist)
--   m, at, e, c   the newest entry: member (as Redis holds it), time, end,
--                 cost (m, at nil: no entry)
--   used          the cost counted in the window at the state's time
--   om, oe, oc    the oldest counted entry's member, end and cost; oe = oc =
--                 0 (om false) while the epoch is in the window
--   dirty         the newest entry grew here and not yet in Redis
-- A key a script call wrote keeps its state in cache: a later request of the
-- call (a batch decides many) at the same time reads nothing, and one at
-- the same instant grows the state's newest entry alone, which flush writes
-- when the call ends or before Redis is read for that key again. Every
-- cached state holds for cacheNow, the time of the call's requests: a
-- request of another time (a store's own clock, in tests) flushes them all.
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

-- read returns key's state for a window of w µs at now, read from Redis.
local function read(key, w, now)
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
  if not s then
    s = {key = key, w = w, epoch = epoch, m = m, at = at, e = e, c = c, used = used, om = om, oe = oe, oc = oc, dirty = false}
    if logTaken <= POOLED then logStates[logTaken] = s end
    return s
  end
  s.key, s.w, s.epoch, s.m, s.at, s.e, s.c, s.used, s.om, s.oe, s.oc, s.dirty = key, w, epoch, m, at, e, c, used, om, oe, oc, false
  return s
end

-- logWait returns how long from now until rule r fits s, once pending units
-- are recorded at now: the longer of the wait until it has room for its cost
-- and the wait until its gap has passed, then those two.
local function logWait(s, r, pending, now)
  -- freed returns when enough of s's oldest counted entries leave the
  -- window to free need units of cost (need <= s.used).
  local function freed(need)
    if s.oc >= need then
      if s.om == s.m then
        return s.at + s.w -- the oldest counted entry is the newest
      end
      return s.epoch + call('ZSCORE', s.key, s.om) + s.w
    end
    -- Then walk the counted entries, oldest first, need at a time: each
    -- frees at least 1 but one a lease settled to 0, which frees nothing.
    flush(s)
    local from = format('(%d', now - s.w - s.epoch)
    while true do
      local entries = call('ZRANGEBYSCORE', s.key, from, '(+inf', 'WITHSCORES', 'LIMIT', '0', format('%d', need))
      for k = 1, #entries, 2 do
        if parse(entries[k]) - s.oe + s.oc >= need then return s.epoch + entries[k + 1] + s.w end
      end
      if #entries < 2 * need then break end
      from = '(' .. entries[#entries]
    end
    error('window ' .. s.key .. ' counts ' .. s.used .. ' but its entries free less than ' .. need, 0)
  end

  local room, gap = 0, 0
  local at = s.at or now
  if at < now then at = now end
  if s.used + pending > MAXCOST then pending = MAXCOST - s.used end -- what the window takes of it
  local need = s.used + pending - r.limit + r.cost -- exact while need <= s.used
  if need > s.used then
    room = at + s.w - now -- only the pending entry's leaving makes room
  elseif need > 0 then
    room = freed(need) - now
  end
  local last = (pending > 0 and at) or s.at -- a write the full window refused records no time
  if r.gap > 0 and last and last + r.gap > now then gap = last + r.gap - now end
  if gap > room then return gap, room, gap end
  return room, room, gap
end

-- logLoad returns key's state for rule r's window at now (the cached one
-- when this call wrote the key at now, else read from Redis) and how r
-- stands on it: 0 it fits, 1 no room for its cost, 2 too soon (its gap has
-- not passed); when both, the longer wait.
local function logLoad(key, r, now)
  local w = r.w
  if cacheNow ~= now then
    flushAll()
    cache, cacheNow = {}, now
  end
  local s = cache[key]
  if s and s.w ~= w then
    flush(s)
    cache[key], s = nil, nil
  end
  if not s then
    s = read(key, w, now)
  end
  local full = s.used > r.limit - r.cost -- exact: s.used + r.cost may pass 2^53
  local early = r.gap > 0 and s.at ~= nil and now - s.at < r.gap
  if full and early then
    local _, room, gap = logWait(s, r, 0, now)
    if gap > room then return s, 2 end
    return s, 1
  end
  if full then return s, 1 end
  if early then return s, 2 end
  return s, 0
end

-- logWrite records rule r's cost in s's key at now (never before its newest
-- entry), caches s, and returns the time it recorded at, then used and
-- reset-after µs as the write leaves them. The window saturates at
-- MAXCOST: the write counts what fits under it, and one that finds the
-- window full writes nothing (and returns 0 for the time); ends that would
-- pass MAXCOST are rebased. A write sets the
-- key to expire W + gap after it, except one into the newest entry's
-- instant, whose write did: on Redis's clock at an absolute time (PEXPIREAT,
-- which needs no conversion on the server), which rule r keeps formatted for
-- the instant it was made for (a call's requests share one), on a store's
-- own clock r.ttl ms from now.
local function logWrite(s, r, now)
  local cost, key, sat, w, e, oe = r.cost, s.key, s.at, s.w, s.e, s.oe
  if s.used + cost > MAXCOST then
    cost = MAXCOST - s.used
    if cost <= 0 then
      if s.at and s.at > now - s.w then return 0, s.used, s.at + s.w - now end
      return 0, s.used, 0
    end
  end
  local at = sat or now
  if at < now then at = now end
  local used = s.used + cost
  s.at, s.used = at, used
  if cache[key] == s and e + cost <= MAXCOST then -- this call's state at this instant: grown in the state alone
    if s.om == s.m then s.oe, s.oc = e + cost, s.c + cost end
    s.e, s.c = e + cost, s.c + cost
    if not s.dirty then
      s.dirty = true
      dirty[#dirty + 1] = s
    end
    return at, used, at + w - now
  end
  flush(s) -- when cached, before its ends are rebased
  cache[key] = s
  local epoch, m, renew = s.epoch, nil, true
  if not (sat and sat > now - w) then -- nothing counts: ends and epoch restart
    if epoch then
      call('DEL', key)
    end
    m = member(cost, cost)
    s.e, s.c, s.oe, s.oc, s.epoch, s.m, s.om = cost, cost, cost, cost, at, m, m
    call('ZADD', key, '0', m, '+inf', '@' .. format('%d', at))
  else
    if s.om and (at - epoch >= REBASE and at - epoch >= 2 * (w + r.gap) or e + cost > MAXCOST) then
      -- Rebase: write the key anew, without expiry, from a new epoch (the
      -- oldest counted entry's time), ends counted from the cost before
      -- that entry.
      local shift, before = tonumber(call('ZSCORE', key, s.om)), oe - s.oc
      call('ZREMRANGEBYSCORE', key, '-inf', format('%d', now - w - epoch))
      local all = call('ZRANGE', key, '0', '-2', 'WITHSCORES')
      call('DEL', key)
      local add = {'ZADD', key}
      for k = 1, #all, 2 do
        add[#add + 1] = format('%d', all[k + 1] - shift)
        add[#add + 1] = reend(all[k], parse(all[k]) - before)
        if #add >= 2002 or k + 1 == #all then
          call(unpack(add))
          add = {'ZADD', key}
        end
      end
      epoch, e, oe = epoch + shift, e - before, oe - before
      s.epoch, s.e, s.oe = epoch, e, oe
      s.m, s.om = reend(s.m, e), reend(s.om, oe)
      call('ZADD', key, '+inf', '@' .. format('%d', epoch))
      renew = true -- the key has no expiry now
    else
      renew = at ~= sat -- a write into the newest entry's instant: its write set the expiry
    end
    local c
    local oldest = at == sat and s.om == s.m -- the entry written to is the oldest counted
    if at == sat then
      call('ZREM', key, s.m)
      c = s.c + cost
      if oldest then s.oe, s.oc = e + cost, c end
    else
      if epoch <= now - w and e % TRIM + cost >= TRIM then -- a multiple of TRIM passed
        call('ZREMRANGEBYSCORE', key, '-inf', format('%d', now - w - epoch))
      end
      c = cost
    end
    e = e + cost
    m = member(e, c)
    s.e, s.c, s.m = e, c, m
    if oldest then s.om = m end
    call('ZADD', key, format('%d', at - epoch), m)
  end
  if not renew then
    return at, used, at + w - now
  end
  if r.ttl then
    call('PEXPIRE', key, r.ttl)
  else
    if r.at ~= at then
      r.at, r.expiry = at, format('%d', ceil((at + r.life) / 1000))
    end
    call('PEXPIREAT', key, r.expiry)
  end
  return at, used, at + w - now
end

-- logFigures returns used and reset-after µs (until the window is empty)
-- for s at now, with pending more units recorded at now.
local function logFigures(s, r, now, pending)
  if pending > 0 and s.used < MAXCOST then
    local at = s.at or now
    if at < now then at = now end
    return min(s.used + pending, MAXCOST), at + s.w - now
  elseif s.at and s.at > now - s.w then
    return s.used, s.at + s.w - now
  end
  return s.used, 0
end
