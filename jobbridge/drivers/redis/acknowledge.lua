-- acknowledge.lua: the jobs are done; remove their entries and leases for good, in one step.
--
-- KEYS[1]        {prefix}leases           sorted set  ZREM each reservation's member
-- KEYS[1+i]      {prefix}queue:{queue i}  stream      XACK + XDEL the entries reserved from queue i
--
-- ARGV[1]        the consumer group
-- ARGV[2]        n, the number of queues (KEYS[2..1+n])
-- ARGV[2+i]      the name of queue i, for its lease members "<entry id> <queue>"
-- ARGV[3+n..]    pairs (i, entry id): an entry reserved from queue i
--
-- A stale receipt (its job was reclaimed and lives on under a new entry id) names an entry
-- that is already gone, so XACK, XDEL and ZREM of it do nothing.
-- Returns how many entries were deleted.

local group = ARGV[1]
local n = tonumber(ARGV[2])
local deleted = 0
for j = 3 + n, #ARGV, 2 do
  local i, entry = tonumber(ARGV[j]), ARGV[j + 1]
  local stream = KEYS[1 + i]
  redis.call('XACK', stream, group, entry)
  deleted = deleted + redis.call('XDEL', stream, entry)
  redis.call('ZREM', KEYS[1], entry .. ' ' .. ARGV[2 + i])
end
return deleted
