-- extend: mark each delivery in ARGV[2..] (pairs: delivery tag, digest of its unacked entry) delivered
-- again at ARGV[1] (kombu's unacked_index score), so no restore (a jobbridge worker's reclaim, a Celery
-- worker's restore_visible) takes it while it runs. Only a delivery whose unacked entry (KEYS[1]) is still
-- the one reserved: one acknowledged, restored or delivered again meanwhile is not revived.
-- KEYS[2]: the unacked_index sorted set. Returns the tags still held.
local held = {}
for i = 2, #ARGV, 2 do
  local entry = redis.call('HGET', KEYS[1], ARGV[i])
  if entry and redis.sha1hex(entry) == ARGV[i + 1] then
    redis.call('ZADD', KEYS[2], ARGV[1], ARGV[i])
    held[#held + 1] = ARGV[i]
  end
end
return held
