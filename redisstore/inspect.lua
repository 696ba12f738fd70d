-- inspect.lua reads, changing nothing, the windows of a policy's rules: the
-- entries each key holds and its time to live, or a concurrency rule's live
-- leases. sluice inspect and the admin view's key inspector show them.
--
-- KEYS     the windows, one per rule, then the key of the slices of each
--          window marked 's' (slices.lua), in order.
-- ARGV     the time in µs, or "" for Redis's TIME (as decide.lua's); then a
--          string of one letter per window, its rule's algorithm: 'n' a
--          concurrency rule (concurrency.lua), 'g' GCRA, 'c' the sliding
--          counter, 'p' a calendar quota (periodic.lua), 'b' a credits
--          balance (credits.lua), any other the log or not known (a key of layout 1,
--          whose string value is then read as a counter's, else GCRA's);
--          then a string of one letter per window, 's' for one whose
--          slices are read too.
--
-- Each algorithm's codec reads its keys: window.lua's logEntries,
-- gcra.lua's and counter.lua's decode, concurrency.lua's alive, and
-- slices.lua's held a window's slices.
--
-- Reply: {now µs, then per key: PTTL in ms (-2 no key, -1 no
-- expiry), then
--   a rate rule's window: the number of entries n, then n pairs of (time
--     µs, cost), oldest first; for a GCRA bucket or a sliding counter (a
--     string key) instead -k and its k numbers: the arrival time µs, or the
--     bucket, previous and current counts, or a calendar quota's period
--     index and count, or a balance and the index of its last refill;
--   a concurrency rule's window: the number of live leases n (those whose
--     expiry is after now; expired ones stay in the set until the rule is
--     next decided), then per lease, soonest to expire first, its expiry
--     µs and its token (32 hex digits) as four integers of 8 hex digits
--     each, a reply being integers only;
--   then, for a window marked 's', the number of slices m held in it, then
--     m pairs of (score µs, units), earliest first: the log's entry stamp
--     of a slice (its end, or when it was given back), GCRA's end of a
--     hold}.

local now = clock(tonumber(ARGV[1]))
local kinds, sliced = ARGV[2] or '', ARGV[3] or ''
local nw, ns = #kinds, 0
local gcraCodec, counterCodec, concurrencyCodec, slicesCodec, periodicCodec, creditsCodec -- made when a key needs them
local out = {now}

for i = 1, nw do
  local key, kind = KEYS[i], sub(kinds, i, i)
  out[#out + 1] = call('PTTL', key)
  if kind == 'n' then
    concurrencyCodec = concurrencyCodec or concurrency()
    local tokens, exps = concurrencyCodec.alive(key, now)
    out[#out + 1] = #tokens
    for j, token in ipairs(tokens) do
      out[#out + 1] = exps[j]
      for k = 1, 32, 8 do
        out[#out + 1] = tonumber(sub(token, k, k + 7), 16)
      end
    end
  elseif call('TYPE', key).ok == 'string' then
    -- GCRA's TAT or a counter's bucket, previous and current counts: -k,
    -- then the k numbers.
    gcraCodec, counterCodec = gcraCodec or gcra(), counterCodec or counter()
    local v = call('GET', key)
    local state = {}
    if kind == 'p' then
      periodicCodec = periodicCodec or periodic()
      state = {periodicCodec.decode(v, key)}
    elseif kind == 'b' then
      creditsCodec = creditsCodec or credits()
      state = {creditsCodec.decode(v, key)}
    elseif kind ~= 'g' then
      state = {counterCodec.decode(v)}
    end
    if #state == 0 then
      state = {gcraCodec.decode(v)}
    end
    out[#out + 1] = -#state
    for _, x in ipairs(state) do
      out[#out + 1] = x
    end
  else
    local times, costs = logEntries(key)
    out[#out + 1] = #times
    for j = 1, #times do
      out[#out + 1], out[#out + 2] = times[j], costs[j]
    end
  end
  if sub(sliced, i, i) == 's' then
    ns = ns + 1
    slicesCodec = slicesCodec or slices()
    local scores, costs = slicesCodec.held(KEYS[nw + ns])
    out[#out + 1] = #scores
    for j = 1, #scores do
      out[#out + 1], out[#out + 2] = scores[j], costs[j]
    end
  end
end
return out
