-- inspect.lua reads, changing nothing, the windows of a policy's rules: the
-- entries each key holds and its time to live. sluice inspect shows them.
--
-- KEYS     the windows, one per rule.
-- ARGV     the time in µs, or "" for Redis's TIME (as decide.lua's).
--
-- Reply: {now µs, then per key: PTTL in ms (-2 no key, -1 no
-- expiry), the number of entries n, then n pairs of (time µs, cost), oldest
-- first; for a GCRA bucket or a sliding counter (a string key) instead -k
-- and its k numbers: the arrival time µs, or the bucket, previous and
-- current counts}.

local out = {clock(tonumber(ARGV[1]))}
for _, key in ipairs(KEYS) do
  out[#out + 1] = call('PTTL', key)
  local v = call('TYPE', key).ok == 'string' and call('GET', key)
  if v then
    local state = {}
    for n in string.gmatch(v, '[^:]+') do
      state[#state + 1] = tonumber(n)
    end
    out[#out + 1] = -#state
    for _, n in ipairs(state) do
      out[#out + 1] = n
    end
  else
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
end
return out
