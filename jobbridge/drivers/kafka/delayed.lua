-- delayed.lua: the delayed rows: add them, take the due ones for one promoter, drop what it produced.
--
-- Keys as in reserve.lua, built from ARGV[1].
-- ARGV[2] the operation:
--   "add"   then 5 values per row: id, queue, due, job id, body                returns 0
--   "take"  now, until, token, limit: each due row is re-scored to `until` and marked with
--           `token`, so a promoter that dies before dropping it leaves it due again at `until`
--                                                     returns id, queue, job id, body per row
--   "drop"  token, then ids: deleted only while still marked with that token   returns 0
--   "fail"  token, id, failed_at, job id, queue, name, attempts, error, body: the row (while still
--           marked with that token) becomes a failed job                      returns 1/0

local p, op = ARGV[1], ARGV[2]

local function add(id, queue, due, job, body)
  redis.call('HSET', p .. 'D:' .. id, 'q', queue, 'j', job, 'b', body)
  redis.call('ZADD', p .. 'delayed', due, id)
  redis.call('ZADD', p .. 'DQ:' .. queue, due, id)
  redis.call('SADD', p .. 'queues', queue)
end

if op == 'add' then
  for i = 3, #ARGV, 5 do
    add(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4])
  end
  return 0
end

if op == 'take' then
  local now, deadline, token = ARGV[3], ARGV[4], ARGV[5]
  local out = {}
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', p .. 'delayed', '-inf', now, 'LIMIT', 0, tonumber(ARGV[6]))) do
    local row = redis.call('HMGET', p .. 'D:' .. id, 'q', 'j', 'b')
    if row[1] then
      redis.call('ZADD', p .. 'delayed', deadline, id)
      redis.call('ZADD', p .. 'DQ:' .. row[1], deadline, id)
      redis.call('HSET', p .. 'D:' .. id, 't', token)
      out[#out + 1] = id
      out[#out + 1] = row[1]
      out[#out + 1] = row[2]
      out[#out + 1] = row[3]
    else
      redis.call('ZREM', p .. 'delayed', id)
    end
  end
  return out
end

if op == 'fail' then
  local key = p .. 'D:' .. ARGV[4]
  local row = redis.call('HMGET', key, 'q', 't')
  if row[2] ~= ARGV[3] then
    return 0
  end
  redis.call('DEL', key)
  redis.call('ZREM', p .. 'delayed', ARGV[4])
  redis.call('ZREM', p .. 'DQ:' .. row[1], ARGV[4])
  local failed_at, id = ARGV[5], ARGV[6]
  redis.call('DEL', p .. 'F:' .. id)
  redis.call('HSET', p .. 'F:' .. id, 'id', id, 'queue', ARGV[7], 'name', ARGV[8], 'attempts', ARGV[9],
    'error', ARGV[10], 'failed_at', failed_at, 'body', ARGV[11])
  redis.call('ZADD', p .. 'failed', failed_at, id)
  return 1
end

local token = ARGV[3]
for i = 4, #ARGV do
  local key = p .. 'D:' .. ARGV[i]
  local row = redis.call('HMGET', key, 'q', 't')
  if row[2] == token then
    redis.call('DEL', key)
    redis.call('ZREM', p .. 'delayed', ARGV[i])
    redis.call('ZREM', p .. 'DQ:' .. row[1], ARGV[i])
  end
end
return 0
