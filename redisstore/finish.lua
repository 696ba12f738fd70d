-- finish.lua releases, settles, extends or abandons a lease that lease.lua
-- took, in one step, when its record says it is alive; otherwise it
-- changes nothing, except that an abandon leaves a tombstone (store.Leaser
-- says what each does).
--
-- KEYS   the rules' keys, in the order of the request that took the lease,
--        then the budgeted rules' slices' and the calendar quotas'
--        histories' keys (decision.lua's shape), then the lease record's
--        key.
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
local rec = KEYS[sh.nk + 1]
local op, token = tonumber(ARGV[2]), ARGV[6]

local v = call('HMGET', rec, 'id', 'cost', 'exp', 'r')
if v[1] ~= ARGV[5] or not v[3] or tonumber(v[3]) <= now then
  local ttl = tonumber(ARGV[4])
  if op == 3 and ttl > 0 and (not v[3] or tonumber(v[3]) <= now) then
    call('DEL', rec)
    call('HSET', rec, 'id', ARGV[5], 'dead', format('%d', now + ttl))
    expireAt(rec, now + ttl, now, sh.own)
  end
  return {0, 0}
end
local cost = tonumber(ARGV[3])
if op == 3 then
  op, cost = 1, 0
end

if op == 2 then
  local exp = now + tonumber(ARGV[4])
  call('HSET', rec, 'exp', format('%d', exp))
  expireAt(rec, exp, now, sh.own)
  for i = 1, n do
    if list[i].alg == concurrencySteps then
      concurrencySteps.extend(KEYS[i], token, exp, now, sh.own)
    end
  end
  return {1, exp}
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
  local alg = baseSteps(r)
  if alg == concurrencySteps then
    concurrencySteps.release(key, token)
  elseif alg == periodicSteps or alg == creditsSteps then
    -- A calendar quota's period and a credits balance take the real cost
    -- in place of the estimate, and a release gives the estimate back: a
    -- quota counts, and a balance pays for, the work done (a balance
    -- refilled To since the draw owes nothing to it: credits.lua's
    -- adjust).
    local d = delta
    if op == 0 then d = -tonumber(v[2]) end
    if d ~= 0 and alg == periodicSteps then
      periodicSteps.adjust(key, r.si and KEYS[r.si], receipts[k], d, false)
    elseif d ~= 0 and receipts[k] > 0 then
      creditsSteps.adjust(key, r, now, -d, receipts[k] - 2)
    end
  elseif op == 1 and delta ~= 0 then
    -- Settling moves what the lease recorded by delta units: the log's
    -- entry (window.lua), GCRA's TAT by delta intervals (r.iv, the
    -- receipt), the counter's bucket of the receipt's time.
    if alg == log then
      logResize(key, r.w, receipts[k], delta, now)
    elseif alg == gcraSteps then
      gcraSteps.move(key, delta * receipts[k], now, sh.own)
    else
      counterSteps.add(key, r.w, receipts[k], delta, false)
    end
  end
end
return {1, 0}
