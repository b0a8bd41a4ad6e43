-- push.lua: store envelopes on one queue: ready ones on its stream, delayed ones in its delayed set.
--
-- KEYS[1]   {prefix}queues          set         SADD the queue name (counts and reclaim find queues here)
-- KEYS[2]   {prefix}queue:{name}    stream      XADD each ready job as fields id, body, attempts
-- KEYS[3]   {prefix}delayed:{name}  sorted set  ZADD each delayed job, scored by its due time
--
-- ARGV[1]   the queue name
-- ARGV[2..] quads (due, attempts, id, body): due is "" for a job ready now, else clock seconds
--
-- A delayed member packs the stream fields as "<attempts>:<bytes in id>:<id><body>", so the
-- body stays binary-safe and the job needs no second key while it waits.
-- Returns the number of jobs stored.

redis.call('SADD', KEYS[1], ARGV[1])
local stored = 0
for i = 2, #ARGV, 4 do
  local due, attempts, id, body = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  if due == '' then
    redis.call('XADD', KEYS[2], '*', 'id', id, 'body', body, 'attempts', attempts)
  else
    redis.call('ZADD', KEYS[3], due, attempts .. ':' .. #id .. ':' .. id .. body)
  end
  stored = stored + 1
end
return stored
