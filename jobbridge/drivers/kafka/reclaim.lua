-- reclaim.lua: every lease past its deadline is settled, and its job becomes a delayed row due now
-- (the row id is the lapsed lease's token, unique to it). One script: one winner however many
-- workers reclaim at once.
--
-- Keys as in reserve.lua, built from ARGV[1].
-- ARGV[2] now (clock seconds)    ARGV[3] at most this many leases
-- Returns the spots put back.

local p, now = ARGV[1], ARGV[2]
local spots = redis.call('ZRANGEBYSCORE', p .. 'leases', '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
for _, spot in ipairs(spots) do
  local key = p .. 'L:' .. spot
  local row = redis.call('HMGET', key, 't', 'q', 'j', 'b')
  local token, queue = row[1], row[2]
  redis.call('HSET', key, 's', 2)
  redis.call('HDEL', key, 't', 'u', 'j', 'b')
  redis.call('ZREM', p .. 'leases', spot)
  redis.call('HINCRBY', p .. 'reserved', queue, -1)
  redis.call('HSET', p .. 'D:' .. token, 'q', queue, 'j', row[3], 'b', row[4])
  redis.call('ZADD', p .. 'delayed', now, token)
  redis.call('ZADD', p .. 'DQ:' .. queue, now, token)
end
return spots
