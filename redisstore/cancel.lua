-- cancel.lua removes a pending reservation from a schedule's queue (see
-- reserve.lua for the layout).
--
-- KEYS[1]  the queue.
-- ARGV[1]  the time in µs, or "" to use Redis's TIME.
-- ARGV[2]  the reservation's ID (its member).
--
-- Reply: {cancelled (1 or 0), now}. An unknown ID, or one whose slot has
-- passed (slot < now), changes nothing. After a removal the key expires at
-- the end of the last reservation left, at once if that has passed.

local key = KEYS[1]
local now = clock(tonumber(ARGV[1]))
local member = ARGV[2]

local slot = call('ZSCORE', key, member)
if not slot or tonumber(slot) < now then
  return {0, now}
end
call('ZREM', key, member)

local last = call('ZRANGE', key, -1, -1, 'WITHSCORES')
if #last == 2 then
  local e = tonumber(last[2]) + tonumber(string.match(last[1], '%.(%d+)$'))
  if e <= now then
    call('DEL', key)
  else
    call('PEXPIRE', key, format('%d', ceil((e - now) / 1000)))
  end
end
return {1, now}
