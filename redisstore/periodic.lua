-- periodic.lua: a calendar quota's window (store.Periodic). One string
-- key, "<index>:<count>", holds the index of the calendar period it counts
-- (store.Calendar) and the cost counted in it; the count starts from 0 at
-- each period's start. Lua knows no time zones: the caller passes, per
-- rule, the index k of the period its own clock is in and the starts of
-- periods k-1 to k+2 (r.k, r.s0 to r.s3, µs), and the script takes the
-- period its clock falls in among k-1, k and k+1 (periodOf).
--
-- A rule that keeps History periods has a second key beside it, in its
-- hash tag (decision.lua's r.sk): a list of "<index>:<total>", newest
-- first, at most History long. A write in a newer period than the key's
-- moves the key's period there when it counted anything, so a decision
-- costs what it did without history but at a period's first write. The
-- count expires at its period's end, plus History times
-- MAXPERIOD with history (the totals must outlive it until they are moved),
-- and the list History times MAXPERIOD after the period of its newest
-- write ends.
--
-- A periodic state is a record of key, idx and ends (its period and that
-- period's end, µs), count, held (whether the key holds idx) and, when the
-- key holds an older period, old and oldc (its index and count).

-- MAXPERIOD is store.MaxPeriodLength in µs.
local MAXPERIOD = 31795200000000

-- periodOf returns the index and end (µs) of the period of r's calendar
-- (r.k, r.s0 to r.s3) that now falls in, among k-1, k and k+1; an error
-- when none: the clocks of the caller and the store differ by more than a
-- period.
local function periodOf(r, now)
  if now < r.s1 then
    if now >= r.s0 then return r.k - 1, r.s1 end
  elseif now < r.s2 then
    return r.k, r.s2
  elseif now < r.s3 then
    return r.k + 1, r.s3
  end
  error(format('calendar rule: the store\'s time %d µs is not in the periods %d to %d around the caller\'s time: the clocks of this process and the store differ by more than a period; synchronize them (NTP)', now, r.k - 1, r.k + 1), 0)
end

-- periodic returns the steps of calendar quotas (see decision.lua) and
-- their codec, the one place such a window is read (load, decode, usage),
-- written (write) and adjusted (adjust, for a settle or a rollback). A
-- script makes them when one of its rules first needs them.
local function periodic()
  -- A count is written with VALUE's format. decode returns the period
  -- index and count value v holds; an error when v is not a calendar
  -- quota's.
  local VALUE = '%d:%d'
  local decode = pairReader('^(-?%d+):(%d+)$', 'a calendar quota\'s count')

  -- endOf returns the end of period b of r's calendar when r knows it.
  local function endOf(r, b)
    if b == r.k - 1 then return r.s1 elseif b == r.k then return r.s2 elseif b == r.k + 1 then return r.s3 end
  end

  -- load returns key's state at now and how r stands on it: 0 it fits, 1
  -- no room for its cost in the period. A key of a later period than
  -- now's (a clock that stepped back) is counted in that period.
  local function load(key, r, now)
    local idx, ends = periodOf(r, now)
    periodicTaken = periodicTaken + 1
    local s = periodicStates[periodicTaken]
    if s then
      s.key, s.idx, s.ends, s.count, s.held, s.old, s.oldc = key, idx, ends, 0, false, false, 0
    else
      s = {key = key, idx = idx, ends = ends, count = 0, held = false, old = false, oldc = 0}
      if periodicTaken <= POOLED then periodicStates[periodicTaken] = s end
    end
    local v = call('GET', key)
    if v then
      local b, c = decode(v, key)
      if b == idx then
        s.count, s.held = c, true
      elseif b < idx then
        s.old, s.oldc = b, c
      else
        local e = endOf(r, b)
        if not e then
          error('calendar rule: key ' .. key .. ' counts period ' .. b .. ', after the store\'s time\'s period ' .. idx .. ': the store\'s clock stepped back by more than a period', 0)
        end
        s.idx, s.ends, s.count, s.held = b, e, c, true
      end
    end
    if s.count > r.limit - r.cost then -- exact: s.count + r.cost may pass 2^53
      return s, 1
    end
    return s, 0
  end

  -- wait returns how long from now until r fits s, once pending units are
  -- recorded at now: 0, or until the period ends (the next starts at 0),
  -- or MAXRETRY for a cost above the limit, which never fits.
  local function wait(s, r, pending, now)
    if r.cost > r.limit then
      return MAXRETRY
    end
    if min(s.count + pending, MAXCOST) > r.limit - r.cost then
      return s.ends - now
    end
    return 0
  end

  -- figures returns used (the period's count) and reset-after µs (until
  -- the period ends; 0 when nothing is counted) for s at now, with
  -- pending more units.
  local function figures(s, r, now, pending)
    local used = min(s.count + pending, MAXCOST)
    if used > 0 then
      return used, s.ends - now
    end
    return 0, 0
  end

  -- write adds r's cost to the period's count, saturating at MAXCOST. A key
  -- that holds the period keeps its expiry; otherwise the period before,
  -- when it counted anything and r keeps history, goes to the history list
  -- (r.sk), and the key expires at the period's end (plus the history's
  -- keep). It returns now, then figures'.
  local function write(s, r, now)
    s.count = min(s.count + r.cost, MAXCOST)
    local v = format(VALUE, s.idx, s.count)
    if s.held then
      call('SET', s.key, v, 'KEEPTTL')
      return now, s.count, s.ends - now
    end
    s.held = true
    local keep = s.ends + r.hist * MAXPERIOD
    if r.hist > 0 and s.old and s.oldc > 0 then
      call('LPUSH', r.sk, format(VALUE, s.old, s.oldc))
      call('LTRIM', r.sk, 0, r.hist - 1)
      expireAt(r.sk, keep, now, r.own)
    end
    if r.own then
      call('SET', s.key, v, 'PX', format('%d', max(1, ceil((keep - now) / 1000))))
    else
      call('SET', s.key, v)
      call('PEXPIREAT', s.key, format('%d', ceil(keep / 1000)))
    end
    return now, s.count, s.ends - now
  end

  -- adjust adds delta to the count of period idx, in key when it holds
  -- that period, else in the history list hkey (nil: none) when an entry
  -- holds it, keeping expiries, and reports whether it did: never below 0,
  -- which whole refuses (the count left as it is) and otherwise clamps
  -- to, and never above MAXCOST.
  local function adjust(key, hkey, idx, delta, whole)
    local function moved(c)
      if whole and c + delta < 0 then return nil end
      return min(max(0, c + delta), MAXCOST)
    end
    local v = call('GET', key)
    if v then
      local b, c = decode(v, key)
      if b == idx then
        c = moved(c)
        if not c then return false end
        call('SET', key, format(VALUE, b, c), 'KEEPTTL')
        return true
      end
    end
    if not hkey then
      return false
    end
    local list = call('LRANGE', hkey, 0, -1)
    for i, e in ipairs(list) do
      local b, c = decode(e, hkey)
      if b == idx then
        c = moved(c)
        if not c then return false end
        call('LSET', hkey, i - 1, format(VALUE, b, c))
        return true
      elseif b < idx then
        return false
      end
    end
    return false
  end

  -- usage returns the counts key and its history list hkey (nil: none)
  -- hold, as a list of index, count, index, count..., the key's first.
  local function usage(key, hkey)
    local out = {}
    local v = call('GET', key)
    if v then
      out[1], out[2] = decode(v, key)
    end
    if hkey then
      for _, e in ipairs(call('LRANGE', hkey, 0, -1)) do
        local b, c = decode(e, hkey)
        out[#out + 1], out[#out + 2] = b, c
      end
    end
    return out
  end

  return {load = load, wait = wait, write = write, figures = figures, decode = decode, adjust = adjust, usage = usage}
end
