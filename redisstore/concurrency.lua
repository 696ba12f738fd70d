-- concurrency.lua: a concurrency rule's window, the leases alive in it. A
-- sorted set holds one member per lease, its token (lease.go), scored by
-- the lease's expiry (absolute µs); a lease is alive while now is before
-- its expiry. The key expires with the newest lease written to it. A
-- concurrency rule's w is the lease time and its cost is 1.

-- concurrency returns the steps of concurrency rules (see decision.lua)
-- and their codec, the one place such a window is read (load, wait,
-- figures, alive), written (write) and changed (extend, release); made when
-- a rule first needs them. Their states are records of key and n, the
-- leases alive.
local function concurrency()
  -- load drops the leases that expired by now and returns the state and
  -- how r stands on it: 0 it fits, 3 its leases are all alive.
  local function load(key, r, now)
    call('ZREMRANGEBYSCORE', key, '-inf', format('%d', now))
    local s = {key = key, n = call('ZCARD', key)}
    if s.n + r.cost > r.limit then
      return s, 3
    end
    return s, 0
  end

  -- wait returns how long from now until one more lease fits, once
  -- pending leases are held from now: until enough of the alive ones
  -- expire (the pending one, held a lease time, expires last).
  local function wait(s, r, pending, now)
    local need = s.n + pending + r.cost - r.limit
    if need <= 0 then
      return 0
    end
    if r.limit == 0 or need > s.n then
      return r.w
    end
    local e = call('ZRANGE', s.key, format('%d', need - 1), format('%d', need - 1), 'WITHSCORES')
    return e[2] - now
  end

  -- figures returns used (the leases alive) and reset-after µs (until the
  -- last one expires) for s at now, with pending more held from now.
  local function figures(s, r, now, pending)
    if pending > 0 then
      return s.n + pending, r.w
    end
    if s.n == 0 then
      return 0, 0
    end
    local e = call('ZRANGE', s.key, '-1', '-1', 'WITHSCORES')
    return s.n, e[2] - now
  end

  -- write holds the lease whose token is r.member (set by lease.lua) until
  -- now plus the lease time, and returns now, then figures'. Only a lease
  -- writes here: Decide sees a concurrency rule in a peek alone.
  local function write(s, r, now)
    if not r.member then
      error('concurrency rule window ' .. s.key .. ' written without a lease: only Acquire takes a slot', 0)
    end
    local exp = now + r.w
    call('ZADD', s.key, format('%d', exp), r.member)
    s.n = s.n + 1
    if r.own then -- expireAt's, inline: a call costs Redis hundreds of instructions per decision
      call('PEXPIRE', s.key, format('%d', max(1, ceil(r.w / 1000))))
    else
      call('PEXPIREAT', s.key, format('%d', ceil(exp / 1000)))
    end
    return now, s.n, r.w
  end

  -- extend moves the expiry of the lease whose token is token, when key
  -- holds it, to exp (absolute µs), and the key's with it.
  local function extend(key, token, exp, now, own)
    if call('ZADD', key, 'XX', 'CH', format('%d', exp), token) == 1 then
      expireAt(key, exp, now, own)
    end
  end

  -- release drops the lease whose token is token.
  local function release(key, token)
    call('ZREM', key, token)
  end

  -- alive returns the leases of key alive at now, soonest to expire first:
  -- their tokens and expiries (absolute µs). A member that is no token (32
  -- hex digits) is an error.
  local function alive(key, now)
    local nxt, tokens, exps = reader(call('ZRANGEBYSCORE', key, format('(%d', now), '+inf', 'WITHSCORES')), {}, {}
    for token in nxt do
      local exp = nxt()
      if #token ~= 32 or find(token, '[^0-9a-f]') then
        error('key ' .. key .. ' is not a concurrency rule\'s window (its member "' .. token ..
          '" is not a lease token): remove it or use another prefix', 0)
      end
      tokens[#tokens + 1], exps[#exps + 1] = token, tonumber(exp)
    end
    return tokens, exps
  end

  return {load = load, wait = wait, write = write, figures = figures, extend = extend, release = release, alive = alive}
end
