-- window.lua holds what the scripts that read and write rule windows share:
-- the layout of a window and the decision over one request. Each such
-- script is this file followed by its own main part (decide.lua, batch.lua,
-- rollback.lua, inspect.lua); see scripts.go.
--
-- A window is a sorted set holding:
--
--   * one entry per instant at which the key recorded something. Its score
--     is the instant in µs after the key's epoch, a small integer; its
--     member is the key's running total of cost ("end") up to and including
--     that instant, followed by ":<cost>" when the instant's cost is not 1:
--     "7" is cost 1 with end 7, "12:5" cost 5 with end 12. Requests recorded
--     at one instant share its entry (its end and cost grow), so scores are
--     unique, ends grow with time, and an instant of any cost is one entry.
--   * the epoch entry: member "@<epoch>", the key's epoch in µs, and score
--     +inf, so that it is always last.
--
-- Both numbers of an event entry stay small (a few bytes each in a
-- listpack): ends restart at 0 and the epoch at the write whenever nothing
-- counts any more, and a key that never empties is rebased (see rebase)
-- before its scores pass 2^30 µs.
--
-- The window at time T is (T-W, T]. The entries it counts are the newest;
-- used = end(newest) - (end(oldest counted) - cost(oldest counted)), two
-- reads whatever the number of entries, and one while the epoch is in the
-- window: then nothing has left it, and used = end(newest). The newest
-- entry is kept even after it left the window, until the key expires, to
-- enforce the minimum gap.

local call, format, tonumber, byte, find, sub = redis.call, string.format, tonumber, string.byte, string.find, string.sub
local floor = math.floor

-- Numbers are passed to Redis formatted as integers: Lua's own conversion
-- would write large ones in exponent form, and Redis's conversion of a Lua
-- number is slower than string.format's of an integer.
local function int(n)
  return format('%d', n)
end

-- member returns the member of an entry with end e and cost c.
local function member(e, c)
  if c == 1 then
    return int(e)
  end
  return int(e) .. ':' .. int(c)
end

-- parse returns the end and cost of a member.
local function parse(m)
  local e = tonumber(m)
  if e then
    return e, 1
  end
  local i = find(m, ':', 1, true)
  return tonumber(sub(m, 1, i - 1)), tonumber(sub(m, i + 1))
end

-- newest reads a key's newest entry and epoch: whether the key exists, then
-- the epoch, the newest entry's member and its time (absolute µs), or nils
-- when the key holds no entry. A key written by something else is an error.
local function newest(key)
  local r = call('ZRANGE', key, '-2', '-1', 'WITHSCORES')
  local last = r[3] or r[1]
  if not last then
    return false
  end
  local epoch = byte(last, 1) == 64 and tonumber(sub(last, 2)) -- '@'
  if not epoch then
    error('key ' .. key .. ' is not a sluice window (its last member is "' .. last .. '"): ' ..
      'remove it or use another prefix', 0)
  end
  if not r[3] then
    return true -- the epoch alone: nothing recorded
  end
  return true, epoch, r[1], epoch + tonumber(r[2])
end

-- TRIM is how many units of cost a key records between two trims of the
-- entries that left its window: they no longer count, and a few kept for a
-- while save a command on most writes.
local TRIM = 8

-- REBASE is the relative score past which a key that never empties gets a
-- new epoch, so that scores stay within 4-byte integers.
local REBASE = 1073741824 -- 2^30 µs, about 18 minutes

-- rebase rewrites a live key's entries from a new epoch, the oldest counted
-- entry's time, with ends counted from what it held before it. cutoff is
-- the window's start relative to the old epoch; fm, fe and fc the oldest
-- counted entry's member, end and cost. It returns the new epoch and the
-- amount subtracted from every end. The key is written anew: its expiry is
-- gone, and the caller sets it.
local function rebase(key, epoch, cutoff, fm, fe, fc)
  local shift = tonumber(call('ZSCORE', key, fm))
  local fts, base = epoch + shift, fe - fc
  call('ZREMRANGEBYSCORE', key, '-inf', int(cutoff))
  local all = call('ZRANGE', key, '0', '-2', 'WITHSCORES')
  call('DEL', key)
  local args = {'ZADD', key}
  for k = 1, #all, 2 do
    local e, c = parse(all[k])
    args[#args + 1] = int(tonumber(all[k + 1]) - shift)
    args[#args + 1] = member(e - base, c)
    if #args >= 2002 or k + 1 == #all then
      call(unpack(args))
      args = {'ZADD', key}
    end
  end
  call('ZADD', key, '+inf', '@' .. int(fts))
  return fts, base
end

-- ruleArgs returns decide's rules for the arguments args[from..to], three
-- per rule: window µs, limit, min gap µs.
local function ruleArgs(args, from, to)
  local rules = {}
  for j = from, to, 3 do
    local w, g = tonumber(args[j]), tonumber(args[j + 2])
    rules[#rules + 1] = w
    rules[#rules + 1] = tonumber(args[j + 1])
    rules[#rules + 1] = g
    rules[#rules + 1] = int(math.ceil((w + g) / 1000))
  end
  return rules
end

-- seen holds, per key this script call wrote, where sv holds the key's
-- state after the write, which holds for later requests of the call
-- (batch.lua decides many) at the same time with the same window: from
-- sv[c + 1], with c = seen[key], now, window, epoch, the newest entry's
-- member as Redis holds it, its time, end and cost, the oldest counted
-- entry's member, end and cost (no member, 0 and 0 while nothing has left
-- the window: what counts is end - cost, the total before that entry), and
-- whether the newest entry's end and cost have grown since Redis got it. (One table for all keys: a decision's cost
-- is mostly in what it allocates.) A request that finds its key there
-- reads nothing, and one recorded at the newest entry's instant only
-- updates the state: flush writes it when the call ends, or before Redis is
-- read for that key. The oldest counted entry is the newest when their ends
-- are equal. dirty lists the keys whose state has grown, in order.
local seen, sv, nsv, dirty = {}, {}, 0, {}

-- flush writes the grown newest entry of key, if any.
local function flush(key)
  local c = seen[key]
  if c and sv[c + 11] then
    call('ZREM', key, sv[c + 4])
    sv[c + 4] = member(sv[c + 6], sv[c + 7])
    call('ZADD', key, int(sv[c + 5] - sv[c + 3]), sv[c + 4])
    if sv[c + 9] == sv[c + 6] then
      sv[c + 8] = sv[c + 4]
    end
    sv[c + 11] = false
  end
end

-- flushAll flushes every key; each script calls it before it returns.
local function flushAll()
  for k = 1, #dirty do
    flush(dirty[k])
  end
end

-- decide decides one request against the rules whose windows are keys:
-- rules holds four values per rule: window µs, limit, minimum gap µs, and
-- the key's lifetime in ms as a decimal string (rules, which batch.lua
-- shares between requests, makes each such string once).
-- mode is "allow" (record only if every rule fits), "peek" (never record),
-- "record" (always record) or "group" ("allow" for one slot group of a
-- policy whose rules span several hash tags, see crossslot.go).
--
-- It appends to out four numbers per rule: fits (1 or 0), used after
-- recording, retry-after µs (0 when it fits) and reset-after µs (0 when the
-- window is empty). In "group" mode it goes on with whether the request was
-- recorded (1 or 0), then two per rule: the reset-after µs from before the
-- write, and the time (absolute µs) the request was recorded at (0 if it
-- was not), which rollback.lua takes to undo the write.
--
-- st is a table the caller lends for the rules' state; decide overwrites it.
local function decide(keys, mode, cost, now, rules, out, st)
  local n = #keys
  local o = #out
  local allfit = true
  for i = 1, n do
    local key = keys[i]
    local w, limit, g = rules[4 * i - 3], rules[4 * i - 2], rules[4 * i - 1]
    local exists, epoch, m, ts, t, tc, lv, fm, fe, fc
    local c = seen[key]
    if c and sv[c + 1] == now and sv[c + 2] == w then
      -- Written by this call at this time: live, and as the state says.
      exists, epoch, m, ts, t, tc, lv = true, sv[c + 3], sv[c + 4], sv[c + 5], sv[c + 6], sv[c + 7], true
      fm, fe, fc = sv[c + 8], sv[c + 9], sv[c + 10]
    else
      if c then
        flush(key)
        seen[key] = nil
      end
      exists, epoch, m, ts = newest(key)
      t, tc, lv = 0, 0, false
      if ts then
        t, tc = parse(m)
        lv = ts > now - w
      end
      if lv and epoch > now - w then
        -- Nothing has left the window since the epoch: every entry
        -- counts, and ends count from 0 there (fe - fc is what preceded
        -- the oldest counted entry; fm is unknown, and not needed).
        fe, fc = 0, 0
      elseif lv then
        -- The oldest counted entry.
        fm = call('ZRANGEBYSCORE', key, format('(%d', now - w - epoch), '(+inf', 'LIMIT', '0', '1')[1]
        fe, fc = parse(fm)
      end
    end
    local u = 0
    if lv then
      u = t - fe + fc
    end

    local ok, rt = 1, 0
    if u + cost > limit then
      ok = 0
      local need = u + cost - limit
      local at = ts or now
      if fc and fc >= need then
        -- The oldest counted entry alone makes room.
        if fe == t then
          at = ts
        else
          at = epoch + tonumber(call('ZSCORE', key, fm))
        end
      elseif lv then
        -- Walk the counted entries, oldest first, until enough cost has
        -- been freed; each entry frees at least 1, so at most need are read.
        flush(key)
        local entries = call('ZRANGEBYSCORE', key, format('(%d', now - w - epoch), '(+inf', 'WITHSCORES', 'LIMIT', '0', int(need))
        local base = fe - fc
        for k = 1, #entries, 2 do
          if parse(entries[k]) - base >= need then
            at = epoch + tonumber(entries[k + 1])
            break
          end
        end
      end
      rt = at + w - now
    end
    if g > 0 and ts and now - ts < g then
      ok = 0
      rt = math.max(rt, ts + g - now)
    end
    allfit = allfit and ok == 1
    out[o + 4 * i - 3], out[o + 4 * i - 2], out[o + 4 * i - 1], out[o + 4 * i] = ok, u, rt, 0
    local b = 10 * i
    st[b - 9], st[b - 8], st[b - 7], st[b - 6], st[b - 5] = exists, epoch, m, ts, lv
    st[b - 4], st[b - 3], st[b - 2], st[b - 1], st[b] = t, tc, fm, fe, fc
  end

  local group = mode == 'group'
  local record = mode == 'record' or ((mode == 'allow' or group) and allfit)
  local u0 = o + 4 * n
  if group then
    out[u0 + 1] = record and 1 or 0
  end
  for i = 1, n do
    local b = 10 * i
    local key, w, g = keys[i], rules[4 * i - 3], rules[4 * i - 1]
    local exists, epoch, m, ts, lv = st[b - 9], st[b - 8], st[b - 7], st[b - 6], st[b - 5]
    local t, tc, fm, fe, fc = st[b - 4], st[b - 3], st[b - 2], st[b - 1], st[b]
    local reset = 0
    if lv then
      reset = ts + w - now
    end
    local we, wc, wat = 0, 0, 0 -- the entry written: end, cost, time
    if record then
      -- Never let a key's time go backwards.
      local at = now
      if ts and ts > at then
        at = ts
      end
      local c = seen[key]
      if c and sv[c + 1] == now and sv[c + 2] == w then
        -- At the instant of the newest entry this call wrote: the entry
        -- takes the cost too, in the state until flushed.
        we, wc = t + cost, tc + cost
        sv[c + 6], sv[c + 7] = we, wc
        if fe == t then
          sv[c + 9], sv[c + 10] = we, wc
        end
        if not sv[c + 11] then
          sv[c + 11] = true
          dirty[#dirty + 1] = key
        end
      else
        local wm -- the written entry's member
        -- A write sets the key to expire window + gap after it, except one
        -- into the newest entry's instant, whose write set that already
        -- (unless a rebase wrote the key anew).
        local expire = at ~= ts
        if not lv then
          -- Nothing counts any more: restart the key's ends and epoch.
          if exists then
            call('DEL', key)
          end
          we, wc = cost, cost
          fe, fc = we, wc
          wm = member(we, wc)
          call('ZADD', key, '0', wm, '+inf', '@' .. int(at))
          epoch = at
        else
          if fm and at - epoch >= REBASE and at - epoch >= 2 * (w + g) then
            local base
            epoch, base = rebase(key, epoch, now - w - epoch, fm, fe, fc)
            t, m, fe = t - base, member(t - base, tc), fe - base
            fm, expire = member(fe, fc), true
          end
          we, wc = t + cost, cost
          if at == ts then
            -- The newest entry's instant: its entry takes the cost too.
            wc = tc + cost
            call('ZREM', key, m)
            if fe == t then
              fe, fc = we, wc -- the oldest counted entry was the newest
            end
          elseif epoch <= now - w and floor(t / TRIM) ~= floor((t + cost) / TRIM) then
            call('ZREMRANGEBYSCORE', key, '-inf', int(now - w - epoch))
          end
          wm = member(we, wc)
          call('ZADD', key, int(at - epoch), wm)
        end
        if expire then
          call('PEXPIRE', key, rules[4 * i])
        end
        if fe == we then
          fm = wm
        end
        local c = nsv
        nsv = nsv + 11
        seen[key] = c
        sv[c + 1], sv[c + 2], sv[c + 3], sv[c + 4], sv[c + 5], sv[c + 6] = now, w, epoch, wm, at, we
        sv[c + 7], sv[c + 8], sv[c + 9], sv[c + 10], sv[c + 11] = wc, fm, fe, fc, false
      end
      out[o + 4 * i - 2] = out[o + 4 * i - 2] + cost
      reset = at + w - now
      wat = at
    end
    out[o + 4 * i] = reset
    if group then
      local r = u0 + 2 * i
      out[r], out[r + 1] = 0, wat
      if lv then
        out[r] = ts + w - now
      end
    end
  end
end
