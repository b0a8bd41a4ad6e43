-- result_store.lua: insert or replace one job's result record, and wake its waiters when it is ready.
--
-- KEYS[1]  {prefix}result:{id}          hash        HGET the old created_at/expires_at; DEL; HSET; PEXPIRE
-- KEYS[2]  {prefix}results              sorted set  ZADD id scored by expires_at (the prune index)
-- KEYS[3]  {prefix}result-waiters:{id}  set         SMEMBERS the waiters' tokens, then DEL (when ready)
-- and, for each token t in KEYS[3]:
--          {prefix}result-wake:{id}:{t} list        RPUSH "1"; PEXPIRE (built here from ARGV[6])
--
-- ARGV[1]  id                ARGV[2]  now (clock seconds)      ARGV[3]  expires_at (clock seconds)
-- ARGV[4]  ttl in milliseconds (real time: the safety net; expiry is judged by expires_at)
-- ARGV[5]  "1" when the state is ready, else "0"
-- ARGV[6]  the wake-list key prefix, "{prefix}result-wake:{id}:"
-- ARGV[7]  the wake lists' lifetime in milliseconds
-- ARGV[8]  created_at for a new record
-- ARGV[9..]  field, value pairs of the record (state, name, result, ...; absent fields are None)
--
-- created_at survives an update unless the old record had expired by the clock. Registering a
-- waiter (SADD, then reading the record, in one MULTI) and this script exclude each other, so
-- a waiter either reads the ready record or finds its token's list pushed: it never misses both.

local old = redis.call('HMGET', KEYS[1], 'created_at', 'expires_at')
local created = ARGV[8]
if old[2] and tonumber(old[2]) > tonumber(ARGV[2]) and old[1] then
  created = old[1]
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'created_at', created, 'updated_at', ARGV[2], 'expires_at', ARGV[3],
           unpack(ARGV, 9))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
if ARGV[5] == '1' then
  for _, token in ipairs(redis.call('SMEMBERS', KEYS[3])) do
    local wake = ARGV[6] .. token
    redis.call('RPUSH', wake, '1')
    redis.call('PEXPIRE', wake, ARGV[7])
  end
  redis.call('DEL', KEYS[3])
end
return created
