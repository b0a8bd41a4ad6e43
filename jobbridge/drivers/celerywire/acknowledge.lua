-- acknowledge: drop each delivery in ARGV (pairs: delivery tag, digest of its unacked entry) from kombu's
-- bookkeeping, the hash KEYS[1] and the sorted set KEYS[2] (what kombu's QoS.ack removes), when its entry
-- is still the one reserved: a stale receipt (the message was restored and delivered again, to this
-- worker or another) settles nothing. Returns how many were dropped.
local dropped = 0
for i = 1, #ARGV, 2 do
  local entry = redis.call('HGET', KEYS[1], ARGV[i])
  if entry and redis.sha1hex(entry) == ARGV[i + 1] then
    redis.call('HDEL', KEYS[1], ARGV[i])
    redis.call('ZREM', KEYS[2], ARGV[i])
    dropped = dropped + 1
  end
end
return dropped
