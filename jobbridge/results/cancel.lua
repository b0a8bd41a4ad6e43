-- cancel.lua: mark job ids cancelled until a clock time, never shortening an earlier cancel.
--
-- KEYS[1]  {prefix}cancelled  sorted set  ZADD GT id scored by expires_at; PTTL; PEXPIRE
--
-- ARGV[1]  expires_at (clock seconds)
-- ARGV[2]  ttl in milliseconds (real time): the whole set lives at least this long after a cancel
-- ARGV[3..]  the ids
--
-- ZADD GT (Redis 6.2) adds a new id and only ever raises an existing one's score. The set's real
-- expiry is only extended, so it outlives its longest-lived member; prune removes members by score.

for i = 3, #ARGV do
  redis.call('ZADD', KEYS[1], 'GT', ARGV[1], ARGV[i])
end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return #ARGV - 2
