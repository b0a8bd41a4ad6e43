-- extend.lua: heartbeat; push each still-held lease to a new deadline.
--
-- KEYS[1]   {prefix}leases  sorted set  ZSCORE + ZADD XX of each member
--
-- ARGV[1]   the new deadline (clock seconds)
-- ARGV[2..] lease members "<entry id> <queue>"
--
-- Returns one 1 (still held, renewed) or 0 (lapsed and reclaimed, or settled) per member.
-- A reclaimed job lives on under a new entry id, so its old member is gone for good.

local held = {}
for i = 2, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], 'XX', ARGV[1], ARGV[i])
    held[#held + 1] = 1
  else
    held[#held + 1] = 0
  end
end
return held
