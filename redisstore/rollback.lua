-- rollback.lua removes the entries decide.lua wrote in "group" mode for one
-- request, when a later slot group of the same policy denied it (see
-- crossslot.go).
--
-- KEYS[i]  a window decide.lua recorded the request in.
-- ARGV[1]  the request's cost.
-- ARGV[2..] two per key, in KEYS order: the end and the score decide.lua
--          returned for the entry it wrote there.
--
-- An entry is removed only if its member and its score both match, so an
-- entry of another request is never removed (a key's ends restart at 0 when
-- its window empties, but the score of a later entry is then later). Removing
-- is therefore safe to repeat. The key's expiry is left as it is: it is at
-- least as late as any remaining entry needs.
--
-- Removing the newest entry restores the key's count exactly. Removing an
-- older one leaves the ends of the entries after it counting its cost until
-- they leave the window: the count errs high, toward denying, never low.
--
-- Reply: {number of entries removed}.

local cost = tonumber(ARGV[1])

local function int(n)
  return string.format('%d', n)
end

local function enc(n)
  local s = int(n)
  return string.char(96 + #s) .. s
end

local removed = 0
for i = 1, #KEYS do
  local m = enc(tonumber(ARGV[2 * i])) .. ':' .. int(cost)
  local score = redis.call('ZSCORE', KEYS[i], m)
  if score and tonumber(score) == tonumber(ARGV[2 * i + 1]) then
    removed = removed + redis.call('ZREM', KEYS[i], m)
  end
end
return {removed}
