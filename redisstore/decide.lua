-- decide.lua decides one request: window.lua's decide.
--
-- KEYS     the windows of the request's rules.
-- ARGV     mode (see modes), the time in µs or "" for Redis's TIME, flags
--          (see rules), then four per rule, in KEYS order: window µs,
--          limit, minimum gap µs, cost.
--
-- Reply: {now, then decide's numbers}.

local arg = reader(ARGV)
local mode, now, flags = arg(), clock(arg()), arg()
local out = {now}
decide(KEYS, rules(arg, #KEYS, flags), mode, now, out)
flushAll()
return out
