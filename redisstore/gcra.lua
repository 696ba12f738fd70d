-- gcra.lua: a rule's bucket under GCRA. One string key holds the
-- theoretical arrival time (TAT, absolute µs): when the bucket would be
-- full again if nothing else came; it expires then, as a full bucket is as
-- good as none. Each unit of cost moves the TAT on by the interval,
-- Window/Limit rounded up to a whole µs (the rule's iv); a request fits at
-- now when max(TAT, now) + cost*interval - now is at most burst intervals.
-- A GCRA state is a record of key, tat (never before the time it holds
-- for), held (whether the key holds that tat: it was not behind) and old
-- (when not, the TAT the key holds, 0 for none).

-- gcra returns GCRA's steps (see decision.lua) and its codec, the one place
-- a bucket is read (tatOf), written (write, expireAt's) and moved (move,
-- rewind). A script makes them only when one of its rules needs them, so
-- that rules of the log alone do not pay for what they do not use.
local function gcra()
  -- decode returns the TAT value v holds, nil when it holds none; tatOf
  -- the TAT key holds, nil for no key, and raises an error when key holds
  -- something else. A TAT is written with format's %d.
  local function decode(v)
    return tonumber(v)
  end

  local function tatOf(key)
    local v = call('GET', key)
    local tat = v and decode(v)
    if v and not tat then
      error('key ' .. key .. ' is not a GCRA bucket (it holds "' .. v .. '"): remove it or use another prefix', 0)
    end
    return tat
  end

  -- load returns key's state at now and how r stands on it: 0 it fits, 1
  -- no room.
  local function load(key, r, now)
    local tat = call('GET', key) -- tatOf's read, inline: a call costs Redis hundreds of instructions
    if tat then
      tat = tat + 0
    end
    gcraTaken = gcraTaken + 1
    local s = gcraStates[gcraTaken]
    if not s then
      s = {key = key, tat = now, held = false, old = 0}
      if gcraTaken <= POOLED then gcraStates[gcraTaken] = s end
    end
    if tat and tat >= now then
      s.key, s.tat, s.held = key, tat, true
    else
      s.key, s.tat, s.held, s.old = key, now, false, tat or 0
    end
    if r.limit == 0 or s.tat + (r.cost - r.burst) * r.iv > now then
      return s, 1
    end
    return s, 0
  end

  -- wait returns how long from now until r fits s, once pending units
  -- are recorded at now.
  local function wait(s, r, pending, now)
    if r.limit == 0 then
      return r.w
    end
    local d = s.tat + (pending + r.cost - r.burst) * r.iv - now
    if d < 0 then return 0 end
    return d
  end

  -- figures returns used and reset-after µs for s at now, with pending
  -- more units recorded: used is the part of the burst taken (remaining,
  -- what is left of it, is burst - used), reset the time until the bucket
  -- is full again.
  local function figures(s, r, now, pending)
    if r.limit == 0 then
      return 0, 0
    end
    local iv = r.iv
    local level = s.tat + pending * iv - now
    local room = r.burst * iv - level
    if room <= 0 then
      return r.burst, level
    end
    local remaining = idiv(room, iv)
    if remaining > r.burst then remaining = r.burst end
    return r.burst - remaining, level
  end

  -- write moves the TAT on, by INCRBY: of the step when the key holds the
  -- TAT, else (the key behind or absent) of what takes the value it holds
  -- (old, 0 for none) to now's TAT, so that the key holds the same integer
  -- as a SET would leave, for less (an integer reply, no status to
  -- convert); then the key expires at the new TAT. It returns now, then
  -- figures'.
  local function write(s, r, now)
    local add = r.cost * r.iv
    if s.held then
      call('INCRBY', s.key, r.step)
    else
      call('INCRBY', s.key, format('%d', s.tat + add - s.old))
      s.held = true
    end
    s.tat = s.tat + add
    if r.own then -- expireAt's, inline as load's read is
      call('PEXPIRE', s.key, format('%d', max(1, ceil((s.tat - now) / 1000))))
    else
      call('PEXPIREAT', s.key, format('%d', ceil(s.tat / 1000)))
    end
    return now, figures(s, r, now, 0)
  end

  -- move moves key's TAT by d µs (forward when d > 0) from max(TAT, now),
  -- never before now: a bucket full again is no key.
  local function move(key, d, now, own)
    local tat = max(tatOf(key) or 0, now) + d
    if tat <= now then
      call('DEL', key)
      return
    end
    call('SET', key, format('%d', tat))
    expireAt(key, tat, now, own)
  end

  -- rewind moves the TAT key holds back by d µs, and its expiry with it
  -- (a rollback knows neither the time nor the clock), and reports whether
  -- the key held one.
  local function rewind(key, d)
    local tat = tatOf(key)
    if not tat then
      return false
    end
    local pttl = call('PTTL', key)
    call('SET', key, format('%d', tat - d), 'PX', format('%d', max(1, pttl - ceil(d / 1000))))
    return true
  end

  return {load = load, wait = wait, write = write, figures = figures, decode = decode, tatOf = tatOf, move = move, rewind = rewind}
end
