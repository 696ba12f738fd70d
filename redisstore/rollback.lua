-- rollback.lua undoes what decide.lua wrote in "group" mode for one request,
-- when a later slot group of the same policy denied it (see crossslot.go).
--
-- KEYS     the windows decide.lua recorded the request in.
-- ARGV     the request's cost, then three per key, in KEYS order: the time
--          (absolute µs) decide.lua recorded the request at there, the
--          key's algorithm (decision.lua's flag: "." or "s" the log, "g" or
--          "G" GCRA, "c" or "C" the sliding counter, "p" or "P" a calendar
--          quota, whose time is then the index of the period it counted
--          the request in, "b" or "B" a credits balance), and GCRA's
--          interval or the counter's window µs (0 for the others).
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
-- of the write loses the cost, if the key still holds that bucket, as a
-- calendar quota's period does; a credits balance takes the cost back. Each
-- algorithm's codec does it: window.lua's logRemove, gcra.lua's rewind,
-- counter.lua's add, periodic.lua's adjust, credits.lua's giveBack.
--
-- Reply: {number of entries changed}.

local arg = reader(ARGV)
local cost = tonumber(arg())
local changed = 0
local gcraCodec, counterCodec, periodicCodec, creditsCodec -- made when a key needs them

for _, key in ipairs(KEYS) do
  local at, flag, param = tonumber(arg()), arg(), tonumber(arg())
  local done
  if flag == 'g' or flag == 'G' then
    gcraCodec = gcraCodec or gcra()
    done = gcraCodec.rewind(key, cost * param)
  elseif flag == 'c' or flag == 'C' then
    counterCodec = counterCodec or counter()
    done = counterCodec.add(key, param, at, -cost, true)
  elseif flag == 'p' or flag == 'P' then
    periodicCodec = periodicCodec or periodic()
    done = periodicCodec.adjust(key, nil, at, -cost, true)
  elseif flag == 'b' or flag == 'B' then
    creditsCodec = creditsCodec or credits()
    done = creditsCodec.giveBack(key, cost)
  else
    done = logRemove(key, at, cost)
  end
  if done then
    changed = changed + 1
  end
end
return {changed}
