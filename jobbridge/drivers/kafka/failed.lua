-- failed.lua: the failed store's moves: back onto the delayed rows (retry), or gone (flush).
--
-- Keys as in reserve.lua, built from ARGV[1]; a failed job is the hash F:<id>, indexed by the
-- sorted set "failed" scored by failed_at.
-- ARGV[2] the operation:
--   "retry"  now, then triples: failed job id, new delayed row id, the body to go back with;
--            a job retried or flushed meanwhile is skipped          returns how many moved
--   "flush"  (nothing)                                              returns how many deleted

local p, op = ARGV[1], ARGV[2]

if op == 'retry' then
  local now, moved = ARGV[3], 0
  for i = 4, #ARGV, 3 do
    local id, row = ARGV[i], ARGV[i + 1]
    local queue = redis.call('HGET', p .. 'F:' .. id, 'queue')
    if queue then
      redis.call('DEL', p .. 'F:' .. id)
      redis.call('ZREM', p .. 'failed', id)
      redis.call('HSET', p .. 'D:' .. row, 'q', queue, 'j', id, 'b', ARGV[i + 2])
      redis.call('ZADD', p .. 'delayed', now, row)
      redis.call('ZADD', p .. 'DQ:' .. queue, now, row)
      redis.call('SADD', p .. 'queues', queue)
      moved = moved + 1
    end
  end
  return moved
end

-- flush
do
  local ids = redis.call('ZRANGE', p .. 'failed', 0, -1)
  for _, id in ipairs(ids) do
    redis.call('DEL', p .. 'F:' .. id)
  end
  redis.call('DEL', p .. 'failed')
  return #ids
end
