-- counter.lua: a rule's sliding counter. One string key, "<bucket>:<prev>:
-- <curr>", holds the index of the current fixed window (a bucket of length
-- W, aligned to multiples of W) and the counts of the previous bucket and
-- the current one; it expires when the bucket after the current one ends.
-- The sliding window's count is estimated as curr plus prev weighted by the
-- part of the previous bucket the window still covers,
-- floor(prev * (W - elapsed) / W), in double precision as memstore does.
-- A counter state is a record of key, idx, prev and curr, rolled to now.

-- counter returns the sliding counter's steps (see decision.lua). A script makes them only
-- when one of its rules needs them, so that rules of the log alone do not
-- pay for what they do not use.
local function counter()
  local function roll(s, r, t)
    local idx = idiv(t, r.w)
    if idx == s.idx + 1 then
      s.idx, s.prev, s.curr = idx, s.curr, 0
    elseif idx ~= s.idx then
      s.idx, s.prev, s.curr = idx, 0, 0
    end
  end

  local function load(key, r, now)
    local s = {key = key, idx = idiv(now, r.w), prev = 0, curr = 0}
    local v = call('GET', key)
    if v then
      local i, j = find(v, ':', 1, true), find(v, ':', find(v, ':', 1, true) + 1, true)
      s.idx, s.prev, s.curr = tonumber(sub(v, 1, i - 1)), tonumber(sub(v, i + 1, j - 1)), tonumber(sub(v, j + 1))
      roll(s, r, now)
    end
    return s
  end

  -- estimate returns the estimated count at t of s, with pending more
  -- units in the current bucket of now.
  local function estimate(s, r, pending, t)
    local idx, prev, curr = s.idx, s.prev, s.curr + pending
    local next = idiv(t, r.w)
    if next == idx + 1 then
      idx, prev, curr = next, curr, 0
    elseif next ~= idx then
      idx, prev, curr = next, 0, 0
    end
    return curr + floor(prev * (r.w - (t - idx * r.w)) / r.w)
  end

  local function check(s, r, now)
    if estimate(s, r, 0, now) + r.cost > r.limit then
      return false, 'limit'
    end
    return true, nil
  end

  -- wait returns how long from now until r fits s, once pending
  -- units are recorded at now: the least time the estimate has room, found
  -- by bisection (it never grows as time passes), at most when the bucket
  -- after the current one ends.
  local function wait(s, r, pending, now)
    if r.limit == 0 then
      return r.w
    end
    local lo, hi = now, (s.idx + 2) * r.w
    if estimate(s, r, pending, now) + r.cost <= r.limit then
      return 0
    end
    while lo + 1 < hi do
      local mid = lo + floor((hi - lo) / 2)
      if estimate(s, r, pending, mid) + r.cost <= r.limit then
        hi = mid
      else
        lo = mid
      end
    end
    return hi - now
  end

  local function write(s, r, now)
    s.curr = s.curr + r.cost
    local ends = (s.idx + 2) * r.w
    call('SET', s.key, int(s.idx) .. ':' .. int(s.prev) .. ':' .. int(s.curr), 'PX', int(max(1, ceil((ends - now) / 1000))))
    return now
  end

  -- figures returns used (the estimate), remaining and reset-after µs
  -- (until the estimate falls to 0) for s at now, with pending more units.
  local function figures(s, r, now, pending)
    local used = estimate(s, r, pending, now)
    local reset = 0
    if s.curr + pending > 0 then
      reset = (s.idx + 2) * r.w - now
    elseif s.prev > 0 then
      reset = (s.idx + 1) * r.w - now
    end
    return used, max(0, r.limit - used), reset
  end

  return {load = load, check = check, wait = wait, write = write, figures = figures}
end
