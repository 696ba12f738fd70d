-- credit.lua runs one Credit call (store.Crediter) on a credits balance:
-- credits.lua's apply, at the store's time.
--
-- KEYS   the balance, then the sorted set of the ids of its changes
--        (calendar.go), of one slot.
-- ARGV   the balance's rule as a shape of one rule (decision.lua's: its
--        limit, calendar and refill, and the store's own time when it has
--        one), then the operation (0 read, 1 add, 2 set), the amount and
--        the change's id ("" none).
--
-- Reply: the balance after the call, 1 when the call changed it as asked
-- (else 0: a read, or an id applied before), and the µs until the next
-- refill (0 for none).

local sh = shape(ARGV[1])
local now = sh.now
if not sh.own then
  now = clock()
end
return creditsSteps.apply(KEYS[1], KEYS[2], sh.rules[1], now, tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4])
