-- celery_chord_part: one chord header task's outcome, counted in the keys Celery's Redis backend joins a
-- chord by, so a chord whose header runs partly on Celery workers and partly on jobbridge workers joins once.
-- KEYS: 1 <group>.j (sorted set: each part's [1, id, state, result] by header index), 2 <group>.t (extra parts),
--       3 <group>.s (the chord's size, set when it was applied), 4 <group>.d (parts counted: "id:index"),
--       5 the group's own key, 6 <group>.c (the claim of whoever publishes the body; "done" once it did)
-- ARGV: 1 task id, 2 the part as JSON, 3 header index (or +inf), 4 seconds the chord's keys live (0: no expiry),
--       5 seconds the claim lives, 6 the claimant's token
-- Returns {parts counted, parts expected (-1: no size, the chord is not known here), 1 if this call claimed}
-- or {-1, 0, 0} once the body was published. A part counts once, however often its task runs.
if redis.call('GET', KEYS[6]) == 'done' then
  return {-1, 0, 0}
end
local member = ARGV[1] .. ':' .. ARGV[3]
if redis.call('SADD', KEYS[4], member) == 1 then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
end
local counted = redis.call('ZCARD', KEYS[1])
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  for i = 1, 4 do
    redis.call('EXPIRE', KEYS[i], ttl)
  end
end
local size = redis.call('GET', KEYS[3])
if not size then
  return {counted, -1, 0}
end
local expected = tonumber(size) + tonumber(redis.call('GET', KEYS[2]) or '0')
local claimed = 0
if counted == expected and redis.call('SET', KEYS[6], ARGV[6], 'NX', 'EX', ARGV[5]) then
  claimed = 1
end
return {counted, expected, claimed}
