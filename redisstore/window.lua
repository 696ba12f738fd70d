-- window.lua: the exact log's codec, the one place a window is read
-- (logRead, logFreed, logEntries), written (logWrite, flush), adjusted
-- (logResize, logRemove), and its members formatted (member, reend) and
-- parsed (parse, newest). A window is a sorted set (docs/design.md, "Time
-- and entries", says why): one entry per instant the key recorded at,
-- scored by its µs after the key's epoch, its member the running total of
-- cost to that instant (its end), then ":<cost>" when not 1 ("7", "12:5");
-- an entry a lease settled to 0 is "<end>:0:<time µs>" (ends may repeat,
-- members do not: an entry is told by its member); then "@<epoch µs>"
-- scored +inf, always last, so ZRANGE -2 -1 reads the newest entry and the
-- epoch at once. Ends and epoch restart when nothing counts, and a key is
-- rebased before its scores pass 2^30 µs. At time T the window (T-W, T]
-- counts end(newest) - end(oldest counted) + cost(oldest counted), or
-- end(newest) while the epoch is in it. The newest entry stays until the
-- key expires, W + gap after it, for the minimum gap.

local TRIM = 8             -- units of cost recorded between two trims of what left the window
local REBASE = 1073741824  -- 2^30 µs (about 18 min): the score past which a key gets a new epoch

-- member returns the member of an entry of end e, cost c and (settled to
-- 0) time t; parse reads one; reend replaces its end. Members of cost 1 and
-- end up to 4096, most, are formatted and parsed once (function.go's library).
local ends, numbers = {}, {}
local function member(e, c, t)
  if c == 1 then
    local m = ends[e]
    if not m then
      m = format('%d', e)
      if e <= 4096 then ends[e], numbers[m] = m, e end
    end
    return m
  elseif c == 0 and t then
    return format('%d:0:%d', e, t)
  end
  return format('%d:%d', e, c)
end

local function parse(m)
  local e = numbers[m] or tonumber(m)
  if e then return e, 1 end
  local i = find(m, ':', 1, true)
  return tonumber(sub(m, 1, i - 1)), tonumber(sub(m, i + 1)) or 0 -- "e:0:t" is no number
end

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
    error('key ' .. key .. ' is not a sluice window (its last member is "' .. last .. '"): remove it or use another prefix', 0)
  end
  if not r[3] then return epoch end
  return epoch, r[1], epoch + r[2]
end

-- moved appends list's entries (ZRANGE's member, score pairs) to gone, and
-- to add moved ds µs earlier, their ends by de; rewrite removes gone, then
-- (a new end may equal an old one) adds add, in commands of 2,000 arguments.
local function moved(list, ds, de, gone, add)
  local nxt = reader(list)
  for m in nxt do
    gone[#gone + 1] = m
    add[#add + 1], add[#add + 2] = format('%d', nxt() - ds), reend(m, parse(m) + de)
  end
end

local function rewrite(key, gone, add)
  for k = 1, #gone, 2000 do call('ZREM', key, unpack(gone, k, min(k + 1999, #gone))) end
  for k = 1, #add, 2000 do call('ZADD', key, unpack(add, k, min(k + 1999, #add))) end
end

-- A window's state: key, w (µs), epoch (nil: no key); the newest entry's
-- m (member), at (time), e (end), c (cost) (m, at nil: none); used, the
-- cost counted at its time; the oldest counted entry's om, oe, oc (false, 0,
-- 0 while the epoch is in the window); dirty: the newest entry grew in the
-- state alone. A call caches the states of the keys it wrote (cache, for
-- cacheNow): a later request at that time reads nothing, one at the same
-- instant grows the newest entry in the state, and flush writes it.
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

-- logPage returns the times (absolute µs) and costs of up to n (-1: all)
-- of key's entries scored after from, oldest first, the from of the page
-- after them (nil: none), then their ends.
local function logPage(key, epoch, from, n)
  local nxt, times, costs, es, score = reader(call('ZRANGEBYSCORE', key, from, '(+inf', 'WITHSCORES', 'LIMIT', '0', format('%d', n))), {}, {}, {}
  for m in nxt do
    score = nxt()
    times[#times + 1], es[#es + 1], costs[#costs + 1] = epoch + score, parse(m)
  end
  return times, costs, #times == n and '(' .. score or nil, es
end

-- logFreed returns when enough of s's oldest counted entries leave to free
-- need units (need <= s.used); one settled to 0 frees nothing.
local function logFreed(s, need, now)
  if s.oc >= need then -- the oldest counted entry: the newest, or one Redis holds
    return (s.om == s.m and s.at or s.epoch + call('ZSCORE', s.key, s.om)) + s.w
  end
  flush(s)
  local from = format('(%d', now - s.w - s.epoch)
  repeat -- need entries at a time
    local times, _, after, es = logPage(s.key, s.epoch, from, need)
    for k = 1, #times do
      if es[k] - s.oe + s.oc >= need then return times[k] + s.w end
    end
    from = after
  until not from
  error('window ' .. s.key .. ' counts ' .. s.used .. ' but its entries free less than ' .. need, 0)
end

-- logWrite records rule r's cost in s's key at now (never before its newest
-- entry), caches s, and returns that time, used and reset-after µs. The key
-- expires W + gap after a write (but one into the newest entry's instant):
-- on Redis's clock at r.expiry, kept for r.at; on its own r.ttl ms on. At
-- MAXCOST a window saturates; ends that would pass it are rebased.
local function logWrite(s, r, now)
  local cost, key, sat, w, e, oe = r.cost, s.key, s.at, s.w, s.e, s.oe
  if s.used + cost > MAXCOST then -- saturated: what fits, or nothing (time 0) when full
    cost = MAXCOST - s.used
    if cost <= 0 then return 0, s.used, (s.at and s.at > now - s.w) and s.at + s.w - now or 0 end
  end
  local at, used = sat or now, s.used + cost
  if at < now then at = now end
  s.at, s.used = at, used
  if cache[key] == s and e + cost <= MAXCOST then -- this call's state at this instant: grown in the state alone
    if s.om == s.m then s.oe, s.oc = e + cost, s.c + cost end
    s.e, s.c = e + cost, s.c + cost
    if not s.dirty then s.dirty, dirty[#dirty + 1] = true, s end
    return at, used, at + w - now
  end
  flush(s) -- when cached, before its ends are rebased
  cache[key] = s
  local epoch, renew = s.epoch, at ~= sat -- a write into the newest entry's instant: its write set the expiry
  if not (sat and sat > now - w) then -- nothing counts: ends and epoch restart
    if epoch then call('DEL', key) end
    local m = member(cost, cost)
    s.e, s.c, s.oe, s.oc, s.epoch, s.m, s.om = cost, cost, cost, cost, at, m, m
    call('ZADD', key, '0', m, '+inf', '@' .. format('%d', at))
  else
    if s.om and (at - epoch >= REBASE and at - epoch >= 2 * (w + r.gap) or e + cost > MAXCOST) then
      -- Rebase: the key anew (its expiry too) from a new epoch, the oldest
      -- counted entry's time, its ends from the cost before that entry.
      local shift, before = tonumber(call('ZSCORE', key, s.om)), oe - s.oc
      call('ZREMRANGEBYSCORE', key, '-inf', format('%d', now - w - epoch))
      local gone, add = {'@' .. format('%d', epoch)}, {'+inf', '@' .. format('%d', epoch + shift)}
      moved(call('ZRANGE', key, '0', '-2', 'WITHSCORES'), shift, -before, gone, add)
      rewrite(key, gone, add)
      epoch, e, oe, renew = epoch + shift, e - before, oe - before, true
      s.epoch, s.e, s.oe, s.m, s.om = epoch, e, oe, reend(s.m, e), reend(s.om, oe)
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

-- entryAt returns the score and member of key's entry of time at (abs. µs),
-- key's epoch and newest member, then the entry's end and cost.
local function entryAt(key, at)
  local epoch, nm = newest(key)
  if not epoch or at < epoch then return nil end
  local score = format('%d', at - epoch)
  local m = call('ZRANGEBYSCORE', key, score, score)[1]
  if m then return score, m, epoch, nm, parse(m) end
end

-- logResize adds delta to the cost of key's entry of time at (absolute
-- µs), never below 0, while it counts in the window of w µs at now, and
-- moves the ends from it on; one settled to 0 stays, as memstore's does (a
-- gap counts from it); it saturates at MAXCOST as a write does.
local function logResize(key, w, at, delta, now)
  if at <= now - w then return end
  local score, m, epoch, nm, e, c = entryAt(key, at)
  if not m then return end
  if c + delta < 0 then delta = -c end
  local gone, add, shift, ne = {}, {}, 0, parse(nm)
  if delta > 0 and ne + delta > MAXCOST then
    local cut, oe, oc = format('%d', now - w - epoch), 0, 0
    if epoch <= now - w then -- something left the window: the oldest counted entry
      oe, oc = parse(call('ZRANGEBYSCORE', key, '(' .. cut, '(+inf', 'LIMIT', '0', '1')[1])
    end
    delta = min(delta, MAXCOST - (ne - oe + oc)) -- what the window counts is ne - oe + oc
    if delta > 0 and ne + delta > MAXCOST then
      shift = oe - oc
      call('ZREMRANGEBYSCORE', key, '-inf', cut)
      moved(call('ZRANGEBYSCORE', key, '(' .. cut, '(' .. score, 'WITHSCORES'), 0, -shift, gone, add)
    end
  end
  if delta == 0 and shift == 0 then return end
  gone[#gone + 1], add[#add + 1], add[#add + 2] = m, score, member(e - shift + delta, c + delta, at)
  moved(call('ZRANGEBYSCORE', key, '(' .. score, '(+inf', 'WITHSCORES'), 0, delta - shift, gone, add)
  rewrite(key, gone, add)
end

-- logRemove takes cost out of key's entry of time at (absolute µs), and
-- reports whether it did (not when it holds less); an entry left empty goes.
-- Later ends still count the cost until they leave the window: it errs high.
local function logRemove(key, at, cost)
  local score, m, _, _, e, c = entryAt(key, at)
  if not m or c < cost then return false end
  rewrite(key, {m}, c > cost and {score, member(e - cost, c - cost)} or {})
  if c == cost and call('ZCARD', key) == 1 then call('DEL', key) end -- the epoch alone is left
  return true
end

-- logEntries returns the times (absolute µs) and costs of key's entries.
local function logEntries(key)
  return logPage(key, newest(key) or 0, '-inf', -1) -- no key: no entries
end
