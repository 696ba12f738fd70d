-- lease.lua decides one request over its rules' windows as decide.lua
-- does, and when the request is admitted holds its lease: the lease's
-- token in every concurrency rule's window (concurrency.lua), and at the
-- last key a record of the lease, which finish.lua reads.
--
-- KEYS   the rules' keys, in the request's order, then the budgeted rules'
--        slices' keys (decision.lua's shape), then the lease record's key
--        (lease.go), all of one slot.
-- ARGV   the request's shape (decision.lua's, in group mode, so that the
--        reply says when each rule recorded), the lease's token, its id,
--        its lease time (µs) and the request's cost, the estimate.
--
-- The record is a hash: id, the lease's id (a token names one lease, and
-- the record holds the id it was taken with, so an id altered to name
-- other windows names none); cost, the estimate; exp, the expiry (absolute
-- µs); r, per rule, what finish.lua needs to settle it: the time the log or
-- the sliding counter recorded at, GCRA's interval, the index of a
-- calendar quota's period; for a credits balance it drew, 2 plus the
-- period of the balance's last refill (1 without a calendar), else 0 (a
-- covered quota had room); 0 for a concurrency rule. It expires with the
-- lease.
--
-- A record alive for the token (a tombstone finish.lua left when the lease
-- was abandoned before this call ran, its expiry in the field dead, or the
-- lease itself) means the id was abandoned or acquired before: the call
-- takes nothing and replies -1 alone, a denial that nobody waits for
-- (store.Leaser, Abandon). The expiry is read, not only the key's
-- existence, since on a store's own clock (Config.Clock) the key's TTL is
-- the server's.
--
-- Reply: decision.lua's five integers per rule, then the lease's expiry
-- (absolute µs), or 0 when the request was denied; or -1 alone.

cache, cacheNow = nil, nil
reuseStates()
for i = #dirty, 1, -1 do
  dirty[i] = nil
end

local sh = shape(ARGV[1])
if not sh.own then
  sh.now = clock()
end
local token, id, ttl, cost = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local list, n, now = sh.rules, sh.n, sh.now
local rec = KEYS[sh.nk + 1]
local kept = call('HMGET', rec, 'exp', 'dead')
kept = tonumber(kept[1] or kept[2])
if kept and kept > now then
  return {-1}
end
for i = 1, n do
  list[i].member = token
end

local out = {}
decide(KEYS, 0, sh, out, 0)
flushAll()
for i = 1, n do
  if out[5 * i - 3] % 4 ~= 0 and not list[i].shadow then
    out[#out + 1] = 0
    return out
  end
end

local receipts = {}
for i = 1, n do
  local r, alg = list[i], baseSteps(list[i])
  if alg == gcraSteps then
    receipts[i] = format('%d', r.iv)
  elseif alg == concurrencySteps then
    receipts[i] = '0'
  elseif alg == periodicSteps then
    receipts[i] = format('%d', states[i].idx) -- the period it counted in
  elseif alg == creditsSteps then
    receipts[i] = '0' -- not drawn (Covers: its quota had room)
    if out[5 * i] > 0 then
      receipts[i] = list[i].cal and format('%d', states[i].idx + 2) or '1'
    end
  else
    receipts[i] = format('%d', out[5 * i])
  end
end
local exp = now + ttl
call('HSET', rec, 'id', id, 'cost', cost, 'exp', format('%d', exp), 'r', table.concat(receipts, ','))
if sh.own then
  call('PEXPIRE', rec, format('%d', max(1, ceil(ttl / 1000))))
else
  call('PEXPIREAT', rec, format('%d', ceil(exp / 1000)))
end
out[#out + 1] = exp
return out
