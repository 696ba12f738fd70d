-- rollback.lua undoes what decide.lua wrote in "group" mode for one request,
-- when a later slot group of the same policy denied it (see crossslot.go).
--
-- KEYS[i]  a window decide.lua recorded the request in.
-- ARGV[1]  the request's cost.
-- ARGV[2..] one per key, in KEYS order: the time (absolute µs) decide.lua
--          recorded the request at there.
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

local cost = tonumber(ARGV[1])
local changed = 0
for i = 1, #KEYS do
  local key = KEYS[i]
  local _, epoch = newest(key)
  if epoch then
    local rel = int(tonumber(ARGV[i + 1]) - epoch)
    local m = call('ZRANGEBYSCORE', key, rel, rel)[1]
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
end
return {changed}
