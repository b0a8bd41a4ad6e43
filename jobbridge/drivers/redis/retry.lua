-- retry.lua: put one failed job back on its queue, attempts reset to 0, keeping its id.
--
-- KEYS[1]  {prefix}failed          sorted set  ZREM the job id
-- KEYS[2]  {prefix}failed:{id}     hash        DEL (EXISTS first: a concurrent retry already took it)
-- KEYS[3]  {prefix}queue:{queue}   stream      XADD the job as fields id, body, attempts = 0
-- KEYS[4]  {prefix}queues          set         SADD the queue name
--
-- ARGV[1]  job id    ARGV[2]  queue    ARGV[3]  the body to queue
--
-- Returns 1 when the job went back, 0 when the failed store no longer held it.

if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 0
end
redis.call('SADD', KEYS[4], ARGV[2])
redis.call('XADD', KEYS[3], '*', 'id', ARGV[1], 'body', ARGV[3], 'attempts', '0')
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[1], ARGV[1])
return 1
