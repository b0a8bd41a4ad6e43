-- extend.lua: heartbeat; move each lease still held under its token to a new deadline.
--
-- Keys as in reserve.lua, built from ARGV[1].
-- ARGV[2] the new deadline (clock seconds); then pairs spot, token.
-- Returns one 1 (renewed) or 0 (settled or reclaimed: the token is gone) per lease.

local p, deadline = ARGV[1], ARGV[2]
local out = {}
for i = 3, #ARGV, 2 do
  local key = p .. 'L:' .. ARGV[i]
  local held = redis.call('HMGET', key, 's', 't')
  if held[1] == '1' and held[2] == ARGV[i + 1] then
    redis.call('HSET', key, 'u', deadline)
    redis.call('ZADD', p .. 'leases', 'XX', deadline, ARGV[i])
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
