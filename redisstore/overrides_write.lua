-- overrides_write.lua sets or deletes one runtime override (overrides.go)
-- and moves the set's version, dropping the overrides that have expired
-- first. It is a script of its own, apart from the windows' scripts.
--
-- KEYS     the set, the expiries and the version, as overrides_read.lua's.
-- ARGV     "set" or "del"; the ID; the time in µs, or "" for Redis's TIME;
--          for "set": the value, the expiry in µs or "" for none, and the
--          most overrides the set may hold.
--
-- Reply: {status, version}: for "set" 1, or -1 when the ID is new and the
-- set is full (nothing changed); for "del" 1 when the ID was there, else 0.
-- The version is "<epoch>:<changes>", the epoch the µs of the first change
-- since the key was made: a Redis that lost its data starts another epoch,
-- so a version is never reused for another set.

local set, expiries, versionKey = KEYS[1], KEYS[2], KEYS[3]
local op, id = ARGV[1], ARGV[2]
local now = tonumber(ARGV[3])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local nowText = string.format('%d', now)

local changed = false
local gone = redis.call('ZRANGEBYSCORE', expiries, '-inf', nowText)
if #gone > 0 then
  for _, gid in ipairs(gone) do
    redis.call('HDEL', set, gid)
  end
  redis.call('ZREMRANGEBYSCORE', expiries, '-inf', nowText)
  changed = true
end

local status = 1
if op == 'set' then
  local value, expiry, most = ARGV[4], ARGV[5], tonumber(ARGV[6])
  if redis.call('HEXISTS', set, id) == 0 and redis.call('HLEN', set) >= most then
    status = -1
  else
    redis.call('HSET', set, id, value)
    if expiry == '' then
      redis.call('ZREM', expiries, id)
    else
      redis.call('ZADD', expiries, expiry, id)
    end
    changed = true
  end
else
  status = redis.call('HDEL', set, id)
  redis.call('ZREM', expiries, id)
  changed = changed or status == 1
end

local version = redis.call('GET', versionKey) or ''
if changed then
  local epoch, changes = string.match(version, '^(%d+):(%d+)$')
  if not epoch then
    epoch, changes = nowText, '0'
  end
  version = epoch .. ':' .. string.format('%d', tonumber(changes) + 1)
  redis.call('SET', versionKey, version)
end
return {status, version}
