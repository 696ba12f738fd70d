-- inspect.lua reads, changing nothing, the windows of a policy's rules: the
-- entries each key holds and its time to live. sluice inspect shows them.
--
-- KEYS     the windows, one per rule.
--
-- Reply: {now µs (Redis TIME), then per key: PTTL in ms (-2 no key, -1 no
-- expiry), the number of entries n, then n pairs of (time µs, cost), oldest
-- first}.

local out = {clock('')}
for _, key in ipairs(KEYS) do
  out[#out + 1] = call('PTTL', key)
  local epoch = newest(key)
  local entries = {}
  if epoch then
    entries = call('ZRANGE', key, '0', '-2', 'WITHSCORES')
  end
  out[#out + 1] = #entries / 2
  for j = 1, #entries, 2 do
    local m, score = unpack(entries, j, j + 1)
    local _, c = parse(m)
    out[#out + 1] = epoch + tonumber(score)
    out[#out + 1] = c
  end
end
return out
