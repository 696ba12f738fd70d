-- decide.lua decides one request: window.lua's decide.
--
-- KEYS[i]  the window of rule i.
-- ARGV[1]  mode: "allow", "peek", "record" or "group" (see decide).
-- ARGV[2]  cost, >= 1.
-- ARGV[3]  the time in µs, or "" to use Redis's TIME.
-- ARGV[4..] three per rule, in KEYS order: window µs, limit, min gap µs.
--
-- Reply: {now, then decide's numbers}.

local now
if ARGV[3] == '' then
  local t = call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[3])
end
local out = {now}
decide(KEYS, ARGV[1], tonumber(ARGV[2]), now, ruleArgs(ARGV, 4, #ARGV), out, {})
flushAll()
return out
