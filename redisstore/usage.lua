-- usage.lua reads, changing nothing, what a calendar quota's window
-- counted (store.Historian): periodic.lua's usage.
--
-- KEYS   the window's count, then its history's list when its rule keeps
--        one (calendar.go), of one slot.
-- ARGV   the rule as a shape of one rule (decision.lua's: its calendar,
--        and the time whose period is the current one when it is not
--        Redis's).
--
-- Reply: the index of the current period, then pairs of a period's index
-- and its count: the count key's, then the history's, newest first.

local sh = shape(ARGV[1])
local now = sh.now
if not sh.own then
  now = clock()
end
local out = {(periodOf(sh.rules[1], now))}
for _, x in ipairs(periodicSteps.usage(KEYS[1], KEYS[2])) do
  out[#out + 1] = x
end
return out
