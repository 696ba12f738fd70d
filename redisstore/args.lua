-- args.lua: helpers of the scripts that read their arguments in order and
-- hand numbers to Redis (reserve.lua, cancel.lua, rollback.lua,
-- inspect.lua); decide.lua, the hot one, does without them.

-- int formats n as an integer. Numbers are passed to Redis formatted so:
-- Lua's own conversion would write large ones in exponent form, and Redis's
-- conversion of a Lua number is slower than string.format's of an integer.
local function int(n)
  return format('%d', n)
end

-- reader returns a function that returns the next value of list at each
-- call: scripts read ARGV and KEYS in order with it.
local function reader(list)
  local i = 0
  return function()
    i = i + 1
    return list[i]
  end
end
