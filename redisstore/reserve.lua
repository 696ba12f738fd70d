-- reserve.lua reserves the next free slot of a schedule's queue, or rejects
-- the reservation and changes nothing.
--
-- KEYS[1]  the queue: a sorted set of reservations. A reservation's score is
--          its slot in µs; its member is its ID, "<16 hex digits>.<length>",
--          where length is the µs it holds (cost × interval). Reservations
--          never overlap, so the last member also has the latest end, and
--          the next free slot is that end.
-- ARGV[1]  the time in µs, or "" to use Redis's TIME.
-- ARGV[2]  the reservation's length in µs, >= 1.
-- ARGV[3]  the longest delay accepted, µs.
-- ARGV[4]  the most pending reservations, 0 for no bound.
-- ARGV[5]  the member to add: the reservation's ID, ending in "." and ARGV[2].
--
-- Reply: {ok (1 or 0), reason (0 none, 1 delay, 2 queue), now, slot, queue}:
-- the slot given or that would have been given, and the queue's length: the
-- reservations that hold the schedule at now (slot >= now, or the one whose
-- slot has passed and whose end has not), including this one when ok.
--
-- Reservations whose slot has passed are removed, except the latest of them,
-- whose end is the next free slot when every later reservation is cancelled.
-- The key expires at the end of its last reservation.

local key = KEYS[1]
local arg = reader(ARGV)
local now = clock(tonumber(arg()))
local length = tonumber(arg())
local maxdelay = tonumber(arg())
local maxqueue = tonumber(arg())
local member = arg()

local passed = call('ZCOUNT', key, '-inf', '(' .. format('%d', now))
if passed > 1 then
  call('ZREMRANGEBYRANK', key, 0, passed - 2)
end

local slot = now
local last = call('ZRANGE', key, -1, -1, 'WITHSCORES')
if #last == 2 then
  local e = tonumber(last[2]) + tonumber(string.match(last[1], '%.(%d+)$'))
  if e > slot then
    slot = e
  end
end
local queue = call('ZCOUNT', key, format('%d', now), '+inf')
if passed > 0 then
  -- The one passed reservation left (rank 0) holds the schedule until its end.
  local first = call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if #first == 2 and tonumber(first[2]) + tonumber(string.match(first[1], '%.(%d+)$')) > now then
    queue = queue + 1
  end
end

if slot - now > maxdelay then
  return {0, 1, now, slot, queue}
end
if maxqueue > 0 and queue >= maxqueue then
  return {0, 2, now, slot, queue}
end
if call('ZADD', key, 'NX', format('%d', slot), member) == 0 then
  return redis.error_reply('ERR reserve.lua: reservation ID ' .. member .. ' already in use')
end
call('PEXPIRE', key, format('%d', math.ceil((slot + length - now) / 1000)))
return {1, 0, now, slot, queue + 1}
