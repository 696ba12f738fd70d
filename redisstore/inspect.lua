-- inspect.lua reads, changing nothing, the windows of a policy's rules: the
-- entries each key holds and its time to live. sluice inspect shows them.
--
-- KEYS[i]  the window of rule i, as decide.lua writes it.
--
-- Reply: {now µs (Redis TIME), then per key: PTTL in ms (-2 no key, -1 no
-- expiry), the number of entries n, then n pairs of (time µs, cost), oldest
-- first}.

local t = redis.call('TIME')
local out = {tonumber(t[1]) * 1000000 + tonumber(t[2])}

-- parse returns the cost of a member "<enc(end)>:<cost>" (see decide.lua).
local function cost(m)
  local len = string.byte(m, 1) - 96
  return tonumber(string.sub(m, 3 + len)) or 0
end

for i = 1, #KEYS do
  out[#out + 1] = redis.call('PTTL', KEYS[i])
  local entries = redis.call('ZRANGE', KEYS[i], 0, -1, 'WITHSCORES')
  out[#out + 1] = #entries / 2
  for j = 1, #entries, 2 do
    out[#out + 1] = tonumber(entries[j + 1])
    out[#out + 1] = cost(entries[j])
  end
end
return out
