-- counter.lua: a rule's sliding counter. One string key, "<bucket>:<prev>:
-- <curr>", holds the index of the current fixed window (a bucket of length
-- W, aligned to multiples of W) and the counts of the previous bucket and
-- the current one; it expires when the bucket after the current one ends.
-- The sliding window's count is estimated as curr plus prev weighted by the
-- part of the previous bucket the window still covers,
-- floor(prev * (W - elapsed) / W), in double precision as memstore does.
-- A counter state is a record of key, idx, prev and curr, rolled to now,
-- and held: whether the key holds bucket idx (its expiry is then that
-- bucket's).

-- counter returns the sliding counter's steps (see decision.lua) and its
-- codec, the one place a counter is read (decode, load), written (write)
-- and adjusted (add). A script makes them only when one of its rules needs
-- them, so that rules of the log alone do not pay for what they do not use.
local function counter()
  local match = string.match

  -- A counter's value is written with VALUE's format and read with
  -- PATTERN. decode returns the bucket, previous and current counts of
  -- value v, nothing when v is not a counter's. load and write, the hot
  -- steps, apply PATTERN and VALUE themselves: a call costs Redis hundreds
  -- of instructions per decision.
  local VALUE, PATTERN = '%d:%d:%d', '^(%d+):(%d+):(%d+)$'

  local function decode(v)
    local idx, prev, curr = match(v, PATTERN)
    if idx then
      return idx + 0, prev + 0, curr + 0
    end
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

  -- load returns key's state, rolled to now, and how r stands on it: 0 it
  -- fits, 1 no room.
  local function load(key, r, now)
    local idx = idiv(now, r.w)
    counterTaken = counterTaken + 1
    local s = counterStates[counterTaken]
    if s then
      s.key, s.idx, s.prev, s.curr, s.held = key, idx, 0, 0, false
    else
      s = {key = key, idx = idx, prev = 0, curr = 0, held = false}
      if counterTaken <= POOLED then counterStates[counterTaken] = s end
    end
    local v = call('GET', key)
    if v then
      local b, prev, curr = match(v, PATTERN)
      b = b + 0
      if b == idx then
        s.prev, s.curr, s.held = prev + 0, curr + 0, true
      elseif b + 1 == idx then
        s.prev = curr + 0
      end
    end
    if estimate(s, r, 0, now) + r.cost > r.limit then
      return s, 1
    end
    return s, 0
  end

  -- solve returns about the least e at which a previous bucket of count
  -- prev, weighted by (w - e) / w, counts at most room.
  local function solve(w, prev, room)
    return floor(w - (room + 1) * w / prev) + 1
  end

  -- wait returns how long from now until r fits s, once pending units are
  -- recorded at now: the least t at which the estimate has room (it never
  -- grows as time passes), at most when the bucket after the current one
  -- ends. It solves for the elapsed time in the bucket of now, then in the
  -- next, and steps to where the fit changes, since doubles may put the
  -- solution a µs off: memstore does the same.
  local function wait(s, r, pending, now)
    if r.limit == 0 then
      return r.w
    end
    if r.cost > r.limit then
      -- recorded over the limit (mode record): it never fits; until both
      -- buckets are empty, as memstore answers
      return (s.idx + 2) * r.w - now
    end
    local function fits(t)
      return estimate(s, r, pending, t) + r.cost <= r.limit
    end
    if fits(now) then
      return 0
    end
    local w, b, curr = r.w, s.idx, s.curr + pending -- s is rolled to now
    local t = (b + 2) * w
    local room = r.limit - r.cost - curr
    if room >= 0 and s.prev > 0 then
      t = b * w + solve(w, s.prev, room)
    end
    if t >= (b + 1) * w then
      t = (b + 1) * w
      if curr > 0 then
        t = t + max(0, solve(w, curr, r.limit - r.cost))
      end
    end
    t = min(max(t, now + 1), (b + 2) * w)
    while t - 1 > now and fits(t - 1) do
      t = t - 1
    end
    while not fits(t) do
      t = t + 1
    end
    return t - now
  end

  -- figures returns used (the estimate) and reset-after µs (until the
  -- estimate falls to 0) for s at now, with pending more units.
  local function figures(s, r, now, pending)
    local used = estimate(s, r, pending, now)
    local reset = 0
    if s.curr + pending > 0 then
      reset = (s.idx + 2) * r.w - now
    elseif s.prev > 0 then
      reset = (s.idx + 1) * r.w - now
    end
    return used, reset
  end

  -- write adds r's cost to the current bucket. A key that holds the bucket
  -- keeps its expiry; otherwise the key expires when the bucket after it
  -- ends. It returns now, then figures'.
  local function write(s, r, now)
    s.curr = s.curr + r.cost
    local v = format(VALUE, s.idx, s.prev, s.curr)
    if s.held then
      call('SET', s.key, v, 'KEEPTTL')
      return now, figures(s, r, now, 0)
    end
    s.held = true
    local ends = (s.idx + 2) * r.w
    if r.own then
      call('SET', s.key, v, 'PX', format('%d', max(1, ceil((ends - now) / 1000))))
    else
      call('SET', s.key, v)
      call('PEXPIREAT', s.key, format('%d', ceil(ends / 1000)))
    end
    return now, figures(s, r, now, 0)
  end

  -- add adds delta to the count of the bucket that at (absolute µs) fell
  -- in, when key holds it as its current or previous bucket, keeping the
  -- key's expiry, and reports whether it did: never below 0, which whole
  -- refuses (the count left as it is) and otherwise clamps to.
  local function add(key, w, at, delta, whole)
    local v = call('GET', key)
    if not v then
      return false
    end
    local idx, prev, curr = decode(v)
    local b = idiv(at, w)
    if b == idx and not (whole and curr + delta < 0) then
      curr = max(0, curr + delta)
    elseif b == idx - 1 and not (whole and prev + delta < 0) then
      prev = max(0, prev + delta)
    else
      return false
    end
    call('SET', key, format(VALUE, idx, prev, curr), 'KEEPTTL')
    return true
  end

  return {load = load, wait = wait, write = write, figures = figures, decode = decode, add = add}
end
