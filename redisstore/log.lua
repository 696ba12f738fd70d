-- log.lua: the exact log's steps (see decision.lua), the checks a decision
-- makes on a window's state; window.lua reads and writes it.
--
-- A rule, one window of a request, is a record made once per script call
-- (decision.lua's rules): w (the window, µs), limit, gap (the minimum gap,
-- µs), cost (what the request counts there), shadow (its denial does not
-- deny), and the key's lifetime after a write: ttl (ms, as a string) on a
-- store's own clock, or life (µs) on Redis's, which expire reads as an
-- absolute time.

-- logWait returns how long from now until rule r fits s, once pending units
-- are recorded at now: the longer of the wait until it has room for its cost
-- and the wait until its gap has passed, then those two.
local function logWait(s, r, pending, now)
  local room, gap = 0, 0
  local at = s.at or now
  if at < now then at = now end
  if s.used + pending > MAXCOST then pending = MAXCOST - s.used end -- what the window takes of it
  local need = s.used + pending - r.limit + r.cost -- exact while need <= s.used
  if need > s.used then
    room = at + s.w - now -- only the pending entry's leaving makes room
  elseif need > 0 then
    room = logFreed(s, need, now) - now
  end
  local last = (pending > 0 and at) or s.at -- a write the full window refused records no time
  if r.gap > 0 and last and last + r.gap > now then gap = last + r.gap - now end
  if gap > room then return gap, room, gap end
  return room, room, gap
end

-- flushAll writes every state this call grew in cache alone (window.lua's
-- flush), before the call ends or reads at another time.
local function flushAll()
  for i = 1, #dirty do
    flush(dirty[i])
    dirty[i] = nil
  end
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
    s = logRead(key, w, now)
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
