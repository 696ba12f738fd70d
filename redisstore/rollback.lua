-- rollback.lua undoes what decide.lua wrote in "group" mode for one request,
-- when a later slot group of the same policy denied it (see crossslot.go).
--
-- KEYS     the windows decide.lua recorded the request in.
-- ARGV     the request's cost, then one per key, in KEYS order: the time
--          (absolute µs) decide.lua recorded the request at there.
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
--
-- Reply: {number of entries changed}.

local arg = reader(ARGV)
local cost = tonumber(arg())
local changed = 0
for _, key in ipairs(KEYS) do
  local at, epoch = tonumber(arg()), newest(key)
  local rel = epoch and int(at - epoch)
  local m = rel and call('ZRANGEBYSCORE', key, rel, rel)[1]
  if m then
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
end
return {changed}
