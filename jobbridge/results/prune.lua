-- prune.lua: delete up to a batch of expired results and counters, and every expired cancellation.
--
-- KEYS[1]  {prefix}results    sorted set  ZRANGEBYSCORE up to now; ZREM
-- KEYS[2]  {prefix}cancelled  sorted set  ZREMRANGEBYSCORE up to now
-- KEYS[3]  {prefix}counters   sorted set  ZRANGEBYSCORE up to now; ZREM
-- and, built here from ARGV[3..5] for each expired id or key:
--          {prefix}result:{id}  hash   DEL
--          {prefix}counter:{key}  hash   DEL      {prefix}counter-members:{key}  set  DEL
--
-- ARGV[1]  now (clock seconds)          ARGV[2]  the batch size
-- ARGV[3]  "{prefix}result:"            ARGV[4]  "{prefix}counter:"      ARGV[5]  "{prefix}counter-members:"
--
-- The indexes are scored by the expires_at written with each record, in the same script that
-- writes it, so a score at or before now means the record (if Redis has not dropped it already)
-- has expired. Returns {results removed, cancellations removed, counters removed}.

local now, batch = ARGV[1], tonumber(ARGV[2])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, batch)
for _, id in ipairs(ids) do
  redis.call('DEL', ARGV[3] .. id)
  redis.call('ZREM', KEYS[1], id)
end
local cancelled = redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local keys = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, batch)
for _, key in ipairs(keys) do
  redis.call('DEL', ARGV[4] .. key, ARGV[5] .. key)
  redis.call('ZREM', KEYS[3], key)
end
return {#ids, cancelled, #keys}
