-- slices.lua: the slices of budgeted windows (store.Budgeter), beside each
-- algorithm's codec: the steps of a budgeted log and a budgeted GCRA bucket
-- (see decision.lua), which count the slices held in the window, and each
-- algorithm's grant and return of a slice. budget.lua leases and returns
-- slices; decide.lua decides per request in a budgeted window through the
-- same steps.
--
-- A log's or GCRA bucket's slices live in a sorted set of their own beside
-- the window's key, in its hash tag ('!s' after the tag, budget.go), which
-- the caller declares (decision.lua's r.sk): member "<cost>:<id>",
-- score a time in absolute µs, the slice's entry stamp for the log (its
-- End, or the time of its return), its End for GCRA. The log's own sorted
-- set holds running totals in time order, which an entry in the future or
-- one that shrinks would renumber: its slices stay apart, and every figure
-- merges the two. A sliding counter keeps nothing per slice: a slice is
-- cost in its current bucket.
--
-- slices returns the steps and operations; a script makes them only when a
-- budgeted window needs them, so that other rules do not pay for them.
local function slices()
  local g = gcra()

  -- sliceMember returns the member of a slice of cost c and id; costOf
  -- reads a member's cost.
  local function sliceMember(c, id)
    return format('%d:', c) .. id
  end

  local function costOf(m)
    return tonumber(sub(m, 1, find(m, ':', 1, true) - 1))
  end

  -- held returns the scores (absolute µs) and costs of the slices at sk,
  -- earliest first.
  local function held(sk)
    local nxt, scores, costs = reader(call('ZRANGE', sk, '0', '-1', 'WITHSCORES')), {}, {}
    for m in nxt do
      scores[#scores + 1], costs[#costs + 1] = tonumber(nxt()), costOf(m)
    end
    return scores, costs
  end

  -- keepUntil makes key expire at at (absolute µs), or deletes it when at
  -- has passed.
  local function keepUntil(key, at, now, own)
    if at <= now then
      call('DEL', key)
    else
      expireAt(key, at, now, own)
    end
  end

  ---------------------------------------------------------------- the log

  -- logSlices reads into log state s the slices at sk of a window of w µs
  -- that count at now: sk, st and sc (their stamps and costs, in time
  -- order), sx (the sum of their costs).
  local function logSlices(s, sk, w, now)
    local list = call('ZRANGEBYSCORE', sk, format('(%d', now - w), '+inf', 'WITHSCORES')
    local st, sc, sx = {}, {}, 0
    for k = 1, #list, 2 do
      local c = costOf(list[k])
      st[#st + 1], sc[#sc + 1], sx = tonumber(list[k + 1]), c, sx + c
    end
    s.sk, s.st, s.sc, s.sx = sk, st, sc, sx
  end

  -- withSlices adds s's slices to a log's used and reset-after µs.
  local function withSlices(s, r, now, used, reset)
    local n = #s.st
    if n == 0 then return used, reset end
    return used + s.sx, max(reset, s.st[n] + r.w - now)
  end

  local function logLoadB(key, r, now)
    local s = logLoad(key, r, now)
    logSlices(s, r.sk, r.w, now)
    if s.used + s.sx + r.cost > r.limit then return s, 1 end
    return s, 0
  end

  local function logFiguresB(s, r, now, pending)
    return withSlices(s, r, now, logFigures(s, r, now, pending))
  end

  local function logWriteB(s, r, now)
    local at, used, reset = logWrite(s, r, now)
    used, reset = withSlices(s, r, now, used, reset)
    return at, used, reset
  end

  -- logWaitB returns how long from now until r fits s once pending units
  -- are recorded at now: the log's entries, the pending ones and the
  -- slices' entries leave in time order, until they free what r needs.
  local function logWaitB(s, r, pending, now)
    local need = s.used + s.sx + pending + r.cost - r.limit
    if need <= 0 then return 0 end
    if s.sx == 0 then return logWait(s, r, pending, now) end
    flush(s)
    local w, lt, lc, li, more, from = r.w, {}, {}, 1, s.epoch ~= nil, nil
    if more then from = format('(%d', now - w - s.epoch) end
    local function fill() -- the log's entries, 64 at a time (window.lua's logPage)
      lt, lc, from = logPage(s.key, s.epoch, from, 64)
      li, more = 1, from ~= nil
    end
    local st, sc, si, freed, last = s.st, s.sc, 1, 0, now
    local pend = pending > 0
    while true do
      if li > #lt and more then fill() end
      local t, c, which = nil, 0, 0
      if li <= #lt then t, c, which = lt[li], lc[li], 1 end
      if pend and (not t or now < t) then t, c, which = now, pending, 2 end
      if si <= #st and (not t or st[si] < t) then t, c, which = st[si], sc[si], 3 end
      if not t then break end
      if which == 1 then li = li + 1 elseif which == 2 then pend = false else si = si + 1 end
      freed, last = freed + c, t
      if freed >= need then return t + w - now end
    end
    return last + w - now -- more than the limit: when the last leaves
  end

  -- logGrant grants a slice of at most want units of s's window to id, at
  -- now until now + life, from its room; it returns the units granted.
  local function logGrant(s, r, want, life, id, now)
    local n = min(want, r.limit - s.used - s.sx)
    if n <= 0 then return 0 end
    local e = now + life
    call('ZREMRANGEBYSCORE', s.sk, '-inf', format('%d', now - r.w))
    call('ZADD', s.sk, format('%d', e), sliceMember(n, id))
    s.st[#s.st + 1], s.sc[#s.sc + 1], s.sx = e, n, s.sx + n -- its end is the latest: slices of one window share Budget
    keepUntil(s.sk, e + r.w, now, r.own)
    return n
  end

  -- logReturn gives back the unused part of slice id of granted units
  -- ending at e, used of them admitted, in the slices at sk of a window of
  -- w µs at now: its entry's cost becomes used, its stamp min(e, now), or it
  -- goes when used is 0; nothing once it has left the window.
  local function logReturn(sk, w, id, e, granted, used, now, own)
    local m = sliceMember(granted, id)
    local at = call('ZSCORE', sk, m)
    if not at or tonumber(at) <= now - w then return end
    call('ZREM', sk, m)
    if used > 0 then
      call('ZADD', sk, format('%d', min(e, now)), sliceMember(used, id))
    end
    local last = call('ZRANGE', sk, '-1', '-1', 'WITHSCORES')[2]
    if last then keepUntil(sk, tonumber(last) + w, now, own) end
  end

  ---------------------------------------------------------------- GCRA

  -- gcraHolds settles the holds (at hk) of key's bucket (interval iv) that
  -- ended by now, earliest first, each by TAT = max(TAT, End + H*iv), then caps the
  -- TAT at now + H*iv (held tokens count against the burst), writing the
  -- TAT when it moved. It returns the holds' key, H, the latest End held
  -- and the TAT (nil for no key).
  local function gcraHolds(key, hk, iv, now, own)
    local list = call('ZRANGE', hk, '0', '-1', 'WITHSCORES')
    local tat = g.tatOf(key)
    if #list == 0 then return hk, 0, 0, tat end
    local h, gone, lastEnd = 0, {}, 0
    for k = 1, #list, 2 do
      h = h + costOf(list[k])
    end
    local t = tat or 0
    for k = 1, #list, 2 do
      local e = tonumber(list[k + 1])
      if e > now then
        lastEnd = tonumber(list[#list])
        break
      end
      t = max(t, e + h * iv)
      h = h - costOf(list[k])
      gone[#gone + 1] = list[k]
    end
    if #gone > 0 then call('ZREM', hk, unpack(gone)) end
    if h > 0 then t = max(t, now + h * iv) end
    if t ~= (tat or 0) then
      if t > now then
        call('SET', key, format('%d', t))
        keepUntil(key, max(t, lastEnd + h * iv), now, own)
        tat = t
      else
        call('DEL', key)
        tat = nil
      end
    end
    if h > 0 then keepUntil(hk, max(t, lastEnd + h * iv), now, own) end
    return hk, h, lastEnd, tat
  end

  local function gcraLoadB(key, r, now)
    local hk, h, lastEnd = gcraHolds(key, r.sk, r.iv, now, r.own)
    local s, code = g.load(key, r, now)
    s.hk, s.h, s.hend = hk, h, lastEnd
    return s, code
  end

  -- gcraKeep makes s's TAT and holds last as long as the holds need:
  -- until the latest End plus the held intervals.
  local function gcraKeep(s, r, now)
    if s.h > 0 then
      local at = max(s.tat, s.hend + s.h * r.iv)
      keepUntil(s.key, at, now, r.own)
      keepUntil(s.hk, at, now, r.own)
    end
  end

  local function gcraWriteB(s, r, now)
    local at, used, reset = g.write(s, r, now)
    gcraKeep(s, r, now)
    return at, used, reset
  end

  -- gcraGrant grants a slice of at most want units of s's bucket to id,
  -- held until now + life: what the burst has left; it moves the TAT on
  -- by the units' intervals.
  local function gcraGrant(s, r, want, life, id, now)
    local used = g.figures(s, r, now, 0)
    local n = min(want, r.burst - used)
    if n <= 0 or r.limit == 0 then return 0 end
    local e = now + life
    call('ZADD', s.hk, format('%d', e), sliceMember(n, id))
    s.h, s.hend = s.h + n, max(s.hend, e)
    s.tat, s.held = max(s.tat, now) + n * r.iv, true
    call('SET', s.key, format('%d', s.tat))
    keepUntil(s.key, s.tat, now, r.own)
    gcraKeep(s, r, now)
    return n
  end

  -- gcraReturn gives back the unused part of slice id of granted units held
  -- until e, used of them admitted, in key's bucket (its holds at hk) of
  -- interval iv at now:
  -- the TAT moves back by the unused units' intervals and the hold ends,
  -- never below now plus the holds left. A slice no longer held was settled
  -- at its end.
  local function gcraReturn(key, hk, iv, id, e, granted, used, now, own)
    local _, h, lastEnd, tat = gcraHolds(key, hk, iv, now, own)
    local m = sliceMember(granted, id)
    if e <= now or not call('ZSCORE', hk, m) then return end
    local t = max(tat or now, now + h * iv) - (granted - used) * iv
    call('ZREM', hk, m)
    h = h - granted
    t = max(t, now + h * iv)
    if t > now then
      call('SET', key, format('%d', t))
      keepUntil(key, max(t, lastEnd + h * iv), now, own)
    else
      call('DEL', key)
    end
    if h > 0 then keepUntil(hk, max(t, lastEnd + h * iv), now, own) end
  end

  ---------------------------------------------------------------- the counter

  -- counterGrant grants a slice of at most want units of counter state s
  -- to id, with the counter's steps c: the room its estimate leaves, added
  -- to the current bucket as a request's cost is.
  local function counterGrant(c, s, r, want, now)
    local used = c.figures(s, r, now, 0)
    local n = min(want, r.limit - used)
    if n <= 0 then return 0 end
    local cost = r.cost
    r.cost = n
    c.write(s, r, now)
    r.cost = cost
    return n
  end

  return {
    log = {load = logLoadB, wait = logWaitB, write = logWriteB, figures = logFiguresB},
    gcra = {load = gcraLoadB, wait = g.wait, write = gcraWriteB, figures = g.figures},
    logGrant = logGrant, logReturn = logReturn, gcraGrant = gcraGrant, gcraReturn = gcraReturn,
    counterGrant = counterGrant, held = held,
  }
end
