-- celery_store: write a task's meta where Celery's Redis backend keeps it, and wake its readers, as
-- Celery's backend does (SET with an expiry, then PUBLISH on the key's own name, which a Celery client's
-- get() is subscribed to). A result already SUCCESS is never overwritten, as in Celery: a late state from
-- a duplicate run (a redelivery) must not turn a finished task back.
-- KEYS[1]: celery-task-meta-<id>; ARGV[1]: the meta as JSON; ARGV[2]: milliseconds to keep it.
-- Returns 1 when written, 0 when the stored result was SUCCESS already.
local current = redis.call('GET', KEYS[1])
if current then
  local ok, meta = pcall(cjson.decode, current)
  if ok and type(meta) == 'table' and meta.status == 'SUCCESS' then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('PUBLISH', KEYS[1], ARGV[1])
return 1
