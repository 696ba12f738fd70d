-- overrides_read.lua reads the runtime overrides (overrides.go), changing
-- nothing. It is a script of its own, apart from the windows' scripts.
--
-- KEYS     the set (a hash: ID -> value), the expiries (a sorted set: ID
--          scored by the µs it expires at, for those that do) and the
--          version (a string).
-- ARGV     the version the caller knows; the time in µs, or "" for
--          Redis's TIME.
--
-- Reply: {version} when the version is the one known; otherwise {version,
-- then per override not expired: ID, value, expiry in µs or ""}.

local set, expiries, versionKey = KEYS[1], KEYS[2], KEYS[3]
local version = redis.call('GET', versionKey) or ''
if version == ARGV[1] then
  return {version}
end
local now = tonumber(ARGV[2])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local gone = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', expiries, '-inf', string.format('%d', now))) do
  gone[id] = true
end
local out = {version}
local all = redis.call('HGETALL', set)
for i = 1, #all, 2 do
  local id = all[i]
  if not gone[id] then
    out[#out + 1] = id
    out[#out + 1] = all[i + 1]
    out[#out + 1] = redis.call('ZSCORE', expiries, id) or ''
  end
end
return out
