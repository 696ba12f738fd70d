-- gcra.lua: a rule's bucket under GCRA. One string key holds the
-- theoretical arrival time (TAT, absolute µs): when the bucket would be
-- full again if nothing else came; it expires then, as a full bucket is as
-- good as none. Each unit of cost moves the TAT on by the interval,
-- Window/Limit rounded up to a whole µs; a request fits at now when
-- max(TAT, now) + cost*interval - now is at most burst intervals.
-- A GCRA state is a record of key and tat (never before the time it holds
-- for).

-- gcra returns GCRA's steps (see decision.lua). A script makes them only
-- when one of its rules needs them, so that rules of the log alone do not
-- pay for what they do not use.
local function gcra()
  local function interval(r)
    if r.limit <= 0 then
      return r.w -- a limit of 0 admits nothing
    end
    return idiv(r.w + r.limit - 1, r.limit)
  end

  local function load(key, r, now)
    local tat = tonumber(call('GET', key))
    return {key = key, tat = max(tat or now, now)}
  end

  -- check returns whether r fits s at now, and why not.
  local function check(s, r, now)
    local iv = interval(r)
    if r.limit == 0 or s.tat + (r.cost - r.burst) * iv > now then
      return false, 'limit'
    end
    return true, nil
  end

  -- wait returns how long from now until r fits s, once pending units
  -- are recorded at now.
  local function wait(s, r, pending, now)
    if r.limit == 0 then
      return r.w
    end
    local iv = interval(r)
    return max(0, s.tat + (pending + r.cost - r.burst) * iv - now)
  end

  local function write(s, r, now)
    s.tat = s.tat + r.cost * interval(r)
    call('SET', s.key, int(s.tat), 'PX', int(max(1, ceil((s.tat - now) / 1000))))
    return now
  end

  -- figures returns used, remaining and reset-after µs for s at now, with
  -- pending more units recorded: remaining is what is left of the burst,
  -- used the rest of it, reset the time until the bucket is full again.
  local function figures(s, r, now, pending)
    if r.limit == 0 then
      return 0, 0, 0
    end
    local iv = interval(r)
    local level = s.tat + pending * iv - now
    local remaining = min(r.burst, max(0, idiv(max(0, r.burst * iv - level), iv)))
    return r.burst - remaining, remaining, level
  end

  return {load = load, check = check, wait = wait, write = write, figures = figures}
end
