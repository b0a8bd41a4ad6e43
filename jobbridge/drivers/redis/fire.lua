-- fire.lua: record a schedule entry's tick and push that tick's job, in one script (so both or neither).
--
-- KEYS[1]  {prefix}schedules       hash        entry name -> "<last tick>|<job id>|<fired at>"
-- KEYS[2]  {prefix}queues          set         SADD the job's queue (as push.lua)      } only when a
-- KEYS[3]  {prefix}queue:{name}    stream      XADD the job when it is ready now        } job is pushed
-- KEYS[4]  {prefix}delayed:{name}  sorted set  ZADD it when it is not due yet           }
-- KEYS[5]  {prefix}lock:{key}      string      a unique job's lock, as lock_acquire.lua (unique jobs only)
--
-- ARGV[1]  entry name   ARGV[2]  tick (clock seconds)   ARGV[3]  now (clock seconds)
-- ARGV[4]  the job's id ("" records the tick with no job)
-- ARGV[5]  queue        ARGV[6]  due ("" for ready now)  ARGV[7]  attempts   ARGV[8]  body
-- ARGV[9]  for a unique job: the lock's expires_at (clock seconds)   ARGV[10] its ttl in milliseconds
--
-- The tick is recorded only if it is later than the stored one: of several schedulers firing one
-- tick, the first script to run records it and pushes; the others find it recorded.
-- Returns 0 when the stored tick is this one or later (nothing changed), 1 when the tick was
-- recorded without a job (none given, or a unique job whose lock is held), 2 when the job was pushed.

local stored = redis.call('HGET', KEYS[1], ARGV[1])
if stored then
  local last = tonumber(string.match(stored, '^([^|]*)'))
  if last and last >= tonumber(ARGV[2]) then
    return 0
  end
end

local id = ARGV[4]
if id ~= '' and KEYS[5] then
  local held = redis.call('GET', KEYS[5])
  local until_ = held and tonumber(string.match(held, '|([^|]*)$'))
  if until_ and until_ > tonumber(ARGV[3]) then
    id = ''
  else
    redis.call('SET', KEYS[5], ARGV[4] .. '|' .. ARGV[9], 'PX', ARGV[10])
  end
end

redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. '|' .. id .. '|' .. ARGV[3])
if id == '' then
  return 1
end
redis.call('SADD', KEYS[2], ARGV[5])
if ARGV[6] == '' then
  redis.call('XADD', KEYS[3], '*', 'id', id, 'body', ARGV[8], 'attempts', ARGV[7])
else
  redis.call('ZADD', KEYS[4], ARGV[6], ARGV[7] .. ':' .. #id .. ':' .. id .. ARGV[8])
end
return 2
