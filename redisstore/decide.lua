-- decide.lua decides one request: window.lua's decide.
--
-- KEYS     the windows of the request's rules.
-- ARGV     mode (see MODES), cost (>= 1), the time in µs or "" for Redis's
--          TIME, then three per rule, in KEYS order: window µs, limit,
--          minimum gap µs.
--
-- Reply: {now, then decide's numbers}.

local arg = reader(ARGV)
local mode, cost, now = arg(), tonumber(arg()), clock(arg())
local out = {now}
decide(KEYS, rules(arg, #KEYS), mode, cost, now, out)
flushAll()
return out
