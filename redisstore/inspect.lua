-- inspect.lua reads, changing nothing, the windows of a policy's rules: the
-- entries each key holds and its time to live. sluice inspect shows them.
--
-- KEYS[i]  the window of rule i.
--
-- Reply: {now µs (Redis TIME), then per key: PTTL in ms (-2 no key, -1 no
-- expiry), the number of entries n, then n pairs of (time µs, cost), oldest
-- first}.

local t = call('TIME')
local out = {tonumber(t[1]) * 1000000 + tonumber(t[2])}
for i = 1, #KEYS do
  out[#out + 1] = call('PTTL', KEYS[i])
  local _, epoch = newest(KEYS[i])
  local entries = {}
  if epoch then
    entries = call('ZRANGE', KEYS[i], '0', '-2', 'WITHSCORES')
  end
  out[#out + 1] = #entries / 2
  for j = 1, #entries, 2 do
    local _, c = parse(entries[j])
    out[#out + 1] = epoch + tonumber(entries[j + 1])
    out[#out + 1] = c
  end
end
return out
