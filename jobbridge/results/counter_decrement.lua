-- counter_decrement.lua: take one off a chord's join counter, once per member.
--
-- KEYS[1]  {prefix}counter:{key}          hash  HGET expires_at and remaining; HINCRBY remaining -1
-- KEYS[2]  {prefix}counter-members:{key}  set   SADD the member; PEXPIRE to the counter's PTTL
--
-- ARGV[1]  now (clock seconds)
-- ARGV[2]  the member (a header job's id), or "" to count without one
--
-- Returns what remains, or nil for a counter never set, expired by the clock or pruned.
-- A member already in the set gets the current value back and takes nothing off.

local expires_at = tonumber(redis.call('HGET', KEYS[1], 'expires_at'))
if not expires_at or expires_at <= tonumber(ARGV[1]) then
  return false
end
if ARGV[2] ~= '' then
  if redis.call('SADD', KEYS[2], ARGV[2]) == 0 then
    return tonumber(redis.call('HGET', KEYS[1], 'remaining'))
  end
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
end
return redis.call('HINCRBY', KEYS[1], 'remaining', -1)
