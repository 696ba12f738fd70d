-- finish.lua releases, settles, extends or abandons a lease that lease.lua
-- took, in one step, when its record says it is alive; otherwise it
-- changes nothing, except that an abandon leaves a tombstone (store.Leaser
-- says what each does).
--
-- KEYS   the rules' keys, in the order of the request that took the lease,
--        then the lease record's key.
-- ARGV   a shape of the rules (decision.lua's: their algorithms and
--        windows, and the store's own time when it has one), then the
--        operation (0 release, 1 settle, 2 extend, 3 abandon), the real
--        cost (settle), the lease time (µs, extend and abandon), the
--        lease's id and its token.
--
-- An abandon of a lease alive settles it to 0. Of one not alive (no record,
-- an expired one, or a tombstone), it writes at the record's key a
-- tombstone, the id and dead, its expiry (absolute µs) a lease time from
-- now, which lease.lua finds: an acquire of the id that reaches the server
-- after the abandon (sent before it, on another connection) takes nothing.
--
-- Reply: 1 and the lease's new expiry (absolute µs; 0 unless extended), or
-- 0, 0 when the lease is not alive.

local sh = shape(ARGV[1])
local now = sh.now
if not sh.own then
  now = clock()
end
local list, n = sh.rules, sh.n
local rec = KEYS[n + 1]
local op, token = tonumber(ARGV[2]), ARGV[6]

-- expireAt makes key expire at exp (absolute µs).
local function expireAt(key, exp)
  if sh.own then
    call('PEXPIRE', key, format('%d', max(1, ceil((exp - now) / 1000))))
  else
    call('PEXPIREAT', key, format('%d', ceil(exp / 1000)))
  end
end

local v = call('HMGET', rec, 'id', 'cost', 'exp', 'r')
if v[1] ~= ARGV[5] or not v[3] or tonumber(v[3]) <= now then
  local ttl = tonumber(ARGV[4])
  if op == 3 and ttl > 0 and (not v[3] or tonumber(v[3]) <= now) then
    call('DEL', rec)
    call('HSET', rec, 'id', ARGV[5], 'dead', format('%d', now + ttl))
    expireAt(rec, now + ttl)
  end
  return {0, 0}
end
local cost = tonumber(ARGV[3])
if op == 3 then
  op, cost = 1, 0
end

if op == 2 then
  local exp = now + tonumber(ARGV[4])
  local e = format('%d', exp)
  call('HSET', rec, 'exp', e)
  expireAt(rec, exp)
  for i = 1, n do
    if list[i].alg == concurrencySteps and call('ZADD', KEYS[i], 'XX', 'CH', e, token) == 1 then
      expireAt(KEYS[i], exp)
    end
  end
  return {1, exp}
end

-- settleLog adds delta to the cost of the log entry of key recorded at at
-- (absolute µs), which holds the lease's estimate, when it still counts
-- in the window of w µs: its end and the ends of the entries after it
-- move by delta (window.lua's layout). An entry whose cost falls to 0
-- stays, as memstore's does: its request happened at its time, so a
-- minimum gap still counts from it, and the window holds it until it
-- leaves (window.lua's zero member). The window saturates at MAXCOST, as
-- a write does: a delta counts what fits under it, and when the ends would
-- pass it, every counted entry's end is counted anew from before the
-- oldest counted one (the entries that left the window are dropped).
local function settleLog(key, w, at, delta)
  if at <= now - w then
    return
  end
  local epoch, nm = newest(key)
  if not epoch or at < epoch then
    return
  end
  local score = format('%d', at - epoch)
  local m = call('ZRANGEBYSCORE', key, score, score)[1]
  if not m then
    return
  end
  local e, c = parse(m)
  if c + delta < 0 then
    delta = -c
  end
  local old, new, shift = {}, {}, 0
  local ne = parse(nm)
  if delta > 0 and ne + delta > MAXCOST then
    local cut, used, oe, oc = format('%d', now - w - epoch), ne, 0, 0
    if epoch <= now - w then -- something left the window: used from the oldest counted entry
      oe, oc = parse(call('ZRANGEBYSCORE', key, '(' .. cut, '(+inf', 'LIMIT', '0', '1')[1])
      used = ne - oe + oc
    end
    delta = min(delta, MAXCOST - used)
    if delta > 0 and ne + delta > MAXCOST then
      shift = oe - oc
      call('ZREMRANGEBYSCORE', key, '-inf', cut)
      local before = call('ZRANGEBYSCORE', key, '(' .. cut, '(' .. score, 'WITHSCORES')
      for k = 1, #before, 2 do
        old[#old + 1] = before[k]
        new[#new + 1], new[#new + 2] = before[k + 1], reend(before[k], parse(before[k]) - shift)
      end
    end
  end
  if delta == 0 and shift == 0 then
    return
  end
  local later = call('ZRANGEBYSCORE', key, '(' .. score, '(+inf', 'WITHSCORES')
  e = e - shift + delta
  old[#old + 1] = m
  new[#new + 1], new[#new + 2] = score, zero(e, at)
  if c + delta > 0 then
    new[#new] = member(e, c + delta)
  end
  for k = 1, #later, 2 do
    local j = #new
    old[#old + 1] = later[k]
    new[j + 1], new[j + 2] = later[k + 1], reend(later[k], parse(later[k]) - shift + delta)
  end
  -- Every old member goes before any new one is written, since a new end
  -- may equal an old one; in commands of at most 2,000 arguments.
  for k = 1, #old, 2000 do
    call('ZREM', key, unpack(old, k, min(k + 1999, #old)))
  end
  for k = 1, #new, 2000 do
    call('ZADD', key, unpack(new, k, min(k + 1999, #new)))
  end
end

-- settleGCRA moves key's arrival time by delta intervals of iv from
-- max(TAT, now), never before now (a full bucket is no key).
local function settleGCRA(key, iv, delta)
  local tat = tonumber(call('GET', key) or '0')
  if tat < now then
    tat = now
  end
  tat = min(tat + delta * iv, now + MAXBUCKET) -- saturated, as a write is
  if tat <= now then
    call('DEL', key)
    return
  end
  call('SET', key, format('%d', tat))
  expireAt(key, tat)
end

-- settleCounter adds delta to the count of the bucket of w µs that at
-- (absolute µs) fell in, when key holds it as its current or previous
-- bucket, never below 0.
local function settleCounter(key, w, at, delta)
  local v = call('GET', key)
  if not v then
    return
  end
  local b, prev, curr = string.match(v, '^(%d+):(%d+):(%d+)$')
  b, prev, curr = b + 0, prev + 0, curr + 0
  local ab = idiv(at, w)
  if ab == b then
    curr = min(max(0, curr + delta), MAXCOST)
  elseif ab == b - 1 then
    prev = min(max(0, prev + delta), MAXCOST)
  else
    return
  end
  call('SET', key, format('%d:%d:%d', b, prev, curr), 'KEEPTTL')
end

local receipts, i = {}, 0
for x in string.gmatch(v[4] or '', '%d+') do
  i = i + 1
  receipts[i] = tonumber(x)
end
if i ~= n then
  return {0, 0} -- not the windows the lease was taken on
end
call('DEL', rec)
local delta = cost - tonumber(v[2])
for k = 1, n do
  local r, key = list[k], KEYS[k]
  if r.alg == concurrencySteps then
    call('ZREM', key, token)
  elseif op == 1 and delta ~= 0 then
    if r.alg == log then
      settleLog(key, r.w, receipts[k], delta)
    elseif r.alg == gcraSteps then
      settleGCRA(key, receipts[k], delta)
    else
      settleCounter(key, r.w, receipts[k], delta)
    end
  end
end
return {1, 0}
