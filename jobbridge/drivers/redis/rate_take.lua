-- rate_take.lua: book turns of one shared rate limit's bucket (jobbridge.rate_limits.book, the
-- same arithmetic), atomically: concurrent takers are granted turns exactly one interval apart.
--
-- KEYS[1]  {prefix}rate:{key}  string  the bucket's theoretical arrival time, server seconds;
--                                      expires a minute after its last booked turn
--
-- ARGV[1]  seconds between turns (1 / rate)
-- ARGV[2]  slack in seconds ((burst - 1) x interval)
-- ARGV[3]  how many turns are wanted
-- ARGV[4]  how far ahead a turn may begin, seconds
--
-- The time is the server's (TIME), so every worker measures from one clock. Returns the seconds
-- until the next free turn, then each granted turn's start, in seconds from now, as strings.

local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local interval, slack = tonumber(ARGV[1]), tonumber(ARGV[2])
local count, horizon = tonumber(ARGV[3]), tonumber(ARGV[4])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if tat < now then
  tat = now
end
local starts = {}
while #starts < count do
  local start = math.max(now, tat - slack)
  if start - now > horizon then
    break
  end
  starts[#starts + 1] = string.format('%.6f', start - now)
  tat = tat + interval
end
if #starts > 0 then
  redis.call('SET', KEYS[1], string.format('%.6f', tat), 'PX', math.ceil((tat - now + 60) * 1000))
end
local out = {string.format('%.6f', math.max(now, tat - slack) - now)}
for i = 1, #starts do
  out[i + 1] = starts[i]
end
return out
