-- rollback.lua undoes what decide.lua wrote in "group" mode for one request,
-- when a later slot group of the same policy denied it (see crossslot.go).
--
-- KEYS[i]  a window decide.lua recorded the request in.
-- ARGV[1]  the request's cost.
-- ARGV[2..] three per key, in KEYS order: the end, time (absolute µs) and
--          cost of the entry decide.lua wrote there.
--
-- The entry is changed only if its member and its time both still match,
-- so an entry of another request is never touched (a key's ends restart at
-- 0 whenever its window empties, but its entries' times then are later).
-- The request's cost is taken out of the entry: the entry goes when it held
-- the request alone, and otherwise keeps the cost of the requests recorded
-- at its instant before this one. Undoing is therefore safe to repeat. The
-- key's expiry is left as it is: it is at least as late as any remaining
-- entry needs.
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
  local e, at, c = tonumber(ARGV[3 * i - 1]), tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1])
  local _, epoch = newest(key)
  if epoch then
    local m = member(e, c)
    local score = call('ZSCORE', key, m)
    if score and tonumber(score) == at - epoch then
      changed = changed + call('ZREM', key, m)
      if c > cost then
        call('ZADD', key, int(at - epoch), member(e - cost, c - cost))
      elseif call('ZCARD', key) == 1 then
        call('DEL', key) -- the epoch alone is left
      end
    end
  end
end
return {changed}
