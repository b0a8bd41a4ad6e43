-- settle.lua: settle leases still held under their tokens, alone, with a delayed row, or failed.
--
-- Keys as in reserve.lua, built from ARGV[1].
--
-- ARGV[2] the mode:
--   "A" acknowledge: then pairs spot, token                       returns one 1/0 per lease
--   "R" release:     spot, token, row id, due, job id, body        returns 1/0
--   "F" fail:        spot, token, failed_at, job id, queue, name, attempts, error, body
--                                                                   returns 1/0
-- A lease whose token no longer matches (reclaimed, settled) is left alone: 0.

local p = ARGV[1]

local function settle(spot, token)
  local key = p .. 'L:' .. spot
  local held = redis.call('HMGET', key, 's', 't', 'q')
  if held[1] ~= '1' or held[2] ~= token then
    return nil
  end
  redis.call('HSET', key, 's', 2)
  redis.call('HDEL', key, 't', 'u', 'j', 'b')
  redis.call('ZREM', p .. 'leases', spot)
  redis.call('HINCRBY', p .. 'reserved', held[3], -1)
  return held[3]
end

local mode = ARGV[2]
if mode == 'A' then
  local out = {}
  for i = 3, #ARGV, 2 do
    out[#out + 1] = settle(ARGV[i], ARGV[i + 1]) and 1 or 0
  end
  return out
end

local queue = settle(ARGV[3], ARGV[4])
if not queue then
  return 0
end
if mode == 'R' then
  local id, due = ARGV[5], ARGV[6]
  redis.call('HSET', p .. 'D:' .. id, 'q', queue, 'j', ARGV[7], 'b', ARGV[8])
  redis.call('ZADD', p .. 'delayed', due, id)
  redis.call('ZADD', p .. 'DQ:' .. queue, due, id)
else
  local failed_at, id = ARGV[5], ARGV[6]
  redis.call('DEL', p .. 'F:' .. id)
  redis.call('HSET', p .. 'F:' .. id, 'id', id, 'queue', ARGV[7], 'name', ARGV[8], 'attempts', ARGV[9],
    'error', ARGV[10], 'failed_at', failed_at, 'body', ARGV[11])
  redis.call('ZADD', p .. 'failed', failed_at, id)
end
return 1
