-- rollback.lua undoes what decide.lua wrote in "group" mode for one request,
-- when a later slot group of the same policy denied it (see crossslot.go).
--
-- KEYS     the windows decide.lua recorded the request in.
-- ARGV     the request's cost, then three per key, in KEYS order: the time
--          (absolute µs) decide.lua recorded the request at there, the
--          key's algorithm (decision.lua's flag: "." or "s" the log, "g" or
--          "G" GCRA, "c" or "C" the sliding counter), and GCRA's interval or
--          the counter's window µs (0 for the log).
--
-- The request's cost is taken out of the key's entry of that time, which
-- holds it: an entry is one instant's, and no other is touched. The entry
-- goes when it held the request alone, and otherwise keeps the cost of the
-- requests recorded at its instant besides this one (a batch records
-- requests of one instant into one entry). The key's expiry is left as it
-- is: it is at least as late as any remaining entry needs. A key whose
-- window emptied and restarted since holds no entry of that time, and is
-- left as it is. crossslot.go undoes each write once: undoing it again
-- would take the cost out twice.
--
-- Undoing the newest entry restores the key's count exactly. Undoing an
-- older one leaves the ends of the entries after it counting its cost until
-- they leave the window: the count errs high, toward denying, never low.
-- A GCRA key's arrival time moves back by the cost's intervals (exact, or
-- high when it had fallen behind the time of the write); a counter's bucket
-- of the write loses the cost, if the key still holds that bucket.
--
-- Reply: {number of entries changed}.

local arg = reader(ARGV)
local cost = tonumber(arg())
local changed = 0

-- undoLog takes cost out of the log entry of time at.
local function undoLog(key, at)
  local epoch = newest(key)
  local rel = epoch and int(at - epoch)
  local m = rel and call('ZRANGEBYSCORE', key, rel, rel)[1]
  if not m then
    return
  end
  local e, c = parse(m)
  if c >= cost then
    changed = changed + 1
    call('ZREM', key, m)
    if c > cost then
      call('ZADD', key, rel, member(e - cost, c - cost))
    elseif call('ZCARD', key) == 1 then
      call('DEL', key) -- the epoch alone is left
    end
  end
end

-- undoGCRA moves a GCRA key's arrival time back by cost intervals.
local function undoGCRA(key, iv)
  local tat = tonumber(call('GET', key))
  if tat then
    changed = changed + 1
    local pttl = call('PTTL', key)
    call('SET', key, int(tat - cost * iv), 'PX', int(max(1, pttl - ceil(cost * iv / 1000))))
  end
end

-- undoCounter takes cost out of the bucket of time at, if the key holds it.
local function undoCounter(key, at, w)
  local v = call('GET', key)
  if not v then
    return
  end
  local i, j = find(v, ':', 1, true), find(v, ':', find(v, ':', 1, true) + 1, true)
  local idx, prev, curr = tonumber(sub(v, 1, i - 1)), tonumber(sub(v, i + 1, j - 1)), tonumber(sub(v, j + 1))
  local b = idiv(at, w)
  if b == idx and curr >= cost then
    curr = curr - cost
  elseif b == idx - 1 and prev >= cost then
    prev = prev - cost
  else
    return
  end
  changed = changed + 1
  call('SET', key, int(idx) .. ':' .. int(prev) .. ':' .. int(curr), 'KEEPTTL')
end

for _, key in ipairs(KEYS) do
  local at, flag, param = tonumber(arg()), arg(), tonumber(arg())
  if flag == 'g' or flag == 'G' then
    undoGCRA(key, param)
  elseif flag == 'c' or flag == 'C' then
    undoCounter(key, at, param)
  else
    undoLog(key, at)
  end
end
return {changed}
