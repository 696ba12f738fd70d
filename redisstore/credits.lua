-- credits.lua: a credits balance (store.Credits). One string key,
-- "<balance>:<index>", holds the balance and the index of the calendar
-- period (store.Calendar; 0 without refills) it was last refilled in. A
-- balance is money: its key never expires. A key not in the store is a
-- balance of the rule's limit, in the current period. A read applies the
-- refills of the periods that began since the stored index (r.to: set to
-- To once; r.add: Add per period), in the script only: the key is written
-- when a write changes the balance, with the refills, since they can be
-- computed again until then.
--
-- The ids of the changes a Credit call applied (an idempotent purchase)
-- are a sorted set beside the balance, in its hash tag: member the id,
-- score the time (µs) it was applied; at most MAXIDS, none older than
-- IDTTL, and the set expires IDTTL after its newest id.
--
-- A credits state is a record of key, bal, idx and ends (the period of the
-- refills and its end, µs), and m: after wait, the periods until a refill
-- makes the cost fit (0 none will).

-- credits returns the steps of credits rules (see decision.lua) and their
-- codec, the one place a balance is read (load, decode), written (write,
-- apply) and adjusted (adjust). A script makes them when a rule first
-- needs them.
local function credits()
  -- A balance is written with VALUE's format. decode returns the balance
  -- and refill index value v holds; an error when v is not a balance.
  local VALUE = '%d:%d'
  local decode = pairReader('^(-?%d+):(-?%d+)$', 'a credits balance')

  -- MAXIDS is store.MaxCreditIDs, IDTTL store.CreditIDTTL in µs.
  local MAXIDS, IDTTL = 1000, 2592000000000

  -- load returns key's state at now, refilled, and how r stands on it: 0
  -- the balance pays for the cost, 1 it does not.
  local function load(key, r, now)
    local idx, ends = 0, 0
    if r.cal then
      idx, ends = periodOf(r, now)
    end
    creditsTaken = creditsTaken + 1
    local s = creditsStates[creditsTaken]
    if not s then
      s = {}
      if creditsTaken <= POOLED then creditsStates[creditsTaken] = s end
    end
    s.key, s.bal, s.idx, s.ends, s.m = key, r.limit, idx, ends, 0
    local v = call('GET', key)
    if v then
      local bal, at = decode(v, key)
      if idx > at then
        if r.to > 0 then
          bal = r.to
        elseif r.add > 0 then
          bal = min(bal + r.add * (idx - at), MAXCOST)
        end
      else
        s.idx = at -- a clock that stepped back refills nothing
      end
      s.bal = bal
    end
    if s.bal < r.cost then
      return s, 1
    end
    return s, 0
  end

  -- after returns a balance bal once cost is drawn from it: a decision
  -- never takes a balance below 0, so one that does not hold the cost
  -- (recorded whatever it holds) is drawn to 0, or left as it is when a
  -- settle took it below.
  local function after(bal, cost)
    if bal >= cost then
      return bal - cost
    end
    return min(bal, 0)
  end

  -- wait returns how long from now until r fits s, once pending units are
  -- drawn at now: 0, or until the next period starts when a refill will
  -- make the cost fit (s.m: in how many periods; the caller counts past
  -- the first), or MAXRETRY when none will.
  local function wait(s, r, pending, now)
    local bal = s.bal
    if pending > 0 then bal = after(bal, pending) end
    if bal >= r.cost then
      return 0
    end
    if r.cal then
      if r.to >= r.cost then
        s.m = 1
      elseif r.add > 0 then
        s.m = idiv(r.cost - bal + r.add - 1, r.add)
      end
      if s.m > 0 then
        return s.ends - now
      end
    end
    return MAXRETRY
  end

  -- figures returns the balance, with pending more units drawn, and in
  -- place of reset-after (0 for credits) s.m, wait's periods.
  local function figures(s, r, now, pending)
    if pending > 0 then
      return after(s.bal, pending), s.m
    end
    return s.bal, s.m
  end

  -- put writes s's balance and refill index to its key, with no expiry.
  local function put(s)
    call('SET', s.key, format(VALUE, s.bal, s.idx))
  end

  -- write draws r's cost from the balance. It returns now, then figures'.
  local function write(s, r, now)
    s.bal = after(s.bal, r.cost)
    put(s)
    return now, s.bal, s.m
  end

  -- adjust adds delta to the balance at key for rule r at now, after its
  -- refills (a settle: it may take the balance below 0), saturating at
  -- +-MAXCOST, for a lease that drew from the balance in refill period
  -- drawn (below 0: not known, or no calendar). A refill To since then set
  -- a balance that owes nothing to the draw: adjust then changes nothing,
  -- as the refill would have undone the change had it come just before.
  local function adjust(key, r, now, delta, drawn)
    local s = load(key, r, now)
    if r.to > 0 and drawn >= 0 and s.idx > drawn then
      return
    end
    s.bal = min(max(s.bal + delta, -MAXCOST), MAXCOST)
    put(s)
  end

  -- giveBack adds cost back to the balance key holds, as it is (a
  -- rollback, moments after the write), and reports whether the key held
  -- one.
  local function giveBack(key, cost)
    local v = call('GET', key)
    if not v then
      return false
    end
    local bal, idx = decode(v, key)
    call('SET', key, format(VALUE, min(bal + cost, MAXCOST), idx))
    return true
  end

  -- apply runs one Credit call on the balance at key for rule r at now:
  -- op 0 reads it, 1 adds amount, 2 sets it to amount; a non-empty id
  -- that the sorted set ids holds changes nothing. It returns the balance
  -- after the call, 1 when it changed as asked (else 0), and the time
  -- until the next refill (0 for none).
  local function apply(key, ids, r, now, op, amount, id)
    local s = load(key, r, now)
    local applied = 0
    if op ~= 0 then
      local fresh = true
      if id ~= '' then
        call('ZREMRANGEBYSCORE', ids, '-inf', format('%d', now - IDTTL))
        fresh = not call('ZSCORE', ids, id)
      end
      if fresh then
        if op == 1 then
          s.bal = min(max(s.bal + amount, -MAXCOST), MAXCOST)
        else
          s.bal = amount
        end
        put(s)
        applied = 1
        if id ~= '' then
          call('ZADD', ids, format('%d', now), id)
          local n = call('ZCARD', ids)
          if n > MAXIDS then
            call('ZREMRANGEBYRANK', ids, 0, n - MAXIDS - 1)
          end
          expireAt(ids, now + IDTTL, now, r.own)
        end
      end
    end
    local next = 0
    if r.cal and (r.to > 0 or r.add > 0) then
      next = s.ends - now
    end
    return {s.bal, applied, next}
  end

  return {load = load, wait = wait, write = write, figures = figures, decode = decode, adjust = adjust,
    giveBack = giveBack, apply = apply}
end
