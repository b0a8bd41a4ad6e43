-- reserve.lua: take each message's spot, unless it has a record already (then say whose it is).
--
-- Every key is built here from ARGV[1], the scope's prefix "<prefix>kafka:{<scope>}:", whose
-- hash tag keeps them in one slot:
--   L:<spot>      hash        s (1 leased, 2 done), t token, u deadline, q queue, j job id, b body
--   leases        sorted set  leased spots by deadline        reserved  hash  leased count by queue
--   O:<topic/p>   sorted set  every spot of a partition by offset (counts, forget)
--   D:<id>        hash        a delayed job: q queue, j job id, b body, t promoter token
--   delayed       sorted set  delayed row ids by due time     DQ:<queue>  the same, per queue
--   queues        set         every queue with a record
--
-- ARGV[1]  the prefix; then 7 values per message: mode ("L" lease it, "P" park it: settled, with
--          a delayed row), spot "topic/partition/offset", queue, token (the lease's, or the
--          delayed row's id), at (the lease deadline, or the due time), job id, body
--
-- Returns per message: 0 won, 1 leased by someone else, 2 settled already.

local p = ARGV[1]
local out = {}
for i = 2, #ARGV, 7 do
  local mode, spot, queue, token, at = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local key = p .. 'L:' .. spot
  local state = redis.call('HGET', key, 's')
  if state then
    out[#out + 1] = tonumber(state)
  else
    local tp, offset = string.match(spot, '^(.*)/(%d+)$')
    redis.call('ZADD', p .. 'O:' .. tp, offset, spot)
    redis.call('SADD', p .. 'queues', queue)
    if mode == 'L' then
      redis.call('HSET', key, 's', 1, 't', token, 'u', at, 'q', queue, 'j', ARGV[i + 5], 'b', ARGV[i + 6])
      redis.call('ZADD', p .. 'leases', at, spot)
      redis.call('HINCRBY', p .. 'reserved', queue, 1)
    else
      redis.call('HSET', key, 's', 2, 'q', queue)
      redis.call('HSET', p .. 'D:' .. token, 'q', queue, 'j', ARGV[i + 5], 'b', ARGV[i + 6])
      redis.call('ZADD', p .. 'delayed', at, token)
      redis.call('ZADD', p .. 'DQ:' .. queue, at, token)
    end
    out[#out + 1] = 0
  end
end
return out
