-- inspect.lua reads, changing nothing, the windows of a policy's rules: the
-- entries each key holds and its time to live, or a concurrency rule's live
-- leases. sluice inspect and the admin view's key inspector show them.
--
-- KEYS     the windows, one per rule.
-- ARGV     the time in µs, or "" for Redis's TIME (as decide.lua's); then a
--          string of one letter per key, 'n' for a concurrency rule's
--          window (concurrency.lua), any other for a rate rule's.
--
-- Reply: {now µs, then per key: PTTL in ms (-2 no key, -1 no
-- expiry), then
--   a rate rule's window: the number of entries n, then n pairs of (time
--     µs, cost), oldest first; for a GCRA bucket or a sliding counter (a
--     string key) instead -k and its k numbers: the arrival time µs, or the
--     bucket, previous and current counts;
--   a concurrency rule's window: the number of live leases n (those whose
--     expiry is after now; expired ones stay in the set until the rule is
--     next decided), then per lease, soonest to expire first, its expiry
--     µs and its token (32 hex digits) as four integers of 8 hex digits
--     each, a reply being integers only}.

local now = clock(tonumber(ARGV[1]))
local kinds = ARGV[2] or ''
local out = {now}
for i, key in ipairs(KEYS) do
  out[#out + 1] = call('PTTL', key)
  if sub(kinds, i, i) == 'n' then
    local leases = call('ZRANGEBYSCORE', key, format('(%d', now), '+inf', 'WITHSCORES')
    out[#out + 1] = #leases / 2
    for j = 1, #leases, 2 do
      local token, exp = leases[j], leases[j + 1]
      if #token ~= 32 or find(token, '[^0-9a-f]') then
        error('key ' .. key .. ' is not a concurrency rule\'s window (its member "' .. token ..
          '" is not a lease token): remove it or use another prefix', 0)
      end
      out[#out + 1] = tonumber(exp)
      for k = 1, 32, 8 do
        out[#out + 1] = tonumber(sub(token, k, k + 7), 16)
      end
    end
  else
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
end
return out
